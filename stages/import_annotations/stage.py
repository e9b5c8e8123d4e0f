"""The stage's entry points: :func:`import_all` (released files, then raw and crowd batches in name
order, into DataFrames and metrics; pure apart from reading inputs) and :func:`run` (params in,
catalog tables ``instances``, ``solves``, ``annotation_rejects`` and ``flags`` out).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pandas as pd

from gavil.domain.flags import FLAG_STATES
from gavil.domain.privacy import annotator_key, key_fingerprint
from gavil.domain.profanity import ProfanityFilter
from gavil.domain.vocabulary import name_key
from gavil.errors import GavilError, MissingInput
from gavil.gamestore.gold import GoldAnswer, read_gold, read_gold_since
from gavil.gamestore.store import store_file
from gavil.io import atomic_path
from gavil.params.game import FlagParams, GoldParams
from gavil.pipeline import catalog
from schemas.annotations import AnnotationRejects, Flags, Instances, Solves
from stages.import_annotations.crowd import import_crowd
from stages.import_annotations.game import (
    consent_metrics,
    flag_rows,
    import_game_creations,
    import_game_solves,
    read_game,
    store_metrics,
    withdrawals,
    withdrawn_column,
)
from stages.import_annotations.gold import GoldCheck, gold_checks, judge, score_gold
from stages.import_annotations.raw import import_creations, import_solves
from stages.import_annotations.records import BASE_ID_COLUMNS, ImportState
from stages.import_annotations.release import import_release_file

if TYPE_CHECKING:
    from gavil.params import Params


def _find(batch: Path, stem: str) -> list[Path]:
    """``<stem>.csv`` and ``<stem>.jsonl`` in ``batch`` (both are read when both exist)."""
    return [batch / f"{stem}{ext}" for ext in (".csv", ".jsonl") if (batch / f"{stem}{ext}").is_file()]


@dataclass(frozen=True)
class ImportResult:
    instances: pd.DataFrame
    solves: pd.DataFrame
    rejects: pd.DataFrame
    metrics: dict[str, Any]
    flags: pd.DataFrame  # schemas.annotations.Flags: the game's flags with their reviews
    gold_checks: pd.DataFrame  # schemas.annotations.GoldChecks


def _game_solves(
    game_store: Path | None, game_solves: list[dict[str, Any]], gold: GoldParams, state: ImportState
) -> tuple[list[GoldAnswer], dict[str, list[float]], dict[str, tuple[str, str | None]], dict[str, int]]:
    """Judge the game's solvers by their gold answers and import the store's solves (those given
    while their solver did not count rejected, gold checks on: :mod:`stages.import_annotations.gold`).

    Returns the gold answers read, hashed solver -> gold Jaccards (fractions, in store order), the
    verdict per hashed solver (status, reason) and the answers excluded per hashed solver."""
    gold_items, gold_answers = read_gold(game_store) if game_store else ([], [])
    timeline = score_gold(game_store, gold_items, gold_answers, state) if game_store and gold_answers else {}
    gold_js = {s: [j for _, j in v] for s, v in timeline.items()}
    verdict = judge(gold_js, game_solves, gold, state.key)
    excluded: dict[str, int] = {}
    if game_store and game_solves:
        check = GoldCheck(gold, timeline, read_gold_since(game_store)) if gold.enabled else None
        import_game_solves(game_store, game_solves, state, check, excluded)
    return gold_answers, gold_js, verdict, excluded


def _flags_table(
    game_store: Path | None,
    game_creations: list[dict[str, Any]],
    state: ImportState,
    verdict: dict[str, tuple[str, str | None]] | None,
    flag_params: FlagParams | None,
) -> tuple[pd.DataFrame, int]:
    """:class:`schemas.annotations.Flags` of the store's accepted creations, each flag with its
    weight (``verdict``: the gold check's per hashed solver, gold checks on; None: off) and
    whether it holds (:func:`stages.import_annotations.game.flag_rows`); and the flags of rejected
    creations left out."""
    counting = None if verdict is None else {s for s, (status, _) in verdict.items() if status == "passed"}
    fp = flag_params or FlagParams()
    flagged, dropped = (
        flag_rows(game_store, game_creations, state, counting, fp.min_reporters) if game_store else ([], 0)
    )
    flags = pd.DataFrame(flagged, columns=list(Flags.to_schema().columns))
    for col in ("flagged_at", "reviewed_at"):
        flags[col] = flags[col].astype(float)
    flags["flag_id"] = flags["flag_id"].astype(int)
    for col in ("weight", "holds"):
        flags[col] = flags[col].astype(bool)
    return flags, dropped


def import_all(
    release_dir: Path | None,
    release_files: list[dict[str, str]],
    raw_dir: Path | None,
    key: bytes,
    crowd: dict[str, Any] | None = None,
    flag_cue: Callable[[str], str | None] | None = None,
    identity_columns: Iterable[str] = (),
    game_store: Path | None = None,
    gold: GoldParams | None = None,
    flag_params: FlagParams | None = None,
) -> ImportResult:
    """Import released files, then raw batches in name order (pure apart from reading inputs).

    In each batch: ``creations.{csv,jsonl}``, the crowd creations CSV, then (after every batch's
    creations, so a later batch may answer an earlier one) ``solves.{csv,jsonl}`` and the crowd
    solves CSV. A file whose bytes were already imported (same sha256) is skipped, so dropping the
    same batch in twice changes nothing.

    Args:
        crowd: ``annotations.crowd`` params (file names, accepted statuses, column map) or None.
        flag_cue: returns why a cue is inappropriate (profanity) or None; raw cues only.
        identity_columns: columns holding a person's id (``annotations.identity_columns``),
            hashed wherever they appear (rejects included), besides :data:`BASE_ID_COLUMNS`.
        game_store: the collection game's SQLite store (``game.sqlite``; a missing file is no
            data): its creations after every batch's, its solves after every batch's.
        gold: ``game.gold`` params (None: the defaults, switch off): the gold check of the game's
            solvers (:mod:`stages.import_annotations.gold`). Withdrawn players: :func:`~.game.withdrawals`.
        flag_params: ``game.flags`` params (None: the defaults): the weight of players' reports
            (:func:`stages.import_annotations.game.flag_rows`).

    Raises:
        MissingInput: a listed release file does not exist.
        gavil.gamestore.store.GameStoreError: the store exists but cannot be read (see
            :func:`stages.import_annotations.game.read_game`); nothing is written then.
    """
    ids = frozenset(BASE_ID_COLUMNS) | frozenset(identity_columns)
    state = ImportState(key, flag_cue or (lambda cue: None), ids)
    _import_release(release_dir, release_files, state)
    crowd_files = crowd or {}
    batches, ignored = _batches(raw_dir, crowd_files)
    _import_batches(batches, "creations", crowd_files, state)
    game_creations, game_solves = read_game(game_store) if game_store else ([], [])
    untrained = import_game_creations(game_store, game_creations, state) if game_store and game_creations else 0
    _import_batches(batches, "solves", crowd_files, state)
    gold = gold or GoldParams()
    game_solves, withdrawn, dropped = withdrawals(game_store, game_solves, state)
    gold_answers, gold_js, verdict, excluded = _game_solves(game_store, game_solves, gold, state)
    inst, sol, rej = _tables(state)
    inst["withdrawn"] = withdrawn_column(game_store, inst["source_file"], inst["spymaster"], withdrawn)
    flags, flags_dropped = _flags_table(
        game_store, game_creations, state, verdict if gold.enabled else None, flag_params
    )
    metrics = {
        **_row_metrics(state, inst, sol, rej, batches, ignored),
        "game": {
            "creations": len(game_creations),
            "solves": len(game_solves),
            "untrained_scores_imported_as_null": untrained,
        },
        # players' flags on game instances (the flags table), by state under the review rule
        "flags": {
            "rows": len(flags),
            "by_state": {k: int((flags["state"] == k).sum()) for k in FLAG_STATES},
            "of_rejected_creations": flags_dropped,
        },
        "game_store": store_metrics(game_store, game_creations, game_solves),
    }
    if withdrawn:  # players who withdrew consent (docs/review.md "Consent"); none: the metrics as before
        metrics["consent"] = consent_metrics(withdrawn, inst["withdrawn"], dropped)
    checks = gold_checks(gold_js, verdict, excluded)
    if gold.enabled or len(checks):  # the switch off and no gold answer: the metrics as before gold items
        metrics["gold"] = {
            "enabled": gold.enabled,
            "gold_answers": len(gold_answers),
            "solvers_by_status": {str(k): int(v) for k, v in checks["gold_status"].value_counts().sort_index().items()},
            "answers_excluded": sum(excluded.values()),
        }
    return ImportResult(inst, sol, rej, metrics, flags, checks)


def _import_release(release_dir: Path | None, release_files: list[dict[str, str]], state: ImportState) -> None:
    """Import each listed release file (``{"file", "dataset"}``, in list order) from ``release_dir``
    into ``state``; nothing without a ``release_dir``.

    Raises:
        MissingInput: a listed release file does not exist.
    """
    for spec in release_files:
        if not release_dir:
            break
        path = release_dir / spec["file"]
        if not path.exists():
            raise MissingInput(f"annotations.release_files: {path} does not exist (check annotations.release_dir)")
        import_release_file(path, spec["dataset"], state)


def _batches(raw_dir: Path | None, crowd_files: dict[str, Any]) -> tuple[list[Path], list[str]]:
    """(the batch folders of ``raw_dir`` in name order, the files the import does not read): loose
    files in ``raw_dir`` but its README, and files in a batch that are neither ``creations``/``solves``
    (``.csv``, ``.jsonl``) nor the crowd files named in ``crowd_files``; posix paths, listed in the
    metrics, never silently skipped.

    Raises:
        MissingInput: ``raw_dir`` is given but is not a folder.
    """
    if raw_dir is not None and not raw_dir.is_dir():
        raise MissingInput(f"annotations.raw_dir: {raw_dir} is not a folder (create it, or fix the path)")
    batches = sorted(p for p in raw_dir.iterdir() if p.is_dir()) if raw_dir else []
    ignored = (
        sorted(p.as_posix() for p in raw_dir.iterdir() if p.is_file() and p.name != "README.md") if raw_dir else []
    )
    known = {f"{s}{e}" for s in ("creations", "solves") for e in (".csv", ".jsonl")}
    known |= {crowd_files.get("creations_file", ""), crowd_files.get("solves_file", ""), "README.md"}
    for batch in batches:  # a file the import does not read is listed in the metrics, never silently skipped
        ignored += sorted(p.as_posix() for p in batch.iterdir() if p.name not in known)
    return batches, ignored


def _import_batches(batches: list[Path], what: str, crowd_files: dict[str, Any], state: ImportState) -> None:
    """Import every batch's ``what`` (``creations`` or ``solves``): its ``<what>.{csv,jsonl}``, then
    its crowd file (``crowd_files["<what>_file"]``), batch by batch; a file whose bytes were already
    imported is skipped (:meth:`ImportState.first_time`)."""
    native = import_creations if what == "creations" else import_solves
    kind = "creation" if what == "creations" else "solve"
    for batch in batches:
        for path in _find(batch, what):
            if state.first_time(path):
                native(path, state)
        crowd_file = batch / crowd_files.get(f"{what}_file", "") if crowd_files else None
        if crowd_file and crowd_file.is_file() and state.first_time(crowd_file):
            import_crowd(crowd_file, kind, crowd_files, state)


def _tables(state: ImportState) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(instances, solves, rejects) of ``state`` as frames with the columns (and nullable integer
    and float dtypes) of :class:`schemas.annotations.Instances`, ``Solves`` and ``AnnotationRejects``."""
    inst = pd.DataFrame(state.instances, columns=list(Instances.to_schema().columns))
    for col in ("release_id", "score_fool_the_ai", "annotation_index"):
        inst[col] = inst[col].astype("Int64")
    for col in ("cue_weight", "associations_mean_weight", "candidates_connectivity_score"):
        inst[col] = inst[col].astype(float)
    sol = pd.DataFrame(state.solves, columns=list(Solves.to_schema().columns))
    rej = pd.DataFrame(state.rejects, columns=list(AnnotationRejects.to_schema().columns))
    return inst, sol, rej


def _row_metrics(
    state: ImportState,
    inst: pd.DataFrame,
    sol: pd.DataFrame,
    rej: pd.DataFrame,
    batches: list[Path],
    ignored: list[str],
) -> dict[str, Any]:
    """The metrics of the rows read (per file: read, accepted, rejected; instances by origin and
    dataset; rejects by reason with names and numbers masked as ``…``), the batches and the files
    ignored, in the order ``metrics.json`` lists them."""
    by_reason = (
        rej["reason"].str.replace(r"'[^']*'|\[[^\]]*\]|\d+", "…", regex=True).value_counts().to_dict()
        if len(rej)
        else {}
    )
    accepted = pd.concat([inst["source_file"], sol["source_file"]]).value_counts().to_dict()
    # cast: pandas-stubs types groupby labels as Hashable; here they are (origin, dataset) pairs
    by_origin = cast("Iterable[tuple[tuple[str, str], int]]", inst.groupby(["origin", "dataset"]).size().items())
    return {
        "rows_read": state.read,
        "rows_accepted": {f: int(accepted.get(f, 0)) for f in state.read},
        "rows_rejected": {f: int((rej["source_file"] == f).sum()) for f in state.read},
        "instances": {f"{o}/{d}": int(n) for (o, d), n in by_origin},
        "instances_with_flagged_cue": int(inst["cue_flag"].notna().sum()),
        # allowed on purpose (docs/annotations.md "Integrity rules"): the game shows images, not names
        "instances_cue_names_a_candidate": int(
            sum(name_key(c) in {name_key(x) for x in cs} for c, cs in zip(inst["cue"], inst["candidates"]))
        ),
        "solves": len(sol),
        "rejected": len(rej),
        "rejected_by_reason": by_reason,
        "skipped_duplicate_files": state.skipped_files,
        "batches": [b.name for b in batches],
        "ignored_files": ignored,
    }


class AnnotatorKeyChanged(GavilError):
    """The annotator key differs from the one the stored hashes were made with."""


def check_annotator_key(fingerprint: str, expected: str | None, previous: str | None, hashes_ids: bool) -> None:
    """Refuse to hash ids under a key other than the intended one (docs/annotations.md "Annotator ids and the key").

    Args:
        fingerprint: :func:`gavil.domain.privacy.key_fingerprint` of the key in use now.
        expected: ``annotations.annotator_key_fingerprint`` (a DVC param), or None.
        previous: the fingerprint the last import recorded (``data/ledger/annotator_key.json``).
        hashes_ids: whether this import hashes any id (raw or crowd rows present).

    Raises:
        AnnotatorKeyChanged: ``expected`` is set and differs from ``fingerprint``; or it is not
            set, ids are hashed, and ``previous`` differs (hashes would silently stop matching).
    """
    env = "the key in use"
    if expected is not None and expected != fingerprint:
        raise AnnotatorKeyChanged(
            f"annotations.annotator_key_fingerprint is {expected}, but {env} has fingerprint {fingerprint}: "
            "restore the key (its env var or .secrets/annotator_key), or set the param to the new fingerprint "
            "to re-key every id at once"
        )
    if expected is None and hashes_ids and previous is not None and previous != fingerprint:
        raise AnnotatorKeyChanged(
            f"the annotator key changed since the last import ({previous} -> {fingerprint}), so no hashed id "
            "would match the stored ones. Restore the previous key, or re-key everything at once: set "
            f"annotations.annotator_key_fingerprint: {fingerprint} in params.yaml and run dvc repro"
        )


def run(params: Params) -> dict[str, Any]:
    """Stage entry point: release files + raw batches + the game's store -> instances, solves,
    annotation_rejects, flags (the game's flags with their reviews), and the annotator key's
    fingerprint (``annotator_key_fingerprint``).

    Returns the metrics of :func:`import_all` plus ``annotator_key_fingerprint`` (null when no id
    was hashed).

    Raises:
        AnnotatorKeyChanged: see :func:`check_annotator_key` (nothing is written then).
    """
    p, prof = params.annotations, params.profanity
    key = annotator_key(p.annotator_key_env)
    res = import_all(
        Path(p.release_dir) if p.release_dir else None,
        [f.model_dump() for f in p.release_files],
        Path(p.raw_dir) if p.raw_dir else None,
        key,
        p.crowd.model_dump(),
        ProfanityFilter(prof.extra_words, prof.allow_words).reason,
        p.identity_columns,
        store_file(params.game.store_dir),
        params.game.gold,
        params.game.flags,
    )
    if res.metrics["ignored_files"]:
        shown = ", ".join(res.metrics["ignored_files"][:5])
        print(f"import_annotations: not read (not a known batch file name): {shown}", file=sys.stderr)
    waiting = res.metrics["game_store"]["creations_without_solves"]
    if waiting:
        print(
            f"import_annotations: game store: {waiting} creation(s) have no solve yet "
            "(metrics game_store.creations_without_solves)",
            file=sys.stderr,
        )
    fp_path = catalog.path("annotator_key_fingerprint", "write")
    previous = json.loads(fp_path.read_text()).get("fingerprint") if fp_path.exists() else None
    hashes_ids = bool(
        (res.instances["origin"] == "raw").any() or len(res.solves) or (res.rejects["kind"] != "release").any()
    )
    fingerprint = key_fingerprint(key)
    check_annotator_key(fingerprint, p.annotator_key_fingerprint, previous, hashes_ids)
    catalog.write_table(res.instances, "instances")
    catalog.write_table(res.solves, "solves")
    catalog.write_table(res.rejects, "annotation_rejects")
    catalog.write_table(res.flags, "flags")
    catalog.write_table(res.gold_checks, "gold_checks")
    # a recorded fingerprint is never forgotten: an import that hashes no id (a fresh clone without
    # the git-ignored batches, an empty raw_dir) keeps it, so a later key change is still caught
    recorded = fingerprint if hashes_ids else (p.annotator_key_fingerprint or previous)
    with atomic_path(fp_path, ".json") as tmp:
        tmp.write_text(json.dumps({"fingerprint": recorded}, indent=2) + "\n")
    return {**res.metrics, "annotator_key_fingerprint": recorded}
