"""Paper Table 6: model success by association type.

The release's ``model_analysis_on_different_association_types.csv`` (425 game instances with 10-12
candidates; columns of ``game_10_12.csv`` plus ``clip_vit32_predictions`` and ``annotations_label``,
a JSON map associated image -> type) labels every associated image with one type. Per type:
``items`` = labelled associated images, ``hits`` = those inside the model's top-K prediction for
the instance, ``percent = round(100 * hits / items)``. For the stored CLIP ViT-B/32 predictions this
is the paper's "% Model" column: 75 / 36 / 65 / 42 / 36 / 79 (items 67 / 379 / 424 / 24 / 25 / 14;
the paper prints 426 concept-related items). "OCR" (20 items) is labelled in the file but not in the
paper's table; it is reported too.

Other models: an instance of the file is matched to a benchmark instance by (split ``game_10_12``,
``split_id`` = the file's ``ID``) and the same cue and candidates; a model's predictions on that
instance are scored the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from gavil.errors import MissingInput

#: File label -> paper Table 6 row, with the paper's items and "% Model" (CLIP ViT-B/32).
PAPER_TABLE6: dict[str, tuple[str, int, int]] = {
    "Visually Salient Object": ("Visually salient", 67, 75),
    "Visually Non-Salient": ("Visually non-salient", 379, 36),
    "Non Visual, Concept Related": ("Concept related", 426, 65),
    "Visually Salient Activity": ("Activity", 24, 42),
    "Counting": ("Counting", 25, 36),
    "Colors": ("Colors", 14, 79),
}
STORED_MODEL = "clip-vit-b-32 (release predictions)"


def no_types() -> pd.DataFrame:
    """What :func:`load_types` returns for a project without the release file: no rows."""
    return pd.DataFrame(columns=["ID", "cue", "candidates", "associations", "predictions", "labels"])


def load_types(path: str | Path) -> pd.DataFrame:
    """The file as a frame with parsed lists/maps: ID, cue, candidates, associations, predictions, labels.

    Raises:
        MissingInput: file missing or a column absent.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingInput(f"{p} missing: paper.association_types_file must name the release's file")
    df = pd.read_csv(p)
    need = {"ID", "cue", "candidates", "associations", "clip_vit32_predictions", "annotations_label"}
    if not need <= set(df.columns):
        raise MissingInput(f"{p}: columns {sorted(need - set(df.columns))} missing")
    df = df.sort_values("ID", kind="stable").reset_index(drop=True)  # the file's row order never matters
    return pd.DataFrame(
        {
            "ID": df["ID"].astype(int),
            "cue": df["cue"].astype(str),
            "candidates": df["candidates"].map(json.loads),
            "associations": df["associations"].map(json.loads),
            "predictions": df["clip_vit32_predictions"].map(json.loads),
            "labels": df["annotations_label"].map(json.loads),
        }
    )


def by_type(types: pd.DataFrame, predictions: dict[int, list[str]]) -> dict[str, dict[str, Any]]:
    """Per type: items, hits, percent (rounded) over the file's instances that have a prediction
    (``predictions``: file ID -> top-K); ``instances`` counts those."""
    items: dict[str, int] = {}
    hits: dict[str, int] = {}
    for rid, labels in zip(types["ID"], types["labels"]):
        if rid not in predictions:
            continue
        pred = set(predictions[rid])
        for image, t in labels.items():
            items[t] = items.get(t, 0) + 1
            hits[t] = hits.get(t, 0) + int(image in pred)
    order = [*PAPER_TABLE6, *sorted(set(items) - set(PAPER_TABLE6))]
    return {
        t: {"items": items[t], "hits": hits[t], "percent": round(100 * hits[t] / items[t])} for t in order if t in items
    }


def match_ids(types: pd.DataFrame, selection: pd.DataFrame) -> dict[str, int]:
    """Benchmark ``instance_uid`` -> file ID, for file instances found in the selection (same
    split ``game_10_12``, split_id, cue and candidates)."""
    sel = selection[(selection["split"] == "game_10_12") & (selection["status"] == "selected")]
    key = {
        (int(s), c, tuple(cs)): uid
        for s, c, cs, uid in zip(sel["split_id"], sel["cue"], sel["candidates"], sel["instance_uid"])
    }
    out = {}
    for rid, cue, cands in zip(types["ID"], types["cue"], types["candidates"]):
        uid = key.get((int(rid), cue, tuple(cands)))
        if uid is not None:
            out[uid] = int(rid)
    return out


def analyse(types: pd.DataFrame, selection: pd.DataFrame, pred: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Table 6 for the stored predictions and for every model in ``pred`` (EvalPredictions) that
    scored the matched instances; models with no scored matched instance are left out."""
    out: dict[str, dict[str, Any]] = {STORED_MODEL: by_type(types, dict(zip(types["ID"], types["predictions"])))}
    uid_to_id = match_ids(types, selection)
    scored = pred[pred["status"].isin(["ok", "untrained"]) & pred["instance_id"].isin(list(uid_to_id))]
    for model, g in scored.groupby("model_name", sort=False):
        p = {uid_to_id[u]: list(x) for u, x in zip(g["instance_id"], g["predictions"])}
        out[str(model)] = {"matched_instances": len(p), **by_type(types, p)}
    return out


def table6_markdown(result: dict[str, dict[str, Any]]) -> str:
    """Rows = types (paper's name, paper items and % Model), columns = models' percent (items)."""
    models = list(result)
    head = "| Type | paper items | paper % model | " + " | ".join(models) + " |\n"
    head += "|---|---|---|" + "---|" * len(models) + "\n"
    types = list(dict.fromkeys(t for r in result.values() for t in r if isinstance(r[t], dict)))
    lines = []
    for t in types:
        name, items, pct = PAPER_TABLE6.get(t, (t, None, None))
        cells = []
        for m in models:
            c = result[m].get(t)
            cells.append(f"{c['percent']} ({c['hits']}/{c['items']})" if isinstance(c, dict) else "–")
        lines.append(
            f"| {name} | {items if items is not None else '–'} | {pct if pct is not None else '–'} | "
            + " | ".join(cells)
            + " |"
        )
    return (
        head + "\n".join(lines) + "\n\nPercent of labelled associated images inside the model's top K (hits/items).\n"
    )
