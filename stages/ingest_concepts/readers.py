"""Readers of the three SWOW formats: a file in, edges (and candidates, counts of what was merged
or dropped) out. Every malformed row raises :class:`SwowFormatError` through :mod:`.locate`."""

from __future__ import annotations

import csv
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from stages.ingest_concepts.formats import (
    BLOCK_SIZE,
    NON_RESPONSE_FORMS,
    R100_HEADER,
    STRENGTH_HEADERS,
    STRENGTH_TOL,
    WINOGAVIL_SWOW_HEADER,
    Names,
    SwowFormatError,
    check_header,
    delimiter_of,
    name_form,
    names_of,
    non_response_form,
)
from stages.ingest_concepts.locate import (
    HEADER_ONLY,
    REPEATED_HEADER,
    Check,
    Failure,
    Layout,
    check_utf8,
    data_rows,
    fail_at,
    first_failure,
    name_failures,
    no_field_limit,
    row_problem,
    scan,
)

R100 = Layout(R100_HEADER, ",", csv.QUOTE_MINIMAL)
WINOGAVIL = Layout(WINOGAVIL_SWOW_HEADER, ",", csv.QUOTE_MINIMAL)


@dataclass
class Read:
    """What a reader found: edges (cue, response, r1/r123 counts and strengths), the candidate
    concepts (release format), and counts for the stage metrics."""

    edges: pd.DataFrame
    candidates: list[str] | None = None
    stats: dict[str, Any] = field(default_factory=dict)


def _stats(cues: int, responses: int, rows: int, dropped: int) -> dict[str, Any]:
    """Metrics: cues dropped by reason; what normalisation merged (distinct input spellings of cues
    and of responses that became one stored name with another; strength-file rows summed into another)."""
    return {
        "dropped_cues": {"no_valid_responses": dropped},
        "merged_by_normalisation": {"cues": cues, "responses": responses, "rows": rows},
    }


# --------------------------------------------------------------------------- checks
def _nonempty(v: str) -> str | None:
    return None if v.strip() else "empty value"


def _int_check(v: str) -> str | None:
    try:
        ok = abs(int(v)) < 2**63
    except ValueError:
        ok = False
    return None if ok else f"not an integer: {v!r}"


def _number_check(v: str) -> str | None:
    try:
        float(v)
    except ValueError:
        return f"not a number: {v!r}"
    return None


def _raise_first(path: Path, layout: Layout, failures: list[Failure]) -> None:
    error = first_failure(path, layout, failures)
    if error is not None:
        raise error


def _arrow(path: Path, layout: Layout, parse: Any, convert: Any, checks: Mapping[str, Check]) -> pd.DataFrame:
    """The fast path: pyarrow reads the file; on failure :func:`scan` names the line."""
    check_utf8(path)
    check_header(path, layout.header)
    try:
        table = pacsv.read_csv(
            path, read_options=pacsv.ReadOptions(block_size=BLOCK_SIZE), parse_options=parse, convert_options=convert
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError) as e:
        raise scan(path, layout, checks, e) from e
    if table.num_rows == 0:
        raise SwowFormatError(path, 2, None, HEADER_ONLY)
    return table.to_pandas()


def _by_name(edges: pd.DataFrame) -> pd.DataFrame:
    """Edges sorted by (cue, response): the order :func:`stages.ingest_concepts.stage.build_tables`
    breaks count ties in, so that shuffling a counted file's rows changes no rank."""
    return edges.sort_values(["cue", "response"], kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- R100
def read_swow_r100(path: str | Path, lowercase: bool = True) -> Read:
    """Count responses in ``SWOW-EN.R100.csv``.

    Edges: cue, response, r1_count, r123_count (Int64), r1_strength, r123_strength (fractions of
    the cue's valid R1 / R1..R3 responses). Missing values (unquoted NA) and
    :data:`~stages.ingest_concepts.formats.NON_RESPONSES` (any case, surrounding whitespace) are not
    responses; a quoted "NA" is the word "NA". A cue with no valid response is dropped and counted (``dropped_cues``).

    Raises:
        SwowFormatError: with file, line and column of the first malformed row.
    """
    path = Path(path)
    names = ("cue", "R1", "R2", "R3")
    convert = pacsv.ConvertOptions(
        include_columns=list(names),
        column_types={c: pa.string() for c in names},
        null_values=["NA"],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,  # "NA" (quoted) is a response, NA is missing
    )
    parse = pacsv.ParseOptions(newlines_in_values=False)
    df = _arrow(path, R100, parse, convert, {"cue": _nonempty})
    n = len(df)
    slots = ["R1", "R2", "R3"]
    raw = pd.concat([df[c] for c in slots], ignore_index=True)  # R1 rows, then R2, then R3
    cue, response = names_of(df["cue"], lowercase), names_of(raw, lowercase)
    header_again = (df["cue"] == "cue") & (df["R1"] == "R1") & (df["R2"] == "R2") & (df["R3"] == "R3")
    _raise_first(
        path,
        R100,
        [
            (None, header_again, lambda i: REPEATED_HEADER),
            ("cue", df["cue"].isna(), lambda i: "cue is NA (missing)"),
            *name_failures("cue", cue, slice(None), "empty cue"),
            *[f for j, c in enumerate(slots) for f in name_failures(c, response, slice(j * n, (j + 1) * n), None)],
        ],
    )
    # a response: not NA, not a SWOW non-response token, not blank (judged once per distinct value)
    ok = np.array([non_response_form(v) not in NON_RESPONSE_FORMS and v.strip() != "" for v in response.raw] + [False])
    keep = ok[response.raw_codes]  # code -1 (NA) picks the trailing False
    # count on integer codes: (cue, response) pairs numbered in first-seen order (R1 rows first)
    at = np.flatnonzero(keep)
    key = cue.codes[at % len(df)].astype(np.int64) * len(response.stored) + response.codes[at]
    pair, uniq = pd.factorize(key)
    pair_cue, pair_response = np.divmod(uniq, len(response.stored))
    r123 = np.bincount(pair, minlength=len(uniq))
    r1 = np.bincount(pair[at < len(df)], minlength=len(uniq))  # R1 answers
    n123 = np.bincount(pair_cue, weights=r123, minlength=len(cue.stored))[pair_cue]
    n1 = np.bincount(pair_cue, weights=r1, minlength=len(cue.stored))[pair_cue]
    text = df["cue"].dtype  # pandas-stubs' pd.array has no overload for such a runtime dtype object (ignores below)
    out = pd.DataFrame(
        {
            "cue": pd.array(cue.stored, dtype=text).take(pair_cue),  # type: ignore[arg-type]
            "response": pd.array(response.stored, dtype=text).take(pair_response),  # type: ignore[arg-type]
            "r123_count": pd.array(r123, dtype="Int64"),
            "r1_count": pd.array(r1, dtype="Int64"),
            "r123_strength": r123 / n123,
            "r1_strength": np.divide(r1, n1, out=np.full(len(r1), np.nan), where=n1 > 0),
        }
    )
    dropped = len(cue.stored) - len(np.unique(pair_cue))
    return Read(_by_name(out), None, _stats(cue.merged, response.merged, 0, dropped))


# --------------------------------------------------------------------------- strength files
def read_swow_strength(path: str | Path, fmt: str, lowercase: bool = True) -> Read:
    """Read ``strength.SWOW-EN.R1.csv`` or ``...R123.csv``.

    The published files are tab-separated and unquoted (a ``"`` is part of a word). The separator
    is taken from the header line (tab, comma or semicolon, as a spreadsheet re-saves the file);
    fields may be quoted (``"a, b"``, doubled ``""``) when the separator is not a tab or the header
    itself is quoted. A UTF-8 BOM and CRLF line ends are accepted. Rows whose response is a SWOW
    non-response marker (:data:`~stages.ingest_concepts.formats.NON_RESPONSES`, any case) are dropped
    and counted (``non_response_rows``).

    Edges: cue, response and the r1_* or r123_* count/strength columns (the others null).
    Each row: cue and response non-empty, 0 <= count <= N, N > 0, strength in [0, 1] and equal
    to count / N within :data:`STRENGTH_TOL`. Across rows: no (cue, response) twice (both lines
    named), one N per cue, a cue's counts sum to at most N (its strengths to at most 1). Rows
    that differ only before normalisation ("Apple" / "apple") are merged: counts summed,
    strength = summed count / N of the merged cue, and counted (``merged_by_normalisation``).

    Raises:
        SwowFormatError: with file, line and column of the first malformed row.
    """
    path = Path(path)
    with open(path, "rb") as f:  # the separator and quoting, from the raw header line
        head = f.readline().decode("utf-8-sig", errors="replace")
    sep = delimiter_of(head)
    quoted = sep != "\t" or '"' in head
    layout = Layout(STRENGTH_HEADERS[fmt], sep, csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE)
    kind, scol = layout.header[2], layout.header[4]  # "R1"/"R123", "R1.Strength"/...
    types = {"cue": pa.string(), "response": pa.string(), kind: pa.int64(), "N": pa.int64(), scol: pa.float64()}
    checks = {"cue": _nonempty, "response": _nonempty, kind: _int_check, "N": _int_check, scol: _number_check}
    parse = pacsv.ParseOptions(delimiter=sep, quote_char='"' if quoted else False, double_quote=True)
    convert = pacsv.ConvertOptions(column_types=types, strings_can_be_null=False, null_values=[])
    df = _arrow(path, layout, parse, convert, checks)
    cue, resp = names_of(df["cue"], lowercase), names_of(df["response"], lowercase)
    c, n, s = df[kind], df["N"], df[scol]
    expected = c / n.where(n > 0)
    _raise_first(
        path,
        layout,
        [
            *name_failures("cue", cue, slice(None), "empty cue"),
            *name_failures("response", resp, slice(None), "empty response"),
            (kind, c < 0, lambda i: f"negative count {c[i]}"),
            ("N", n <= 0, lambda i: f"N must be a positive number of responses, got {n[i]}"),
            (kind, c > n, lambda i: f"count {c[i]} > N = {n[i]}"),
            (scol, ~s.between(0.0, 1.0), lambda i: f"strength {s[i]} outside [0, 1]"),
            (
                scol,
                (s - expected).abs() > STRENGTH_TOL,
                lambda i: (
                    f"strength {s[i]} != {kind} / N = {c[i]}/{n[i]} = {expected[i]:.6g} (tolerance {STRENGTH_TOL})"
                ),
            ),
        ],
    )
    first_of = _check_strength_totals(path, layout, df, kind, scol, cue, resp)
    edges, candidates, stats = _merge_strength(df, kind, scol, cue, resp, first_of)
    marker = np.array([non_response_form(v) in NON_RESPONSE_FORMS for v in edges["response"]], dtype=bool)
    stats["non_response_rows"] = int(marker.sum())
    return Read(_by_name(edges[~marker]), candidates, stats)


def _check_strength_totals(
    path: Path, layout: Layout, df: pd.DataFrame, kind: str, scol: str, cue: Names, resp: Names
) -> np.ndarray:
    """The strength file's checks across rows (see :func:`read_swow_strength`): no (cue, response)
    twice, one N per cue, a cue's counts sum to at most N. ``kind``/``scol``: the count and strength
    columns; ``cue``/``resp``: the rows' names.

    Returns: (input cues,) int: the first row of each input cue, by its raw code.

    Raises:
        SwowFormatError: at the first offending row, naming the other line where there is one."""
    c, n, s = df[kind], df["N"], df[scol]
    pair = cue.raw_codes.astype(np.int64) * (resp.n_raw + 1) + resp.raw_codes
    dup = pd.Series(pair).duplicated().to_numpy()
    if dup.any():
        i = int(dup.argmax())
        first = int((pair == pair[i]).argmax())
        twice = (df["cue"][i], df["response"][i])
        raise fail_at(path, layout, i, "response", f"duplicate row {twice}: also on line {{other}}", first)
    first_of = np.unique(cue.raw_codes, return_index=True)[1]  # first row of each input cue
    first_row = first_of[cue.raw_codes]
    cue_n = n.to_numpy()[first_row]
    if (n.to_numpy() != cue_n).any():
        i = int((n.to_numpy() != cue_n).argmax())
        problem = f"N = {n[i]}, but cue {df['cue'][i]!r} has N = {cue_n[i]} on line {{other}}"
        raise fail_at(path, layout, i, "N", problem, int(first_row[i]))
    total = np.bincount(cue.raw_codes, weights=c.to_numpy(dtype=float))
    over = np.flatnonzero(total > n.to_numpy()[first_of])
    if len(over):
        i = int(first_of[over].min())
        k = cue.raw_codes[i]
        ssum = np.bincount(cue.raw_codes, weights=s.to_numpy())[k]
        problem = (
            f"counts of cue {df['cue'][i]!r} (first on this line) sum to {int(total[k])} > N = {n[i]} "
            f"(strengths sum to {ssum:.4g} > 1)"
        )
        raise fail_at(path, layout, i, kind, problem)
    return first_of


def _merge_strength(
    df: pd.DataFrame, kind: str, scol: str, cue: Names, resp: Names, first_of: np.ndarray
) -> tuple[pd.DataFrame, None, dict]:
    """Merge rows that collide only after normalisation (see :func:`read_swow_strength`)."""
    count, strength = df[kind].to_numpy(), df[scol].to_numpy()
    cues, responses = cue.values, resp.values
    if cue.changed or resp.changed:  # else nothing can merge: there are no exact duplicates
        group, _ = pd.factorize(cue.codes.astype(np.int64) * (len(resp.stored) + 1) + resp.codes)  # first-seen order
        head = np.unique(group, return_index=True)[1]  # the first row of each group
        rows = np.bincount(group)
        total = np.bincount(group, weights=count).astype(np.int64)
        # a stored cue's valid responses: its input cues' N summed; strengths recomputed where rows merged
        n_cue = np.bincount(cue.of_raw, weights=df["N"].to_numpy()[first_of], minlength=len(cue.stored))
        sources = np.bincount(cue.of_raw, minlength=len(cue.stored))
        merged = (rows > 1) | (sources[cue.codes[head]] > 1)
        strength = np.where(merged, total / n_cue[cue.codes[head]], strength[head])
        count, cues, responses = total, cues.take(head), responses.take(head)
    low, other = kind.lower(), ("r123" if kind == "R1" else "r1")
    edges = pd.DataFrame({"cue": cues.reset_index(drop=True), "response": responses.reset_index(drop=True)})
    edges[f"{low}_count"] = pd.array(count, dtype="Int64")
    edges[f"{low}_strength"] = strength.astype(float)
    edges[f"{other}_count"] = pd.array(np.full(len(edges), None), dtype="Int64")
    edges[f"{other}_strength"] = float("nan")
    return edges, None, _stats(cue.merged, resp.merged, len(df) - len(edges), 0)


# --------------------------------------------------------------------------- WinoGAViL release
def read_winogavil_swow(path: str | Path, lowercase: bool = True) -> Read:
    """Read the WinoGAViL release's ``swow.csv`` (CRLF, JSON-list cells).

    Edges: cue, response and null counts/strengths, in association order (a cue on several rows:
    its rows sorted by their text first, so the file's row order never matters); candidates: the
    image concepts in that order. A cue whose rows have no associations is dropped and counted.

    Raises:
        SwowFormatError: for a bad header, a header-only file, or a row whose cells are not JSON
            lists of non-empty strings.
    """
    path = Path(path)
    check_utf8(path)
    check_header(path, WINOGAVIL.header)
    form = name_form(lowercase)
    rows: list[tuple[str, str]] = []
    raw_responses: set[str] = set()
    candidates: dict[str, None] = {}
    cues: dict[str, None] = {}
    raw_cues: set[str] = set()
    records: list[tuple[str, list[str], dict[str, list[str]]]] = []
    at = {c: WINOGAVIL.header.index(c) for c in ("cue", "associations", "candidates")}
    with no_field_limit():
        for line, rec in data_rows(path, WINOGAVIL):
            found = row_problem(rec, WINOGAVIL, {"cue": _nonempty})
            if found:
                raise SwowFormatError(path, line, *found)
            parsed = {}
            for col in ("associations", "candidates"):
                try:
                    value = json.loads(rec[at[col]])
                except json.JSONDecodeError as e:
                    raise SwowFormatError(path, line, col, f"not a JSON list: {e.msg}") from e
                if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                    raise SwowFormatError(path, line, col, "must be a JSON list of non-empty strings")
                parsed[col] = value
            records.append((form(rec[at["cue"]]), rec, parsed))
    # rows in a canonical order (by cue, then the row's text), so a cue on several rows ranks its
    # associations the same whatever the file's row order; within a row, association order is kept
    for cue, rec, parsed in sorted(records, key=lambda r: (r[0], r[1])):
        raw_cues.add(rec[at["cue"]])
        cues.setdefault(cue, None)
        for response in parsed["associations"]:
            raw_responses.add(response)
            rows.append((cue, form(response)))
        for c in parsed["candidates"]:
            candidates.setdefault(form(c), None)
    if not cues:
        raise SwowFormatError(path, 2, None, HEADER_ONLY)
    edges = pd.DataFrame(rows, columns=["cue", "response"]).drop_duplicates(["cue", "response"])
    edges["r1_count"] = pd.array([pd.NA] * len(edges), dtype="Int64")
    edges["r123_count"] = pd.array([pd.NA] * len(edges), dtype="Int64")
    edges["r1_strength"] = float("nan")
    edges["r123_strength"] = float("nan")
    dropped = len(set(cues) - set(edges["cue"]))
    stats = _stats(len(raw_cues) - len(cues), len(raw_responses) - len({form(r) for r in raw_responses}), 0, dropped)
    return Read(edges.reset_index(drop=True), list(candidates), stats)
