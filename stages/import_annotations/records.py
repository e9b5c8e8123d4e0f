"""Row-level building blocks shared by every importer: the released files' header layouts, the
:class:`RowError` a bad row raises, cell parsing (``parse_*``), the CSV/JSONL readers
(:func:`iter_records`, :func:`header_of`), the instance shape check both release and raw rows
pass, and :class:`ImportState`, which accumulates accepted rows, rejects (annotator ids redacted)
and seen files over one import run.
"""

from __future__ import annotations

import csv
import json
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gavil.domain.names import NameError_, clean_word
from gavil.domain.privacy import hash_annotator
from gavil.domain.vocabulary import (
    CANDIDATE_SIZES,
    K_LIMITS,
    RELEASE_DATASET_COLUMNS,
    RELEASE_GAME_COLUMNS,
    RELEASE_SWOW_COLUMNS,
    name_key,
    normalize_name,
)
from gavil.domain.winogavil import k_is_valid
from gavil.io import sha256_file

GAME_HEADER = list(RELEASE_GAME_COLUMNS)
DATASET_HEADER = list(RELEASE_DATASET_COLUMNS)
SWOW_HEADER = list(RELEASE_SWOW_COLUMNS)
#: Columns holding a person's identity: hashed before anything is stored (rejects included).
#: The effective list is ``annotations.identity_columns``; these are always among them.
BASE_ID_COLUMNS = ("spymaster_id", "solver_id", "WorkerId")


class RowError(ValueError):
    """A row is invalid; the message is the reason written to the rejects table."""


# --------------------------------------------------------------------------- cell parsing
def parse_list(value: object, column: str, normalize: bool = False) -> list[str]:
    """A JSON list of non-empty strings (cell text or an already-parsed list), stripped.

    Each name must pass the word policy (:func:`gavil.domain.names.clean_word` with phrases: letters and
    marks, internal hyphens/apostrophes, single spaces; no invisible character; one script; at
    most :data:`gavil.domain.names.MAX_WORD` code points) and is taken in its NFKC form.
    Names in it must be distinct by :func:`gavil.domain.vocabulary.name_key` (the TR39 skeleton after
    NFKC and case folding): ``["Dog", "dog"]`` and ``["dog's", "dog’s"]`` are a RowError. With
    ``normalize`` the stored forms (:func:`gavil.domain.vocabulary.normalize_name`) are
    returned (raw annotations are stored in that form); otherwise the stripped names as given
    (released files are kept as published).
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise RowError(f"{column}: not a JSON list (invalid JSON at character {e.pos})") from e
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise RowError(f"{column}: must be a JSON list of non-empty strings")
    try:  # image concepts: the word policy of gavil.domain.names (phrases of letters, no invisible characters)
        value = [clean_word(v, f"{column[:-1]} name", phrase=True) for v in value]
    except NameError_ as e:
        raise RowError(str(e)) from None
    keys = [name_key(v) for v in value]
    dup = sorted({v for v, k in zip(value, keys) if keys.count(k) > 1})
    if dup:
        raise RowError(
            f"{column} contain duplicates after normalisation (NFKC, case folding, TR39 confusable skeleton): "
            f"{dup} are one name"
        )
    return [normalize_name(v) for v in value] if normalize else value


def parse_id(value: object, column: str) -> str:
    """A person's, an instance's or a task's id: a non-empty string, stored in one form: Unicode
    NFC, invisible format characters (zero-width spaces, BOMs: category Cf) removed, trimmed. JSON
    numbers, booleans, lists, objects, null or NaN are refused (``1`` and ``1.0`` would otherwise be
    two people). Case is kept: platforms' ids are case-sensitive. The message never repeats the
    value (it may be a person's id)."""
    if not isinstance(value, str):
        raise RowError(f"{column} is not a non-empty string (got {'null' if value is None else type(value).__name__})")
    clean = "".join(ch for ch in unicodedata.normalize("NFC", value) if unicodedata.category(ch) != "Cf").strip()
    if not clean:
        raise RowError(f"{column} is not a non-empty string (got an empty one)")
    return clean


_INT_TEXT = re.compile(r"[+-]?[0-9]+(?:\.0*)?", re.ASCII)
_INT_LIMIT = 2**53  # exactly representable everywhere (JSON readers, float64); IDs and scores are far below


def parse_int(value: Any, column: str) -> int:
    """An integer cell: an int, a whole float (``1.0``: the release writes both) or ASCII digits
    (``"12"``, ``"12.0"``), with magnitude below 2**53. Booleans (a JSONL ``true``), fractions,
    NaN, infinities, exponents (``"1e3"``) and non-ASCII digits are refused; never rounded."""
    if isinstance(value, bool):
        raise RowError(f"{column}: {value!r} is not an integer")
    if isinstance(value, int):
        n = value
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            raise RowError(f"{column}: {value!r} is not an integer")
        n = int(value)
    elif isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
        n = int(value.strip().split(".")[0])
    else:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        try:
            float(value)
        except (TypeError, ValueError, OverflowError):
            raise RowError(f"{column}: {shown} is not a number") from None
        raise RowError(f"{column}: {shown} is not an integer")
    if abs(n) >= _INT_LIMIT:
        raise RowError(f"{column}: {n if abs(n) < 10**30 else 'a huge number'} is out of range")
    return n


def parse_float(value: Any, column: str, lo: float | None = None, hi: float | None = None) -> float:
    """A finite number (booleans, NaN and infinities refused), optionally within [lo, hi]."""
    if isinstance(value, bool):
        raise RowError(f"{column}: {value!r} is not a number")
    try:
        f = float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise RowError(f"{column}: {str(value)[:40]!r} is not a number") from e
    if not math.isfinite(f):
        raise RowError(f"{column}: {value!r} is not a finite number")
    if (lo is not None and f < lo) or (hi is not None and f > hi):
        raise RowError(f"{column}: {value!r} outside [{lo}, {hi}]")
    return f


def opt_float(rec: dict[str, Any], column: str) -> float | None:
    return parse_float(rec[column], column) if rec.get(column) not in (None, "") else None


def _redact_value(v: Any, key: bytes, ids: frozenset[str], is_id: bool) -> Any:
    if is_id and v not in (None, ""):
        return hash_annotator(v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=str), key)
    if isinstance(v, dict):
        return {k: _redact_value(x, key, ids, str(k).casefold() in ids) for k, x in v.items()}
    if isinstance(v, list):
        return [_redact_value(x, key, ids, False) for x in v]
    return v


def _redact(row: dict[str, Any], key: bytes, identity_columns: frozenset[str] = frozenset(BASE_ID_COLUMNS)) -> str:
    """The row as JSON for the rejects table, every identity column's value replaced by its keyed
    hash (never the raw id): column names matched case-insensitively, at any depth of nested JSON
    objects; non-string ids are hashed by their JSON text."""
    ids = frozenset(c.casefold() for c in identity_columns)
    clean = _redact_value({k: v for k, v in row.items() if k is not None}, key, ids, False)
    return json.dumps(clean, ensure_ascii=False, default=str)


# --------------------------------------------------------------------------- readers
_SURROGATE = re.compile("[\udc80-\udcff]")


def duplicate_column(header: list[str]) -> str | None:
    """The first column name a header holds twice (compared as written), or None: a reader would
    silently keep one of the two columns' values."""
    seen: set[str] = set()
    for name in header:
        if name in seen:
            return name
        seen.add(name)
    return None


def duplicate_header_reason(header: list[str]) -> str | None:
    """The reject reason for a header with a column twice (:func:`duplicate_column`), or None."""
    dup = duplicate_column(header)
    return None if dup is None else f"header has column {dup!r} twice: every column name must be unique"


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` object hook: a JSON object with a key twice is an error, not its last value."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"key {k!r} appears twice in the record")
        out[k] = v
    return out


def _not_utf8(*texts: Any) -> str | None:
    """The reason a decoded text holds bytes that were not UTF-8 (read with surrogateescape), or None."""
    for t in texts:
        m = _SURROGATE.search(t) if isinstance(t, str) else None
        if m:
            return f"not UTF-8: byte 0x{ord(m.group()) - 0xDC00:02x} (save the file as UTF-8)"
    return None


def iter_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """Yield (line, record, error) from a CSV (BOM/CRLF tolerant) or JSONL file.

    For CSV, ``line`` is the physical line where the record ends; short rows (e.g. a truncated
    last line) yield an error instead of a record; a header with a column twice yields one error
    at line 1 and nothing else (:func:`duplicate_header_reason`). In JSONL a record with a key
    twice is an error of its line. A line with bytes that are not UTF-8 yields an
    error for that line (the file is read on); a CSV syntax error (e.g. a field over the csv
    module's size limit) yields an error and ends the file there.
    """
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
            for i, text in enumerate(f, start=1):
                if not text.strip():
                    continue
                bad = _not_utf8(text)
                if bad:
                    yield i, None, bad
                    continue
                try:
                    rec = json.loads(text, object_pairs_hook=_unique_keys)
                except (ValueError, RecursionError) as e:  # json.JSONDecodeError is a ValueError
                    if isinstance(e, json.JSONDecodeError):
                        why = f"invalid JSON at character {e.pos}"
                    else:
                        why = str(e) if isinstance(e, ValueError) else "nested too deeply"
                    yield i, None, f"not a JSON object ({why})"
                    continue
                yield (i, rec, None) if isinstance(rec, dict) else (i, None, "not a JSON object")
        return
    with open(path, encoding="utf-8-sig", newline="", errors="surrogateescape") as f:
        reader = csv.DictReader(f)
        try:
            dup = duplicate_header_reason(list(reader.fieldnames or []))
            if dup:  # the csv module would keep the last column's value: the whole file is refused
                yield 1, None, dup
                return
            for rec in reader:
                bad = _not_utf8(*rec.keys(), *(v for v in rec.values() if isinstance(v, str)))
                if bad:
                    yield reader.line_num, None, bad
                elif None in rec.values():
                    yield (
                        reader.line_num,
                        {k: v for k, v in rec.items() if v is not None},
                        "row has fewer fields than the header (truncated?)",
                    )
                elif None in rec:
                    yield reader.line_num, None, "row has more fields than the header"
                else:
                    yield reader.line_num, rec, None
        except csv.Error as e:  # the csv module's wording goes to the log; the reject keeps a fixed sentence
            print(f"import_annotations: {path.name} line {reader.line_num + 1}: {e}", file=sys.stderr)
            yield (
                reader.line_num + 1,
                None,
                "CSV syntax error (a quote inside a quoted field must be doubled), the rest of the file is not read",
            )


def header_of(path: Path) -> list[str]:
    """The column names: a CSV's header line, or the keys of a JSONL file's first record
    (``[]`` when unreadable: the caller then rejects the file)."""
    if path.suffix.lower() == ".jsonl":
        with open(path, encoding="utf-8-sig", errors="surrogateescape") as f:
            for text in f:
                if text.strip():
                    try:
                        return list(json.loads(text, object_pairs_hook=_unique_keys))
                    except (ValueError, TypeError, RecursionError):
                        return []
        return []
    with open(path, encoding="utf-8-sig", newline="", errors="surrogateescape") as f:
        try:
            return next(csv.reader(f), [])
        except csv.Error:
            return []


Records = Iterator[tuple[int, dict[str, Any] | None, str | None]]


@dataclass
class ImportState:
    """Accumulates accepted rows and rejects across files (one import run)."""

    key: bytes
    flag_cue: Callable[[str], str | None] = lambda cue: None
    identity_columns: frozenset[str] = frozenset(BASE_ID_COLUMNS)
    instances: list[dict[str, Any]] = field(default_factory=list)
    solves: list[dict[str, Any]] = field(default_factory=list)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    by_uid: dict[str, dict[str, Any]] = field(default_factory=dict)
    solved: set[tuple[str, str]] = field(default_factory=set)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    read: dict[str, int] = field(default_factory=dict)
    file_hashes: dict[str, str] = field(default_factory=dict)  # sha256 -> first file with it
    skipped_files: list[str] = field(default_factory=list)

    def first_time(self, path: Path) -> bool:
        """False (and the file is noted as skipped) when identical content was already imported."""
        digest = sha256_file(path)  # in blocks: a batch file may be large
        if digest in self.file_hashes:
            self.skipped_files.append(f"{path.as_posix()} = {self.file_hashes[digest]}")
            return False
        self.file_hashes[digest] = path.as_posix()
        return True

    def reject(self, file: str, line: int, kind: str, reason: str, row: dict[str, Any] | None) -> None:
        self.rejects.append(
            {
                "source_file": file,
                "source_line": line,
                "kind": kind,
                "reason": reason,
                "row": _redact(row or {}, self.key, self.identity_columns),
            }
        )

    def add_instance(self, inst: dict[str, Any]) -> None:
        self.instances.append(inst)
        self.by_uid[inst["instance_uid"]] = inst


def check_instance_shape(
    candidates: list[str], associations: list[str], k: int | None = None, n: int | None = None
) -> None:
    """The game's shape rules (N, K, associations among the candidates), names compared by
    :func:`gavil.domain.vocabulary.name_key`."""
    if len({name_key(c) for c in candidates}) != len(candidates):
        raise RowError("candidates contain duplicates")
    if len(candidates) not in CANDIDATE_SIZES:
        raise RowError(f"{len(candidates)} candidates; must be one of {CANDIDATE_SIZES}")
    if n is not None and n != len(candidates):
        raise RowError(f"num_candidates={n} but {len(candidates)} candidates")
    if len({name_key(a) for a in associations}) != len(associations):
        raise RowError("associations contain duplicates")
    names = {name_key(c) for c in candidates}
    extra = [a for a in associations if name_key(a) not in names]
    if extra:
        raise RowError(f"associations {extra} are not among the candidates")
    if k is not None and k != len(associations):
        raise RowError(f"num_associations={k} but {len(associations)} associations")
    if not k_is_valid(len(candidates), len(associations)):
        lo, hi = K_LIMITS[len(candidates)]
        raise RowError(f"K={len(associations)} associations outside {lo}..{hi} for N={len(candidates)}")
