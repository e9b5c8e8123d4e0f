"""The one place that turns a row failure into file / line / column / reason.

Fast path: pyarrow reads the file; vectorised checks give the failing *data row* (0-based, as
pyarrow numbers rows: blank lines skipped). :func:`first_failure` / :func:`fail_at` turn that row
into its 1-based line by one csv-module pass over the file (only when something is wrong).
When pyarrow itself cannot parse the file, :func:`scan` re-reads it with the csv module and
applies :func:`row_problem` to every row. Bytes that are not UTF-8 are found by
:func:`check_utf8` (a chunked decode of the whole file) before any parsing.
"""

from __future__ import annotations

import codecs
import csv
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from stages.ingest_concepts.formats import MAX_FIELD_CHARS, Names, SwowFormatError, delimiter_of

#: A per-field check for the csv pass: the field's text -> what is wrong (naming the value), or None.
Check = Callable[[str], "str | None"]
REPEATED_HEADER = "the header line is repeated here (were two files concatenated?)"
HEADER_ONLY = "no data rows: the file has a header only"
_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f]")  # control characters but the tab
_CHUNK = 16 << 20


@dataclass(frozen=True)
class Layout:
    """How a format is laid out: its header and csv-module dialect."""

    header: tuple[str, ...]
    delimiter: str
    quoting: int  # csv.QUOTE_MINIMAL or csv.QUOTE_NONE

    def column(self, index: int) -> str | None:
        return self.header[index] if 0 <= index < len(self.header) else None


# --------------------------------------------------------------------------- UTF-8
def _bad_byte(path: Path) -> SwowFormatError:
    """Find the first line that is not UTF-8 (a slow line-by-line pass, run only after a failure)."""
    with open(path, "rb") as f:
        header = b""
        for line, raw in enumerate(f, start=1):
            header = header or raw
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                column = None
                if line > 1:  # name the column from the header (line 1 is UTF-8, or the error is there)
                    head = header.decode("utf-8-sig").rstrip("\r\n")
                    names = next(csv.reader([head], delimiter=delimiter_of(head)))
                    prefix = raw[: e.start].decode("utf-8")
                    index = len(next(csv.reader([prefix + "x"], delimiter=delimiter_of(head)))) - 1
                    column = names[index] if index < len(names) else None
                problem = f"not UTF-8: byte 0x{raw[e.start]:02x} (save the file as UTF-8)"
                return SwowFormatError(path, line, column, problem)
    return SwowFormatError(path, None, None, "not UTF-8: the file ends inside a multi-byte character")


def check_utf8(path: str | Path) -> None:
    """Decode the whole file in chunks; raise at the first byte that is not UTF-8.

    Raises:
        SwowFormatError: naming the line and, from the header, the column of the bad byte.
    """
    path = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8")()
    with open(path, "rb") as f:
        try:
            while chunk := f.read(_CHUNK):
                decoder.decode(chunk)
            decoder.decode(b"", final=True)
        except UnicodeDecodeError:
            raise _bad_byte(path) from None


# --------------------------------------------------------------------------- csv pass
@contextmanager
def no_field_limit() -> Iterator[None]:
    """Lift the csv module's field-size limit (131072) so a long field is reported by its length."""
    old = csv.field_size_limit()
    csv.field_size_limit(2**31 - 1)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def data_rows(path: Path, layout: Layout) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of each non-blank row after the header, as pyarrow numbers rows.

    Use inside :func:`no_field_limit`. Raises :class:`SwowFormatError` for a CSV syntax error.
    """
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=layout.delimiter, quoting=layout.quoting, strict=True)  # type: ignore[arg-type]
        try:
            next(reader, None)
            start = reader.line_num + 1
            for row in reader:
                if row:
                    yield start, row
                start = reader.line_num + 1
        except csv.Error as e:
            problem = f"CSV syntax error: {e} (a quote inside a quoted field must be doubled)"
            if "end of data" in str(e):
                problem = "a quoted field is never closed"
            raise SwowFormatError(path, start, None, problem) from None


def field_problem(value: str) -> str | None:
    """What is wrong with one field whatever its column: too long, a line break or a control character."""
    if len(value) > MAX_FIELD_CHARS:
        return f"field longer than {MAX_FIELD_CHARS} characters ({len(value)} characters)"
    found = _CONTROL.search(value)
    if found:
        char = found.group()
        return "line break inside a field" if char in "\r\n" else f"control character U+{ord(char):04X} in a field"
    return None


def row_problem(row: Sequence[str], layout: Layout, checks: Mapping[str, Check]) -> tuple[str | None, str] | None:
    """What is wrong with one parsed row, as (column or None, reason); None if nothing.

    Order: an over-long field, a repeated header line, the field count, any :func:`field_problem`,
    then the per-column ``checks``.
    """
    for i, value in enumerate(row):
        if len(value) > MAX_FIELD_CHARS:
            return layout.column(i), f"field longer than {MAX_FIELD_CHARS} characters ({len(value)} characters)"
    if tuple(row) == layout.header:
        return None, REPEATED_HEADER
    if len(row) != len(layout.header):
        return None, f"expected {len(layout.header)} fields, found {len(row)}"
    for i, value in enumerate(row):
        problem = field_problem(value)
        if problem:
            return layout.column(i), problem
    for col, check in checks.items():
        value = row[layout.header.index(col)]
        problem = check(value)
        if problem:
            return col, problem
    return None


def scan(path: Path, layout: Layout, checks: Mapping[str, Check], cause: Exception) -> SwowFormatError:
    """The csv-module pass after pyarrow failed: the first row with a :func:`row_problem`."""
    rows = 0
    with no_field_limit():
        for line, row in data_rows(path, layout):
            rows += 1
            found = row_problem(row, layout, checks)
            if found:
                return SwowFormatError(path, line, found[0], found[1])
    if rows == 0:
        return SwowFormatError(path, 2, None, HEADER_ONLY)
    return SwowFormatError(path, None, None, f"could not be parsed: {cause}")


# --------------------------------------------------------------------------- vectorised checks
def lines_of(path: Path, layout: Layout, rows: Sequence[int]) -> dict[int, int]:
    """1-based first line of each 0-based data row in ``rows``."""
    wanted, found = set(rows), {}
    with no_field_limit():
        for i, (line, _) in enumerate(data_rows(path, layout)):
            if i in wanted:
                found[i] = line
                if len(found) == len(wanted):
                    break
    return found


def fail_at(
    path: Path, layout: Layout, row: int, column: str | None, problem: str, other: int | None = None
) -> SwowFormatError:
    """The error for data row ``row``; ``{other}`` in ``problem`` becomes the line of row ``other``."""
    lines = lines_of(path, layout, [row] if other is None else [row, other])
    text = problem.replace("{other}", str(lines.get(other, "?"))) if other is not None else problem
    return SwowFormatError(path, lines.get(row), column, text)


#: (column, rows that fail as a boolean mask, the reason for row i)
Failure = tuple[str | None, "pd.Series | np.ndarray", Callable[[int], str]]


def first_failure(path: Path, layout: Layout, failures: Sequence[Failure]) -> SwowFormatError | None:
    """The error for the earliest failing row over all ``failures`` (ties: the first listed)."""
    best: tuple[int, str | None, Callable[[int], str]] | None = None
    for column, mask, reason in failures:
        hits = np.flatnonzero(pd.Series(mask, dtype="boolean").fillna(False).to_numpy(dtype=bool))
        if len(hits) and (best is None or hits[0] < best[0]):
            best = (int(hits[0]), column, reason)
    if best is None:
        return None
    row, column, reason = best
    return fail_at(path, layout, row, column, reason(row))


def name_failures(column: str, names: Names, rows: slice, empty: str | None) -> list[Failure]:
    """Failures of a name column, judged once per distinct value: :func:`field_problem`, and
    ``empty`` (the reason) for a blank name unless None. ``rows`` selects the column's rows
    within ``names`` (one Names object may hold several columns, one after the other)."""
    reasons = [field_problem(v) or (empty if empty and not v.strip() else None) for v in names.raw] + [None]
    codes = names.raw_codes[rows]
    bad = np.array([r is not None for r in reasons])[codes]
    return [(column, bad, lambda i: str(reasons[codes[i]]))]
