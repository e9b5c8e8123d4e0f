"""Each collection round's rival on the later rounds (the dynamic benchmark's claim: a later round
is harder for an earlier round's rival; docs/dynamic.md).

A game round r >= 1 is collected against one rival, a ``models:`` entry; every creation stores its
identity and ``import_annotations`` carries the entry (``rival_model``) and the weights the game
loaded (``rival_weights``) onto the ``instances`` table. :func:`round_rivals` reads them back,
:func:`models_to_score` adds each rival's entry to the models ``evaluate`` scores (a rival need not
be in ``evaluate.models``), and :func:`rival_rounds` takes, from the ``evaluation`` table, each
rival's mean Jaccard on the game benchmark's round 0, its own round and every later round.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from schemas.evaluate import RivalRounds

if TYPE_CHECKING:
    from gavil.params import Params


def round_rivals(instances: pd.DataFrame) -> pd.DataFrame:
    """The rivals of the game's rounds: one row per (``rival_round``, ``rival_model``,
    ``rival_weights``) among the imported game instances of round >= 1 that name their rival,
    sorted. A round has one rival; a store that changed the entry's weights mid-round gives two rows.

    Args:
        instances: the ``instances`` table (:class:`schemas.annotations.Instances`).
    """
    cols = ["rival_round", "rival_model", "rival_weights"]
    if "rival_model" not in instances:
        return pd.DataFrame(columns=cols)
    game = instances[(instances["dataset"] == "game") & (instances["round"] >= 1) & instances["rival_model"].notna()]
    out = game.rename(columns={"round": "rival_round"})[cols].drop_duplicates()
    out = out.assign(rival_round=out["rival_round"].astype(int))
    return out.sort_values(cols, na_position="last").reset_index(drop=True)


def models_to_score(params: Params, rivals: pd.DataFrame) -> list[str]:
    """``evaluate.models``, then each round's rival entry that is a ``models:`` entry and not among
    them (in round order): ``evaluate`` scores a round's rival whether or not it is listed."""
    names = list(params.evaluate.models)
    for name in rivals["rival_model"]:
        if name in params.models.root and name not in names:
            names.append(name)
    return names


def rival_rounds(rivals: pd.DataFrame, ev: pd.DataFrame, game_rounds: list[int], params: Params) -> pd.DataFrame:
    """Each round's rival on round 0, its own round and every later round of the game benchmark:
    :class:`schemas.evaluate.RivalRounds` rows, by rival round, then scored round.

    Args:
        rivals: :func:`round_rivals`.
        ev: the ``evaluation`` table (:class:`schemas.evaluate.Evaluation`); read: its game rows,
            breakdown ``all``, per round.
        game_rounds: the collection rounds of the game benchmark's selected instances.

    ``status``: ``scored`` (the entry loaded the weights the round's rival had), ``other_weights``
    (scored, but the entry now loads other weights than the round's game did: not the round's
    rival), ``no_weights`` (the entry's weights are not on this machine) or ``no_entry`` (the rival
    is no ``models:`` entry now: nothing scored).
    """
    rows = []
    version = str(ev["dataset_version"].iloc[0]) if len(ev) else "1.0.0"
    game = ev[(ev["dataset"] == "game") & (ev["breakdown"] == "all")]
    for r, name, weights in zip(
        rivals["rival_round"].astype(int), rivals["rival_model"].astype(str), rivals["rival_weights"]
    ):
        recorded = weights if isinstance(weights, str) else None
        mine = game[game["model_name"] == name]
        for s in [x for x in game_rounds if x == 0 or x >= r]:
            cell = mine[mine["round"] == s]
            row = {
                "rival_round": r,
                "rival_model": name,
                "rival_weights": recorded,
                "round": s,
                "weights_id": None,
                "status": "no_entry",
                "reason": f"no models: entry {name!r} in params.yaml (restore it to score this rival)",
                "n_instances": 0,
                "n_scored": 0,
                "mean_jaccard_percent": None,
                "random_percent": None,
                "dataset_version": version,
            }
            if name in params.models.root and len(cell):
                c = cell.iloc[0]
                scored = not pd.isna(c["mean_jaccard_percent"])
                same = recorded is None or recorded == c["weights_id"]
                status = ("scored" if same else "other_weights") if scored else "no_weights"
                reason = {
                    "scored": None,
                    "other_weights": f"the entry now loads {c['weights_id']}; round {r}'s rival had {recorded}",
                    "no_weights": "the entry's weights are not on this machine (see the evaluation rows)",
                }[status]
                row |= {
                    "weights_id": str(c["weights_id"]),
                    "status": status,
                    "reason": reason,
                    "n_instances": int(c["n_instances"]),
                    "n_scored": int(c["n_scored"]),
                    "mean_jaccard_percent": c["mean_jaccard_percent"] if scored else None,
                    "random_percent": float(c["random_percent"]),
                }
            elif name in params.models.root:
                row |= {"status": "no_weights", "reason": "not scored on this round (no instance to score)"}
            rows.append(row)
    return pd.DataFrame(rows, columns=list(RivalRounds.to_schema().columns))


def rival_rounds_markdown(table: pd.DataFrame) -> str:
    """The table4.md section "Each round's rival on later rounds": one row per rival, one column per
    scored round, mean Jaccard x100 (scored/total); "" when no round names its rival."""
    if table.empty:
        return ""
    rounds = sorted(table["round"].unique())
    head = "| Rival (round) | " + " | ".join(f"Round {s}" for s in rounds) + " |\n|---|" + "---|" * len(rounds)
    lines = []
    for (r, name, weights), g in table.groupby(
        ["rival_round", "rival_model", "rival_weights"], sort=True, dropna=False
    ):
        cells = []
        for s in rounds:
            x = g[g["round"] == s]
            if x.empty:
                cells.append("–")
            elif pd.isna(x["mean_jaccard_percent"].iloc[0]):
                cells.append(f"n/a ({x['status'].iloc[0]})")
            else:
                flag = " (other weights)" if x["status"].iloc[0] == "other_weights" else ""
                cells.append(
                    f"{x['mean_jaccard_percent'].iloc[0]:.1f} ({x['n_scored'].iloc[0]}/{x['n_instances'].iloc[0]}){flag}"
                )
        label = f"{name} ({weights if isinstance(weights, str) else 'weights not recorded'}), round {r}"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    note = (
        "\nGame instances only; mean Jaccard x100 (scored/total) of each round's rival on round 0 (the "
        "release), its own round and every later round. A later round should be harder for an earlier "
        "round's rival. –: an earlier round than the rival's.\n"
    )
    return "\n## Each round's rival on later rounds\n\n" + head + "\n" + "\n".join(lines) + "\n" + note
