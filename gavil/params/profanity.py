"""Params section ``profanity`` (stages ``filter_profanity`` and ``import_annotations``): words added to
or kept from better-profanity's list."""

from __future__ import annotations

from gavil.params.base import Section


class ProfanityParams(Section):
    extra_words: list[str] = ["butt"]
    allow_words: list[str] = []
