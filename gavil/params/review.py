"""Params section ``review`` (stage ``ocr_filter``; the ``gavil review`` page): whether every image
must be accepted by a person before anyone sees it, and where the reviewers' decisions are kept
(docs/review.md)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gavil.params.base import Section, runtime_field


class ReviewParams(Section):
    # true: an image the OCR accepted reaches candidate sets, the game and the export only once a
    # reviewer accepted it (review_pending until then); false: only rejections apply
    required: bool = True
    # the append-only decisions file (CSV in git): who, when (UTC), decision, reason, sha256, concept
    decisions_path: str = "data/review/decisions.csv"
    # `gavil review` binds here (127.0.0.1: this machine only)
    host: str = runtime_field("127.0.0.1")
    port: Annotated[int, Field(ge=1, le=65535)] = runtime_field(8766)
