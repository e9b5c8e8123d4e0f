"""The seeds' adversarial methods: time and peak memory at SWOW scale, and AF on the release's SWOW baseline.

1. ``--scale`` (default): 12,000 synthetic instances (SWOW scale: 12,000 cues), 384-d vectors (the
   text model's width), N = 6, K = 2, 12,000 concepts.
   - AF: pool 1023 per instance, ``--af-cheap`` cheap iterations then ``--af-ensemble`` ensemble
     iterations (the stage's core, text member only); seconds per iteration of each phase and the
     extrapolation to the paper's 100 + 50.
   - AfLite: the paper's fractions (m = 0.3409, k = 0.0114 of 12,000 = 4,091 / 137), n = 64, on
     pair features [cue ⊙ name, name] with ``--planted`` of the instances carrying an artifact.
   Each runs in a child process; its peak RSS (``ru_maxrss``) is the memory figure.
2. ``--release``: AF with the offline text model on the release's 998 SWOW-baseline instances
   (``data/sample/winogavil/swow.csv``); pool = the release's concepts (``image2url.json`` keys)
   minus the cue's SWOW responses in the file; the text baseline's zero-shot Jaccard (cue vs
   names, cosine, top K) on the original and on the AF distractors; the first replacements.

Usage: python benchmarks/adversarial.py [--scale] [--release]. Writes benchmarks/results/adversarial.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402

N_INST, DIM = 12_000, 384


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def child_af(cheap: int, ensemble: int) -> dict:
    from gavil.params.adversarial import AdversarialFilterParams
    from stages.adversarial_filter import Member, adversarial_filter

    rng = np.random.default_rng(0)
    concepts, cues = _vectors(rng, N_INST), _vectors(rng, N_INST)
    pos = [rng.choice(N_INST, 2, replace=False) for _ in range(N_INST)]
    pools = [np.setdiff1d(rng.choice(N_INST, 1030, replace=False), p)[:1023] for p in pos]
    assigned = [pl[:4].copy() for pl in pools]
    p = AdversarialFilterParams(members=["text"], cheap_iterations=cheap, ensemble_iterations=ensemble, patience=1000)
    stamps: list[float] = []
    t0 = time.perf_counter()
    adversarial_filter(
        [f"s{i}" for i in range(N_INST)],
        pos,
        assigned,
        pools,
        [Member("text", cues, concepts)],
        p,
        log=lambda s: stamps.append(time.perf_counter()),
    )
    per = np.diff([t0, *stamps])
    return {
        "seconds": round(time.perf_counter() - t0, 1),
        "cheap_s_per_iteration": round(float(per[:cheap].mean()), 2),
        "ensemble_s_per_iteration": round(float(per[cheap:].mean()), 2) if ensemble else None,
    }


def child_aflite(planted: float) -> dict:
    from gavil.models.features import Layout, pair_features
    from gavil.params.adversarial import AfliteParams
    from stages.aflite import aflite

    rng = np.random.default_rng(1)
    names = [[f"i{i}c{j}" for j in range(6)] for i in range(N_INST)]
    lay = Layout.build(names, [n[:2] for n in names])
    cands = _vectors(rng, 6 * N_INST)
    marked = np.zeros(N_INST, dtype=bool)
    marked[: int(planted * N_INST)] = True
    cands.reshape(N_INST, 6, DIM)[marked, :2, 0] = 1.0  # the associations of planted instances
    cues = np.repeat(_vectors(rng, N_INST), 6, axis=0)
    x = pair_features(cues, cands)
    t0 = time.perf_counter()
    res = aflite(x, lay, np.array([f"i{i:05d}" for i in range(N_INST)]), [set(n) for n in names], AfliteParams())
    secs = time.perf_counter() - t0
    flagged = res.phase > 0
    return {
        "seconds": round(secs, 1),
        "phases": len(res.phases),
        "s_per_phase": round(secs / max(1, len(res.phases)), 1),
        "flagged": int(flagged.sum()),
        "planted_flagged_percent": round(100 * float(flagged[marked].mean()), 1),
        "others_flagged_percent": round(100 * float(flagged[~marked].mean()), 2),
    }


def _in_child(what: str, *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", what, *args], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def release_af(ensemble: int) -> dict:
    import pandas as pd

    from gavil.domain.winogavil import jaccard, top_k
    from gavil.models.embeddings import Cache
    from gavil.models.features import cue_key, embed
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from gavil.params import Params
    from gavil.params.adversarial import AdversarialFilterParams
    from stages.adversarial_filter import Member, adversarial_filter, pools_for

    rel = ROOT / "data/sample/winogavil"
    sw = pd.read_csv(rel / "swow.csv")
    sw = pd.DataFrame(
        {
            "instance_id": [f"swow:{i}" for i in sw["ID"]],
            "cue": sw["cue"],
            "candidates": sw["candidates"].map(json.loads),
            "associations": sw["associations"].map(json.loads),
        }
    )
    concepts = sorted(json.loads((rel / "image2url.json").read_text()))
    edges = pd.DataFrame(
        [(c, a) for c, assoc in zip(sw["cue"], sw["associations"]) for a in assoc], columns=["cue", "response"]
    )
    p = AdversarialFilterParams(members=["text"], ensemble_iterations=ensemble)
    pools, _ = pools_for(sw, concepts, edges, p.pool_size, p.seed)
    universe = sorted({c for pl in pools for c in pl} | {c for a in sw["associations"] for c in a})
    idx = {c: i for i, c in enumerate(universe)}
    entry = Params().models[p.text_model]
    model = load_model(ModelSpec.of(p.text_model, entry), RuntimeOptions.of(entry))
    cue_vecs, cvecs = embed(model, list(sw["cue"]), universe, Cache([], None))
    member = Member("text", np.stack([cue_vecs[cue_key(c)] for c in sw["cue"]]), np.stack([cvecs[c] for c in universe]))
    orig = [[c for c in cs if c not in a] for cs, a in zip(sw["candidates"], sw["associations"])]
    t0 = time.perf_counter()
    final, reps, iters, _stop = adversarial_filter(
        list(sw["instance_id"]),
        [np.array([idx[c] for c in a]) for a in sw["associations"]],
        [np.array([idx[c] for c in o]) for o in orig],
        [np.array([idx[c] for c in pl]) for pl in pools],
        [member],
        p,
        log=lambda line: print(line, file=sys.stderr, flush=True),
    )
    secs = time.perf_counter() - t0

    def zero_shot(distractors: list[list[str]]) -> float:
        scores = []
        for cue, a, d in zip(sw["cue"], sw["associations"], distractors):
            cands = list(a) + list(d)
            sims = np.array([cvecs[c] @ cue_vecs[cue_key(cue)] for c in cands])
            pred = top_k(cands, sims, len(a))
            scores.append(jaccard(pred, a))
        return round(100 * float(np.mean(scores)), 1)

    new = [[universe[j] for j in a] for a in final]
    it = pd.DataFrame(iters)
    return {
        "instances": len(sw),
        "pool_mean": round(float(np.mean([len(pl) for pl in pools])), 1),
        "seconds": round(secs, 1),
        "iterations": len(iters),
        "iterations_by_phase": it["phase"].value_counts().to_dict(),
        "replacements": len(reps),
        "held_out_jaccard_first_last_chance": [
            round(float(it["held_out_jaccard"].iloc[0]), 3),
            round(float(it["held_out_jaccard"].iloc[-1]), 3),
            round(float(it["chance_jaccard"].iloc[-1]), 3),
        ],
        "easy_fraction_first_last": [
            round(float(it["easy_fraction"].iloc[0]), 3),
            round(float(it["easy_fraction"].iloc[-1]), 3),
        ],
        "changed_distractors_percent": round(
            100 * float(np.mean([len(set(n) - set(o)) / len(o) for n, o in zip(new, orig)])), 1
        ),
        "text_zero_shot_jaccard_original": zero_shot(orig),
        "text_zero_shot_jaccard_af": zero_shot(new),
        "first_replacements": [
            {
                **r,
                "removed": universe[r["removed"]],
                "added": universe[r["added"]],
                "cue": sw.set_index("instance_id").at[r["instance_id"], "cue"],
            }
            for r in reps[:8]
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", action="store_true")
    ap.add_argument("--release", action="store_true")
    ap.add_argument("--af-cheap", type=int, default=3)
    ap.add_argument("--af-ensemble", type=int, default=2)
    ap.add_argument("--planted", type=float, default=0.03)
    ap.add_argument("--release-ensemble", type=int, default=50, help="ensemble iterations of the --release run")
    ap.add_argument("--child", nargs="+")
    a = ap.parse_args()
    if a.child:
        what, *rest = a.child
        res = child_af(int(rest[0]), int(rest[1])) if what == "af" else child_aflite(float(rest[0]))
        res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        print(json.dumps(res))
        return
    path = ROOT / "benchmarks/results/adversarial.json"
    result: dict = {"machine": machine("shared with other jobs")}
    if a.scale or not a.release:
        af = _in_child("af", str(a.af_cheap), str(a.af_ensemble))
        af["extrapolated_150_iterations_s"] = round(
            100 * af["cheap_s_per_iteration"] + 50 * (af["ensemble_s_per_iteration"] or 0)
        )
        result["af_12000"] = {"iterations_run": [a.af_cheap, a.af_ensemble], **af}
        result["aflite_12000"] = {"planted": a.planted, **_in_child("aflite", str(a.planted))}
    if a.release:
        result["af_release_swow"] = release_af(a.release_ensemble)
    # merge with the file as it is now (the --scale and --release runs may overlap)
    write_result("adversarial", {**(json.loads(path.read_text()) if path.exists() else {}), **result})
    result = json.loads(path.read_text())
    print(f"{'run':<16}{'seconds':>9}{'peak RSS MB':>13}  notes")
    for key in ("af_12000", "aflite_12000"):
        if key in result:
            r = result[key]
            note = (
                f"cheap {r['cheap_s_per_iteration']} s/it, ensemble {r['ensemble_s_per_iteration']} s/it, 100+50 ~ {r['extrapolated_150_iterations_s']} s"
                if key == "af_12000"
                else f"{r['phases']} phases, {r['s_per_phase']} s/phase, planted flagged {r['planted_flagged_percent']} %"
            )
            print(f"{key:<16}{r['seconds']:>9}{r['peak_rss_mb']:>13}  {note}")
    if "af_release_swow" in result:
        r = result["af_release_swow"]
        print(
            f"release SWOW AF: {r['iterations']} iterations, {r['replacements']} replacements, text zero-shot "
            f"{r['text_zero_shot_jaccard_original']} -> {r['text_zero_shot_jaccard_af']}"
        )


if __name__ == "__main__":
    main()
