"""SWOW-scale synthetic run of the offline stages (issue 6): time and peak memory per stage,
the same flow on a 2-worker local Dask cluster versus sequential, and a no-op ``dvc repro``.

The synthetic project (a temporary folder holding a copy of the code, ``dvc.yaml`` and
``params.yaml``):

- ``strength.SWOW-EN.R123.csv`` (the real SWOW strength format, tab-separated) with
  ``--concepts`` cues (12,000: SWOW-EN's cue count), 30 responses each: 20 other cues and 10
  words that are never cues, R123 counts falling with rank (N = the cue's valid responses);
- one small generated JPEG per concept (96 x 96 px, smooth random colours; 1 % of them show the
  concept's own word, which the OCR stage must reject), read by the ``local`` crawl source;
- one raw annotation batch (``creations.csv``/``solves.csv``): ``--tasks`` creation tasks
  (30,000) with two cues each over 5, 6, 10 or 12 candidates = 60,000 instances, and three
  solvers per instance = 180,000 solve rows (80 % of solvers pick the spymaster's associations);
- params: the embedded defaults, except the inputs above, ``annotations.release_files: []``,
  ``instances.swow.min_concreteness: null`` (pseudo-words have no concreteness rating),
  and the scoring/evaluation model ``--model`` with random weights (``pretrained: null``;
  no weights can be downloaded here, and speed does not depend on the weights' values).

Runs (each on a fresh copy of the generated project, so no cache is shared between them):

1. **sequential**: each stage in DAG order in its own process (``run_stage``, what ``dvc repro``
   runs through ``gavil stage``); per stage: seconds and the process's peak RSS.
2. **dask** (``--dask``): ``flows.build.run_flow`` with ``prefect.task_runner.kind: dask``
   (a local cluster of 2 worker processes, 1 thread each), outside DVC; total seconds, the
   peak summed RSS of the whole process tree (flow, scheduler, workers), sampled every 0.25 s,
   and the flow run's timeline per stage and plan/work/reduce (``benchmarks/flow_timeline.py``).
3. **no-op dvc repro**: in the sequential project, ``dvc commit`` records every stage's outputs,
   then ``dvc repro`` is timed (it must run nothing).

Peak memory of the sequential run is the largest per-stage peak RSS (stages run one at a time)
and, as a cross-check, the sampled process-tree peak.

Usage (project root, venv with the ``dask`` or ``test`` extra, for psutil and prefect-dask):
    python benchmarks/scale.py [--concepts 12000] [--tasks 30000] [--model RN50] [--dask] [--out scale]
        [--precision fp32|bf16|auto] [--stages ingest_concepts,ocr_filter,...]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import copy_project, machine, tool_env, write_result  # noqa: E402

_SYLLABLES = [c + v for c in "bdfgklmnprstvz" for v in "aeiou"]


def pseudo_words(n: int, rng: random.Random, taken: set[str] | None = None) -> list[str]:
    """n distinct lower-case pseudo-words of 3-4 syllables (not in ``taken``)."""
    taken = set(taken or ())
    out: list[str] = []
    while len(out) < n:
        w = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((3, 4))))
        if w not in taken:
            taken.add(w)
            out.append(w)
    return out


def write_swow(path: Path, cues: list[str], others: list[str], rng: random.Random) -> int:
    """strength.SWOW-EN.R123.csv: 20 cue responses + 10 non-cue responses per cue; returns rows."""
    rows = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["cue", "response", "R123", "N", "R123.Strength"])
        for cue in cues:
            responses = [r for r in rng.sample(cues, 21) if r != cue][:20] + rng.sample(others, 10)
            rng.shuffle(responses)
            counts = sorted((rng.randint(1, 40) for _ in responses), reverse=True)
            n = sum(counts) + rng.randint(0, 30)
            for r, c in zip(responses, counts):
                w.writerow([cue, r, c, n, f"{c / n:.6f}"])
                rows += 1
    return rows


def write_images(folder: Path, concepts: list[str], rng: random.Random, text_share: float = 0.01) -> int:
    """One 96 x 96 JPEG per concept; ``text_share`` of them show the concept's word. Returns how many do."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFont

    folder.mkdir(parents=True)
    font = ImageFont.load_default(size=22)
    with_text = 0
    for i, c in enumerate(concepts):
        arr = (np.random.default_rng(i).random((8, 8, 3)) * 255).astype("uint8")
        im = Image.fromarray(arr).resize((96, 96), Image.Resampling.BICUBIC)
        if rng.random() < text_share:
            im = Image.new("RGB", (96, 96), (245, 245, 235))
            ImageDraw.Draw(im).text((4, 36), c, fill=(10, 10, 10), font=font)
            with_text += 1
        im.save(folder / f"{c}.jpg", quality=85)
    return with_text


def write_raw_batch(folder: Path, concepts: list[str], tasks: int, rng: random.Random) -> tuple[int, int]:
    """creations.csv + solves.csv (the raw format, README "Annotation formats"); returns (instances, solves)."""
    k_limits = {5: (2, 3), 6: (2, 4), 10: (2, 5), 12: (2, 6)}
    folder.mkdir(parents=True)
    n_inst = n_solve = 0
    with open(folder / "creations.csv", "w", newline="") as fc, open(folder / "solves.csv", "w", newline="") as fs:
        c, s = csv.writer(fc), csv.writer(fs)
        c.writerow(["instance_id", "task_id", "spymaster_id", "cue", "candidates", "associations", "score_fool_the_ai"])
        s.writerow(["instance_id", "solver_id", "selection"])
        for t in range(tasks):
            n = rng.choice((5, 6, 10, 12))
            picked = rng.sample(concepts, n + 2)
            cands, cues = picked[:n], picked[n:]
            for j, cue in enumerate(cues):
                k = rng.randint(*k_limits[n])
                assoc = rng.sample(cands, k)
                iid = f"t{t:05d}-{j + 1}"
                c.writerow(
                    [
                        iid,
                        f"t{t:05d}",
                        f"spy{t % 300:03d}",
                        cue,
                        json.dumps(cands),
                        json.dumps(assoc),
                        rng.choice((0, 33, 50, 67, 100)),
                    ]
                )
                n_inst += 1
                for solver in rng.sample(range(1000), 3):
                    sel = assoc if rng.random() < 0.8 else rng.sample(cands, k)
                    s.writerow([iid, f"solver{solver:04d}", json.dumps(sel)])
                    n_solve += 1
    return n_inst, n_solve


def make_project(
    dest: Path, n_concepts: int, tasks: int, model: str, seed: int = 0, precision: str | None = None
) -> dict[str, Any]:
    """Write the synthetic project into ``dest``; returns what was generated. ``precision`` (fp32 |
    bf16 | auto) replaces ``ocr.precision`` and the models' (None keeps params.yaml's)."""
    import yaml

    from gavil.pipeline.dvc import write_dvc_yaml

    rng = random.Random(seed)
    copy_project(dest, with_params=False)
    cues = pseudo_words(n_concepts, rng)
    others = pseudo_words(max(1000, n_concepts // 2), rng, set(cues))
    synth = dest / "data/synth"
    synth.mkdir(parents=True)
    edges = write_swow(synth / "strength.SWOW-EN.R123.csv", cues, others, rng)
    with_text = write_images(synth / "images", cues, rng)
    n_inst, n_solve = write_raw_batch(synth / "raw" / "batch-0001", cues, tasks, rng)

    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["ingest"]["path"] = "data/synth/strength.SWOW-EN.R123.csv"
    p["crawl"] |= {"source": "local", "local_dir": "data/synth/images"}
    untrained = {"kind": "open_clip", "model": model, "pretrained": None, "weights_path": None, "allow_download": False}
    p["models"]["rival"] |= untrained
    p["models"][f"{model.lower()}-untrained"] = {**untrained, "precision": "fp32", "device": "auto"}
    p["annotations"] |= {"release_files": [], "raw_dir": "data/synth/raw"}
    # pseudo-words have no Brysbaert concreteness rating: with the filter on, no SWOW instance is left
    p["instances"]["swow"]["min_concreteness"] = None
    if precision is not None:
        p["ocr"]["precision"] = p["models"]["rival"]["precision"] = precision
        p["models"][f"{model.lower()}-untrained"]["precision"] = precision
    p["evaluate"]["models"] = [f"{model.lower()}-untrained"]
    (dest / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    write_dvc_yaml(dest / "dvc.yaml", dest / "params.yaml")  # evaluate names other models than the shipped file
    return {
        "concepts": n_concepts,
        "swow_edges": edges,
        "images": n_concepts,
        "images_with_text": with_text,
        "instances": n_inst,
        "solves": n_solve,
        "model": f"{model} (random weights)",
        "precision": {"ocr": p["ocr"]["precision"], "score": p["models"]["rival"]["precision"]}
        | {"evaluate": p["models"][f"{model.lower()}-untrained"]["precision"]},
    }


class TreeMemory:
    """Peak summed RSS (MB) of this process and all its descendants, sampled every ``every_s``."""

    def __init__(self, every_s: float = 0.25):
        import psutil

        self._proc, self._every, self.peak_mb = psutil.Process(), every_s, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for p in [self._proc, *self._proc.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)
            self._stop.wait(self._every)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_STAGE_CHILD = (
    "import json, resource, sys\n"
    "from gavil.pipeline.runner import run_stage\n"
    "m = run_stage(sys.argv[1])\n"
    "print('@@' + json.dumps({'seconds': m['seconds'], 'peak_rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))\n"
)


def _env() -> dict[str, str]:
    return tool_env(GAVIL_ANNOTATOR_KEY="scale-benchmark", PREFECT_SERVER_ANALYTICS_ENABLED="false")


def _run_child(code: str, args: list[str], project: Path, what: str) -> dict[str, Any]:
    """Run ``python -c code *args`` in ``project``; return the JSON it printed after ``@@``.

    Raises:
        RuntimeError: the child failed (with the end of its stderr).
    """
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=project, env=_env(), capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{what} failed:\n{out.stderr[-4000:]}")
    return json.loads(next(line[2:] for line in out.stdout.splitlines() if line.startswith("@@")))


def run_sequential(project: Path, only: set[str] | None = None) -> tuple[list[dict[str, Any]], float, float]:
    """Every stage (of ``only``, if given) in its own process, in DAG order: (rows, total seconds,
    sampled tree peak MB)."""
    from gavil.pipeline.registry import STAGES

    rows = []
    t0 = time.perf_counter()
    with TreeMemory() as mem:
        for s in STAGES:
            if only is not None and s.name not in only:
                continue
            t = time.perf_counter()
            child = _run_child(_STAGE_CHILD, [s.name], project, s.name)
            metrics = json.loads((project / s.metrics).read_text())
            rows.append(
                {
                    "stage": s.name,
                    "seconds": round(time.perf_counter() - t, 2),
                    "stage_seconds": child["seconds"],
                    "peak_rss_mb": round(child["peak_rss_mb"], 1),
                    "summary": _summary(metrics),
                }
            )
            print(
                f"  {s.name:20s} {rows[-1]['seconds']:9.2f} s  {rows[-1]['peak_rss_mb']:8.1f} MB  {rows[-1]['summary']}",
                flush=True,
            )
            check_not_empty(s.name, rows[-1]["summary"])
    return rows, time.perf_counter() - t0, mem.peak_mb


def check_not_empty(stage: str, summary: dict[str, Any]) -> None:
    """Raise if ``stage`` reported no concepts, images or instances to work on: its seconds would
    time nothing (with the concreteness filter on, pseudo-words once left scoring 0 instances, and
    the run still printed a total).

    Raises:
        RuntimeError: naming the stage and the empty counts.
    """
    empty = [k for k in ("concepts", "images", "instances") if k in summary and not summary[k]]
    if empty:
        raise RuntimeError(
            f"{stage} had no {' or '.join(empty)} to work on, so its time would measure nothing: "
            "the synthetic project does not reach it (did a filter drop everything?)"
        )


def _summary(m: dict[str, Any]) -> dict[str, Any]:
    keep = ("concepts", "edges", "images", "instances", "solves", "by_status", "selected", "rejected")
    return {k: m[k] for k in keep if k in m}


_FLOW_CHILD = (
    "import json\n"
    "from flows.build import run_flow\n"
    "r = run_flow(use_dvc=False)\n"
    "print('@@' + json.dumps({k: v.get('seconds') for k, v in r.items()}))\n"
)


def run_dask(project: Path, workers: int) -> tuple[float, float, dict[str, Any]]:
    """The Prefect flow on a local Dask cluster: (seconds, sampled tree peak MB, {stage: reported seconds})."""
    import yaml

    pp = project / "params.yaml"
    p = yaml.safe_load(pp.read_text())
    p["prefect"]["task_runner"] |= {
        "kind": "dask",
        "dask_workers": workers,
        "dask_threads_per_worker": 1,
        "dask_address": None,
    }
    pp.write_text(yaml.safe_dump(p, sort_keys=False))
    t0 = time.perf_counter()
    with TreeMemory() as mem:
        stages = _run_child(_FLOW_CHILD, [], project, "dask flow")
    return time.perf_counter() - t0, mem.peak_mb, stages


def dask_timeline() -> list[dict[str, Any]]:
    """The Dask flow run's timeline (benchmarks/flow_timeline.py) from the local Prefect API."""
    import os

    from benchmarks.flow_timeline import read_run, timeline

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    run, tasks = read_run(None)
    rows = timeline(run.start_time, tasks)
    for r in rows:
        print(
            f"  {r['stage']:20s} {r['kind']:7s} {r['start_s']:8.1f} -> {r['end_s']:8.1f} s  {r['tasks']:4d} task(s), busy {r['busy_s']:8.1f} s",
            flush=True,
        )
    return rows


def dvc_noop(project: Path) -> tuple[float, float]:
    """``dvc commit`` every stage's outputs, then time a ``dvc repro`` that must run nothing: (commit s, repro s)."""
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([*dvc, "init", "-q"], cwd=project, check=True, env=_env())
    t0 = time.perf_counter()
    subprocess.run([*dvc, "commit", "-f", "-q"], cwd=project, check=True, env=_env(), capture_output=True)
    t_commit = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = subprocess.run([*dvc, "repro"], cwd=project, check=True, env=_env(), capture_output=True, text=True)
    t_repro = time.perf_counter() - t0
    if "Running stage" in out.stdout:
        raise RuntimeError(f"dvc repro was not a no-op:\n{out.stdout[-3000:]}")
    return t_commit, t_repro


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concepts", type=int, default=12_000)
    ap.add_argument("--tasks", type=int, default=30_000, help="creation tasks; two instances (cues) each")
    ap.add_argument("--model", default="RN50", help="open_clip architecture for scoring/evaluation (random weights)")
    ap.add_argument("--dask", action="store_true", help="also run the flow on a 2-worker local Dask cluster")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the temporary projects")
    ap.add_argument("--out", default="scale", help="results file name: benchmarks/results/<out>.json")
    ap.add_argument(
        "--precision",
        choices=("fp32", "bf16", "auto"),
        default=None,
        help="ocr/score/evaluate precision for the run (default: params.yaml's values)",
    )
    ap.add_argument(
        "--stages",
        default=None,
        help="comma-separated stages to run (default: all); the others' outputs must not be needed "
        "downstream, and the no-op dvc repro is then not measured",
    )
    args = ap.parse_args()
    only = set(args.stages.split(",")) if args.stages else None
    if only is not None:
        from gavil.pipeline.registry import STAGES

        if unknown := only - {s.name for s in STAGES}:
            ap.error(f"unknown stage(s) {sorted(unknown)}; stages: {', '.join(s.name for s in STAGES)}")

    base = Path(tempfile.mkdtemp(prefix="gavil-scale-"))
    t0 = time.perf_counter()
    generated = make_project(base / "template", args.concepts, args.tasks, args.model, precision=args.precision)
    t_generate = time.perf_counter() - t0
    print(f"generated in {t_generate:.1f} s: {generated}", flush=True)

    seq = base / "sequential"
    shutil.copytree(base / "template", seq)
    print("sequential (one process per stage, DAG order):", flush=True)
    rows, t_seq, seq_tree_mb = run_sequential(seq, only)
    t_commit = t_noop = float("nan")
    if only is None:
        t_commit, t_noop = dvc_noop(seq)
        print(f"dvc commit {t_commit:.1f} s; no-op dvc repro {t_noop:.2f} s", flush=True)

    result: dict[str, Any] = {
        "machine": machine(),
        "generated": generated,
        "generate_s": round(t_generate, 1),
        "sequential": {
            "stages": rows,
            "total_s": round(t_seq, 1),
            "peak_stage_rss_mb": max(r["peak_rss_mb"] for r in rows),
            "peak_tree_rss_mb_sampled": round(seq_tree_mb, 1),
        },
        "stages_run": "all" if only is None else sorted(only),
        "dvc_commit_s": None if only is not None else round(t_commit, 1),
        "dvc_repro_noop_s": None if only is not None else round(t_noop, 2),
        "targets": {"peak_memory_mb": "< 4096", "dvc_repro_noop_s": "< 5"},
    }
    if args.dask:
        dk = base / "dask"
        shutil.copytree(base / "template", dk)
        print(f"Prefect flow on a {args.workers}-worker local Dask cluster:", flush=True)
        t_dask, dask_mb, dask_stages = run_dask(dk, args.workers)
        result["dask"] = {
            "workers": args.workers,
            "threads_per_worker": 1,
            "total_s": round(t_dask, 1),
            "peak_tree_rss_mb_sampled": round(dask_mb, 1),
            "reported_stage_seconds": dask_stages,
            "sequential_over_dask": round(t_seq / t_dask, 2),
        }
        result["dask"]["timeline"] = dask_timeline()
        print(
            f"  dask flow {t_dask:.1f} s vs sequential {t_seq:.1f} s: ratio {t_seq / t_dask:.2f}; tree peak {dask_mb:.0f} MB",
            flush=True,
        )

    print(f"\n{'stage':22s} {'seconds':>9s} {'peak RSS MB':>12s}")
    for r in rows:
        print(f"{r['stage']:22s} {r['seconds']:9.2f} {r['peak_rss_mb']:12.1f}")
    print(
        f"{'total (sequential)':22s} {t_seq:9.1f} {result['sequential']['peak_stage_rss_mb']:12.1f}  (tree sampled {seq_tree_mb:.0f} MB)"
    )
    if only is None:
        print(f"no-op dvc repro {t_noop:.2f} s (target < 5)")
    if args.dask:
        print(
            f"dask ({args.workers} workers) {result['dask']['total_s']} s; sequential / dask = {result['dask']['sequential_over_dask']}"
        )
    write_result(args.out, result)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
