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
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

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


def accepted_ocr(words: list[str], shas: list[str], paths: list[str]) -> pd.DataFrame:
    """An ``ocr`` table (:class:`schemas.ocr.Ocr`) in which every concept of ``words`` has its image
    (``shas``/``paths``, one each) accepted at rank 1, nothing read: for synthetic AF projects."""
    import pandas as pd

    return pd.DataFrame(
        {
            "concept": words,
            "sha256": shas,
            "path": paths,
            "source_url": None,
            "rank": 1,
            "candidates_read": 1,
            "status": "accepted",
            "reason": None,
            "ocr_text": None,
            "ocr_confidence": None,
            "match_token": None,
            "match_score": None,
        }
    ).astype({"rank": "Int64", "candidates_read": "Int64"})


def planted_length_project(dest: Path, n_instances: int = 300, seed: int = 0, **af: object) -> Path:
    """A scratch project (:func:`benchmarks._common.copy_project`) whose SWOW baseline carries a
    length artifact: the concepts are the release's 50 shortest (3 letters) and 350 longest names
    (``image2url.json``), every association is short, so the baseline's random distractors are
    mostly long. Writes the ``ocr`` (all accepted), ``edges`` and ``swow_instances`` tables the
    stage reads (N = 5 or 6, K = 2 or 3) and ``params.yaml`` with ``adversarial_filter`` updated by ``af``."""
    import pandas as pd
    import yaml

    from benchmarks._common import copy_project
    from gavil.pipeline import catalog

    copy_project(dest)
    names = sorted(json.loads((ROOT / "data/sample/winogavil/image2url.json").read_text()))
    by_len = sorted(names, key=lambda w: (len(w), w))
    short = [w for w in by_len if len(w) == 3][:50]
    long_ = by_len[-350:]
    words = sorted(short + long_)
    cues = sorted(w for w in names if len(w) in (5, 6) and w not in words)
    rng = np.random.default_rng(seed)
    cues = [str(c) for c in rng.choice(cues, n_instances, replace=False)]
    rows, edges = [], []
    for i, cue in enumerate(cues):
        k, n = 2 + i % 2, 5 + (i // 2) % 2
        assoc = [str(w) for w in rng.choice(short, k, replace=False)]
        rest = [w for w in words if w not in assoc]
        cands = assoc + [str(w) for w in rng.choice(rest, n - k, replace=False)]
        edges += [(cue, a) for a in assoc]
        rows.append(
            {
                "instance_id": f"swow-{i:04d}",
                "cue": cue,
                "status": "ok",
                "reason": None,
                "associations": assoc,
                "candidates": [cands[j] for j in rng.permutation(n)],
                "num_associations": k,
                "num_candidates": n,
                "associations_mean_weight": None,
                "candidates_connectivity_score": None,
                "dropped_words": [],
            }
        )
    ocr = accepted_ocr(
        words, [f"{i:064x}" for i in range(len(words))], [f"data/images/{i}.png" for i in range(len(words))]
    )
    edge_df = (
        pd.DataFrame(edges, columns=["cue", "response"])
        .assign(r1_count=pd.NA, r123_count=pd.NA, r1_strength=np.nan, r123_strength=np.nan, rank=1)
        .assign(source_format="winogavil_swow")
        .astype({"r1_count": "Int64", "r123_count": "Int64"})
    )
    for table, df in (("ocr", ocr), ("edges", edge_df), ("swow_instances", pd.DataFrame(rows))):
        catalog.write_table(df, table, root=dest)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    params["adversarial_filter"].update(af)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dest


def length_artifact(project: Path, folds: int = 5) -> dict:
    """On the ``af_instances`` table of ``project``: the share of long (> 3 characters) distractors,
    a length-only logistic regression's held-out accuracy and Jaccard (``folds``-fold, seeded) and
    the K-shortest rule's Jaccard, on the original and on the AF distractors, with their chance (%)."""
    import pandas as pd

    from gavil.models.judges import judge, k_shortest_judge, length_judge

    out = pd.read_parquet(project / "data/adversarial/swow_af.parquet")
    out = out[out["status"] == "ok"].reset_index(drop=True)
    universe = sorted(
        {c for col in ("associations", "distractors", "original_distractors") for x in out[col] for c in x}
    )
    idx = {c: i for i, c in enumerate(universe)}
    pos = [np.array([idx[c] for c in a]) for a in out["associations"]]
    judges = [length_judge(universe), k_shortest_judge(universe)]
    res: dict = {"instances": len(out)}
    for side in ("original_distractors", "distractors"):
        ass = [np.array([idx[c] for c in d]) for d in out[side]]
        parts = np.array_split(np.random.default_rng(0).permutation(len(out)), folds)
        runs = [
            judge(judges, pos, ass, np.sort(np.concatenate(parts[:f] + parts[f + 1 :])), np.sort(parts[f]), f)
            for f in range(folds)
        ]

        def mean(j: str, m: str, runs: list = runs) -> float:
            return round(100 * float(np.mean([r[j][m] for r in runs])), 1)

        res["after" if side == "distractors" else "before"] = {
            "long_distractors_percent": round(
                100 * float(np.mean([np.mean([len(c) > 3 for c in d]) for d in out[side]])), 1
            ),
            "length_accuracy": mean("length", "accuracy"),
            "length_accuracy_chance": mean("length", "chance_accuracy"),
            "length_jaccard": mean("length", "jaccard"),
            "k_shortest_jaccard": mean("k_shortest", "jaccard"),
            "jaccard_chance": mean("k_shortest", "chance_jaccard"),
        }
    return res


def planted_length(n_instances: int, judges: list[str]) -> dict:
    """:func:`planted_length_project` in a temporary folder, ``gavil stage adversarial_filter`` run
    there (the public interface: params.yaml + the stage's entry point), then :func:`length_artifact`
    and the stage's metrics (stop reason, per-judge drop)."""
    import tempfile

    from benchmarks._common import tool_env

    with tempfile.TemporaryDirectory() as tmp:
        proj = planted_length_project(Path(tmp) / "p", n_instances, judges=judges)
        t0 = time.perf_counter()
        subprocess.run(
            ["gavil", "stage", "adversarial_filter"], cwd=proj, env=tool_env(), check=True, capture_output=True
        )
        secs = time.perf_counter() - t0
        metrics = json.loads((proj / "data/metrics/details/adversarial_filter.json").read_text())
        return {
            "stage_seconds": round(secs, 1),
            **length_artifact(proj),
            "stop": metrics["stop"],
            "judges": metrics["judges"],
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
