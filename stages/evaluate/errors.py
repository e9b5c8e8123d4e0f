"""Rounds compared: each round's **model error rate** (docs/evaluation.md "Model error rate per round").

Dynabench (Kiela et al., "Dynabench: Rethinking Benchmarking in NLP", NAACL 2021, §4) measures a
collection round by its validated model error rate: the share of the round's human-validated
examples that fooled the model in the loop. Adapted to WinoGAViL's set answers:

- **validated**: a selected game instance of the round (its solvers' mean Jaccard reached
  ``select.min_solver_jaccard``, and every other selection rule held: ``selection.status`` selected);
- **fooled**: the rival's top-K is not exactly the K associations, i.e. its Jaccard is below 1, i.e.
  the stored fool-the-AI score ``100 - int(100 x Jaccard)`` is above 0 (the spymaster earned
  fool-the-AI points, paper §2.2). With K <= 6 (:data:`gavil.domain.vocabulary.K_LIMITS`) the highest
  Jaccard below 1 is 5/7, so at the default threshold 0.8 this is also "the rival scored below the
  bar the humans had to pass".

Rows of :func:`round_errors` (:class:`schemas.evaluate.RoundErrors`), per game round r of the
benchmark (round 0: the release, collected against the paper's CLIP RN50/openai):

- ``in_the_loop``: the round's own rival, from the fool-the-AI scores stored when each instance was
  made (the release's as released, the game's as the rival scored them); exactly Dynabench's measure;
- ``rescored``: the rival of every round q <= r (round 0's: the first ``models:`` entry scored that
  runs open_clip RN50 with the ``openai`` tag) on round r, from ``evaluate``'s own predictions, so an
  earlier rival is measured on every later round.

Each rate has a 95 % percentile bootstrap interval over the instances
(:func:`stages.evaluate.bootstrap.bootstrap_ci`, ``evaluate.bootstrap`` resamples, ``evaluate.seed``:
the same bytes on every run) and the chance error rate of the same instances: a uniformly random
K-subset of N is exactly right with probability 1 / C(N, K), so it fools with 1 - 1 / C(N, K).
"""

from __future__ import annotations

from math import comb
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from schemas.evaluate import RoundErrors
from schemas.export import RELEASE_RIVAL, instance_rivals
from stages.evaluate.bootstrap import bootstrap_ci

if TYPE_CHECKING:
    from gavil.params import Params

COLUMNS = list(RoundErrors.to_schema().columns)


def chance_error(num_candidates: int, num_associations: int) -> float:
    """The probability (fraction) that a uniformly random K-subset of N candidates is not exactly the
    K associations: 1 - 1 / C(N, K) (one of the C(N, K) subsets is right)."""
    return 1.0 - 1.0 / comb(num_candidates, num_associations)


def validated(selection: pd.DataFrame) -> pd.DataFrame:
    """The validated game instances: selected game rows of ``selection`` with their ``round`` (null:
    0), fool-the-AI score and rival (:func:`schemas.export.instance_rivals`), in ID order."""
    sel = selection[(selection["status"] == "selected") & (selection["dataset"] == "game")].sort_values("ID")
    rivals = instance_rivals(sel)
    return pd.DataFrame(
        {
            "instance_id": sel["instance_uid"].to_numpy(),
            "round": sel["round"].fillna(0).astype(int).to_numpy(),
            "score_fool_the_ai": sel["score_fool_the_ai"].to_numpy(),
            "num_candidates": sel["num_candidates"].astype(int).to_numpy(),
            "num_associations": sel["num_associations"].astype(int).to_numpy(),
            "rival_model": rivals["rival_model"].to_numpy(),
            "rival_weights": rivals["rival_weights"].to_numpy(),
        }
    )


def release_rival_entry(params: Params, scored: list[str]) -> str | None:
    """The entry of ``scored`` (the models ``evaluate`` scored, in order) that runs round 0's rival,
    open_clip RN50 with the ``openai`` tag (:data:`schemas.export.RELEASE_RIVAL`); None when none does."""
    for name in scored:
        e = params.models[name]
        if e.kind == "open_clip" and (e.model, e.pretrained) == RELEASE_RIVAL and e.weights_path is None:
            return name
    return None


def _rate(fooled: np.ndarray, inst: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    """The error-rate cells of one row: ``fooled`` (bool per scored instance), ``inst`` the
    instances the chance rate is taken over; percent."""
    vals = 100.0 * fooled.astype(float)
    lo, hi = bootstrap_ci(vals, n_boot, seed)
    chance = [chance_error(n, k) for n, k in zip(inst["num_candidates"], inst["num_associations"])]
    return {
        "n_scored": len(vals),
        "n_fooled": int(fooled.sum()),
        "error_rate_percent": float(vals.mean()) if len(vals) else None,
        "ci_low_percent": lo if len(vals) else None,
        "ci_high_percent": hi if len(vals) else None,
        "chance_error_percent": 100.0 * float(np.mean(chance)) if chance else None,
    }


def in_the_loop(inst: pd.DataFrame, n_boot: int, seed: int, version: str) -> list[dict[str, object]]:
    """One ``in_the_loop`` row per (round, rival) of ``inst`` (:func:`validated`): the rival's stored
    fool-the-AI scores on its round's validated instances (fooled: score > 0; a null score is not
    scored). Rounds ascending; a rival not known is ``rival_model`` "unknown"."""
    rows = []
    keys = (
        inst[["round", "rival_model", "rival_weights"]]
        .fillna("")
        .drop_duplicates()
        .sort_values(["round", "rival_model", "rival_weights"])
    )
    for r, model, weights in keys.itertuples(index=False, name=None):
        mine = inst[
            (inst["round"] == r)
            & (inst["rival_model"].fillna("") == model)
            & (inst["rival_weights"].fillna("") == weights)
        ]
        fool = mine["score_fool_the_ai"].dropna().astype(int).to_numpy()
        row = {"round": int(r), "rival_round": int(r), "rival_model": model or "unknown"}
        row |= {"rival_weights": weights or None, "source": "in_the_loop", "weights_id": weights or None}
        row |= {"status": "scored" if len(fool) else "not_recorded", "n_validated": len(mine)}
        row |= {"reason": None if len(fool) else "no fool-the-AI score was stored with these instances"}
        rows.append(row | _rate(fool > 0, mine, n_boot, seed) | {"dataset_version": version})
    return rows


def rescored(
    inst: pd.DataFrame, pred: pd.DataFrame, params: Params, scored: list[str], n_boot: int, seed: int, version: str
) -> list[dict[str, object]]:
    """``rescored`` rows: the rival of each round q (one per known (round, rival) of ``inst``) on every
    round r >= q of ``inst``, from ``pred`` (the ``predictions`` table: its ``ok`` / ``untrained`` rows
    of the rival's entry; fooled: Jaccard < 1). ``scored``: the entries ``evaluate`` scored.

    ``status``: ``scored``; ``other_weights`` (the entry now loads other weights than the round's
    rival had: scored, but not that rival); ``no_weights`` (nothing scored); ``no_entry`` (no
    ``models:`` entry runs the rival)."""
    rows = []
    rounds = sorted(set(inst["round"]))
    rivals = inst.dropna(subset=["rival_model"])[["round", "rival_model", "rival_weights"]].drop_duplicates()
    for q, model, weights in rivals.sort_values(["round", "rival_model"]).itertuples(index=False, name=None):
        entry = release_rival_entry(params, scored) if q == 0 and (model, weights) == RELEASE_RIVAL else model
        known = entry is not None and entry in scored
        mine = pred[pred["model_name"] == entry] if known else pred.iloc[0:0]
        for r in [x for x in rounds if x >= q]:
            these = inst[inst["round"] == r]
            got = mine[mine["instance_id"].isin(set(these["instance_id"])) & mine["status"].isin(["ok", "untrained"])]
            wid = str(mine["weights_id"].iloc[0]) if len(mine) else None
            status = "no_entry" if not known else ("no_weights" if got.empty else "scored")
            if status == "scored" and weights is not None and wid != weights:
                status = "other_weights"
            reason = {
                "scored": None,
                "other_weights": f"the entry {entry} now loads {wid}; round {q}'s rival had {weights}",
                "no_weights": f"the entry {entry} scored none of these instances (no weights on this machine)",
                "no_entry": f"no models: entry scored by evaluate runs {model}/{weights} (add one to score it)",
            }[status]
            row = {"round": int(r), "rival_round": int(q), "rival_model": model, "rival_weights": weights}
            row |= {"source": "rescored", "weights_id": wid, "status": status, "reason": reason}
            base = these[these["instance_id"].isin(set(got["instance_id"]))] if len(got) else these
            cells = _rate(got["jaccard"].to_numpy(dtype=float) < 1.0, base, n_boot, seed)
            rows.append(row | {"n_validated": len(these)} | cells | {"dataset_version": version})
    return rows


def round_errors(
    selection: pd.DataFrame, pred: pd.DataFrame, params: Params, scored: list[str], version: str
) -> pd.DataFrame:
    """The per-round model error table (:class:`schemas.evaluate.RoundErrors`): :func:`in_the_loop`
    rows, then :func:`rescored` rows, each by round, then rival round (see the module docstring for
    the definitions and their sources). ``evaluate.bootstrap`` and ``evaluate.seed`` set the intervals."""
    inst = validated(selection)
    n_boot, seed = params.evaluate.bootstrap, params.evaluate.seed
    rows = in_the_loop(inst, n_boot, seed, version) + rescored(inst, pred, params, scored, n_boot, seed, version)
    out = pd.DataFrame(rows, columns=COLUMNS)
    order = out.assign(_src=out["source"].map({"in_the_loop": 0, "rescored": 1}))
    return out.loc[order.sort_values(["round", "_src", "rival_round", "rival_model"], kind="stable").index].reset_index(
        drop=True
    )


def round_errors_markdown(table: pd.DataFrame) -> str:
    """The table4.md section "Model error rate per round": one row per (rival, source), one column
    per round, error rate x100 [95 % CI] (fooled/scored), and the chance row; "" for an empty table."""
    if table.empty:
        return ""
    rounds = sorted(table["round"].unique())
    head = (
        "| Rival (round), measured | " + " | ".join(f"Round {r}" for r in rounds) + " |\n|---|" + "---|" * len(rounds)
    )
    lines = []
    keys = table[["source", "rival_round", "rival_model", "rival_weights"]].drop_duplicates()
    for src, q, model, weights in keys.itertuples(index=False, name=None):
        g = table[(table["source"] == src) & (table["rival_round"] == q) & (table["rival_model"] == model)]
        cells = []
        for r in rounds:
            x = g[g["round"] == r]
            if x.empty:
                cells.append("–")
            elif pd.isna(x["error_rate_percent"].iloc[0]):
                cells.append(f"n/a ({x['status'].iloc[0]})")
            else:
                c = x.iloc[0]
                flag = " (other weights)" if c["status"] == "other_weights" else ""
                cells.append(
                    f"{c.error_rate_percent:.1f} [{c.ci_low_percent:.1f}, {c.ci_high_percent:.1f}] "
                    f"({c.n_fooled}/{c.n_scored}){flag}"
                )
        how = "in the loop" if src == "in_the_loop" else "re-scored"
        w = weights if isinstance(weights, str) else "weights not recorded"
        lines.append(f"| {model} ({w}), round {q}, {how} | " + " | ".join(cells) + " |")
    chance = []
    for r in rounds:
        x = table[table["round"] == r].sort_values("n_validated", ascending=False)
        v = x["chance_error_percent"].iloc[0]
        chance.append("–" if pd.isna(v) else f"{v:.1f}")
    lines.append("| Random chance (same instances) | " + " | ".join(chance) + " |")
    note = (
        "\nModel error rate x100 (after Dynabench's validated model error rate): the share of a round's "
        "validated game instances (selected) on which the rival's top-K is not exactly the associations "
        "(Jaccard < 1); in the loop: from the fool-the-AI scores stored when the instances were made; "
        "re-scored: from this stage's predictions. 95 % percentile bootstrap CI over instances; "
        "(fooled/scored). Random chance: 1 - 1/C(N, K). –: a round earlier than the rival's.\n"
    )
    return "\n## Model error rate per round\n\n" + head + "\n" + "\n".join(lines) + "\n" + note
