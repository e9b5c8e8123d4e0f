"""One content, one ID, whatever the source or the order: the same instance (cue, candidate set,
association set, names compared by TR39 skeleton) arriving from a released file, a raw batch, a
crowd batch and the game's store, in every order across builds, is published once; the copy that
arrives later from any source is a ``duplicate`` whose reason names the ID. Within one build the
choice never depends on the row order of any input."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

from gavil.gamestore.store import connect, store_file
from stages.import_annotations import import_all
from stages.select_instances import select, update_ledger
from tests.helpers import MTURK_COLUMNS

KEY = b"k" * 32
CANDS = ["rocket", "moon", "astronaut", "cat", "coffee"]
CUE, ASSOC = "space", ["rocket", "moon"]
SOURCES = ("release", "raw", "crowd", "game")
CROWD = {
    "creations_file": "crowd_creations.csv",
    "solves_file": "crowd_solves.csv",
    "accepted_status": ["Submitted", "Approved"],
    "columns": MTURK_COLUMNS,
}
FIXED = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "SubmitTime", "WorkTimeInSeconds"]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def add_source(root: Path, source: str, cue: str = CUE) -> None:
    """The one content, as ``source`` writes it (each source spells the cue its own way)."""
    if source == "release":
        write_csv(
            root / "release/game_5_6.csv",
            ["candidates", "cue", "associations", "score_fool_the_ai", "num_associations", "annotation_index"]
            + ["num_candidates", "solvers_jaccard_mean", "solvers_jaccard_std", "images_source", "ID"],
            [[json.dumps(CANDS), cue, json.dumps(ASSOC), "50", "2", "0", "5", "1", "0", "random", "0"]],
        )
    elif source == "raw":
        batch = root / "raw/b-raw"
        batch.mkdir(parents=True, exist_ok=True)
        c = {"instance_id": "r1", "spymaster_id": "RAWSPY", "cue": cue.upper(), "candidates": CANDS[::-1]}
        (batch / "creations.jsonl").write_text(json.dumps(c | {"associations": ASSOC}) + "\n")
        solves = [{"instance_id": "r1", "solver_id": f"RS{i}", "selection": ASSOC} for i in range(3)]
        (batch / "solves.jsonl").write_text("".join(json.dumps(s) + "\n" for s in solves))
    elif source == "crowd":
        batch = root / "raw/b-crowd"
        cols = ["Input.candidates", "Answer.cue1", "Answer.associations1", "Answer.cue2", "Answer.associations2"]
        row = ["H1", "A1", "CROWDSPY", "Approved", "t", "60", json.dumps(CANDS), cue]
        row += [json.dumps(ASSOC[::-1]), "orbit", json.dumps(["moon", "astronaut"])]
        write_csv(batch / "crowd_creations.csv", FIXED + cols, [row])
        write_csv(
            batch / "crowd_solves.csv",
            FIXED + ["Input.instance_id", "Answer.selection"],
            [["S", f"s{i}", f"CS{i}", "Approved", "t", "9", "A1:1", json.dumps(ASSOC)] for i in range(3)],
        )
    else:
        con = connect(store_file(root / "game"))
        con.execute(
            "INSERT INTO players(player_id, token_hash, display_name, name_key, created_at, look_key)"
            " VALUES ('gp', 'h', 'Spy', 'spy', 1, 'Spy')"
        )
        con.execute("INSERT INTO tasks VALUES ('t0', 'random-5-0000', 'gp', ?, 1.0)", (json.dumps(CANDS),))
        con.execute(
            "INSERT INTO creations(instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
            " associations, rival_status, rival_predictions, score_fool_the_ai, created_at)"
            " VALUES ('g_1', 't0', 'gp', ?, 'k', 'c', ?, ?, 'no_weights', NULL, NULL, 2.0)",
            (cue.replace("'", "\u2019"), json.dumps(CANDS), json.dumps(ASSOC)),
        )
        for i in range(3):
            con.execute(
                "INSERT INTO solves(instance_id, solver_id, selection, jaccard, created_at) VALUES ('g_1', ?, ?, 1, 3)",
                (f"GS{i}", json.dumps(ASSOC)),
            )
        con.close()


UID = {"release": "release:game_5_6:0", "raw": "raw:r1", "crowd": "raw:A1:1", "game": "raw:g_1"}


def build(root: Path, ledger: pd.DataFrame | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    release = root / "release"
    res = import_all(
        release if release.is_dir() else None,
        [{"file": "game_5_6.csv", "dataset": "game"}],
        root / "raw",
        KEY,
        CROWD,
        game_store=store_file(root / "game"),
    )
    assert res.rejects.empty, res.rejects.to_dict("records")
    sel = select(res.instances, res.solves, 0.8, 3, ledger)
    return sel, update_ledger(sel, ledger)


@pytest.mark.parametrize("order", list(itertools.permutations(SOURCES)), ids="-".join)
def test_one_content_from_every_source_in_every_order_has_one_id(tmp_path, order):
    (tmp_path / "raw").mkdir()
    ledger = None
    for n, source in enumerate(order):
        add_source(tmp_path, source)
        sel, ledger = build(tmp_path, ledger)
        mine = sel[sel["instance_uid"].isin(UID.values())].set_index("instance_uid")
        first = UID[order[0]]
        assert mine.loc[first, "status"] == "selected" and mine.loc[first, "ID"] == 0, mine.loc[first].to_dict()
        assert len(mine) == n + 1
        for later in order[1 : n + 1]:
            row = mine.loc[UID[later]]
            assert row["status"] == "duplicate", (later, row.to_dict())
            assert row["reason"].startswith(f"duplicate of game ID 0 ({first})"), row["reason"]
            assert pd.isna(row["ID"]) and pd.isna(row["split_id"])
    assert list(ledger.loc[ledger["ID"].notna(), "instance_uid"]) == [UID[order[0]]]  # one ID, ever
    assert not set(ledger["instance_uid"]) & {UID[s] for s in order[1:]}  # a duplicate never enters the ledger


def test_all_sources_at_once_keep_the_release_and_no_row_order_decides(tmp_path):
    (tmp_path / "raw").mkdir()
    for source in SOURCES:
        add_source(tmp_path, source)
    res = import_all(
        tmp_path / "release",
        [{"file": "game_5_6.csv", "dataset": "game"}],
        tmp_path / "raw",
        KEY,
        CROWD,
        game_store=store_file(tmp_path / "game"),
    )
    sel = select(res.instances, res.solves, 0.8)
    dup = sel.set_index("instance_uid")["status"]
    assert dup[UID["release"]] == "selected" and all(dup[UID[s]] == "duplicate" for s in ("raw", "crowd", "game"))
    for seed in range(5):
        shuffled = select(
            res.instances.sample(frac=1, random_state=seed), res.solves.sample(frac=1, random_state=seed), 0.8
        )
        pd.testing.assert_frame_equal(shuffled, sel)


def test_without_the_release_the_canonical_order_decides_not_the_import_order(tmp_path):
    """The game's store is imported after every batch; its copy still wins when it comes first in
    the canonical order (source path), and a published game instance keeps its ID whatever later
    batch copies it."""
    (tmp_path / "raw").mkdir()
    add_source(tmp_path, "game")
    sel, ledger = build(tmp_path, None)
    assert sel.set_index("instance_uid").loc[UID["game"], "ID"] == 0
    add_source(tmp_path, "raw")  # the case: a raw batch copies a published game instance
    sel, ledger = build(tmp_path, ledger)
    row = sel.set_index("instance_uid").loc[UID["raw"]]
    assert row["status"] == "duplicate" and "game ID 0 (raw:g_1)" in row["reason"]
    assert sel["ID"].notna().sum() == 1
