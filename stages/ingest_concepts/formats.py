"""The SWOW input formats (headers, limits), their detection, the error type and the stored name form."""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from gavil.domain.vocabulary import RELEASE_SWOW_COLUMNS, normalize_name
from gavil.errors import GavilError

#: SWOW tokens that are not responses (SWOW-EN documentation); compared by :func:`non_response_form`.
NON_RESPONSES = frozenset({"Unknown word", "No more responses"})


def non_response_form(value: str) -> str:
    """How a value is compared with :data:`NON_RESPONSES`: whitespace runs collapsed and trimmed,
    case-folded (``" unknown  WORD "`` is the marker "Unknown word")."""
    return " ".join(value.split()).casefold()


#: :data:`NON_RESPONSES` in :func:`non_response_form`.
NON_RESPONSE_FORMS = frozenset(non_response_form(v) for v in NON_RESPONSES)
R100_HEADER = (
    "",
    "id",
    "participantID",
    "age",
    "gender",
    "nativeLanguage",
    "country",
    "education",
    "created_at",
    "cue",
    "R1",
    "R2",
    "R3",
)
STRENGTH_HEADERS = {
    "swow_strength_r1": ("cue", "response", "R1", "N", "R1.Strength"),
    "swow_strength_r123": ("cue", "response", "R123", "N", "R123.Strength"),
}
WINOGAVIL_SWOW_HEADER = RELEASE_SWOW_COLUMNS
#: Every input format: SWOW's three, the release's swow.csv, and a plain concept list (stages/ingest_concepts/concept_list.py).
FORMATS = ("swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow", "concept_list")

#: A field (a cue, a response, a list cell) longer than this is refused: no SWOW word is that long,
#: and such a field is a broken file (e.g. an unclosed quote that swallowed many lines).
MAX_FIELD_CHARS = 1000
#: pyarrow's CSV block size: a row must fit in one block, so it is far above MAX_FIELD_CHARS and
#: a long field is reported by its length, never as a parse error.
BLOCK_SIZE = 16 << 20
#: |strength - count / N| allowed in strength files (accepts strengths rounded to 3 decimals; an
#: off-by-one count at SWOW's N of ~100-300 responses per cue is 0.003 or more).
STRENGTH_TOL = 1e-3


class SwowFormatError(GavilError, ValueError):
    """A SWOW input file is malformed; the message names file, line (1-based) and column.

    ``line`` is None only when no line can be named (the reason then says why).
    """

    def __init__(self, path: str | Path, line: int | None, column: str | None, problem: str):
        self.path, self.line, self.column, self.problem = str(path), line, column, problem
        where = str(path) + (f", line {line}" if line is not None else "")
        where += f", column '{column}'" if column else ""
        super().__init__(f"{where}: {problem}")


# --------------------------------------------------------------------------- names
def nfc_trim(name: str) -> str:
    """The stored form with ``ingest.lowercase: false``: Unicode NFC, surrounding whitespace trimmed."""
    return unicodedata.normalize("NFC", name).strip()


def name_form(lowercase: bool) -> Callable[[str], str]:
    """The one function every ingested name goes through: :func:`gavil.domain.vocabulary.normalize_name`
    (NFC, trimmed, case-folded) when ``lowercase``, else :func:`nfc_trim`."""
    return normalize_name if lowercase else nfc_trim


@dataclass(frozen=True)
class Names:
    """A column of names through :func:`name_form`, with integer codes for vectorised grouping.

    ``values``: the stored names (the input Series itself when no name changes); ``raw``: the
    distinct input values, first-seen order; ``raw_codes``: each row's index in ``raw`` (-1 for
    null); ``stored``: the distinct stored names, first-seen order; ``of_raw``: index in ``raw``
    -> index in ``stored``; ``codes``: each row's index in ``stored`` (-1 for null).
    """

    values: pd.Series
    raw: list[str]
    raw_codes: np.ndarray
    stored: list[str]
    of_raw: np.ndarray
    codes: np.ndarray
    changed: bool  # some name differs from its input

    @property
    def n_raw(self) -> int:
        return len(self.raw)

    @property
    def merged(self) -> int:
        """Distinct input spellings that became one stored name with another."""
        return len(self.raw) - len(self.stored)


def names_of(values: pd.Series, lowercase: bool) -> Names:
    """Normalise ``values`` once per distinct value (nulls stay null); see :class:`Names`."""
    form = name_form(lowercase)
    raw_codes, uniques = pd.factorize(values)
    raw = uniques.tolist()
    mapped = [form(v) for v in raw]
    if mapped == raw:
        return Names(values, raw, raw_codes, raw, np.arange(len(raw)), raw_codes, False)
    of_raw, stored = pd.factorize(pd.Series(mapped, dtype=object))
    codes = np.where(raw_codes >= 0, of_raw[np.maximum(raw_codes, 0)], -1)
    # pandas-stubs' pd.array has no overload for a runtime dtype object (np.dtype | ExtensionDtype)
    out = pd.array(mapped, dtype=values.dtype).take(raw_codes, allow_fill=True)  # type: ignore[arg-type]
    series = pd.Series(out, index=values.index, name=values.name)
    return Names(series, raw, raw_codes, stored.tolist(), of_raw, codes, True)


# --------------------------------------------------------------------------- detection
def delimiter_of(first_line: str) -> str:
    """The field separator of a header line: the most frequent of tab, comma and semicolon (no
    header name holds one; ties, e.g. a one-field line, go to tab, then comma)."""
    return max(("\t", ",", ";"), key=first_line.count)


def first_line(path: str | Path) -> tuple[str, ...]:
    """The header fields of ``path`` (UTF-8, BOM allowed); () for an empty file.

    Raises:
        SwowFormatError: line 1 is not UTF-8.
    """
    with open(path, "rb") as f:
        raw = f.readline()
    try:
        text = raw.decode("utf-8-sig").rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise SwowFormatError(path, 1, None, f"not UTF-8: byte 0x{raw[e.start]:02x} (save the file as UTF-8)") from e
    return tuple(next(csv.reader([text], delimiter=delimiter_of(text)))) if text else ()


def check_header(path: str | Path, header: tuple[str, ...]) -> None:
    """Raise :class:`SwowFormatError` (line 1) unless ``path`` starts with exactly ``header``."""
    got = first_line(path)
    if not got:
        raise SwowFormatError(path, 1, None, "file is empty (expected a header line)")
    if got != header:
        missing = [h for h in header if h not in got]
        raise SwowFormatError(
            path, 1, missing[0] if missing else None, f"header {list(got)} != expected {list(header)}"
        )


def detect_format(path: str | Path) -> str:
    """Name the SWOW format of ``path`` from its header line (one of :data:`FORMATS`).

    Raises:
        SwowFormatError: when the file is empty or the header matches none of the known formats.
    """
    fields = first_line(path)
    if not fields:
        raise SwowFormatError(path, 1, None, "file is empty (expected a header line)")
    if fields == R100_HEADER:
        return "swow_r100"
    for name, header in STRENGTH_HEADERS.items():
        if fields == header:
            return name
    if fields == WINOGAVIL_SWOW_HEADER:
        return "winogavil_swow"
    if Path(path).suffix.lower() == ".txt" and len(fields) == 1:
        return "concept_list"  # one concept per line, no header (stages/ingest_concepts/concept_list.py)
    raise SwowFormatError(
        path,
        1,
        None,
        f"unrecognised header {list(fields[:6])}...: expected SWOW-EN.R100 ({list(R100_HEADER[1:4])}...), "
        f"strength.SWOW-EN.R1/R123 (tab, comma or semicolon-separated {list(STRENGTH_HEADERS['swow_strength_r1'])}) or the "
        "WinoGAViL swow.csv, or a .txt list with one concept per line; or set ingest.format explicitly",
    )
