"""Each game round's rival scored on round 0, its own round and every later round (docs/dynamic.md,
stages/evaluate/rivals.py): a two-round benchmark imported the way the game's rows arrive (a batch
whose creations name their round and rival), selected, then scored with fake predictions."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from gavil.io import validate
from gavil.params import Params, load_params
from schemas.evaluate import EvalPredictions, Evaluation, RivalRounds
from stages.evaluate import aggregate
from stages.evaluate.rivals import models_to_score, rival_rounds, rival_rounds_markdown, round_rivals
from stages.import_annotations import import_all
from stages.select_instances import select
from tests.helpers import ROOT

CANDS = ["rocket", "moon", "astronaut", "cat", "coffee"]
# (instance_id, round, rival entry, rival weights): round 0 names no rival; round 1 played against
# `early` (random weights), round 2 against `late`
ROWS = [("a", 0, None, None), ("b", 0, None, None), ("c", 1, "early", "untrained"), ("d", 2, "late", "untrained")]
ROWS += [("e", 2, "late", "untrained")]


def _params(tmp: Path) -> Params:
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["models"]["early"] = {"kind": "open_clip", "model": "RN50", "pretrained": None}
    raw["models"]["late"] = {"kind": "open_clip", "model": "ViT-B-32", "pretrained": None}
    raw["evaluate"]["models"] = ["clip-rn50", "late"]  # `early` is not listed: it is scored anyway
    (tmp / "params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    return load_params(tmp / "params.yaml")


def _benchmark(tmp: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    batch = tmp / "raw/b1"
    batch.mkdir(parents=True)
    creations = [
        {"instance_id": i, "spymaster_id": "s", "cue": f"cue{i}", "candidates": CANDS, "associations": CANDS[:2]}
        | {"round": r}
        | ({"rival_model": m, "rival_weights": w} if m else {})
        for i, r, m, w in ROWS
    ]
    (batch / "creations.jsonl").write_text("".join(json.dumps(c) + "\n" for c in creations))
    solves = [{"instance_id": i, "solver_id": f"w{k}", "selection": CANDS[:2]} for i, *_ in ROWS for k in range(3)]
    (batch / "solves.jsonl").write_text("".join(json.dumps(s) + "\n" for s in solves))
    res = import_all(None, [], tmp / "raw", b"k")
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
