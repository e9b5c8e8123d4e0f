"""The paper's analyses beyond Table 4, called from :func:`stages.evaluate.run` in two steps.

1. :func:`text_rows` (before the predictions table is written): Table 7 text baselines,
   ``paper.text_models`` x {cue vs names, cue vs OFA captions} over the benchmark instances
   (:mod:`stages.evaluate.captions`); their rows join ``predictions`` / ``evaluation`` / Table 4.
2. :func:`analyses` (after): Table 7 truncated cells, Table 6 (:mod:`~stages.evaluate.association_types`),
   the published numbers beside ours and the random-chance figures (:mod:`~stages.evaluate.published`),
   Table 5 (:mod:`~stages.evaluate.supervised`, if ``paper.supervised.enabled``) and the
   ``cue_image_pairs`` export; writes ``data/evaluate/paper_tables.md`` and returns the metrics.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gavil.io import atomic_path
from gavil.models.embeddings import Cache
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline import catalog
from gavil.progress import step
from stages.evaluate import association_types, captions, published, supervised

if TYPE_CHECKING:
    from gavil.params import Params

SPLIT_FILES = {
    "game_5_6": "cue_image_pairs_game_5_6.json",
    "game_10_12": "cue_image_pairs_game_10_12.json",
    "swow": "cue_image_pairs_swow.json",
}


def text_rows(
    params: Params, inst: pd.DataFrame, cache: Cache, rand: np.ndarray
) -> tuple[list[pd.DataFrame], dict[str, Any]]:
    """Prediction frames of the Table 7 text baselines and what :func:`analyses` needs about them."""
    p = params.paper
    # paper.release_dir "": a project without the release (no captions: caption rows say so)
    caps = captions.load_captions(Path(p.release_dir) / p.captions_file) if p.release_dir else {}
    frames, model_ids, status, text_keys, shas = [], {}, {}, {}, {}
    for name in p.text_models:
        spec, opt = ModelSpec.of(name, params.models[name]), RuntimeOptions.of(params.models[name])
        model: LoadedModel | None
        step(f"Table 7: loading {name}")
        try:
            model, reason = load_model(spec, opt), ""
        except WeightsUnavailable as e:
            model, reason = None, e.reason  # a fixed sentence; the machine's cause goes to the log only
            print(
                f"evaluate: {spec.name}: NO WEIGHTS - its Table 7 rows are no_weights. {e.log_text()}", file=sys.stderr
            )
        for mode in captions.MODES:
            step(f"Table 7: {name}, {captions.MODES[mode]}")
            frames.append(
                captions.text_predictions(inst, spec.name, model, caps, cache, mode, rand, p.tie_break, reason)
            )
            label = captions.model_label(spec.name, mode)
            model_ids[label] = spec.model
            status[label] = "ok" if model is not None else "no_weights"
            shas[label] = model.weights_sha256 if model is not None else None
        text_keys[spec.name] = model.cache_key("text") if model is not None else None
    meta = {"model_ids": model_ids, "status": status, "captions": caps, "text_keys": text_keys, "sha256": shas}
    return frames, meta


class _Lookup:
    """Embeddings by candidate (its name, or its caption) and by cue text."""

    def __init__(self, vecs: dict[str, np.ndarray], caps: dict[str, str] | None):
        self.vecs, self.caps = vecs, caps

    def candidate(self, name: str) -> np.ndarray:
        return self.vecs[self.caps[name] if self.caps is not None else name]

    def text(self, t: str) -> np.ndarray:
        return self.vecs[t]


def _embedder(spec: ModelSpec, opt: RuntimeOptions) -> Callable[[list[Any]], np.ndarray]:
    """Embeds texts the cache lacks (loads the model only then)."""

    def embed(texts: list[Any]) -> np.ndarray:
        return load_model(spec, opt).embed_texts(texts)

    return embed


def _supervised(params: Params, inst: pd.DataFrame, cache: Cache, meta: dict[str, Any]) -> dict[str, Any]:
    s = params.paper.supervised
    out: dict[str, Any] = {}
    caps = meta["captions"]
    for name in params.paper.text_models:
        if name not in s.models:
            continue
        spec, opt = ModelSpec.of(name, params.models[name]), RuntimeOptions.of(params.models[name])
        if meta["status"].get(captions.model_label(spec.name, "names")) != "ok":
            out[spec.name] = {"status": "no_weights"}
            continue
        for feat in s.features:
            game = inst[inst["dataset"] == "game"]
            if feat == "captions":
                # a bool mask even for zero rows (an empty object Series would select columns)
                game = game[game["candidates"].map(lambda cs: all(c in caps for c in cs)).astype(bool)]
            texts = {str(c): str(c) for c in game["cue"]}
            texts |= {
                (caps[c] if feat == "captions" else c): (caps[c] if feat == "captions" else c)
                for cs in game["candidates"]
                for c in cs
            }
            step(f"Table 5: {spec.name} on {feat}, {len(s.seeds)} seeds")
            vecs = cache.ensure(meta["text_keys"][spec.name], texts, _embedder(spec, opt))
            lookup = _Lookup(vecs, caps if feat == "captions" else None)
            res = supervised.run_supervised(
                game,
                lookup.candidate,
                lookup.text,
                s.seeds,
                s.epochs,
                s.lr,
                s.batch_size,
                s.test_fraction,
                s.dev_fraction,
                threads=1,  # a small MLP: one thread is faster than two sharing a busy machine
                protocol=s.protocol,
                train_pairs=s.train_pairs,
            )
            variant = "" if s.protocol == "unified" else ", per-group variant (released code), not the paper's protocol"
            out[f"{spec.name} on {feat} (offline, text model; not CLIP{variant})"] = res
    return out


def export_pairs(selection: pd.DataFrame) -> dict[str, int]:
    """Write the benchmark's cue_image_pairs_<split>.json (release layout) into the ``cue_image_pairs`` folder."""
    folder = catalog.path("cue_image_pairs", "write")
    folder.mkdir(parents=True, exist_ok=True)
    sel = selection[selection["status"] == "selected"]
    counts = {}
    for split, name in SPLIT_FILES.items():
        rows = supervised.cue_image_pairs(sel[sel["split"] == split])
        with atomic_path(folder / name, ".json") as tmp:  # the release's key order: image, cue, label, ID
            tmp.write_text(json.dumps(rows, indent=4) + "\n")
        counts[name] = len(rows)
    return counts


def analyses(
    params: Params,
    selection: pd.DataFrame,
    inst: pd.DataFrame,
    pred: pd.DataFrame,
    cache: Cache,
    meta: dict[str, Any],
    table4: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """Tables 5-7, published numbers, random chance, pair export -> metrics (and the Markdown file)."""
    p = params.paper
    labels = list(meta["model_ids"])
    t7 = captions.truncated_cells(pred[pred["model_name"].isin(labels)])
    t7_check = {
        label: {"ours": cells, "paper": captions.PAPER_TABLE7[meta["model_ids"][label]]}
        for label, cells in t7.items()
        if "captions" in label and meta["model_ids"][label] in captions.PAPER_TABLE7
    }
    for v in t7_check.values():
        v["matches"] = v["ours"] == v["paper"]
    types = (
        association_types.load_types(Path(p.release_dir) / p.association_types_file)
        if p.release_dir
        else association_types.no_types()
    )
    step("Table 6 association types")
    t6 = association_types.analyse(types, selection, pred)
    entries = {n: params.models[n] for n in params.evaluate.models}
    oc = [(n, m.model, m.pretrained) for n, m in entries.items() if m.kind == "open_clip"]
    refs = published.reference_rows(oc)
    t5 = _supervised(params, inst, cache, meta) if p.supervised.enabled else {}
    step("cue_image_pairs export and paper tables")
    pairs = export_pairs(selection)
    md = [
        "# The paper's other tables, recomputed\n",
        f"Tie-break: `{p.tie_break}`.\n",
        "## Table 7: text models, cue vs names and cue vs OFA captions\n",
        captions.table7_markdown(t7, meta["model_ids"]),
        "## Table 6: association types\n",
        association_types.table6_markdown(t6),
        "## Published numbers beside ours (Table 4 cells, x100)\n",
        published.published_markdown(refs, table4),
        "## Random chance\n",
        f"- exact expectation: {published.RANDOM_CHANCE['exact_expectation']} (Table 4's 'Random chance' row)\n"
        f"- DataComp: 0.205 ({published.RANDOM_CHANCE['datacomp']['definition']})\n"
        "- paper: 38 / 34 / 24 / 17 % for N = 5 / 6 / 10 / 12\n",
    ]
    if t5:
        md += [
            "## Table 5: supervised vs zero-shot on the same test sets\n",
            supervised.table5_markdown({k: v for k, v in t5.items() if "status" not in v}),
        ]
    md += [f"\ncue_image_pairs written: {pairs}\n"]
    with atomic_path(catalog.path("paper_md", "write"), ".md") as tmp:
        tmp.write_text("\n".join(md))
    return {
        "table7": t7,
        "table7_check": t7_check,
        "table6": t6,
        "published": refs,
        "random_chance": published.RANDOM_CHANCE,
        "table5": t5,
        "cue_image_pairs": pairs,
        "tie_break": p.tie_break,
    }
