"""A living benchmark's integrity rules (issue: annotation integrity and permanent IDs):
spymasters never solve their own associations, names compare after one normalisation, ids are
strings, released numbers are finite, published IDs never move, the annotator key cannot change
silently, identity columns never reach storage raw, raw batches never reach git."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from gavil.domain.privacy import hash_annotator, key_fingerprint
from gavil.errors import ParamsError
from gavil.params import parse_params
from gavil.pipeline import catalog
from stages.export import benchmark_table, to_release_csv
from stages.import_annotations import import_all
from stages.import_annotations.stage import AnnotatorKeyChanged, check_annotator_key
from stages.select_instances import select, update_ledger
from tests.helpers import RELEASE, ROOT

KEY = b"k"
C5 = ["rocket", "cat", "moon", "coffee", "brick"]


def j(x):
    return json.dumps(x)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def creation(iid, spy="SPY", cue="space", cands=C5, assoc=("rocket", "moon"), **kw):
    return {
        "instance_id": iid,
        "spymaster_id": spy,
        "cue": cue,
        "candidates": list(cands),
        "associations": list(assoc),
    } | kw


def solve(iid, who, sel=("rocket", "moon")):
    return {"instance_id": iid, "solver_id": who, "selection": list(sel)}


def reasons(res) -> dict[int, str]:
    return dict(zip(res.rejects["source_line"], res.rejects["reason"]))


# ----------------------------------------------------------------------------------- spymaster ≠ solver
def test_a_spymasters_own_answer_is_rejected_and_never_counts(tmp_path):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", spy="ALICE")])
    write_jsonl(tmp_path / "raw/b1/solves.jsonl", [solve("i1", "ALICE"), solve("i1", "BOB"), solve("i1", "CAROL")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert reasons(res) == {1: "the solver is the instance's spymaster: an association is solved by other players"}
    assert "ALICE" not in res.rejects["row"].iloc[0] and hash_annotator("ALICE", KEY) in res.rejects["row"].iloc[0]
    sel = select(res.instances, res.solves, 0.8, 3)
    assert sel.loc[0, "status"] == "insufficient_solvers" and sel.loc[0, "n_solvers"] == 2
    assert "2 valid answer(s) by other players, need 3" == sel.loc[0, "reason"]
    # even a solves table that holds the spymaster's answer (another source) does not count it
    spy = res.instances.loc[0, "spymaster"]
    forged = pd.concat([res.solves, res.solves.head(1).assign(solver=spy)], ignore_index=True)
    assert select(res.instances, forged, 0.8, 3).loc[0, "status"] == "insufficient_solvers"
    write_jsonl(tmp_path / "raw/b2/solves.jsonl", [solve("i1", "DAVE")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert select(res.instances, res.solves, 0.8, 3).loc[0, "status"] == "selected"


# ----------------------------------------------------------------------------------- one normalisation
@pytest.mark.parametrize(
    ("cands", "assoc", "expect"),
    [
        (
            ["Dog", "dog", "moon", "coffee", "brick"],
            ["Dog", "moon"],
            "candidates contain duplicates after normalisation",
        ),
        (["café", "cafe\u0301", "moon", "coffee", "brick"], ["moon", "brick"], "candidates contain duplicates"),
        ([" rocket", "rocket ", "moon", "coffee", "brick"], ["moon", "brick"], "candidates contain duplicates"),
        (C5, ["Moon", "moon"], "associations contain duplicates after normalisation"),
    ],
)
def test_names_that_normalise_alike_are_duplicates(tmp_path, cands, assoc, expect):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", cands=cands, assoc=assoc)])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty and expect in reasons(res)[1]


def test_raw_names_are_stored_normalised_and_matched_in_solves(tmp_path):
    cands = ["Rocket", "CAT", "Cafe\u0301", "coffee", "brick"]
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", cands=cands, assoc=["rocket ", "café"])])
    write_jsonl(
        tmp_path / "raw/b1/solves.jsonl",
        [
            solve("i1", w, sel)
            for w, sel in (("S1", ["ROCKET", "Café"]), ("S2", ["café", "rocket"]), ("S3", ["rocket", "cat"]))
        ],
    )
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.loc[0, "candidates"] == ["rocket", "cat", "café", "coffee", "brick"]
    assert res.instances.loc[0, "associations"] == ["rocket", "café"] and res.rejects.empty
    assert res.solves["selection"].tolist()[0] == ["rocket", "café"]


@pytest.mark.parametrize("cue", ["sky\u200b", "\u2060sky", "s\u00adky", "sky\u0007", "sky\u3000blue", "a b"])
def test_cues_with_invisible_or_control_characters_are_rejected(tmp_path, cue):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", cue="sky"), creation("i2", cue=cue)])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances["cue"].tolist() == ["sky"]
    assert len(res.rejects) == 1 and "cue" in res.rejects.loc[0, "reason"]


# ----------------------------------------------------------------------------------- ids are strings
@pytest.mark.parametrize("bad", [1, 1.0, True, ["S2"], float("nan"), None, "", "  "])
def test_non_string_ids_are_rejected(tmp_path, bad):
    write_jsonl(
        tmp_path / "raw/b1/creations.jsonl",
        [creation("i1"), creation(bad, cue="moonish"), creation("i3", spy=bad, cue="orbit")],
    )
    write_jsonl(tmp_path / "raw/b1/solves.jsonl", [solve("i1", bad), solve("i1", "S1")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances["instance_uid"].tolist() == ["raw:i1"]
    assert len(res.solves) == 1 and res.solves.loc[0, "solver"] == hash_annotator("S1", KEY)
    rej = res.rejects
    assert (rej["kind"] == "creation").sum() == 2 and (rej["kind"] == "solve").sum() == 1
    assert all("is not a non-empty string" in r for r in rej["reason"])


def test_one_and_one_point_zero_are_not_two_solvers(tmp_path):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1")])
    write_jsonl(tmp_path / "raw/b1/solves.jsonl", [solve("i1", 1), solve("i1", 1.0), solve("i1", "1")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert len(res.solves) == 1 and len(res.rejects) == 2


@pytest.mark.parametrize("fool", [True, False, "yes", 50.5, float("inf"), 101, -1])
def test_a_fool_the_ai_score_must_be_an_integer_percent(tmp_path, fool):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", score_fool_the_ai=fool)])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty and "score_fool_the_ai" in reasons(res)[1]


# ----------------------------------------------------------------------------------- released numbers
@pytest.mark.parametrize(
    ("mean", "expect"),
    [
        ("nan", "not a finite number"),
        ("inf", "not a finite number"),
        ("-inf", "not a finite number"),
        ("1.5", "outside"),
    ],
)
def test_released_solver_means_must_be_finite_fractions(tmp_path, mean, expect):
    lines = (RELEASE / "game_5_6.csv").read_text().splitlines()
    header = lines[0].split(",")
    bad = lines[1].rsplit(",", 5)  # ..., num_candidates, solvers_jaccard_mean, std, images_source, ID
    assert header[-4] == "solvers_jaccard_mean"
    bad[-4] = mean
    (tmp_path / "game.csv").write_text("\n".join([lines[0], ",".join(bad), lines[2]]) + "\n")
    res = import_all(tmp_path, [{"file": "game.csv", "dataset": "game"}], None, KEY)
    assert len(res.instances) == 1
    r = res.rejects.iloc[0]
    assert (r["source_file"], r["source_line"], r["kind"]) == ((tmp_path / "game.csv").as_posix(), 2, "release")
    assert r["reason"].startswith("solvers_jaccard_mean:") and expect in r["reason"]


# ----------------------------------------------------------------------------------- permanent IDs
def _build(raw: Path, thr: float = 0.8, ledger=None):
    res = import_all(None, [], raw, KEY)
    sel = select(res.instances, res.solves, thr, 3, ledger)
    return sel.set_index("instance_uid"), update_ledger(sel, ledger)


def _batch(raw: Path, name: str, ids: list[str], weak: tuple[str, ...] = ()) -> None:
    write_jsonl(
        raw / name / "creations.jsonl",
        [creation(i, cue="cue" + i.translate(str.maketrans("0123456789", "abcdefghij"))) for i in ids],
    )
    rows = []
    for i in ids:
        for w in ("S1", "S2", "S3"):
            rows.append(solve(i, w, ("rocket", "cat") if i in weak and w != "S1" else ("rocket", "moon")))
    write_jsonl(raw / name / "solves.jsonl", rows)


def test_published_ids_never_move(tmp_path):
    raw = tmp_path / "raw"
    _batch(raw, "b-200", ["x1", "x2", "x3"])
    sel1, ledger1 = _build(raw)
    first = {u: (int(sel1.loc[u, "ID"]), int(sel1.loc[u, "split_id"])) for u in sel1.index}
    assert sorted(v[0] for v in first.values()) == [0, 1, 2]
    # a new batch whose name sorts *before* the exported one: old IDs stay, new ones take the next free
    _batch(raw, "a-100", ["n1", "n2"])
    sel2, ledger2 = _build(raw, ledger=ledger1)
    assert {u: (int(sel2.loc[u, "ID"]), int(sel2.loc[u, "split_id"])) for u in first} == first
    assert sorted(int(sel2.loc[u, "ID"]) for u in ("raw:n1", "raw:n2")) == [3, 4]
    # without the ledger the same data would renumber (the defect the ledger prevents)
    fresh, _ = _build(raw)
    assert int(fresh.loc["raw:x1", "ID"]) != first["raw:x1"][0]
    # published is final: edited answers do not unpublish it (issue 24); only retiring does, leaving a gap
    _batch(raw, "b-200", ["x1", "x2", "x3"], weak=("x2",))
    sel3, ledger3 = _build(raw, ledger=ledger2)
    assert int(sel3.loc["raw:x2", "ID"]) == first["raw:x2"][0] and sel3.loc["raw:x2", "solvers_jaccard_mean"] == 1.0
    assert ledger3.equals(ledger2)
    res = import_all(None, [], raw, KEY)
    sel4 = select(res.instances, res.solves, 0.8, 3, ledger3, [("game", first["raw:x2"][0], "a typo in the cue")])
    sel4 = sel4.set_index("instance_uid")
    assert sel4.loc["raw:x2", "status"] == "retired" and "a typo in the cue" in sel4.loc["raw:x2", "reason"]
    assert int(sel4.loc["raw:x3", "ID"]) == first["raw:x3"][0]
    bench = benchmark_table(sel4.reset_index())
    assert first["raw:x2"][0] not in set(bench["ID"]) and len(bench) == 4


def test_release_round_trip_is_byte_identical_through_the_ledger():
    res = import_all(RELEASE, [{"file": f, "dataset": "game"} for f in ("game_5_6.csv", "game_10_12.csv")], None, KEY)
    sel = select(res.instances, res.solves, 0.8)
    ledger = update_ledger(sel)
    again = select(res.instances, res.solves, 0.8, 3, ledger)  # the next build reads the ledger
    for s in (sel, again):
        assert to_release_csv(benchmark_table(s)) == (RELEASE / "winogavil_dataset.csv").read_text()
    assert ledger["ID"].dropna().astype(int).tolist() == list(range(3563))


# ----------------------------------------------------------------------------------- the annotator key
def test_key_fingerprint_rules():
    a, b = key_fingerprint(b"key-a"), key_fingerprint(b"key-b")
    assert a.startswith("kf_") and len(a) == 19 and a != b and key_fingerprint(b"key-a") == a
    check_annotator_key(a, None, None, True)  # first import
    check_annotator_key(b, None, a, False)  # no id hashed: nothing to mismatch
    with pytest.raises(AnnotatorKeyChanged, match=f"set annotations.annotator_key_fingerprint: {b}"):
        check_annotator_key(b, None, a, True)
    check_annotator_key(b, b, a, True)  # re-keyed on purpose
    with pytest.raises(AnnotatorKeyChanged, match="restore the key"):
        check_annotator_key(a, b, None, False)


def test_a_different_key_stops_the_import_without_writing(in_tmp, monkeypatch):
    from stages import import_annotations

    _batch(in_tmp / "raw", "b1", ["x1"])
    params = parse_params(
        {"annotations": {"release_files": [], "raw_dir": "raw", "annotator_key_env": "TEST_GAVIL_KEY"}}
    )
    monkeypatch.setenv("TEST_GAVIL_KEY", "first key")
    metrics = import_annotations.run(params)
    stored = json.loads((in_tmp / catalog.entry("annotator_key_fingerprint").path).read_text())
    assert (
        stored
        == {"fingerprint": key_fingerprint(b"first key")}
        == {"fingerprint": metrics["annotator_key_fingerprint"]}
    )
    solves_before = (in_tmp / catalog.entry("solves").path).read_bytes()
    monkeypatch.setenv("TEST_GAVIL_KEY", "second key")
    with pytest.raises(AnnotatorKeyChanged, match="changed since the last import"):
        import_annotations.run(params)
    assert (in_tmp / catalog.entry("solves").path).read_bytes() == solves_before  # nothing half-written
    new = key_fingerprint(b"second key")
    rekeyed = params.replace(annotations={"annotator_key_fingerprint": new})
    import_annotations.run(rekeyed)  # every hash changes at once
    assert set(catalog.read_table("solves")["solver"]) == {hash_annotator(w, b"second key") for w in ("S1", "S2", "S3")}


def test_the_fingerprint_param_is_checked_and_a_dependency():
    with pytest.raises(ParamsError, match="annotator_key_fingerprint"):
        parse_params({"annotations": {"annotator_key_fingerprint": "secret-key"}})
    from gavil.pipeline.registry import BY_NAME

    assert "annotations.annotator_key_fingerprint" in BY_NAME["import_annotations"].param_keys(parse_params({}))


# ----------------------------------------------------------------------------------- identity columns
def test_identity_columns_are_hashed_in_the_rejects(tmp_path):
    crowd = parse_params({}).annotations.crowd.model_dump()
    header = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", "SubmitTime", "WorkTimeInSeconds"]
    header += ["Turkle.Username", "Input.candidates", "Answer.cue1", "Answer.associations1", "Answer.fool1"]
    header += ["Answer.cue2", "Answer.associations2", "Answer.fool2"]
    row = ["H1", "A1", "W-1", "Rejected", "t", "5", "jane.doe", j(C5), "space", j(["rocket", "moon"]), "0", "x"]
    row += ["[]", "0"]
    path = tmp_path / "raw/b1/crowd_creations.csv"
    path.parent.mkdir(parents=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, row])
    res = import_all(None, [], tmp_path / "raw", KEY, crowd, identity_columns=["Turkle.Username"])
    stored = res.rejects.to_json()
    assert len(res.rejects) == 1 and "jane.doe" not in stored and "W-1" not in stored
    assert hash_annotator("jane.doe", KEY) in stored
    assert "Turkle.Username" in parse_params({}).annotations.identity_columns  # on by default


# ----------------------------------------------------------------------------------- git and params
def test_raw_batches_are_never_in_git():
    paths = ["data/sample/raw/batch-0042/creations.csv", "data/sample/raw/README.md"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True, text=True)
    assert ignored.stdout.split() == ["data/sample/raw/batch-0042/creations.csv"]
    kept = subprocess.run(["git", "check-ignore", "--no-index", "data/ledger/benchmark_ids.parquet"], cwd=ROOT)
    assert kept.returncode == 1  # the ledger is shared through git


@pytest.mark.parametrize("bad", [0, -1, 2.5, "3"])
def test_min_solvers_must_be_a_positive_integer(bad):
    with pytest.raises(ParamsError, match="select.min_solvers"):
        parse_params({"select": {"min_solvers": bad}})


def test_a_cue_naming_a_candidate_is_allowed_and_counted(tmp_path):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", cue="Moon")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert len(res.instances) == 1 and res.metrics["instances_cue_names_a_candidate"] == 1
    rel = import_all(RELEASE, [{"file": "game_5_6.csv", "dataset": "game"}], None, KEY)
    assert rel.metrics["instances_cue_names_a_candidate"] == 73  # the release has such instances


# ----------------------------------------------------------------------------------- found by review
def test_bytes_that_are_not_utf8_reject_their_line_not_the_stage(tmp_path):
    raw = tmp_path / "raw/b1"
    raw.mkdir(parents=True)
    (raw / "creations.csv").write_bytes(
        b"instance_id,spymaster_id,cue,candidates,associations\n"
        b'i1,S,caf\xe9,"[""rocket"", ""cat"", ""moon"", ""coffee"", ""brick""]","[""rocket"", ""moon""]"\n'
        b'i2,S,space,"[""rocket"", ""cat"", ""moon"", ""coffee"", ""brick""]","[""rocket"", ""moon""]"\n'
    )
    (raw / "solves.jsonl").write_bytes(b'{"instance_id": "i2", "solver_id": "X\xff", "selection": []}\n')
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances["instance_uid"].tolist() == ["raw:i2"]
    got = {
        (Path(f).name, line): r
        for f, line, r in zip(res.rejects["source_file"], res.rejects["source_line"], res.rejects["reason"])
    }
    assert got == {
        ("creations.csv", 2): "not UTF-8: byte 0xe9 (save the file as UTF-8)",
        ("solves.jsonl", 1): "not UTF-8: byte 0xff (save the file as UTF-8)",
    }


def test_a_rejects_reason_never_repeats_a_persons_id(tmp_path):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1"), creation("i2", spy=5551234, cue="moonish")])
    write_jsonl(tmp_path / "raw/b1/solves.jsonl", [solve("i1", 987654321), solve("i1", {"email": "john@example.com"})])
    res = import_all(None, [], tmp_path / "raw", KEY)
    stored = res.rejects.to_json()
    assert len(res.rejects) == 3
    for secret in ("987654321", "5551234", "john@example.com"):
        assert secret not in stored


def test_nested_and_differently_cased_identity_columns_are_hashed(tmp_path):
    write_jsonl(
        tmp_path / "raw/b1/creations.jsonl", [creation("i1", cue="x", meta={"WorkerId": "W-SECRET"}, workerid="W-2")]
    )
    res = import_all(None, [], tmp_path / "raw", KEY)
    stored = res.rejects.to_json()
    assert len(res.rejects) == 1 and "W-SECRET" not in stored and "W-2" not in stored


def test_the_same_person_typed_two_ways_is_one_person(tmp_path):
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("i1", spy=nfc)])
    write_jsonl(tmp_path / "raw/b1/solves.jsonl", [solve("i1", nfd), solve("i1", "B\u200b"), solve("i1", "B")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert len(res.solves) == 1 and set(reasons(res).values()) == {
        "the solver is the instance's spymaster: an association is solved by other players",
        "this solver already answered this instance",
    }


def test_a_released_association_spelled_differently_is_stored_as_its_candidate(tmp_path):
    lines = (RELEASE / "game_5_6.csv").read_text().splitlines()
    row = lines[1]
    first_assoc = json.loads(next(csv.reader([row]))[2])[0]
    (tmp_path / "game.csv").write_text(
        lines[0]
        + "\n"
        + row.replace(f'""{first_assoc}""]', f'""{first_assoc.upper()}""]', 1).replace(
            f'[""{first_assoc}""', f'[""{first_assoc.upper()}""', 1
        )
        + "\n"
    )
    res = import_all(tmp_path, [{"file": "game.csv", "dataset": "game"}], None, KEY)
    assert len(res.instances) == 1 and res.rejects.empty
    inst = res.instances.iloc[0]
    assert set(inst["associations"]) <= set(inst["candidates"])  # the table contract holds


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (12, 12),
        ("12", 12),
        ("12.0", 12),
        (12.0, 12),
        ("1e3", None),
        ("\u0663", None),
        (2**63, None),
        (10**400, None),
        (9007199254740993, None),
    ],
)
def test_integers_are_parsed_exactly(value, ok):
    from stages.import_annotations.records import RowError, parse_int

    if ok is None:
        with pytest.raises(RowError):
            parse_int(value, "ID")
    else:
        assert parse_int(value, "ID") == ok


def test_a_jsonl_record_missing_a_field_is_rejected_alone(tmp_path):
    first = creation("i1")
    del first["associations"]
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [first, creation("i2"), creation("i3", cue="moonish")])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances["instance_uid"].tolist() == ["raw:i2", "raw:i3"]
    assert reasons(res) == {1: "missing field 'associations'"}


def test_every_batch_file_is_read_or_listed(tmp_path):
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", [creation("j1")])
    (tmp_path / "raw/b1/creations.csv").write_text(
        "instance_id,spymaster_id,cue,candidates,associations\n"
        + 'c1,S,moonish,"[""rocket"", ""cat"", ""moon"", ""coffee"", ""brick""]","[""rocket"", ""moon""]"\n'
    )
    (tmp_path / "raw/b1/solves.json").write_text("[]")
    (tmp_path / "raw/stray.csv").write_text("x\n")
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert sorted(res.instances["instance_uid"]) == ["raw:c1", "raw:j1"]
    assert [Path(p).name for p in res.metrics["ignored_files"]] == ["stray.csv", "solves.json"]
    with pytest.raises(catalog.MissingInput, match="raw_dir"):
        import_all(None, [], tmp_path / "no-such-folder", KEY)


def test_the_recorded_key_fingerprint_survives_an_import_without_raw_data(in_tmp, monkeypatch):
    from stages import import_annotations

    _batch(in_tmp / "raw", "b1", ["x1"])
    params = parse_params(
        {"annotations": {"release_files": [], "raw_dir": "raw", "annotator_key_env": "TEST_GAVIL_KEY"}}
    )
    monkeypatch.setenv("TEST_GAVIL_KEY", "first key")
    import_annotations.run(params)
    (in_tmp / "raw").rename(in_tmp / "away")
    (in_tmp / "raw").mkdir()
    monkeypatch.setenv("TEST_GAVIL_KEY", "second key")
    import_annotations.run(params)  # hashes nothing: keeps the recorded fingerprint
    stored = json.loads((in_tmp / catalog.entry("annotator_key_fingerprint").path).read_text())
    assert stored == {"fingerprint": key_fingerprint(b"first key")}
    (in_tmp / "raw").rmdir()
    (in_tmp / "away").rename(in_tmp / "raw")
    with pytest.raises(AnnotatorKeyChanged):
        import_annotations.run(params)


def test_split_id_collisions_are_an_error_with_the_fix():
    from gavil.errors import GavilError

    files = [{"file": "winogavil_dataset.csv", "dataset": "game"}, {"file": "game_5_6.csv", "dataset": "game"}]
    res = import_all(RELEASE, files, None, KEY)
    with pytest.raises(GavilError, match="list each released instance once"):
        select(res.instances, res.solves, 0.8)


def test_unknown_keys_in_list_items_and_dict_values_get_a_suggestion():
    cases = {
        "models.a.pretrained": {"models": {"a": {"kind": "text", "model": "m", "pretraind": None}}},
        "prefect.deployments.full-build.cron": {"prefect": {"deployments": {"full-build": {"crn": None}}}},
        "annotations.release_files.0.file": {"annotations": {"release_files": [{"fil": "x", "dataset": "game"}]}},
    }
    for right, data in cases.items():
        with pytest.raises(ParamsError) as e:
            parse_params(data)
        assert f"did you mean {right}?" in str(e.value), str(e.value)


def test_params_files_are_read_strictly(tmp_path):
    from gavil.params import load_params

    good = (ROOT / "params.yaml").read_text()
    cases = {
        "dup.yaml": ("select:\n  min_solver_jaccard: 0.8\n  min_solver_jaccard: 0.9\n", "appears twice"),
        "latin1.yaml": (None, "not UTF-8"),
        "short.yaml": (good.replace("  min_solvers: 3\n", ""), "lacks select.min_solvers"),
        "badcron.yaml": (good.replace('cron: "0 3 * * *"', 'cron: "every night"'), "not a cron expression"),
        "badzone.yaml": (good.replace("timezone: UTC", "timezone: Mars/Olympus"), "IANA time zone"),
    }
    for name, (text, expect) in cases.items():
        path = tmp_path / name
        path.write_bytes(b"select:\n  note: caf\xe9\n") if text is None else path.write_text(text)
        with pytest.raises(ParamsError, match=expect):
            load_params(path)
    with pytest.raises(ParamsError, match="is not a file"):
        load_params(tmp_path)
