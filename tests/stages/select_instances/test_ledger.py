"""Issue 24: the permanent ID ledger binds IDs to content, and published instances never change.

Every test plays an attack on a published benchmark (a reused or edited instance_id, batches
that arrive out of order, vanish or come back, answers piled on after publication, shuffled
input rows) and checks the published rows stay byte-for-byte what they were.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from gavil.errors import GavilError, ParamsError
from gavil.params import parse_params
from gavil.pipeline import catalog
from stages.export import benchmark_table, to_release_csv
from stages.import_annotations import import_all
from stages.select_instances import content_fingerprint, select, update_ledger
from tests.helpers import RELEASE

KEY = b"k"
C5 = ["rocket", "cat", "moon", "coffee", "brick"]
RIGHT, WRONG = ("rocket", "moon"), ("cat", "brick")


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def creation(iid: str, cue: str, cands=C5, assoc=RIGHT, spy: str = "SPY") -> dict:
    return {"instance_id": iid, "spymaster_id": spy, "cue": cue, "candidates": list(cands), "associations": list(assoc)}


def solve(iid: str, who: str, sel=RIGHT) -> dict:
    return {"instance_id": iid, "solver_id": who, "selection": list(sel)}


def batch(raw: Path, name: str, creations: list[dict], solves: list[dict]) -> None:
    write_jsonl(raw / name / "creations.jsonl", creations)
    write_jsonl(raw / name / "solves.jsonl", solves)


def three(iid: str, sel=RIGHT, prefix: str = "S") -> list[dict]:
    return [solve(iid, f"{prefix}{i}", sel) for i in (1, 2, 3)]


def build(raw: Path, ledger=None, retired=(), min_solvers: int = 3):
    res = import_all(None, [], raw, KEY)
    sel = select(res.instances, res.solves, 0.8, min_solvers, ledger, retired)
    return sel, update_ledger(sel, ledger)


def by_uid(sel: pd.DataFrame) -> pd.DataFrame:
    return sel.set_index("instance_uid")


def bench_csv(sel: pd.DataFrame) -> str:
    return to_release_csv(benchmark_table(sel))


@pytest.fixture
def published(tmp_path):
    """A first build: b-200 publishes x1 (cue 'meow') and x2 (cue 'bark'), IDs 0 and 1."""
    raw = tmp_path / "raw"
    batch(raw, "b-200", [creation("x1", "meow"), creation("x2", "bark")], three("x1") + three("x2"))
    sel, ledger = build(raw)
    assert by_uid(sel).loc[["raw:x1", "raw:x2"], "ID"].tolist() == [0, 1]
    return raw, sel, ledger


# ----------------------------------------------------------------------------------- IDs bind to content
def test_fingerprint_is_a_property_of_content_not_of_its_spelling_or_order():
    fp = content_fingerprint("game", "meow", C5, list(RIGHT))
    assert fp == content_fingerprint("game", " MEOW ", list(reversed(C5)), ["Moon", "rocket"])
    assert fp == content_fingerprint("game", "me\u0301ow".replace("e\u0301", "e"), C5, list(RIGHT))
    for other in (
        content_fingerprint("game", "evil", C5, list(RIGHT)),
        content_fingerprint("game", "meow", C5, ["rocket", "cat"]),
        content_fingerprint("game", "meow", [*C5[:4], "tree"], list(RIGHT)),
        content_fingerprint("swow_baseline", "meow", C5, list(RIGHT)),
    ):
        assert other != fp


def test_a_reused_instance_id_in_an_earlier_batch_cannot_take_over_a_published_id(published):
    raw, sel1, ledger1 = published
    # a batch that sorts earlier reuses x1 for another cue; the import now reads it first
    batch(raw, "a-100", [creation("x1", "evil", assoc=WRONG)], three("x1", WRONG, prefix="E"))
    sel2, ledger2 = build(raw, ledger1)
    rows = by_uid(sel2)
    assert rows.loc["raw:x1", ["cue", "status", "ID"]].tolist() == ["meow", "selected", 0]
    conflict = rows[rows.index.str.startswith("raw:x1#conflict:")]
    assert len(conflict) == 1 and conflict["status"].iloc[0] == "rejected" and pd.isna(conflict["ID"].iloc[0])
    assert "content differs from published game ID 0 (cue 'meow')" in conflict["reason"].iloc[0]
    assert bench_csv(sel2) == bench_csv(sel1) and "evil" not in bench_csv(sel2)
    assert ledger2.equals(ledger1)


def test_an_edited_row_of_a_published_instance_is_rejected_and_the_published_row_stays(published):
    raw, sel1, ledger1 = published
    batch(raw, "b-200", [creation("x1", "meow", assoc=("cat", "brick")), creation("x2", "bark")], three("x2"))
    sel2, ledger2 = build(raw, ledger1)
    rows = by_uid(sel2)
    assert rows.loc["raw:x1", "associations"] == list(RIGHT) and rows.loc["raw:x1", "status"] == "selected"
    assert "no longer imported" not in rows.loc["raw:x1", "reason"]  # its uid holds other content now
    rejected = rows[rows["status"] == "rejected"]
    assert len(rejected) == 1 and "published game ID 0" in rejected["reason"].iloc[0]
    assert bench_csv(sel2) == bench_csv(sel1) and ledger2.equals(ledger1)


def test_an_unpublished_instance_id_is_bound_too_so_old_answers_never_score_new_content(tmp_path):
    raw = tmp_path / "raw"
    batch(raw, "b-2", [creation("y1", "purr")], [solve("y1", "S1"), solve("y1", "S2")])
    sel1, ledger1 = build(raw)
    assert by_uid(sel1).loc["raw:y1", "status"] == "insufficient_solvers"
    batch(raw, "a-1", [creation("y1", "hiss", assoc=WRONG)], [solve("y1", "S3", WRONG)])
    sel2, ledger2 = build(raw, ledger1)
    assert (sel2["status"] == "rejected").sum() == 1 and not (sel2["status"] == "selected").any()
    assert "split ID 0 (cue 'purr')" in sel2.loc[sel2["status"] == "rejected", "reason"].iloc[0]
    assert ledger2.equals(ledger1)


# ----------------------------------------------------------------------------------- batches come and go
def test_a_removed_batch_keeps_its_published_rows_and_a_reimport_changes_nothing(published, tmp_path):
    raw, sel1, ledger1 = published
    moved = tmp_path / "moved"
    (raw / "b-200").rename(moved)
    batch(raw, "c-300", [creation("n1", "woof")], three("n1"))
    sel2, ledger2 = build(raw, ledger1)
    rows = by_uid(sel2)
    assert rows.loc[["raw:x1", "raw:x2", "raw:n1"], "ID"].tolist() == [0, 1, 2]  # no gap, no renumbering
    assert "no longer imported" in rows.loc["raw:x1", "reason"]
    assert bench_csv(sel2).startswith(bench_csv(sel1))
    moved.rename(raw / "b-200")  # the batch comes back
    sel3, ledger3 = build(raw, ledger2)
    assert bench_csv(sel3) == bench_csv(sel2) and ledger3.equals(ledger2)


def test_batches_arriving_out_of_order_keep_every_published_id(tmp_path):
    raw = tmp_path / "raw"
    batch(raw, "b-2", [creation("x2", "bark")], three("x2"))
    sel1, ledger1 = build(raw)
    # the earlier-named batch arrives later, and answers x2 again from new accounts
    batch(raw, "a-1", [creation("x1", "meow")], three("x1") + three("x2", WRONG, prefix="N"))
    sel2, ledger2 = build(raw, ledger1)
    rows = by_uid(sel2)
    assert rows.loc[["raw:x2", "raw:x1"], "ID"].tolist() == [0, 1]
    assert rows.loc["raw:x2", "solvers_jaccard_mean"] == 1.0 and rows.loc["raw:x2", "late_answers"] == 3


# ----------------------------------------------------------------------------------- published is final
def test_answers_after_publication_never_unpublish_an_instance(published):
    raw, sel1, ledger1 = published
    # three fresh accounts post a wrong answer to the published x1 (from a later batch)
    write_jsonl(raw / "z-900" / "solves.jsonl", three("x1", WRONG, prefix="FRESH"))
    sel2, ledger2 = build(raw, ledger1)
    row = by_uid(sel2).loc["raw:x1"]
    assert (row["status"], row["ID"], row["solvers_jaccard_mean"], row["late_answers"]) == ("selected", 0, 1.0, 3)
    assert "3 later answer(s) not counted" in row["reason"]
    assert bench_csv(sel2) == bench_csv(sel1) and ledger2.equals(ledger1)
    # even with min_solvers raised, or the counted answers gone, the published row is frozen
    (raw / "b-200" / "solves.jsonl").write_text("")
    sel3, _ = build(raw, ledger2, min_solvers=5)
    assert bench_csv(sel3) == bench_csv(sel1)


def test_exactly_min_solvers_answers_count_whatever_their_order(tmp_path):
    raw = tmp_path / "raw"
    answers = three("x1") + three("x1", WRONG, prefix="W")
    batch(raw, "b-1", [creation("x1", "meow")], answers)
    sel1, ledger1 = build(raw)
    row = by_uid(sel1).loc["raw:x1"]
    assert row["n_solvers"] == 3 and row["late_answers"] == 3 and len(row["solvers"]) == 3
    for seed in range(3):
        random.Random(seed).shuffle(answers)
        batch(raw, "b-1", [creation("x1", "meow")], answers)
        assert build(raw)[0].equals(sel1)


def test_a_scored_unpublished_instance_keeps_its_counted_solvers(tmp_path):
    raw = tmp_path / "raw"
    batch(raw, "b-1", [creation("x1", "meow")], three("x1", WRONG))
    sel1, ledger1 = build(raw)
    assert by_uid(sel1).loc["raw:x1", "status"] == "below_threshold"
    # a flood of right answers from new accounts cannot flip the decision
    write_jsonl(raw / "b-2" / "solves.jsonl", [solve("x1", f"R{i}") for i in range(40)])
    sel2, _ = build(raw, ledger1)
    row = by_uid(sel2).loc["raw:x1"]
    assert row["status"] == "below_threshold" and row["late_answers"] == 40
    assert row["solvers"] == by_uid(sel1).loc["raw:x1", "solvers"]


# ----------------------------------------------------------------------------------- retiring
def test_a_retired_id_leaves_the_export_and_is_never_reused(published):
    raw, _, ledger1 = published
    sel2, ledger2 = build(raw, ledger1, retired=[("game", 0, "the cue is a slur in some dialects")])
    row = by_uid(sel2).loc["raw:x1"]
    assert (row["status"], row["ID"]) == ("retired", 0) and "slur" in row["reason"]
    assert benchmark_table(sel2)["ID"].tolist() == [1]
    batch(raw, "c-3", [creation("n1", "woof")], three("n1"))
    sel3, _ = build(raw, ledger2, retired=[("game", 0, "the cue is a slur in some dialects")])
    assert benchmark_table(sel3)["ID"].tolist() == [1, 2]  # 0 stays retired, never given again
    # retiring an ID that was never published is an error naming it, not a silent no-op
    with pytest.raises(GavilError, match="game ID 7 was never published"):
        build(raw, ledger2, retired=[("game", 7, "typo")])


@pytest.mark.parametrize(
    "bad",
    [
        [{"dataset": "game", "ID": 1, "reason": ""}],
        [{"dataset": "game", "ID": -1, "reason": "typo"}],
        [{"dataset": "gmae", "ID": 1, "reason": "typo"}],
        [{"dataset": "game", "ID": 1, "reason": "typo"}, {"dataset": "game", "ID": 1, "reason": "again"}],
        [{"dataset": "game", "ID": 1}],
    ],
)
def test_retired_entries_are_checked(bad):
    with pytest.raises(ParamsError, match="select.retired"):
        parse_params({"select": {"retired": bad}})


def test_the_stage_applies_select_retired_and_writes_nothing_on_a_bad_entry(in_tmp, published):
    raw, _, _ = published
    res = import_all(None, [], raw, KEY)
    catalog.write_table(res.instances, "instances")
    catalog.write_table(res.solves, "solves")
    catalog.write_table(res.flags, "flags")
    catalog.write_table(res.gold_checks, "gold_checks")
    from stages import select_instances

    select_instances.run(parse_params({}))
    ledger = (in_tmp / catalog.entry("id_ledger").path).read_bytes()
    select_instances.run(parse_params({"select": {"retired": [{"dataset": "game", "ID": 1, "reason": "a dupe"}]}}))
    assert catalog.read_table("selection").set_index("instance_uid").loc["raw:x2", "status"] == "retired"
    assert (in_tmp / catalog.entry("id_ledger").path).read_bytes() == ledger
    selection = (in_tmp / catalog.entry("selection").path).read_bytes()
    with pytest.raises(GavilError, match="never published"):
        select_instances.run(parse_params({"select": {"retired": [{"dataset": "game", "ID": 9, "reason": "x y"}]}}))
    assert (in_tmp / catalog.entry("selection").path).read_bytes() == selection


# ----------------------------------------------------------------------------------- same commit, same bytes
def test_selection_and_ledger_do_not_depend_on_input_row_order(published):
    raw, _, ledger1 = published
    batch(raw, "a-1", [creation("n1", "woof"), creation("x1", "evil")], three("n1") + three("x2", WRONG, "L"))
    res = import_all(None, [], raw, KEY)
    base = select(res.instances, res.solves, 0.8, 3, ledger1)
    base_ledger = update_ledger(base, ledger1)
    for seed in range(4):
        rng = random.Random(seed)

        def shuffled(df: pd.DataFrame, rng: random.Random = rng) -> pd.DataFrame:
            return df.sample(frac=1, random_state=rng.randrange(2**32)).reset_index(drop=True)

        led = shuffled(ledger1)
        sel = select(shuffled(res.instances), shuffled(res.solves), 0.8, 3, led)
        assert sel.equals(base)
        assert update_ledger(sel, led).equals(base_ledger)


def test_release_round_trip_holds_with_shuffled_rows_and_through_the_ledger():
    files = [{"file": f, "dataset": "game"} for f in ("game_5_6.csv", "game_10_12.csv")]
    res = import_all(RELEASE, files, None, KEY)
    want = (RELEASE / "winogavil_dataset.csv").read_text()
    sel = select(res.instances.sample(frac=1, random_state=1), res.solves, 0.8)
    assert to_release_csv(benchmark_table(sel)) == want
    ledger = update_ledger(sel)
    # the next build: the release's numbers cannot be edited under a published ID
    inst = res.instances.copy()
    inst.loc[0, "solvers_jaccard_mean"] = 0.1
    again = select(inst, res.solves, 0.8, 3, ledger)
    assert to_release_csv(benchmark_table(again)) == want
    assert "solvers_jaccard_mean" in again.loc[again["instance_uid"] == inst.loc[0, "instance_uid"], "reason"].iloc[0]
    # a raised threshold applies to new instances only: the published ones stay, and say so
    higher = select(res.instances, res.solves, 0.9, 3, ledger)
    assert to_release_csv(benchmark_table(higher)) == want
    assert higher["reason"].str.contains("threshold rose", na=False).sum() == 176


def test_the_tracked_ledger_reads_in_its_schema():
    led = catalog.read_table("id_ledger")
    assert led["ID"].notna().all()
    again = [content_fingerprint(*r) for r in zip(led["dataset"], led["cue"], led["candidates"], led["associations"])]
    assert again == led["fingerprint"].tolist()  # each ID is bound to the content stored beside it


def test_a_new_ledger_starts_a_new_benchmark_and_keeps_uncommitted_ids_safe(tmp_path):
    """`gavil ledger new` in a git checkout: an empty ledger and published-ID list that selection's
    guard accepts, the old export gone, and a refusal while the ledger holds IDs git does not."""
    import shutil
    import subprocess

    from gavil.errors import GavilError
    from gavil.pipeline import catalog
    from gavil.pipeline.ledger import start_new_ledger
    from stages.select_instances.guard import read_published
    from tests.helpers import ROOT

    shutil.copytree(ROOT / "data/ledger", tmp_path / "data/ledger")
    (tmp_path / "data/export").mkdir(parents=True)
    (tmp_path / "data/export/benchmark.csv").write_text("old\n")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "-A"],
        ["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "x"],
    ):
        subprocess.run(cmd, cwd=tmp_path, check=True)
    lines = start_new_ledger(tmp_path)
    assert "held 4561 IDs" in lines[0] and not (tmp_path / "data/export/benchmark.csv").exists()
    assert (
        catalog.read_table("id_ledger", tmp_path).empty
        and read_published(tmp_path / "data/ledger/published_ids.csv") == []
    )
    with pytest.raises(GavilError, match="changes git does not hold"):
        start_new_ledger(tmp_path)  # the new, empty ledger is not committed: the IDs it may hold are safe
    assert start_new_ledger(tmp_path, force=True)
