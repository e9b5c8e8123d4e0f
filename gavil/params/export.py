"""Params section ``export`` (stage ``export``): how the benchmark dataset is written."""

from __future__ import annotations

from gavil.params.base import Section


class ExportParams(Section):
    copy_images: bool = True
