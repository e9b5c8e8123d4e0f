"""Paper Table 7: text-only baselines, cue vs candidate *names* and cue vs candidate *OFA captions*.

Reproduces WinoGAViL-experiments ``run_zero_shot.py --image2text``: a sentence-transformers model
embeds the cue (as written, not lower-cased) and, per candidate, either its name or the OFA caption
of its image (the release's ``ofa_image_caption_predictions.csv``: ``img_name,caption``, one row per
image); candidates are ranked by cosine similarity, the top K are the prediction (ties: see
``paper.tie_break``), and the paper reports the mean Jaccard **truncated** to an integer percent
(``int(mean * 100)``). With ``all-mpnet-base-v2`` on the release's instances this gives the paper's
MPNet row 39 / 52 / 72 (game 10&12, game 5&6, SWOW 5&6).

Rows are :class:`schemas.evaluate.EvalPredictions` rows named ``<model> (cue vs names)`` and
``<model> (cue vs OFA captions)``, so they join Table 4 and ``evaluation.parquet``. An instance
with a candidate that has no caption is ``missing_image`` (reason names the candidates).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd

from gavil.domain.winogavil import candidate_group, fool_the_ai_score, jaccard
from gavil.errors import MissingInput
from gavil.models.embeddings import Cache, predict
from gavil.models.loading import LoadedModel
from schemas.evaluate import EvalPredictions
from stages.evaluate.published import TieBreak, datacomp_jaccard, top_k_positions

MODES = {"names": "cue vs names", "captions": "cue vs OFA captions"}
#: Paper Table 7 (x100, truncated): model id -> game 10&12, game 5&6, SWOW 5&6 with OFA captions.
PAPER_TABLE7 = {"all-mpnet-base-v2": {"game 10&12": 39, "game 5&6": 52, "swow_baseline 5&6": 72}}


class _InstanceRow(Protocol):
    """A benchmark instance row as ``itertuples`` yields it (the fields read here)."""

    dataset: str
    instance_id: str
    num_candidates: int
    candidates: list[str]


def load_captions(path: str | Path) -> dict[str, str]:
    """``img_name -> caption`` from the release's caption CSV.

    Raises:
        MissingInput: the file is missing or lacks the ``img_name``/``caption`` columns.
    """
    p = Path(path)
    if not p.is_file():
        raise MissingInput(
            f"{p} missing: paper.captions_file must name the release's ofa_image_caption_predictions.csv"
        )
    with open(p, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if not {"img_name", "caption"} <= set(reader.fieldnames or []):
            raise MissingInput(f"{p}: expected columns img_name,caption; got {reader.fieldnames}")
        return {r["img_name"]: r["caption"] for r in reader}


def model_label(name: str, mode: str) -> str:
    return f"{name} ({MODES[mode]})"


def text_predictions(
    inst: pd.DataFrame,
    name: str,
    model: LoadedModel | None,
    captions: dict[str, str],
    cache: Cache,
    mode: str,
    rand: np.ndarray,
    tie_break: TieBreak = "stable",
    no_weights: str = "",
) -> pd.DataFrame:
    """One model, one mode (``names``/``captions``) over benchmark instances -> EvalPredictions rows."""
    label = model_label(name, mode)
    rows: list[dict[str, Any]] = []
    cand_texts: list[list[str]] = []
    todo: list[int] = []
    # cast: pandas-stubs types every itertuples field as a scalar; list columns hold lists
    for i, r in enumerate(cast("Iterator[_InstanceRow]", inst.itertuples(index=False))):
        row = {
            "model_name": label,
            "weights_id": model.weights_id if model else "no_weights",
            "dataset": r.dataset,
            "instance_id": r.instance_id,
            "num_candidates": int(r.num_candidates),
            "status": "no_weights",
            "reason": no_weights or None,
            "predictions": None,
            "jaccard": None,
            "score_fool_the_ai": None,
            "random_jaccard": float(rand[i]),
        }
        rows.append(row)
        if model is None:
            continue
        missing = [c for c in r.candidates if c not in captions] if mode == "captions" else []
        if missing:
            row.update(status="missing_image", reason=f"no caption for {missing}")
            continue
        cand_texts.append([captions[c] if mode == "captions" else c for c in r.candidates])
        todo.append(i)
    if model is not None and todo:
        # columns as lists once: a pandas cell lookup per row cost more than the rest of this loop
        cue_col, cand_col, assoc_col = (inst[c].tolist() for c in ("cue", "candidates", "associations"))
        queries = [str(cue_col[i]) for i in todo]
        texts = {t: t for ts in cand_texts for t in ts} | {q: q for q in queries}
        vecs = cache.ensure(model.cache_key("text"), texts, model.embed_texts)
        ks = [len(assoc_col[i]) for i in todo]
        picks, sims = predict(cand_texts, queries, ks, vecs, vecs)
        for i, pick, s in zip(todo, picks, sims):
            cands, assoc = list(cand_col[i]), list(assoc_col[i])
            if tie_break == "datacomp":
                pick = top_k_positions(s, len(assoc), "datacomp")
            pred = [cands[j] for j in pick]
            jac = datacomp_jaccard(cands, assoc, pick) if tie_break == "datacomp" else jaccard(pred, assoc)
            rows[i].update(
                status="ok",
                reason=None,
                predictions=pred,
                jaccard=jac,
                score_fool_the_ai=fool_the_ai_score(pred, assoc),
            )
    df = pd.DataFrame(rows, columns=list(EvalPredictions.to_schema().columns))
    df["score_fool_the_ai"] = df["score_fool_the_ai"].astype("Int64")
    df["jaccard"] = df["jaccard"].astype(float)
    return df


def truncated_cells(pred: pd.DataFrame) -> dict[str, dict[str, int | None]]:
    """Per model: Table 4 cells as the paper prints Table 7, ``int(100 * mean Jaccard)`` (truncation)."""
    out: dict[str, dict[str, int | None]] = {}
    ok = pred[pred["status"] == "ok"].assign(group=lambda d: d["num_candidates"].map(candidate_group))
    for model in dict.fromkeys(pred["model_name"]):
        cells: dict[str, int | None] = {}
        for dataset, grp in (("game", "10&12"), ("game", "5&6"), ("swow_baseline", "5&6")):
            x = ok[(ok["model_name"] == model) & (ok["dataset"] == dataset) & (ok["group"] == grp)]["jaccard"]
            cells[f"{dataset} {grp}"] = int(x.mean() * 100) if len(x) else None
        out[model] = cells
    return out


def table7_markdown(cells: dict[str, dict[str, int | None]], model_ids: dict[str, str]) -> str:
    """Table 7 layout: ours (truncated ints) with the paper's figure where it published one."""
    lines = ["| Model | Game 10 & 12 | Game 5 & 6 | SWOW 5 & 6 | paper |", "|---|---|---|---|---|"]
    for label, c in cells.items():
        paper = PAPER_TABLE7.get(model_ids.get(label, ""), None) if "captions" in label else None
        vals = " | ".join("–" if v is None else str(v) for v in c.values())
        ref = " / ".join(str(v) for v in paper.values()) if paper else "–"
        lines.append(f"| {label} | {vals} | {ref} |")
    return "\n".join(lines) + "\n\nMean Jaccard x100 truncated to an integer, as the paper prints Table 7.\n"
