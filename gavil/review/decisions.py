"""The image review's decisions file: an append-only CSV in git (``review.decisions_path``,
default ``data/review/decisions.csv``), one row per decision a reviewer made (docs/review.md).

Columns :data:`COLUMNS`: ``who`` (the reviewer's name), ``when`` (UTC, ISO 8601 with a ``Z``:
``2024-05-01T09:30:00.123456Z``), ``decision`` (:data:`DECISIONS`), ``reason`` (for a rejection:
one of :data:`REASONS`, or ``other: <words>``; empty otherwise), ``sha256`` (the image's bytes) and
``concept`` (what it was shown for). Rows are only ever appended: a later decision for the same
sha256 supersedes an earlier one by being later (:func:`latest`), both kept; ``undo`` withdraws
the decision before it (the image is pending again). A decision names bytes, so a re-crawled image
with other bytes (another sha256) needs a decision of its own.

A file edited by hand is checked row by row (:func:`read_decisions`); the first problem is one line
naming the file, the row (its line number; the header is row 1) and the column, and the file is
left as it is.
"""

from __future__ import annotations

import csv
import fcntl
import io
import os
import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gavil.errors import GavilError
from gavil.io import csv_writer

#: The header, in order.
COLUMNS = ("who", "when", "decision", "reason", "sha256", "concept")
#: What a row decides: ``undo`` withdraws the decision before it for the same image.
DECISIONS = ("accept", "reject", "undo")
#: The reasons a rejection gives (the page's short list); ``other: <words>`` is the fifth.
REASONS = ("inappropriate", "wrong concept", "text shows the word", "low quality")
OTHER = "other: "
_WHEN = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z")
_SHA = re.compile(r"[0-9a-f]{64}")
_MAX_TEXT = 200  # characters of a name, a concept or a reason's words


class DecisionsError(GavilError):
    """A decisions file breaks its contract: the message names the file, the row and the column."""


@dataclass(frozen=True)
class Decision:
    """One row of the decisions file; ``row`` is its line number (0: not yet written)."""

    who: str
    when: str
    decision: str
    reason: str
    sha256: str
    concept: str
    row: int = 0

    def as_row(self) -> list[str]:
        """The CSV cells, in :data:`COLUMNS` order."""
        return [self.who, self.when, self.decision, self.reason, self.sha256, self.concept]


def now_utc() -> str:
    """The current UTC time as the file writes it (microseconds, ``Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def problem(d: Decision) -> tuple[str, str] | None:
    """(column, what is wrong and the fix) for the first broken cell of ``d``, or None (pure)."""
    if any(ch in cell for cell in d.as_row() for ch in "\r\n"):
        return "who", "a cell holds a line break: one line per decision"
    if not d.who.strip() or len(d.who) > _MAX_TEXT:
        return "who", f"the reviewer's name must be 1-{_MAX_TEXT} characters"
    if not _WHEN.fullmatch(d.when):
        return "when", f"{d.when!r} is not a UTC time like 2024-05-01T09:30:00Z"
    if d.decision not in DECISIONS:
        return "decision", f"{d.decision!r} is not one of {', '.join(DECISIONS)}"
    if d.decision == "reject":
        words = d.reason[len(OTHER) :].strip() if d.reason.startswith(OTHER) else ""
        if d.reason not in REASONS and not words:
            return "reason", f"{d.reason!r}: a rejection's reason is one of {', '.join(REASONS)} or 'other: <words>'"
        if len(d.reason) > _MAX_TEXT:
            return "reason", f"at most {_MAX_TEXT} characters"
    elif d.reason:
        return "reason", f"an {d.decision} gives no reason (found {d.reason!r}): leave it empty"
    if not _SHA.fullmatch(d.sha256):
        return "sha256", f"{d.sha256!r} is not a lower-case hex sha256 (64 characters)"
    if not d.concept.strip() or len(d.concept) > _MAX_TEXT:
        return "concept", f"the concept must be 1-{_MAX_TEXT} characters"
    return None


def read_decisions(path: str | os.PathLike[str], known: Collection[str] | None = None) -> list[Decision]:
    """Every row of the decisions file at ``path``, in file order (an absent file: none).

    Args:
        known: the sha256 of every image of this project (its image store); a row for another
            image is an error. None: not checked.

    Raises:
        DecisionsError: a missing column, a broken cell (:func:`problem`), a row repeating an
            earlier one's who, when and sha256, or an unknown image: one line naming the file, row
            and column; the file is never changed.
    """
    p = Path(path)
    if not p.exists():
        return []
    reader = csv.DictReader(io.StringIO(p.read_text(encoding="utf-8"), newline=""))
    for col in COLUMNS:
        if col not in (reader.fieldnames or []):
            raise DecisionsError(
                f"{p} row 1, column {col}: the column is missing (the header is {','.join(COLUMNS)});"
                " add it back, nothing was read or changed"
            )
    out: list[Decision] = []
    seen: dict[tuple[str, str, str], int] = {}
    for rec in reader:
        d = Decision(**{c: (rec.get(c) or "") for c in COLUMNS}, row=reader.line_num)
        bad = problem(d)
        if bad is None and (d.who, d.when, d.sha256) in seen:
            bad = (
                "who",
                f"repeats row {seen[(d.who, d.when, d.sha256)]} (same who, when and sha256): delete one of them",
            )
        if bad is None and known is not None and d.sha256 not in known:
            bad = (
                "sha256",
                f"{d.sha256[:12]}... is no image of this project (not in its image store): fix or delete the row",
            )
        if bad is not None:
            raise DecisionsError(f"{p} row {d.row}, column {bad[0]}: {bad[1]}")
        seen[(d.who, d.when, d.sha256)] = d.row
        out.append(d)
    return out


def latest(decisions: list[Decision]) -> dict[str, Decision]:
    """sha256 -> the decision in force (the latest by ``when``, file order breaking ties); an
    ``undo`` withdraws the decision before it, so an image whose last rows are undone is absent
    (pending), or falls back to the decision before those."""
    stacks: dict[str, list[Decision]] = {}
    for d in sorted(decisions, key=lambda d: (d.when, d.row)):
        stack = stacks.setdefault(d.sha256, [])
        if d.decision == "undo":
            if stack:
                stack.pop()
        else:
            stack.append(d)
    return {sha: stack[-1] for sha, stack in stacks.items() if stack}


def append_decision(path: str | os.PathLike[str], d: Decision) -> Decision:
    """Append ``d`` to the file at ``path`` (the header first when the file is new or empty),
    under an exclusive lock so that reviewers' servers sharing the file never interleave, and
    flushed to disk. Returns ``d`` with its row number.

    Raises:
        DecisionsError: ``d`` has a broken cell (:func:`problem`); nothing is written.
    """
    bad = problem(d)
    if bad is not None:
        raise DecisionsError(f"{path}: new decision, column {bad[0]}: {bad[1]}")
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "a+", encoding="utf-8", newline="") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            f.seek(0)
            text = f.read()
            if not text.strip():
                f.truncate(0)
                text = ""
            elif not text.endswith("\n"):
                f.write("\n")  # a hand edit left no line end: never glue a row onto it
                text += "\n"
            w = csv_writer(f, lineterminator="\n")
            if not text:
                w.writerow(COLUMNS)
            w.writerow(d.as_row())
            f.flush()
            os.fsync(f.fileno())
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
    rows = text.count("\n") or 1  # the lines before the new row (the header, when it was written now)
    who, when, decision, reason, sha256, concept = d.as_row()
    return Decision(who, when, decision, reason, sha256, concept, row=rows + 1)
