"""Stage entry of ``aflite`` (see :mod:`stages.aflite`): selection, instances (+ ocr for
open_clip) -> the aflite table, phases, plot, debiased CSV; embeddings, probes, KL, report."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from gavil.io import write_csv
from gavil.models.batched_logistic import SharedRows, gram
from gavil.models.embeddings import Cache
from gavil.models.features import Layout, cue_key, embed, pair_features
from gavil.models.keyed import id_hashes
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.params.adversarial import resolve_size
from gavil.pipeline import catalog
from gavil.progress import heartbeat
from schemas.ocr import accepted_images
from stages.aflite.core import Fitter, Result, aflite, kl_assessment, predictability
from stages.aflite.report import (
    GroupCounts,
    PlantReport,
    batch_of,
    group_counts,
    plant_feature,
    plant_mask,
    plant_report,
    round_or_none,
)

if TYPE_CHECKING:
    from gavil.params import Params
    from gavil.params.adversarial import AfliteParams


class Metrics(TypedDict):
    """``data/metrics/aflite.json``."""

    status: str  # ok | no_weights
    weights_sha256: str | None  # of the model's weights file (None: no weights)
    instances: int  # selected instances assessed
    m: int
    k: int
    phases: int
    flagged: int
    by_dataset: dict[str, GroupCounts]  # dataset -> instances, flagged, flagged_percent, mean_score
    by_batch: dict[str, GroupCounts]  # batch -> the same and its dataset
    kl: dict[str, float | None]  # before, aflite, random (nats)
    probes: dict[str, Any]  # full / cue_free -> by_dataset and by_batch -> mean_score, above_tau_percent
    plant: PlantReport | None  # the audit (aflite.plant): precision and recall of the flags; None: off
    debiased_written: bool


def _features(
    sel: pd.DataFrame,
    cue_vecs: dict[str, np.ndarray],
    cand_vecs: dict[str, np.ndarray],
    probe: str,
    lay: Layout | None = None,
    planted: np.ndarray | None = None,
    p: AfliteParams | None = None,
) -> tuple[np.ndarray, SharedRows]:
    """(pair rows, width) float64 pair features of ``sel``'s instances (rows in ``sel``'s order,
    candidates in list order); with ``planted`` instances (and ``lay``, ``p``), the ``plant``
    column appended (:func:`plant_feature`). Also the :class:`SharedRows` of the candidate columns
    (one vector per concept, concepts sorted), so that the fits multiply each concept's vector once."""
    names = sorted(cand_vecs)
    pos = {c: i for i, c in enumerate(names)}
    index = np.array([pos[c] for cs in sel["candidates"] for c in cs], dtype=np.int64)
    table = np.stack([cand_vecs[c] for c in names]).astype(np.float64)
    cues = np.stack([cue_vecs[cue_key(c)] for c, cs in zip(sel["cue"], sel["candidates"]) for _ in cs])
    cands = table[index]
    # float64: AfLite's batched fits run their GEMMs in the features' dtype. In float32 another OpenBLAS kernel
    # (OPENBLAS_CORETYPE=Sandybridge vs SkylakeX) flipped two of the sample's near-tied top-K credits
    # (0.49 -> 0.51); in float64 every kernel and thread count gave the same table, for ~1.2x the time
    x = pair_features(cues, cands, probe).astype(np.float64, copy=False)  # float64 already: no copy
    if planted is not None and lay is not None and p is not None and p.plant.fraction > 0:
        x = plant_feature(x, lay, planted, p.plant.strength)
    start = 0 if probe == "cue_free" else table.shape[1]  # pair_features: [cue ⊙ cand, cand] or [cand]
    return x, SharedRows(start, start + table.shape[1], table, index)


def run(params: Params) -> Metrics:
    """Stage entry: selection, instances (+ ocr for open_clip) -> aflite table, phases, plot, debiased CSV.

    Order-free: the selection is sorted by ``instance_uid`` first and every draw is keyed by id,
    so the tables (rows by ``instance_uid``), probes and KL are the same whatever the row order
    of any input."""
    p = params.aflite
    entry = params.models[p.model]
    selection = catalog.read_table("selection").sort_values("instance_uid", kind="stable", ignore_index=True)
    out = selection[["instance_uid", "dataset"]].copy()
    out["batch"] = batch_of(selection, catalog.read_table("instances"))
    out["num_candidates"] = selection["num_candidates"]
    out["score"], out["phase"] = np.nan, pd.array([pd.NA] * len(out), dtype="Int64")
    out["planted"] = False
    out["status"], out["reason"] = "not_selected", "selection status: " + selection["status"].astype(str)
    chosen = (selection["status"] == "selected").to_numpy()
    images = accepted_images(catalog.read_table("ocr")) if entry.kind == "open_clip" else None
    if images is not None:
        has = selection["candidates"].map(lambda cs: all(c in images for c in cs)).to_numpy()
        out.loc[chosen & ~has, ["status", "reason"]] = ["kept", "not assessed: a candidate has no accepted image"]
        chosen &= has
    sel = selection[chosen].reset_index(drop=True)
    sel["batch"] = out.loc[chosen, "batch"].to_numpy()
    cache = Cache([catalog.path(n) for n in catalog.EMBEDDING_CACHES], catalog.path("aflite_embeddings", "write"))
    m = resolve_size(p.train_size, len(sel))
    k = resolve_size(p.cutoff, len(sel))
    metrics = _initial_metrics(len(sel), m, k, p.write_debiased)
    phases: list[dict[str, Any]] = []
    opt = RuntimeOptions.of(entry)
    try:
        with heartbeat(f"aflite: loading {p.model}", file=sys.stderr):
            model = load_model(ModelSpec.of(p.model, entry), opt)
        metrics["weights_sha256"] = model.weights_sha256
    except WeightsUnavailable as e:
        print(f"aflite: {p.model}: NO WEIGHTS - nothing assessed. {e.log_text()}", file=sys.stderr)
        out.loc[chosen, ["status", "reason"]] = ["kept", f"not assessed: no weights for {p.model}"]
        metrics["status"] = "no_weights"
        model = None
    if model is not None and len(sel):
        phases = _assess(sel, model, images, cache, chosen, out, metrics, m, p, opt.threads)
    assessed = out[chosen]
    metrics["by_dataset"] = group_counts(assessed, "dataset")
    metrics["by_batch"] = group_counts(assessed, "batch")
    catalog.write_table(out, "aflite")
    cols = ["phase", "instances", "held_out", "above_tau", "flagged"]
    catalog.write_table(pd.DataFrame(phases, columns=cols), "aflite_phases")
    write_csv(pd.DataFrame(phases, columns=cols)[["phase", "flagged"]], catalog.path("plot_aflite", "write"))
    _write_debiased(selection, out, p.write_debiased)
    return metrics


def _initial_metrics(instances: int, m: int, k: int, debiased_written: bool) -> Metrics:
    """The metrics before anything is assessed: status ``ok``, ``instances`` selected to assess,
    the train size ``m`` and cutoff ``k`` (instances), no phase, no flag, empty reports."""
    return {
        "status": "ok",
        "instances": instances,
        "m": m,
        "k": k,
        "phases": 0,
        "flagged": 0,
        "by_dataset": {},
        "by_batch": {},
        "kl": {},
        "probes": {},
        "plant": None,
        "debiased_written": debiased_written,
        "weights_sha256": None,
    }


def _assess(
    sel: pd.DataFrame,
    model: LoadedModel,
    images: dict[str, tuple[str, str]] | None,
    cache: Cache,
    chosen: np.ndarray,
    out: pd.DataFrame,
    metrics: Metrics,
    m: int,
    p: AfliteParams,
    threads: int,
) -> list[dict[str, Any]]:
    """Embed ``sel`` (the assessed instances, in id order) with ``model``, run AfLite on their
    pair features and record each one's score, phase, planted flag, status and reason in
    ``out``'s ``chosen`` rows (a bool mask over ``out``); ``metrics`` gets the phases, flags,
    KL assessment, probes and plant audit, in place. Returns the phase rows (``aflite_phases``)."""
    concepts = sorted({c for cs in sel["candidates"] for c in cs})
    with heartbeat(f"aflite: embedding {len(concepts)} concepts and the cues", file=sys.stderr):
        cue_vecs, cand_vecs = embed(model, list(sel["cue"]), concepts, cache, images)
    cache.save()
    lay = Layout.build(list(sel["candidates"]), list(sel["associations"]))
    ids = sel["instance_uid"].to_numpy().astype(str)
    planted = plant_mask(ids, p.plant.fraction, p.plant.seed)
    x, shared = _features(sel, cue_vecs, cand_vecs, "full", lay, planted, p)
    sets = [set(cs) for cs in sel["candidates"]]
    with threadpool_limits(threads):
        x_gram = gram(x)
    res = aflite(x, lay, ids, sets, p, threads, x_gram, shared)
    phases = res.phases
    flagged = res.phase > 0
    idx = np.flatnonzero(chosen)
    out.loc[idx, "score"] = res.score
    out.loc[idx, "phase"] = pd.array(np.where(flagged, res.phase, 0), dtype="Int64").astype("Int64")
    out.loc[idx[~flagged], "phase"] = pd.NA
    out.loc[idx, "planted"] = planted
    out.loc[idx, "status"] = np.where(flagged, "flagged", "kept")
    out.loc[idx, "reason"] = [
        f"phase {ph}: score {s:.2f} >= tau {p.tau}" if f else ("never held out" if np.isnan(s) else f"score {s:.2f}")
        for f, ph, s in zip(flagged, res.phase, res.score)
    ]
    metrics["phases"], metrics["flagged"] = len(phases), int(flagged.sum())
    print("aflite: KL assessment (before, after AfLite, after a random reduction)", file=sys.stderr)
    with threadpool_limits(threads):
        metrics["kl"] = kl_assessment(x, lay, ids, ~flagged, p.kl_bins, p.seed, x_gram)
    metrics["probes"] = _probes(sel, cue_vecs, cand_vecs, lay, m, p, sets, model.spec.kind, res, threads, planted)
    if p.plant.fraction > 0:
        metrics["plant"] = plant_report(out[chosen], p.plant)
    return phases


def _probes(
    sel: pd.DataFrame,
    cue_vecs: dict,
    cand_vecs: dict,
    lay: Layout,
    m: int,
    p: AfliteParams,
    sets: list,
    kind: str,
    res: Result,
    threads: int,
    planted: np.ndarray,
) -> dict[str, Any]:
    """Phase-1 predictability by dataset and by batch with the full features (the main run's
    phase 1: the same keyed draws on the same id-ordered instances) and with the cue-free ones
    (one phase, the same draws; the planted column too when ``plant`` is on). ``sel`` in id order."""
    out: dict[str, Any] = {}
    h = id_hashes(sel["instance_uid"].to_numpy().astype(str))
    for probe in ("full", "cue_free"):
        if probe == "full":
            s = res.first_score
        else:
            print("aflite: cue-free probe (one phase on the candidate features alone)", file=sys.stderr)
            x, shared = _features(sel, cue_vecs, cand_vecs, probe, lay, planted, p)
            fitter = Fitter(x, p, threads, shared=shared)
            total, count = predictability(fitter, lay, np.arange(len(sel)), m, p, 1, sets, h)
            s = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        out[probe] = {
            by: {
                str(key): {
                    "mean_score": round_or_none(float(np.nanmean(s[g.index])))
                    if np.isfinite(s[g.index]).any()
                    else None,
                    "above_tau_percent": round(100 * float(np.mean(s[g.index] >= p.tau)), 2),
                }
                for key, g in sel.groupby(col, sort=True)
            }
            for by, col in (("by_dataset", "dataset"), ("by_batch", "batch"))
        }
    out["image_free"] = (
        "the text model sees no images: the full run is the image-free probe"
        if kind == "text"
        else "not run: needs the open_clip text side on candidate names"
    )
    return out


def _write_debiased(selection: pd.DataFrame, out: pd.DataFrame, enabled: bool) -> None:
    kept = selection[(out["status"] == "kept").to_numpy()] if enabled else selection.iloc[0:0]
    df = pd.DataFrame(
        {
            "instance_uid": kept["instance_uid"],
            "dataset": kept["dataset"],
            "cue": kept["cue"],
            "candidates": kept["candidates"].map(json.dumps),
            "associations": kept["associations"].map(json.dumps),
            "num_associations": kept["num_associations"],
            "num_candidates": kept["num_candidates"],
        }
    )
    write_csv(df, catalog.path("aflite_debiased", "write"))
