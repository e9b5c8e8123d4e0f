"""Released WinoGAViL files: :func:`import_release_file` recognises the game, dataset or swow
layout by header and imports each row as published (solver means/stds and fool-the-AI scores kept,
cues not re-filtered by the profanity check; every cue and name passes the word policy of
:mod:`gavil.domain.names`); a bad row becomes a ``release`` reject.
"""

from __future__ import annotations

from pathlib import Path

from gavil.domain.names import NameError_, clean_word
from gavil.domain.vocabulary import name_key
from stages.import_annotations.records import (
    DATASET_HEADER,
    GAME_HEADER,
    SWOW_HEADER,
    ImportState,
    RowError,
    check_instance_shape,
    duplicate_header_reason,
    header_of,
    iter_records,
    opt_float,
    parse_float,
    parse_int,
    parse_list,
)


def _opt_text(value: object, column: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise RowError(f"{column} is not a string")


def import_release_file(path: Path, dataset: str, state: ImportState) -> None:
    """Import one released WinoGAViL CSV (game, dataset or swow layout) into ``state``."""
    header = header_of(path)
    layout = {tuple(GAME_HEADER): "game", tuple(DATASET_HEADER): "dataset", tuple(SWOW_HEADER): "swow"}.get(
        tuple(header)
    )
    name = path.as_posix()
    dup = duplicate_header_reason(header)
    if layout is None or dup:
        state.reject(name, 1, "release", dup or f"header {header} is not a WinoGAViL release layout", None)
        return
    n_read = 0
    for line, rec, err in iter_records(path):
        n_read += 1
        if err:
            state.reject(name, line, "release", err, rec)
            continue
        assert rec is not None
        try:
            cands = parse_list(rec["candidates"], "candidates")
            assoc = parse_list(rec["associations"], "associations")
            k, n = parse_int(rec["num_associations"], "num_associations"), len(cands)
            if "num_candidates" in rec:
                n = parse_int(rec["num_candidates"], "num_candidates")
            check_instance_shape(cands, assoc, k, n)
            spelled = {name_key(c): c for c in cands}
            assoc = [spelled[name_key(a)] for a in assoc]  # as the candidate list spells it
            rid = parse_int(rec["ID"], "ID")
            if rid < 0:
                raise RowError(f"ID {rid} is negative")
            uid = f"release:{path.stem}:{rid}"
            if uid in state.by_uid:
                raise RowError(f"duplicate ID {rid} in {path.name}")
            cue = rec["cue"]
            if not isinstance(cue, str) or not cue.strip():
                raise RowError("cue is not a non-empty string")
            try:  # released cues may be phrases ("lord of the rings"); the word policy still holds
                cue = clean_word(cue, "cue", phrase=True)
            except NameError_ as e:
                raise RowError(str(e)) from None
            fool = parse_int(rec["score_fool_the_ai"], "score_fool_the_ai") if "score_fool_the_ai" in rec else None
            if fool is not None and not 0 <= fool <= 100:
                raise RowError(f"score_fool_the_ai={fool} outside 0..100")
            state.add_instance(
                {
                    "instance_uid": uid,
                    "origin": "release",
                    "dataset": dataset,
                    "source_file": name,
                    "source_line": line,
                    "release_id": rid,
                    "cue": cue,
                    "candidates": cands,
                    "associations": assoc,
                    "num_associations": k,
                    "num_candidates": n,
                    "score_fool_the_ai": fool,
                    "solvers_jaccard_mean": parse_float(rec["solvers_jaccard_mean"], "solvers_jaccard_mean", 0, 1),
                    "solvers_jaccard_std": parse_float(rec["solvers_jaccard_std"], "solvers_jaccard_std", 0, 1),
                    "annotation_index": parse_int(rec["annotation_index"], "annotation_index")
                    if "annotation_index" in rec
                    else None,
                    "images_source": _opt_text(rec.get("images_source"), "images_source"),
                    "task_id": None,
                    "cue_weight": opt_float(rec, "cue_weight"),
                    "associations_mean_weight": opt_float(rec, "associations_mean_weight"),
                    "candidates_connectivity_score": opt_float(rec, "candidates_connectivity_score"),
                    "spymaster": None,
                    "cue_flag": None,  # released instances are imported as published
                    "round": 0,  # the released WinoGAViL data are round 0
                }
            )
        except RowError as e:
            state.reject(name, line, "release", str(e), rec)
        except KeyError as e:  # a JSONL record without one of the layout's fields
            state.reject(name, line, "release", f"missing field {e}", rec)
    state.read[name] = n_read
