"""Each game round's rival scored on round 0, its own round and every later round (docs/dynamic.md,
stages/evaluate/rivals.py): a two-round benchmark imported the way the game's rows arrive (a batch
whose creations name their round and rival), selected, then scored with fake predictions."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.io import validate
from gavil.params import Params, load_params
from gavil.pipeline import catalog
from gavil.pipeline.runner import run_stage
from schemas.evaluate import EvalPredictions, Evaluation, RivalRounds, RoundErrors
from stages.evaluate import aggregate, table4_by_round
from stages.evaluate.errors import round_errors, round_errors_markdown
from stages.evaluate.rivals import models_to_score, rival_rounds, rival_rounds_markdown, round_rivals
from stages.import_annotations import import_all
from stages.select_instances import select
from tests.helpers import IMAGES, RELEASE, ROOT

CANDS = ["rocket", "moon", "astronaut", "cat", "coffee"]
# (instance_id, round, rival entry, rival weights): round 0 names no rival; round 1 played against
# `early` (random weights), round 2 against `late`
ROWS = [("a", 0, None, None), ("b", 0, None, None), ("c", 1, "early", "untrained"), ("d", 2, "late", "untrained")]
ROWS += [("e", 2, "late", "untrained")]
#: the fool-the-AI score each creation's rival gave it in the loop (K=2 of 5: 0, 67 or 100)
FOOL = {"a": 0, "b": 67, "c": 67, "d": 100, "e": 0}


def _params(tmp: Path) -> Params:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["models"]["early"] = {"kind": "open_clip", "model": "RN50", "pretrained": None}
    raw["models"]["late"] = {"kind": "open_clip", "model": "ViT-B-32", "pretrained": None}
    raw["evaluate"]["models"] = ["clip-rn50", "late"]  # `early` is not listed: it is scored anyway
    (tmp / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_params(tmp / "params.yaml")


def _benchmark(tmp: Path, release: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Instances and selection of the batch below (``release``: after the sample release's
    ``game_5_6.csv``, round 0 collected against the paper's rival)."""
    batch = tmp / "raw/b1"
    batch.mkdir(parents=True)
    creations = [
        {"instance_id": i, "spymaster_id": "s", "cue": f"cue{i}", "candidates": CANDS, "associations": CANDS[:2]}
        | {"round": r, "score_fool_the_ai": FOOL[i]}
        | ({"rival_model": m, "rival_weights": w} if m else {})
        for i, r, m, w in ROWS
    ]
    (batch / "creations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in creations))
    solves = [{"instance_id": i, "solver_id": f"w{k}", "selection": CANDS[:2]} for i, *_ in ROWS for k in range(3)]
    (batch / "solves.jsonl").write_text("".join(json.dumps(s) + "\n" for s in solves))
    files = [{"file": "game_5_6.csv", "dataset": "game"}] if release else []
    res = import_all(RELEASE if release else None, files, tmp / "raw", b"k")
    return res.instances, select(res.instances, res.solves, 0.8, 3)


def _predictions(models: list[str], selection: pd.DataFrame) -> pd.DataFrame:
    """Fake predictions: every model picks the associations on round 0, one of two on round 1 and
    none on round 2 (a later round is harder)."""
    sel = selection[selection["status"] == "selected"]
    picks = {0: CANDS[:2], 1: [CANDS[0], CANDS[3]], 2: CANDS[3:]}
    rows = []
    for m in models:
        for uid, rnd in zip(sel["instance_uid"], sel["round"]):
            j = {0: 1.0, 1: 1 / 3, 2: 0.0}[int(rnd)]
            rows.append(
                {
                    "model_name": m,
                    "weights_id": "untrained",
                    "dataset": "game",
                    "instance_id": uid,
                    "num_candidates": 5,
                    "status": "untrained",
                    "reason": "random weights",
                    "predictions": picks[int(rnd)],
                    "similarities": None,
                    "jaccard": j,
                    "score_fool_the_ai": 100 - int(100 * j),
                    "random_jaccard": 0.3,
                }
            )
    return validate(pd.DataFrame(rows), EvalPredictions)


def test_round_1s_rival_is_scored_on_round_2_without_being_in_evaluate_models(in_tmp):
    params = _params(in_tmp)
    instances, selection = _benchmark(in_tmp)
    assert (selection["status"] == "selected").all()
    rivals = round_rivals(instances)
    assert rivals.values.tolist() == [[1, "early", "untrained"], [2, "late", "untrained"]]
    names = models_to_score(params, rivals)
    assert names == ["clip-rn50", "late", "early"]  # the rival not in evaluate.models is added
    pred = _predictions(names, selection)
    rounds = dict(zip(selection["instance_uid"], selection["round"].astype(int)))
    ev = validate(aggregate(pred, 50, 0, rounds, "1.2.0"), Evaluation)
    table = validate(rival_rounds(rivals, ev, [0, 1, 2], params), RivalRounds)
    got = {
        (r, m, s): (st, n, round(mean, 1))
        for r, m, s, st, n, mean in table[
            ["rival_round", "rival_model", "round", "status", "n_instances", "mean_jaccard_percent"]
        ].itertuples(index=False)
    }
    assert got == {
        (1, "early", 0): ("scored", 2, 100.0),
        (1, "early", 1): ("scored", 1, 33.3),
        (1, "early", 2): ("scored", 2, 0.0),  # round 1's rival on the later round 2
        (2, "late", 0): ("scored", 2, 100.0),
        (2, "late", 2): ("scored", 2, 0.0),  # no row for round 1: earlier than late's round
    }
    assert set(table["dataset_version"]) == {"1.2.0"}
    md = rival_rounds_markdown(table)
    assert "## Each round's rival on later rounds" in md
    assert "| early (untrained), round 1 | 100.0 (2/2) | 33.3 (1/1) | 0.0 (2/2) |" in md
    assert "| late (untrained), round 2 | 100.0 (2/2) | – | 0.0 (2/2) |" in md


def test_a_rival_with_other_weights_or_no_entry_now_is_said_so(in_tmp):
    params = _params(in_tmp)
    instances, selection = _benchmark(in_tmp)
    rivals = round_rivals(instances)
    rivals.loc[rivals["rival_model"] == "late", "rival_weights"] = "openai"  # the round's game loaded other weights
    rivals.loc[len(rivals)] = [2, "gone", "openai"]  # an entry removed from params.yaml since
    pred = _predictions(models_to_score(params, rivals), selection)
    ev = aggregate(pred, 20, 0, dict(zip(selection["instance_uid"], selection["round"].astype(int))), "1.2.0")
    table = validate(rival_rounds(rivals, validate(ev, Evaluation), [0, 1, 2], params), RivalRounds)
    late = table[table["rival_model"] == "late"]
    assert set(late["status"]) == {"other_weights"} and late["mean_jaccard_percent"].notna().all()
    assert "round 2's rival had openai" in late["reason"].iloc[0]
    gone = table[table["rival_model"] == "gone"]
    assert set(gone["status"]) == {"no_entry"} and gone["mean_jaccard_percent"].isna().all()
    assert "no models: entry 'gone'" in gone["reason"].iloc[0]
    assert "(other weights)" in rival_rounds_markdown(table) and "n/a (no_entry)" in rival_rounds_markdown(table)


def test_no_round_names_a_rival_gives_an_empty_table_and_no_section(in_tmp):
    params = _params(in_tmp)
    instances, _ = _benchmark(in_tmp)
    rivals = round_rivals(instances.assign(rival_model=None))
    assert rivals.empty and models_to_score(params, rivals) == ["clip-rn50", "late"]
    table = validate(
        rival_rounds(rivals, pd.DataFrame(columns=list(Evaluation.to_schema().columns)), [0], params), RivalRounds
    )
    assert table.empty and rival_rounds_markdown(table) == ""


def test_each_round_has_its_model_error_rate_with_intervals_and_every_earlier_rival(in_tmp):
    """The per-round error table (stages/evaluate/errors.py): in the loop from the stored fool-the-AI
    scores (fooled: score > 0, i.e. the rival's Jaccard < 1), re-scored for every earlier rival on every
    later round, chance 1 - 1/C(5, 2) = 90 %, seeded bootstrap intervals: the same bytes twice."""
    params = _params(in_tmp)
    instances, selection = _benchmark(in_tmp)
    names = models_to_score(params, round_rivals(instances))
    pred = _predictions(names, selection)
    table = validate(round_errors(selection, pred, params, names, "1.2.0"), RoundErrors)
    got = {
        (r, q, m, src): (st, n, fooled, None if pd.isna(e) else round(e, 1))
        for r, q, m, src, st, n, fooled, e in table[
            ["round", "rival_round", "rival_model", "source", "status", "n_scored", "n_fooled", "error_rate_percent"]
        ].itertuples(index=False)
    }
    assert got == {
        (0, 0, "unknown", "in_the_loop"): ("scored", 2, 1, 50.0),  # a raw batch that names no rival
        (1, 1, "early", "in_the_loop"): ("scored", 1, 1, 100.0),
        (1, 1, "early", "rescored"): ("scored", 1, 1, 100.0),
        (2, 1, "early", "rescored"): ("scored", 2, 2, 100.0),  # round 1's rival on the later round 2
        (2, 2, "late", "in_the_loop"): ("scored", 2, 1, 50.0),
        (2, 2, "late", "rescored"): ("scored", 2, 2, 100.0),
    }
    assert set(table["chance_error_percent"]) == {90.0}
    late = table[(table["round"] == 2) & (table["source"] == "in_the_loop")].iloc[0]
    assert late["ci_low_percent"] == 0.0 and late["ci_high_percent"] == 100.0  # two instances, one fooled
    again = validate(round_errors(selection, pred, params, names, "1.2.0"), RoundErrors)
    a, b = in_tmp / "a.parquet", in_tmp / "b.parquet"
    table.to_parquet(a), again.to_parquet(b)
    assert a.read_bytes() == b.read_bytes()  # seeded: the same intervals on every run
    md = round_errors_markdown(table)
    assert "## Model error rate per round" in md
    assert "| late (untrained), round 2, in the loop | – | – | 50.0 [0.0, 100.0] (1/2) |" in md
    assert "| Random chance (same instances) | 90.0 | 90.0 | 90.0 |" in md
    ev = validate(
        aggregate(pred, 50, 0, dict(zip(selection["instance_uid"], selection["round"].astype(int)))), Evaluation
    )
    assert "| late (untrained) | – | 33.3 [33.3, 33.3] (1/1) | – |" in table4_by_round(ev)  # per round, with CIs


def _ocr(project: Path) -> pd.DataFrame:
    """An ``ocr`` table accepting every sample image (copied into the project's image store)."""
    rows = []
    for src in sorted(p for p in IMAGES.glob("*.*") if p.suffix != ".md"):
        sha = hashlib.sha256(src.read_bytes()).hexdigest()
        rel = f"data/images/{sha[:2]}/{sha}{src.suffix}"
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, project / rel)
        rows.append(
            {"concept": src.stem, "sha256": sha, "path": rel, "source_url": str(src), "rank": 1}
            | {"candidates_read": 1, "status": "accepted", "reason": None, "ocr_text": "", "ocr_confidence": None}
            | {"match_token": None, "match_score": None}
        )
    df = pd.DataFrame(rows)
    return df.astype({"rank": "Int64", "candidates_read": "Int64"})


@pytest.mark.slow
def test_the_release_and_each_game_round_name_their_rival_in_the_dataset_and_card(in_tmp, tmp_path_factory):
    """A two-round benchmark after the release, exported by the real stage: every row of the Parquet
    table and of the Hugging Face dataset (loaded offline, each round's config too) names its rival,
    the card lists each round's rival, and benchmark.csv keeps the release's columns and rows."""
    datasets = pytest.importorskip("datasets", reason="the `test` extra installs datasets")
    _params(in_tmp)
    _, selection = _benchmark(in_tmp, release=True)
    catalog.write_table(selection, "selection", in_tmp)
    catalog.write_table(_ocr(in_tmp), "ocr", in_tmp)
    metrics = run_stage("export", in_tmp / "params.yaml")
    assert metrics["version"] == "1.2.0"
    bench = pd.read_parquet(in_tmp / "data/export/benchmark.parquet")
    by_round = {
        r: set(map(tuple, g[["rival_model", "rival_weights"]].fillna("-").values.tolist()))
        for r, g in bench.groupby("round")
    }
    assert by_round == {0: {("RN50", "openai"), ("-", "-")}, 1: {("early", "untrained")}, 2: {("late", "untrained")}}
    folder = in_tmp / "data/export/dataset"
    cache = str(tmp_path_factory.mktemp("hf"))
    whole = datasets.load_dataset(str(folder), split="test", cache_dir=cache)
    rows = set(zip(whole["round"], whole["rival_model"], whole["rival_weights"]))
    assert {(0, "RN50", "openai"), (1, "early", "untrained"), (2, "late", "untrained")} <= rows
    for r, name in ((1, "early"), (2, "late")):
        part = datasets.load_dataset(str(folder), f"round_{r}", split="test", cache_dir=cache)
        assert set(part["rival_model"]) == {name} and set(part["rival_weights"]) == {"untrained"}
    card = (folder / "README.md").read_text()
    assert "| 0 (the release) | RN50 (CLIP RN50, OpenAI weights: the paper's rival) | openai |" in card
    assert "| 0 (the release) | not recorded | not recorded | 2 |" in card  # the batch's round-0 rows name none
    assert "| 1 | early | untrained | 1 |" in card and "| 2 | late | untrained | 2 |" in card
    csv_lines = (in_tmp / "data/export/benchmark.csv").read_text().splitlines()
    release = (RELEASE / "winogavil_dataset.csv").read_text().splitlines()
    assert csv_lines[0] == release[0]  # the release's columns, no round or rival
    released = bench.index[bench["rival_model"] == "RN50"]
    assert set(csv_lines[1 + i] for i in released) <= set(release[1:])  # the release's rows, byte for byte
