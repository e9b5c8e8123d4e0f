"""Params section ``review`` (stage ``ocr_filter``; the ``gavil review`` page): whether every image
must be accepted by a person before anyone sees it, and where the reviewers' decisions are kept;
``review.safety`` (stage ``safety_score``): the optional zero-shot safety score that orders the
review queue (docs/review.md)."""

from __future__ import annotations

import ipaddress
from typing import Annotated, ClassVar

from pydantic import Field, field_validator

from gavil.params.base import Section, runtime_field


class SafetyParams(Section):
    """The safety score (stage ``safety_score``, docs/review.md "The safety score"): off by default.

    With ``enabled``, the open_clip model of the ``models`` entry ``model`` scores every image in the
    review queue against a short list of unsafe-content prompts (zero-shot; the prompts are in
    :mod:`stages.safety_score`), and the review page can sort by the score. It orders the queue
    only: no image is accepted or rejected by it. Off, the stage loads no model and writes an
    empty table.
    """

    enabled: bool = False  # true: score the review queue's images (the page can sort by the score)
    model: str = "rival"  # models entry (open_clip) that scores; pretrained: null = random weights, "untrained"


class ReviewParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"safety.model": "open_clip"}

    # true: an image the OCR accepted reaches candidate sets, the game and the export only once a
    # reviewer accepted it (review_pending until then); false: only rejections apply
    required: bool = True
    # the append-only decisions file (CSV in git): who, when (UTC), decision, reason, sha256, concept
    decisions_path: str = "data/review/decisions.csv"
    # `gavil review` binds here: a loopback address only (the page has no login; reviewers on other
    # machines reach it through an SSH tunnel, docs/review.md)
    host: str = runtime_field("127.0.0.1")
    port: Annotated[int, Field(ge=1, le=65535)] = runtime_field(8766)
    # the optional safety score that orders the queue (stage safety_score; never decides anything)
    safety: SafetyParams = SafetyParams()

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
