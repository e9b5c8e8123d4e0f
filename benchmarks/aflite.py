"""AfLite on the sample's release instances (4,561 selected, MiniLM pair features, d = 768,
~30k pair rows) at WinoGrande's settings (64 classifiers per phase, m = 0.3409, k = 0.0114):
time and flags per solver, in one session on the same machine.

Solvers (``--solvers``, comma-separated):
- ``batched``: the stage's default (gavil/models/batched_logistic.py), all 64 fits of a phase at once.
- ``sklearn``: the stage's reference, 64 scikit-learn fits per phase converged to the optimum
  (tol 1e-8, float64): the same optimum, so the same flags (slow: ~0.9 CPU s per fit).
- ``sklearn_default``: the stage before the batched solver: scikit-learn's defaults (tol 1e-4)
  on float32, which stop 0.03-0.17 (decision value) from the optimum, so its flags differ a little.

Audit (``--plant FRACTION``, ``--strength S[,S2...]``): the batched run with ``aflite.plant``'s spurious
column in a keyed FRACTION of the instances; precision and recall of the flags against them,
overall and per dataset (the stage's report: ``data/metrics/details/aflite.json`` "plant").
``--shuffle``: the batched run again on the instances in a random row order (same flags required).

Needs the upstream outputs (``dvc repro select_instances`` or a copy of data/) and the aflite
embedding cache (``data/cache/aflite_embeddings.parquet``, written by the stage) in the project.
Usage: python benchmarks/aflite.py [--solvers batched,sklearn_default] [--threads T]
[--plant 0.05 --strength 1.0] [--shuffle].
Writes benchmarks/results/aflite.json (merged with what is there).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402


def features() -> tuple:
    """The stage's inputs to :func:`stages.aflite.aflite`, from the selection and the embedding cache."""
    from gavil.models.embeddings import Cache
    from gavil.models.features import Layout, embed
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from gavil.params import load_params
    from gavil.pipeline import catalog
    from stages.aflite.stage import _features

    params = load_params()
    p, entry = params.aflite, params.models[params.aflite.model]
    sel = catalog.read_table("selection").sort_values("instance_uid", kind="stable", ignore_index=True)
    sel = sel[sel["status"] == "selected"].reset_index(drop=True)
    model = load_model(ModelSpec.of(p.model, entry), RuntimeOptions.of(entry))
    concepts = sorted({c for cs in sel["candidates"] for c in cs})
    cue_vecs, cand_vecs = embed(model, list(sel["cue"]), concepts, Cache([], catalog.path("aflite_embeddings", "read")))
    lay = Layout.build(list(sel["candidates"]), list(sel["associations"]))
    ids = sel["instance_uid"].to_numpy().astype(str)
    x = _features(sel, cue_vecs, cand_vecs, "full")
    return x, lay, ids, [set(cs) for cs in sel["candidates"]], p, sel["dataset"].to_numpy().astype(str)


def run(solver: str, threads: int, data: tuple, planted: np.ndarray | None = None, strength: float = 1.0) -> dict:
    """One AfLite run (the stage's core) with ``solver``; seconds, flags per phase and per dataset,
    flagged ids; with ``planted``, the plant column added and precision/recall of the flags."""
    import stages.aflite.core as stage

    x, lay, ids, sets, p, dataset = data
    if planted is not None:
        from stages.aflite.report import plant_feature

        x = plant_feature(x, lay, planted, strength)
    old = solver == "sklearn_default"  # the per-classifier fits as they were: defaults, float32
    stage.SKLEARN_TOL, stage.SKLEARN_DTYPE = (1e-4, np.float32) if old else (1e-8, np.float64)
    p = p.model_copy(update={"solver": "sklearn" if old else solver})
    t0, c0 = time.perf_counter(), time.process_time()
    res = stage.aflite(x, lay, ids, sets, p, threads)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    flagged = res.phase > 0
    return {
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "phases": len(res.phases),
        "above_tau_per_phase": [ph["above_tau"] for ph in res.phases],
        "flagged_per_phase": [ph["flagged"] for ph in res.phases],
        "flagged": int(flagged.sum()),
        "flagged_by_dataset": {
            str(d): {"instances": int((dataset == d).sum()), "flagged": int(flagged[dataset == d].sum())}
            for d in sorted(set(dataset))
        },
        "flagged_ids": sorted(ids[flagged].tolist()),
    } | ({} if planted is None else {"plant": plant_scores(flagged, planted, dataset)})


def plant_scores(flagged: np.ndarray, planted: np.ndarray, dataset: np.ndarray) -> dict:
    """Precision and recall of ``flagged`` against ``planted``, overall and per dataset."""

    def pr(sel: np.ndarray) -> dict:
        f, t = flagged[sel], planted[sel]
        hit = int((f & t).sum())
        return {
            "planted": int(t.sum()),
            "flagged": int(f.sum()),
            "flagged_planted": hit,
            "precision": round(hit / f.sum(), 4) if f.any() else None,
            "recall": round(hit / t.sum(), 4) if t.any() else None,
        }

    return pr(np.ones(len(flagged), dtype=bool)) | {
        "by_dataset": {str(d): pr(dataset == d) for d in sorted(set(dataset))}
    }


def shuffled(data: tuple, seed: int = 0) -> tuple:
    """The same instances in a random row order (pair rows moved with them)."""
    from gavil.models.features import Layout

    x, lay, ids, sets, p, dataset = data
    perm = np.random.default_rng(seed).permutation(len(ids))
    rows = lay.rows[perm]
    new = np.full_like(rows, -1)
    new[rows >= 0] = np.arange((rows >= 0).sum())
    return (
        x[rows[rows >= 0]],
        Layout(new, lay.label[perm], lay.k[perm]),
        ids[perm],
        [sets[i] for i in perm],
        p,
        dataset[perm],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solvers", default="batched,sklearn_default")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--plant", type=float, default=0.0, help="fraction of instances to plant (0: no audit run)")
    ap.add_argument("--strength", default="1.0", help="the plant column's value; comma-separated: one run each")
    ap.add_argument("--shuffle", action="store_true")
    a = ap.parse_args()
    data = features()
    runs = {s: run(s, a.threads, data) for s in a.solvers.split(",") if s}
    if a.shuffle:
        runs["batched_shuffled"] = run("batched", a.threads, shuffled(data))
    if a.plant > 0:
        from stages.aflite import plant_mask

        planted = plant_mask(data[2], a.plant, 0)
        for s in map(float, a.strength.split(",")):
            runs[f"batched_plant_{a.plant:g}_strength_{s:g}"] = run("batched", a.threads, data, planted, s)
    path = ROOT / "benchmarks/results/aflite.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    result["machine"] = machine(f"shared with other jobs; {a.threads} BLAS thread(s)")
    result.setdefault("runs", {}).update(runs)
    write_result("aflite", result)
    runs = result["runs"]
    print(f"{'solver':<17}{'seconds':>9}{'cpu s':>8}{'flagged':>9}  flagged per phase")
    for s, r in runs.items():
        print(f"{s:<17}{r['seconds']:>9}{r['cpu_seconds']:>8}{r['flagged']:>9}  {r['flagged_per_phase']}")
        for d, c in r.get("flagged_by_dataset", {}).items():
            print(f"    {d}: {c['flagged']} / {c['instances']} flagged")
        if "plant" in r:
            pl = r["plant"]
            print(f"    plant: {pl['planted']} planted, precision {pl['precision']}, recall {pl['recall']}")
            for d, c in pl["by_dataset"].items():
                print(f"      {d}: {c['planted']} planted, precision {c['precision']}, recall {c['recall']}")
    names = list(runs)
    for i, s in enumerate(names):
        for t in names[i + 1 :]:
            a_ids, b_ids = set(runs[s]["flagged_ids"]), set(runs[t]["flagged_ids"])
            print(
                f"{s} vs {t}: {len(a_ids & b_ids)} flagged by both, {len(a_ids - b_ids)} / {len(b_ids - a_ids)} by one only"
            )


if __name__ == "__main__":
    main()
