"""Params section ``review`` (stage ``ocr_filter``; the ``gavil review`` page): whether every image
must be accepted by a person before anyone sees it, and where the reviewers' decisions are kept
(docs/review.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import Field, field_validator

from gavil.params.base import Section, runtime_field


class ReviewParams(Section):
    # true: an image the OCR accepted reaches candidate sets, the game and the export only once a
    # reviewer accepted it (review_pending until then); false: only rejections apply
    required: bool = True
    # the append-only decisions file (CSV in git): who, when (UTC), decision, reason, sha256, concept
    decisions_path: str = "data/review/decisions.csv"
    # `gavil review` binds here: a loopback address only (the page has no login; reviewers on other
    # machines reach it through an SSH tunnel, docs/review.md)
    host: str = runtime_field("127.0.0.1")
    port: Annotated[int, Field(ge=1, le=65535)] = runtime_field(8766)

    @field_validator("host")
    @classmethod
    def _loopback_only(cls, v: str) -> str:
        """The review page names its reviewers but checks no one: served beyond this machine, anyone
        who reaches it could accept images. So only a loopback address (``localhost``, 127.0.0.0/8,
        ``::1``) is taken."""
        try:
            loopback = v == "localhost" or ipaddress.ip_address(v).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ValueError(
                f"{v!r} is not a loopback address: the review page has no login, so it is served on this "
                "machine only (127.0.0.1); reviewers elsewhere use an SSH tunnel (ssh -L 8766:127.0.0.1:8766 HOST)"
            )
        return v
