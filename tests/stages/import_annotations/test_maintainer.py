"""What a benchmark maintainer relies on: crowd batches, creation tasks, idempotent re-import,
cue filtering, annotator statistics, and the export's release layouts and dataset folder."""

import csv
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.domain.privacy import hash_annotator
from gavil.io import validate
from schemas.annotations import AnnotationRejects, Instances, Solves
from schemas.selection import AnnotatorStats, Selection
from stages.export import release_cell, split_table, to_split_csv
from stages.filter_profanity import ProfanityFilter
from stages.import_annotations import import_all
from stages.select_instances import annotator_stats, select
from tests.helpers import RELEASE, ROOT

KEY = b"k"
CROWD = yaml.safe_load((ROOT / "params.yaml").read_text())["annotations"]["crowd"]
C6 = ["rocket", "cat", "moon", "coffee", "brick", "horse"]
C12 = ["rocket", "cat", "moon", "coffee", "brick", "horse", "grass", "stone", "clock", "eye", "page", "text"]


def j(x):
    return json.dumps(x)


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


FIXED = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "SubmitTime", "WorkTimeInSeconds"]


def crowd_batch(root: Path) -> None:
    write_csv(
        root / "b1" / "crowd_creations.csv",
        FIXED
        + [
            "Input.candidates",
            "Answer.cue1",
            "Answer.associations1",
            "Answer.fool1",
            "Answer.cue2",
            "Answer.associations2",
            "Answer.fool2",
        ],
        [
            [
                "H1",
                "A1",
                "SPY-1",
                "Approved",
                "2022-03-01",
                "120",
                j(C6),
                "space",
                j(["rocket", "moon"]),
                "67",
                "meow",
                j(["cat", "coffee"]),
                "0",
            ],
            [
                "H2",
                "A2",
                "SPY-2",
                "Rejected",
                "2022-03-01",
                "5",
                j(C6),
                "x1",
                j(["rocket", "moon"]),
                "0",
                "y1",
                j(["cat", "moon"]),
                "0",
            ],
            [
                "H3",
                "A3",
                "SPY-1",
                "Submitted",
                "2022-03-02",
                "90",
                j(C6),
                "night",
                j(["moon", "cat"]),
                "",
                "NIGHT",
                j(["moon", "coffee"]),
                "",
            ],
        ],
    )
    write_csv(
        root / "b1" / "crowd_solves.csv",
        FIXED + ["Input.instance_id", "Answer.selection"],
        [
            ["S", f"a{i}", f"SOLVER-{w}", "Approved", "t", "30", iid, j(sel)]
            for i, (w, iid, sel) in enumerate(
                [
                    (1, "A1:1", ["rocket", "moon"]),
                    (2, "A1:1", ["moon", "rocket"]),
                    (3, "A1:1", ["rocket", "cat"]),
                    (1, "A1:2", ["cat", "coffee"]),
                    (2, "A1:2", ["cat", "coffee"]),
                    (3, "A1:2", ["cat", "coffee"]),
                ]
            )
        ],
    )


def test_crowd_batch_creation_hit_yields_two_instances(tmp_path):
    crowd_batch(tmp_path / "raw")
    res = import_all(None, [], tmp_path / "raw", KEY, CROWD)
    inst = validate(res.instances, Instances).set_index("instance_uid")
    assert list(inst.index) == ["raw:A1:1", "raw:A1:2", "raw:A3:1"]
    assert inst.loc["raw:A1:1", "task_id"] == "A1" and inst.loc["raw:A1:2", "cue"] == "meow"
    assert inst.loc["raw:A1:1", "score_fool_the_ai"] == 67 and pd.isna(inst.loc["raw:A3:1", "score_fool_the_ai"])
    assert inst.loc["raw:A1:1", "spymaster"] == hash_annotator("SPY-1", KEY)
    rej = validate(res.rejects, AnnotationRejects)
    reasons = rej["reason"].tolist()
    assert any("AssignmentStatus 'Rejected'" in r for r in reasons)
    assert any("duplicate creation: cue 'NIGHT'" in r for r in reasons)  # cues must differ case-insensitively
    assert "SPY-2" not in rej["row"].str.cat() and "SOLVER" not in json.dumps(res.solves.astype(str).to_dict())
    sel = select(res.instances, validate(res.solves, Solves), 0.8).set_index("instance_uid")
    assert sel.loc["raw:A1:1", "solvers_jaccard_mean"] == 0.78 and sel.loc["raw:A1:2", "status"] == "selected"


def test_creation_task_rules(tmp_path):
    rows = [
        ["t1-a", "t1", "W", "space", j(C6), j(["rocket", "moon"])],
        ["t1-b", "t1", "W", "dinner", j(C6[::-1]), j(["cat", "coffee"])],  # same set, other order: fine
        ["t1-c", "t1", "W", "third", j(C6), j(["cat", "moon"])],  # a task has two cues
        ["t2-a", "t2", "W", "wall", j(C6), j(["brick", "horse"])],
        ["t2-b", "t2", "W", "field", j(C12), j(["grass", "horse"])],  # other candidates than its task
        ["t3-a", "t3", "W", "everything", j(C12), j(C12[:7])],  # K=7 > 6 for N=12
        ["t4-a", "t4", "W", "fool", j(C6), j(["cat", "moon"]), "lots"],  # wrong type
    ]
    rows = [r + [""] * (7 - len(r)) for r in rows]
    write_csv(
        tmp_path / "raw/b1/creations.csv",
        ["instance_id", "task_id", "spymaster_id", "cue", "candidates", "associations", "score_fool_the_ai"],
        rows,
    )
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances["instance_uid"].tolist() == ["raw:t1-a", "raw:t1-b", "raw:t2-a"]
    r = dict(zip(res.rejects["source_line"], res.rejects["reason"]))
    assert "already has two cues" in r[4]
    assert "candidates differ" in r[6]
    assert "K=7" in r[7]
    assert "not a number" in r[8]


def test_reimporting_the_same_file_changes_nothing_and_new_batches_append(tmp_path):
    raw = tmp_path / "raw"
    crowd_batch(raw)
    once = import_all(None, [], raw, KEY, CROWD)
    shutil.copytree(raw / "b1", raw / "b2")  # the same batch dropped in again
    twice = import_all(None, [], raw, KEY, CROWD)
    pd.testing.assert_frame_equal(once.instances, twice.instances)
    pd.testing.assert_frame_equal(once.solves, twice.solves)
    pd.testing.assert_frame_equal(once.rejects, twice.rejects)
    assert len(twice.metrics["skipped_duplicate_files"]) == 2
    write_csv(
        raw / "b3/creations.csv",
        ["instance_id", "spymaster_id", "cue", "candidates", "associations"],
        [["new-1", "W9", "galaxy", j(C6), j(["moon", "rocket"])]],
    )
    third = import_all(None, [], raw, KEY, CROWD)
    assert third.instances["instance_uid"].tolist() == once.instances["instance_uid"].tolist() + ["raw:new-1"]


def test_flagged_cues_are_kept_but_not_selected(tmp_path):
    write_csv(
        tmp_path / "raw/b1/creations.csv",
        ["instance_id", "spymaster_id", "cue", "candidates", "associations"],
        [["p1", "W", "shit", j(C6), j(["cat", "coffee"])], ["p2", "W", "space", j(C6), j(["rocket", "moon"])]],
    )
    write_csv(
        tmp_path / "raw/b1/solves.csv",
        ["instance_id", "solver_id", "selection"],
        [[i, f"S{s}", j(sel)] for i, sel in (("p1", ["cat", "coffee"]), ("p2", ["rocket", "moon"])) for s in range(3)],
    )
    res = import_all(None, [], tmp_path / "raw", KEY, None, ProfanityFilter().reason)
    sel = validate(select(res.instances, res.solves, 0.8), Selection).set_index("instance_uid")
    assert sel.loc["raw:p1", "status"] == "profane_cue" and "better-profanity" in sel.loc["raw:p1", "reason"]
    assert sel.loc["raw:p1", "solvers_jaccard_mean"] == 1.0  # scores kept, fate explained
    assert sel.loc["raw:p2", "status"] == "selected" and sel.loc["raw:p2", "ID"] == 0


def test_annotator_statistics(tmp_path):
    crowd_batch(tmp_path / "raw")
    res = import_all(None, [], tmp_path / "raw", KEY, CROWD)
    sel = select(res.instances, res.solves, 0.8)
    stats = validate(annotator_stats(sel, res.solves), AnnotatorStats).set_index(["role", "annotator"])
    spy1 = stats.loc[("spymaster", hash_annotator("SPY-1", KEY))]
    assert spy1["count"] == 3 and spy1["selected"] == 1
    assert spy1["mean_jaccard"] == pytest.approx((0.78 + 1.0) / 2)  # A3:1 has no solves
    assert spy1["mean_fool_the_ai"] == pytest.approx((67 + 0) / 2)
    s3 = stats.loc[("solver", hash_annotator("SOLVER-3", KEY))]
    assert s3["count"] == 2 and s3["mean_jaccard"] == pytest.approx((1 / 3 + 1) / 2)
    assert not any("SOLVER" in a or "SPY" in a for _, a in stats.index)


def test_release_split_files_round_trip_cell_for_cell():
    files = [
        {"file": "game_5_6.csv", "dataset": "game"},
        {"file": "game_10_12.csv", "dataset": "game"},
        {"file": "swow.csv", "dataset": "swow_baseline"},
    ]
    res = import_all(RELEASE, files, None, KEY)
    sel = validate(select(res.instances, res.solves, 0.8), Selection)
    for split in ("game_5_6", "game_10_12", "swow"):
        header, rows = split_table(sel, split)
        ours = list(csv.reader(to_split_csv(header, rows).splitlines()))
        with open(RELEASE / f"{split}.csv", newline="") as f:
            theirs = list(csv.reader(f))
        assert ours == theirs, split
    assert release_cell(0.833333333) == "0.833333333" and release_cell(1.0) == "1" and release_cell(None) == ""


def test_new_instances_get_the_next_split_ids(tmp_path):
    write_csv(
        tmp_path / "raw/b1/creations.csv",
        ["instance_id", "spymaster_id", "cue", "candidates", "associations"],
        [["n1", "W", "space", j(C6), j(["rocket", "moon"])], ["n2", "W", "grid", j(C12), j(["brick", "page"])]],
    )
    res = import_all(RELEASE, [{"file": "game_5_6.csv", "dataset": "game"}], tmp_path / "raw", KEY)
    sel = select(res.instances, res.solves, 0.8).set_index("instance_uid")
    assert sel.loc["raw:n1", ["split", "split_id"]].tolist() == ["game_5_6", 2714]  # release IDs end at 2713
    assert sel.loc["raw:n2", ["split", "split_id"]].tolist() == ["game_10_12", 0]


def test_missing_columns_reject_the_file_and_the_summary_adds_up(tmp_path):
    write_csv(
        tmp_path / "raw/b1/creations.csv",
        ["instance_id", "spymaster_id", "cue", "candidates", "associations"],
        [["m1", "W", "space", j(C6), j(["rocket", "moon"])]],
    )
    write_csv(
        tmp_path / "raw/b1/solves.csv", ["instance_id", "solver_id", "answer"], [["m1", "S1", j(["rocket", "moon"])]]
    )
    res = import_all(None, [], tmp_path / "raw", KEY)
    solves_file = (tmp_path / "raw/b1/solves.csv").as_posix()
    rej = res.rejects.set_index("source_file")
    assert (
        rej.loc[solves_file, "source_line"] == 1 and "missing column(s) ['selection']" in rej.loc[solves_file, "reason"]
    )
    m = res.metrics
    for f, n in m["rows_read"].items():
        assert m["rows_accepted"][f] + m["rows_rejected"][f] >= n  # header problems count once
    assert m["rows_accepted"][(tmp_path / "raw/b1/creations.csv").as_posix()] == 1
