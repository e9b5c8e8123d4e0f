"""A plain concept list: one concept per line, for a game-only benchmark (no SWOW norms).

The file is UTF-8 text (a BOM is allowed); each non-blank line is one concept, a word or a phrase of
words (``ice cream``); a line starting with ``#`` is a comment. There is no header and there are no
counts, so the list gives concepts and no edges: every concept gets an image and may be a candidate
or an association in the game, and no SWOW-baseline instance is built from it. Names are stored in
the same form as every SWOW word (:func:`stages.ingest_concepts.formats.name_form`); lines that are
one name after that form are merged and counted (``merged_by_normalisation``), and every name passes
the name policy in :func:`stages.ingest_concepts.stage.reject_bad_names` like a release candidate.

Chosen with ``ingest.format: concept_list``, or by ``auto`` for a ``.txt`` file whose first line is
not a SWOW header and holds one field (:func:`stages.ingest_concepts.formats.detect_format`).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pandas as pd

from stages.ingest_concepts.formats import MAX_FIELD_CHARS, SwowFormatError, name_form
from stages.ingest_concepts.readers import Read

#: Characters that make a line more than one field: a list line that holds one is a table, not a list.
SEPARATORS = ("\t", ",", ";")
#: The edges columns (schemas.ingest.Edges without rank and source_format), empty: a list has none.
EDGE_COLUMNS = {
    "cue": "object",
    "response": "object",
    "r1_count": "Int64",
    "r123_count": "Int64",
    "r1_strength": "float64",
    "r123_strength": "float64",
}


def _line_problem(text: str) -> str | None:
    """Why one stripped list line is not one concept, or None."""
    if len(text) > MAX_FIELD_CHARS:
        return f"line has {len(text)} characters (at most {MAX_FIELD_CHARS}): one concept per line"
    sep = next((s for s in SEPARATORS if s in text), None)
    if sep is not None:
        return f"holds {sep!r}: a concept list has one concept per line (a table needs a SWOW format)"
    bad = next((ch for ch in text if unicodedata.category(ch) == "Cc"), None)
    if bad is not None:
        return f"holds control character U+{ord(bad):04X}: save the list as plain text"
    return None


def read_concept_list(path: str | Path, lowercase: bool = True) -> Read:
    """Read a concept list (module doc): no edges (an empty frame with the edge columns, dtypes as
    the SWOW readers give them), ``candidates`` = the concepts in their stored form, in first-seen
    order, and stats shaped like the SWOW readers' (``dropped_cues`` all 0; ``merged_by_normalisation``
    ``rows`` = lines merged into an earlier one).

    Raises:
        SwowFormatError: a byte that is not UTF-8 (line named), a line with a separator or a control
            character or over :data:`MAX_FIELD_CHARS` characters, or no concept at all.
    """
    path = Path(path)
    form = name_form(lowercase)
    stored: dict[str, None] = {}
    merged = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise SwowFormatError(
                    path, number, None, f"not UTF-8: byte 0x{raw[e.start]:02x} (save as UTF-8)"
                ) from e
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            problem = _line_problem(text)
            if problem:
                raise SwowFormatError(path, number, None, problem)
            name = form(text)
            merged += name in stored
            stored[name] = None
    if not stored:
        raise SwowFormatError(path, None, None, "no concept: write one concept per line")
    edges = pd.DataFrame({c: pd.Series([], dtype=t) for c, t in EDGE_COLUMNS.items()})
    stats = {
        "dropped_cues": {"no_valid_responses": 0},
        "merged_by_normalisation": {"cues": 0, "responses": 0, "rows": merged},
    }
    return Read(edges, list(stored), stats)
