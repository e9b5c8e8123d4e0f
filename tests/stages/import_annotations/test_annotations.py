"""import_annotations, select_instances and export on the real release and hand-made raw batches."""

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from gavil.domain.privacy import hash_annotator
from gavil.io import validate
from schemas.annotations import AnnotationRejects, Instances, Solves
from schemas.selection import Selection
from stages.export import benchmark_table, to_release_csv
from stages.import_annotations import import_all
from stages.select_instances import select, table1, table1_markdown
from tests.helpers import RELEASE

KEY = b"test-key"
RELEASE_FILES = [
    {"file": "game_5_6.csv", "dataset": "game"},
    {"file": "game_10_12.csv", "dataset": "game"},
    {"file": "swow.csv", "dataset": "swow_baseline"},
]
C5 = '"[""rocket"", ""cat"", ""moon"", ""coffee"", ""brick""]"'


@pytest.fixture(scope="module")
def release():
    return import_all(RELEASE, RELEASE_FILES, None, KEY)


def test_release_imports_everything_as_given(release):
    inst = validate(release.instances, Instances)
    assert release.rejects.empty
    assert (inst["dataset"] == "game").sum() == 3563 and (inst["dataset"] == "swow_baseline").sum() == 998
    first = inst.iloc[0]
    assert first["cue"] == "bald" and first["candidates"] == ["eagle", "teepee", "factory", "metal", "ash"]
    assert first["annotation_index"] == 0 and first["images_source"] == "swow" and first["solvers_jaccard_mean"] == 1.0
    assert first["source_line"] == 2


@pytest.mark.parametrize("threshold,expected", [(0.8, 3563), (0.83, 3563), (0.84, 3387 + 0), (0.9, 3387), (1.0, 3387)])
def test_selection_thresholds_on_the_release(release, threshold, expected):
    sel = validate(select(release.instances, release.solves, threshold), Selection)
    game = sel[sel.dataset == "game"]
    if threshold == 0.84:  # 0.87 kept, 0.83 dropped
        expected = int((game["solvers_jaccard_mean"] >= 0.84).sum())
        assert 3387 < expected < 3563
    assert (game["status"] == "selected").sum() == expected
    kept = game[game.status == "selected"]
    assert kept["ID"].tolist() == list(range(expected))
    assert (game[game.status != "selected"]["status"] == "below_threshold").all()


def test_export_round_trip_is_byte_identical(release):
    sel = select(release.instances, release.solves, 0.8)
    text = to_release_csv(benchmark_table(sel))
    reference = (RELEASE / "winogavil_dataset.csv").read_bytes()
    assert hashlib.sha256(text.encode()).hexdigest() == hashlib.sha256(reference).hexdigest()


def test_export_at_0_9_has_only_perfect_instances(release):
    bench = benchmark_table(select(release.instances, release.solves, 0.9))
    assert (
        len(bench) == 3387
        and (bench["solvers_jaccard_mean"] == 1.0).all()
        and bench["ID"].tolist() == list(range(3387))
    )


def test_table1_layout(release):
    t = table1(select(release.instances, release.solves, 0.8), 0.8)
    game = t[t.dataset == "game"].set_index("candidates_group")
    assert game.loc["5&6", "generated_associations"] == 2709 and game.loc["10&12", "kept"] == 854
    # model score = 100 - fool-the-AI; paper Table 1 reports 50 % and 35 % on all generated data
    assert (
        45 < game.loc["5&6", "avg_model_score_percent"] < 55 and 30 < game.loc["10&12", "avg_model_score_percent"] < 40
    )
    md = table1_markdown(t)
    assert md.splitlines()[0].startswith("| # Candidates | game 5&6 | game 10&12")
    assert "| # >= 80% Avg. Human Score | 2,709 | 854 |" in md


def write_batch(root: Path, name: str, creations: str, solves: str | None = None) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "creations.csv").write_text(creations)
    if solves is not None:
        (d / "solves.csv").write_text(solves)


def test_raw_batch_jaccards_mean_std_exactly(tmp_path):
    raw = tmp_path / "raw"
    write_batch(
        raw,
        "b1",
        "instance_id,spymaster_id,cue,candidates,associations,score_fool_the_ai\n"
        f'i1,W-SPY,space,{C5},"[""rocket"", ""moon""]",67\n'
        f'i2,W-SPY,meow,{C5},"[""cat"", ""coffee"", ""brick""]",\n',
        "instance_id,solver_id,selection\n"
        'i1,W1,"[""rocket"", ""moon""]"\n'
        'i1,W2,"[""moon"", ""rocket""]"\n'
        'i1,W3,"[""rocket"", ""cat""]"\n'
        'i2,W1,"[""cat"", ""coffee"", ""brick""]"\n'
        'i2,W2,"[""cat"", ""coffee"", ""moon""]"\n'
        'i2,W3,"[""cat"", ""coffee"", ""brick""]"\n',
    )
    res = import_all(None, [], raw, KEY)
    assert res.rejects.empty
    sel = validate(select(res.instances, res.solves, 0.8), Selection).set_index("instance_uid")
    i1 = sel.loc["raw:i1"]
    # one Jaccard per counted solver, listed in the order of ``solvers`` (hashed ids), not of the file
    assert sorted(i1["solver_jaccards"]) == [pytest.approx(1 / 3), 1.0, 1.0] and sorted(i1["solvers"]) == i1["solvers"]
    assert (i1["solvers_jaccard_mean"], i1["solvers_jaccard_std"]) == (0.78, 0.31)  # round(0.7778), pstdev 0.3143
    assert i1["status"] == "below_threshold" and i1["solvers_agreement"] == pytest.approx(1 / 3)
    i2 = sel.loc["raw:i2"]
    assert sorted(i2["solver_jaccards"]) == [0.5, 1.0, 1.0]  # |{cat,coffee}| / |{cat,coffee,brick,moon}|
    assert (i2["solvers_jaccard_mean"], i2["solvers_jaccard_std"]) == (0.83, 0.24)
    assert i2["status"] == "selected" and i2["ID"] == 0 and pd.isna(i2["score_fool_the_ai"])
    assert sel.loc["raw:i1", "score_fool_the_ai"] == 67


def test_raw_faults_go_to_rejects_and_nothing_valid_is_lost(tmp_path):
    raw = tmp_path / "raw"
    write_batch(
        raw,
        "b1",
        "\ufeffinstance_id,spymaster_id,cue,candidates,associations\r\n"
        f'ok1,W-SPY,space,{C5},"[""rocket"", ""moon""]"\r\n'
        f'bad-subset,W-SPY,tea,{C5},"[""rocket"", ""teapot""]"\r\n'
        f'bad-k1,W-SPY,red,{C5},"[""brick""]"\r\n'
        f'bad-k4,W-SPY,all,{C5},"[""rocket"", ""cat"", ""moon"", ""coffee""]"\r\n'
        f'bad-space,W-SPY,outer space,{C5},"[""rocket"", ""moon""]"\r\n'
        f'ok1,W-SPY,night,{C5},"[""moon"", ""cat""]"\r\n'
        f'dup-content,W-OTHER,SPACE,{C5},"[""rocket"", ""moon""]"\r\n'
        f'bad-json,W-SPY,cup,[coffee,"[""coffee""]"\r\n'
        f"trunc,W-SPY,wall,{C5}",
        "instance_id,solver_id,selection\n"
        'ok1,S1,"[""rocket"", ""moon""]"\n'
        'ok1,S1,"[""rocket"", ""cat""]"\n'
        'ok1,S2,"[""rocket""]"\n'
        'ok1,S3,"[""rocket"", ""unicorn""]"\n'
        'nope,S1,"[""rocket"", ""moon""]"\n'
        'ok1,S4,"[""moon"", ""rocket""]"\n',
    )
    res = import_all(None, [], raw, KEY)
    inst = validate(res.instances, Instances)
    rej = validate(res.rejects, AnnotationRejects)
    validate(res.solves, Solves)
    # a copy of content (same cue and candidates) is imported; selection names one of the two a
    # duplicate of the other, by canonical order (instance ids as numbers and text), never row order
    assert inst["instance_uid"].tolist() == ["raw:ok1", "raw:dup-content"]
    sel = select(inst, validate(res.solves, Solves), 0.8).set_index("instance_uid")
    assert sel.loc["raw:ok1", "status"] == "duplicate"
    assert "duplicate of instance raw:dup-content" in sel.loc["raw:ok1", "reason"]
    reasons = dict(zip(rej["source_line"].astype(str) + ":" + rej["kind"], rej["reason"]))
    c = "creations.csv"
    assert rej[rej.source_file.str.endswith(c)]["source_line"].tolist() == [3, 4, 5, 6, 7, 9, 10]
    assert "not among the candidates" in reasons["3:creation"]
    assert "K=1" in reasons["4:creation"] and "K=4" in reasons["5:creation"]
    assert "single token" in reasons["6:creation"]
    assert "duplicate instance_id" in reasons["7:creation"]
    assert "JSON" in reasons["9:creation"] or "fewer fields" in reasons["9:creation"]
    assert "fewer fields" in reasons["10:creation"]
    solve_reasons = rej[rej.kind == "solve"].set_index("source_line")["reason"].to_dict()
    assert "already answered" in solve_reasons[3]
    assert "K=2" in solve_reasons[4]
    assert "not among the instance's candidates" in solve_reasons[5]
    assert "unknown instance_id" in solve_reasons[6]
    assert len(res.solves) == 2  # S1's first answer and S4
    sel = select(res.instances, res.solves, 0.8)
    assert sel.loc[0, "status"] == "insufficient_solvers" and pd.isna(sel.loc[0, "solvers_jaccard_mean"])


def test_annotator_ids_never_stored_raw(tmp_path):
    raw = tmp_path / "raw"
    write_batch(
        raw,
        "b1",
        f'instance_id,spymaster_id,cue,candidates,associations\ni1,SECRET-SPY-7,space,{C5},"[""rocket"", ""moon""]"\n',
        "instance_id,solver_id,selection\n"
        'i1,SECRET-SOLVER-9,"[""rocket"", ""moon""]"\n'
        'i1,SECRET-SOLVER-9,"[""rocket"", ""cat""]"\n',
    )
    res = import_all(None, [], raw, KEY)
    blob = json.dumps(
        [
            res.instances.astype(str).to_dict("records"),
            res.solves.astype(str).to_dict("records"),
            res.rejects.astype(str).to_dict("records"),
        ]
    )
    assert "SECRET" not in blob
    assert res.instances.loc[0, "spymaster"] == hash_annotator("SECRET-SPY-7", KEY)
    assert hash_annotator("SECRET-SPY-7", b"other-key") != hash_annotator("SECRET-SPY-7", KEY)


def test_jsonl_batches_and_empty_files(tmp_path):
    raw = tmp_path / "raw"
    d = raw / "b1"
    d.mkdir(parents=True)
    (d / "creations.jsonl").write_text(
        json.dumps(
            {
                "instance_id": "j1",
                "spymaster_id": "x",
                "cue": "space",
                "candidates": ["rocket", "cat", "moon", "coffee", "brick", "horse"],
                "associations": ["rocket", "moon"],
            }
        )
        + "\n\n{oops\n"
    )
    (raw / "b2").mkdir()
    (raw / "b2" / "creations.csv").write_text("")
    res = import_all(None, [], raw, KEY)
    assert res.instances["instance_uid"].tolist() == ["raw:j1"] and res.instances.loc[0, "num_candidates"] == 6
    assert set(res.rejects["reason"].str.slice(0, 14)) == {"not a JSON obj", "missing column"}
