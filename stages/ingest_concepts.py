"""Stage 1, ``ingest_concepts``: SWOW association norms -> concepts + cue->response edges.

Reads the three real input formats (see README "SWOW input"):

- ``SWOW-EN.R100.csv`` (R ``write.csv``): quoted strings, unquoted ``NA`` for missing, the
  tokens "Unknown word" / "No more responses" (not responses). Counts R1 and R123 per
  (cue, response); strength = count / number of valid responses of the cue (R1 or R1..R3).
- ``strength.SWOW-EN.R1.csv`` / ``strength.SWOW-EN.R123.csv``: tab-separated, unquoted,
  columns ``cue, response, R1|R123, N, R1.Strength|R123.Strength``.
- the WinoGAViL release's ``swow.csv``: one row per SWOW-baseline instance; its cue ->
  associations lists become edges (no counts in that file), and its candidates concepts.

Concepts are the SWOW cues (WinoGAViL §2.1 starts "with a corpus of English concepts
obtained from SWOW"); for the release format also every image candidate.
SWOW: De Deyne, Navarro, Perfors, Brysbaert & Storms (2019), Behav. Res. Methods 51:987-1006.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv

from schemas.ingest import Concepts, Edges
from stages._io import ParamsError, section, write_json, write_table

CONCEPTS_PATH = "data/ingest/concepts.parquet"
EDGES_PATH = "data/ingest/edges.parquet"
METRICS_PATH = "data/metrics/ingest_concepts.json"

#: SWOW tokens that are not responses (SWOW-EN documentation).
NON_RESPONSES = frozenset({"Unknown word", "No more responses"})
R100_HEADER = ["", "id", "participantID", "age", "gender", "nativeLanguage", "country", "education", "created_at", "cue", "R1", "R2", "R3"]
STRENGTH_HEADERS = {
    "swow_strength_r1": ["cue", "response", "R1", "N", "R1.Strength"],
    "swow_strength_r123": ["cue", "response", "R123", "N", "R123.Strength"],
}
WINOGAVIL_SWOW_HEADER = [
    "ID", "cue", "associations", "num_associations", "cue_weight", "associations_mean_weight",
    "candidates", "candidates_connectivity_score", "solvers_jaccard_mean", "solvers_jaccard_std",
]  # fmt: skip
FORMATS = ("swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow")


class SwowFormatError(ValueError):
    """A SWOW input file is malformed; the message names file, line (1-based) and column."""

    def __init__(self, path: str | Path, line: int, column: str | None, problem: str):
        self.path, self.line, self.column = str(path), line, column
        where = f"{path}, line {line}" + (f", column '{column}'" if column else "")
        super().__init__(f"{where}: {problem}")


# --------------------------------------------------------------------------- detection
def _header_fields(first_line: str) -> list[str]:
    delim = "\t" if "\t" in first_line else ","
    return next(csv.reader([first_line], delimiter=delim))


def detect_format(path: str | Path) -> str:
    """Name the SWOW format of ``path`` from its header line (one of :data:`FORMATS`).

    Raises:
        SwowFormatError: when the header matches none of the known formats.
    """
    with open(path, encoding="utf-8-sig", newline="") as f:
        first = f.readline().rstrip("\r\n")
    if not first:
        raise SwowFormatError(path, 1, None, "file is empty (expected a header line)")
    fields = _header_fields(first)
    if fields == R100_HEADER:
        return "swow_r100"
    for name, header in STRENGTH_HEADERS.items():
        if fields == header:
            return name
    if fields == WINOGAVIL_SWOW_HEADER:
        return "winogavil_swow"
    raise SwowFormatError(
        path, 1, None,
        f"unrecognised header {fields[:6]}...: expected SWOW-EN.R100 ({R100_HEADER[1:4]}...), "
        f"strength.SWOW-EN.R1/R123 (tab-separated {STRENGTH_HEADERS['swow_strength_r1']}) or the "
        "WinoGAViL swow.csv; or set ingest.format explicitly",
    )  # fmt: skip


# --------------------------------------------------------------------------- error location
def _check_header(path: Path, header: list[str]) -> None:
    with open(path, encoding="utf-8-sig", newline="") as f:
        first = f.readline().rstrip("\r\n")
    got = _header_fields(first) if first else []
    if got != header:
        missing = [h for h in header if h not in got]
        raise SwowFormatError(path, 1, missing[0] if missing else None, f"header {got} != expected {header}")



def _locate(path: Path, delimiter: str, quoting: int, header: list[str], checks: dict[str, Any]) -> SwowFormatError:
    """Re-scan ``path`` with the csv module to find the first bad line and column."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter=delimiter, quoting=quoting, strict=True)
        try:
            got = next(reader)
            if got != header:
                missing = [h for h in header if h not in got]
                return SwowFormatError(path, 1, missing[0] if missing else None, f"header {got} != expected {header}")
            for row in reader:
                line = reader.line_num
                if len(row) != len(header):
                    return SwowFormatError(path, line, None, f"expected {len(header)} fields, found {len(row)}")
                for col, check in checks.items():
                    value = row[header.index(col)]
                    problem = check(value)
                    if problem:
                        return SwowFormatError(path, line, col, f"{problem}: {value!r}")
        except csv.Error as e:
            return SwowFormatError(path, reader.line_num, None, f"CSV syntax error: {e}")
        except UnicodeDecodeError as e:
            return SwowFormatError(path, reader.line_num + 1, None, f"not UTF-8: {e}")
    return SwowFormatError(path, 0, None, "could not be parsed")


def _int_check(v: str) -> str | None:
    return None if v.isdigit() else "not a non-negative integer"


def _prob_check(v: str) -> str | None:
    try:
        x = float(v)
    except ValueError:
        return "not a number"
    return None if 0.0 <= x <= 1.0 else "strength outside [0, 1]"


def _nonempty(v: str) -> str | None:
    return None if v.strip() and v != "NA" else "empty cue"


# --------------------------------------------------------------------------- readers
def read_swow_r100(path: str | Path, lowercase: bool = True) -> pd.DataFrame:
    """Count responses in ``SWOW-EN.R100.csv``.

    Returns a frame with columns cue, response, r1_count, r123_count, r1_strength,
    r123_strength (counts Int64, strengths float fractions). Missing values (unquoted NA)
    and :data:`NON_RESPONSES` are not responses; a quoted "NA" is the word "NA".

    Raises:
        SwowFormatError: with file, line and column of the first malformed row.
    """
    path = Path(path)
    header = R100_HEADER
    _check_header(path, header)
    convert = pacsv.ConvertOptions(
        include_columns=["cue", "R1", "R2", "R3"],
        column_types={c: pa.string() for c in ("cue", "R1", "R2", "R3")},
        null_values=["NA"],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,  # "NA" (quoted) is a response, NA is missing
    )
    try:
        table = pacsv.read_csv(path, parse_options=pacsv.ParseOptions(newlines_in_values=False), convert_options=convert)
    except (pa.ArrowInvalid, pa.ArrowKeyError) as e:
        raise _locate(path, ",", csv.QUOTE_MINIMAL, header, {"cue": _nonempty}) from e
    df = table.to_pandas()
    bad_cue = df["cue"].isna() | (df["cue"].str.strip() == "")
    if bad_cue.any():
        raise SwowFormatError(path, int(bad_cue.idxmax()) + 2, "cue", "empty or NA cue")
    long = df.melt(id_vars="cue", value_vars=["R1", "R2", "R3"], var_name="slot", value_name="response")
    long = long[long["response"].notna() & ~long["response"].isin(NON_RESPONSES)]
    long["response"] = long["response"].str.strip()
    long = long[long["response"] != ""]
    if lowercase:
        long["cue"] = long["cue"].str.strip().str.lower()
        long["response"] = long["response"].str.lower()
    r123 = long.groupby(["cue", "response"], sort=False).size().rename("r123_count")
    r1 = long[long["slot"] == "R1"].groupby(["cue", "response"], sort=False).size().rename("r1_count")
    out = pd.concat([r123, r1], axis=1).reset_index()
    out["r1_count"] = out["r1_count"].fillna(0).astype("Int64")
    out["r123_count"] = out["r123_count"].astype("Int64")
    n123 = out.groupby("cue")["r123_count"].transform("sum")
    n1 = out.groupby("cue")["r1_count"].transform("sum")
    out["r123_strength"] = (out["r123_count"] / n123).astype(float)
    out["r1_strength"] = (out["r1_count"] / n1.where(n1 > 0)).astype(float)
    return out


def read_swow_strength(path: str | Path, fmt: str, lowercase: bool = True) -> pd.DataFrame:
    """Read ``strength.SWOW-EN.R1.csv`` or ``...R123.csv`` (tab-separated, unquoted).

    Returns cue, response and the r1_* or r123_* count/strength columns (the others null).

    Raises:
        SwowFormatError: with file, line and column of the first malformed row.
    """
    path = Path(path)
    header = STRENGTH_HEADERS[fmt]
    kind = header[2]  # "R1" or "R123"
    _check_header(path, header)
    types = {"cue": pa.string(), "response": pa.string(), kind: pa.int64(), "N": pa.int64(), f"{kind}.Strength": pa.float64()}
    try:
        table = pacsv.read_csv(
            path,
            parse_options=pacsv.ParseOptions(delimiter="\t", quote_char=False),
            convert_options=pacsv.ConvertOptions(column_types=types, strings_can_be_null=False, null_values=[]),
        )
    except (pa.ArrowInvalid, pa.ArrowKeyError) as e:
        checks = {"cue": _nonempty, kind: _int_check, "N": _int_check, f"{kind}.Strength": _prob_check}
        raise _locate(path, "\t", csv.QUOTE_NONE, header, checks) from e
    if table.column_names != header:
        raise SwowFormatError(path, 1, None, f"header {table.column_names} != expected {header}")
    df = table.to_pandas()
    strength = df[f"{kind}.Strength"]
    bad = (strength < 0) | (strength > 1) | (df[kind] > df["N"])
    if bad.any():
        i = int(bad.idxmax())
        raise SwowFormatError(path, i + 2, f"{kind}.Strength", f"strength {strength[i]} / count {df[kind][i]} > N {df['N'][i]}")
    if lowercase:
        df["cue"] = df["cue"].str.strip().str.lower()
        df["response"] = df["response"].str.strip().str.lower()
    low = kind.lower()
    out = pd.DataFrame({"cue": df["cue"], "response": df["response"]})
    out[f"{low}_count"] = df[kind].astype("Int64")
    out[f"{low}_strength"] = df[f"{kind}.Strength"].astype(float)
    # lower-casing may merge rows (e.g. "Apple" and "apple"): sum counts and strengths
    out = out.groupby(["cue", "response"], sort=False, as_index=False).sum(min_count=1)
    other = "r123" if low == "r1" else "r1"
    out[f"{other}_count"] = pd.array([pd.NA] * len(out), dtype="Int64")
    out[f"{other}_strength"] = float("nan")
    return out


def read_winogavil_swow(path: str | Path, lowercase: bool = True) -> tuple[pd.DataFrame, list[str]]:
    """Read the WinoGAViL release's ``swow.csv`` (CRLF, JSON-list cells).

    Returns (edges with cue, response and null counts/strengths in association order,
    the candidate concepts in first-seen order).

    Raises:
        SwowFormatError: for a bad header or a cell that is not a JSON list of strings.
    """
    path = Path(path)
    rows, candidates = [], {}
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != WINOGAVIL_SWOW_HEADER:
            raise SwowFormatError(path, 1, None, f"header {reader.fieldnames} != expected {WINOGAVIL_SWOW_HEADER}")
        for rec in reader:
            line = reader.line_num
            parsed = {}
            for col in ("associations", "candidates"):
                try:
                    value = json.loads(rec[col] or "")
                except json.JSONDecodeError as e:
                    raise SwowFormatError(path, line, col, f"not a JSON list: {e.msg}") from e
                if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                    raise SwowFormatError(path, line, col, "must be a JSON list of non-empty strings")
                parsed[col] = [v.strip().lower() if lowercase else v.strip() for v in value]
            cue = (rec["cue"] or "").strip()
            if not cue:
                raise SwowFormatError(path, line, "cue", "empty cue")
            cue = cue.lower() if lowercase else cue
            for response in parsed["associations"]:
                rows.append((cue, response))
            for c in parsed["candidates"]:
                candidates.setdefault(c, None)
    edges = pd.DataFrame(rows, columns=["cue", "response"]).drop_duplicates(["cue", "response"])
    edges["r1_count"] = pd.array([pd.NA] * len(edges), dtype="Int64")
    edges["r123_count"] = pd.array([pd.NA] * len(edges), dtype="Int64")
    edges["r1_strength"] = float("nan")
    edges["r123_strength"] = float("nan")
    return edges.reset_index(drop=True), list(candidates)


# --------------------------------------------------------------------------- pure core
@dataclass(frozen=True)
class IngestResult:
    concepts: pd.DataFrame
    edges: pd.DataFrame
    metrics: dict[str, Any]


def build_tables(edges: pd.DataFrame, source_format: str, candidates: list[str] | None = None) -> IngestResult:
    """Rank edges per cue and derive the concepts table (pure: frames in, frames out).

    Args:
        edges: cue, response, r1_count, r123_count, r1_strength, r123_strength.
        source_format: one of :data:`FORMATS`.
        candidates: image concepts named by the input (release format), or None.

    Returns:
        :class:`IngestResult` with frames valid under :class:`schemas.ingest.Concepts`
        and :class:`schemas.ingest.Edges`.
    """
    e = edges.copy()
    e["_order"] = range(len(e))
    e = e.sort_values(
        ["cue", "r123_count", "r1_count", "_order"], ascending=[True, False, False, True], na_position="last", kind="stable"
    )
    e["rank"] = e.groupby("cue").cumcount() + 1
    e["source_format"] = source_format
    e = e.drop(columns="_order").reset_index(drop=True)
    cues = e["cue"].drop_duplicates()
    cand = list(candidates or [])
    names = pd.Index(cues).append(pd.Index(cand)).drop_duplicates()
    n_resp = e.groupby("cue")["response"].nunique()
    n_cues = e.groupby("response")["cue"].nunique()
    concepts = pd.DataFrame({"concept": names})
    concepts["is_cue"] = concepts["concept"].isin(set(cues))
    concepts["is_candidate"] = concepts["concept"].isin(set(cand))
    concepts["n_responses"] = concepts["concept"].map(n_resp).fillna(0).astype(int)
    concepts["n_cues"] = concepts["concept"].map(n_cues).fillna(0).astype(int)
    concepts["source_format"] = source_format
    concepts = concepts.sort_values("concept", kind="stable").reset_index(drop=True)
    metrics = {
        "format": source_format,
        "concepts": len(concepts),
        "cues": int(concepts["is_cue"].sum()),
        "candidates": int(concepts["is_candidate"].sum()),
        "edges": len(e),
    }
    return IngestResult(concepts, e[list(Edges.to_schema().columns)], metrics)


def ingest(path: str | Path, fmt: str = "auto", lowercase: bool = True) -> IngestResult:
    """Read a SWOW file in any supported format and build the concepts and edges tables.

    Raises:
        FileNotFoundError: if ``path`` does not exist (message says how to point at it).
        SwowFormatError: for malformed input (file, line, column).
        ParamsError: for an unknown ``fmt``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(
            f"{path} not found: download SWOW-EN from smallworldofwords.org and set ingest.path in params.yaml"
        )
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt not in FORMATS:
        raise ParamsError(f"ingest.format={fmt!r}: expected 'auto' or one of {FORMATS}")
    candidates = None
    if fmt == "swow_r100":
        edges = read_swow_r100(path, lowercase)
    elif fmt.startswith("swow_strength"):
        edges = read_swow_strength(path, fmt, lowercase)
    else:
        edges, candidates = read_winogavil_swow(path, lowercase)
    result = build_tables(edges, fmt, candidates)
    result.metrics["input"] = str(path)
    return result


# --------------------------------------------------------------------------- stage I/O
def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point (used by ``gavil stage`` and the Prefect flow): params in, tables out."""
    p = section(params, "ingest", ("path", "format", "lowercase"))
    if not isinstance(p["lowercase"], bool):
        raise ParamsError("ingest.lowercase must be true or false")
    result = ingest(p["path"], p["format"], p["lowercase"])
    write_table(result.edges, EDGES_PATH, Edges)
    write_table(result.concepts, CONCEPTS_PATH, Concepts)
    write_json(METRICS_PATH, result.metrics)
    return result.metrics

