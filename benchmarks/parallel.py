"""Every core under ``dvc repro``: each partitioned stage run by ``gavil stage`` with 1 and with N
worker processes, each from a new interpreter, on one generated project big enough that every one
of them really splits.

The project is :mod:`benchmarks.scale`'s (``--concepts`` real English words, ``--top-n`` web-sized
JPEG photos each served on loopback and crawled with ``crawl.source: urllist``, a raw annotation
batch of ``--tasks`` creation tasks, random-weight CLIP models labelled untrained, every other param
at its default). The stages run in DAG order; each partitioned stage (``crawl_images``,
``ocr_filter``, ``score_candidates``, ``evaluate``) runs once per ``--processes`` value (an upper
bound: ``gavil stage`` may use fewer), and the two CLIP stages once more on the largest value with
every model's ``threads`` set to 1 (so their workers are one-thread processes, one per core), after its
outputs and its own cache are removed (the crawl: journal and image store too; scoring and evaluate:
their embedding caches, so the CLIP forward passes are redone; evaluate still reuses the rival's
vectors from scoring, as it does in a real run). Each run: wall seconds, CPU seconds (user + system
of the command and every worker process it started and waited for, ``RUSAGE_CHILDREN``), the largest
single process's peak RSS, the partitions and processes it used (``data/metrics/timings``), and the
sha256 of its outputs, which must be the same for every process count. The machine's load average is
recorded before and after (other users' work counts against the wall time; the CPU seconds do not
depend on it much).

Usage (from the project root, in the project's venv with the ``test`` extra)::

    python benchmarks/parallel.py --concepts 300 --tasks 600 --processes 1 2

Prints a table and writes ``benchmarks/results/parallel.json``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, tool_env, write_result  # noqa: E402

PARTITIONED = ("crawl_images", "ocr_filter", "score_candidates", "evaluate")
#: What a stage's run must not find, beyond its dvc.yaml outputs: its own caches (scoring's and
#: evaluate's embeddings, OCR's detections, the crawl's journal).
CACHES = {
    "crawl_images": ["data/cache/crawl_journal"],
    "ocr_filter": ["data/cache/ocr_detections.parquet"],
    "score_candidates": ["data/cache/embeddings.parquet"],
    "evaluate": ["data/cache/eval_embeddings.parquet"],
}


def _gavil(project: Path, *args: str) -> dict:
    """``gavil *args`` in ``project`` from a new interpreter: wall, CPU, peak RSS and its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    env = tool_env(GAVIL_ANNOTATOR_KEY="parallel-benchmark", PREFECT_SERVER_ANALYTICS_ENABLED="false")
    done = subprocess.run(["gavil", *args], cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"gavil {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "max_rss_mb": round(after.ru_maxrss / 1024),
        "log": done.stderr,
    }


def _outputs(project: Path, stage: str) -> str:
    """One sha256 over every output file of ``stage`` (dvc.yaml outs, in path order)."""
    import yaml

    outs = yaml.safe_load((project / "dvc.yaml").read_text())["stages"][stage]["outs"]
    h = hashlib.sha256()
    for entry in outs:
        path = project / (next(iter(entry)) if isinstance(entry, dict) else entry)
        for f in sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]:
            h.update(str(f.relative_to(project)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _outs(project: Path, stage: str) -> list[Path]:
    """``stage``'s dvc.yaml outputs in ``project``."""
    import yaml

    outs = yaml.safe_load((project / "dvc.yaml").read_text())["stages"][stage]["outs"]
    return [project / (next(iter(entry)) if isinstance(entry, dict) else entry) for entry in outs]


def _reset(project: Path, stage: str) -> None:
    """Remove what would let ``stage`` skip work: its outputs and its own caches (:data:`CACHES`)."""
    for p in [*_outs(project, stage), *(project / rel for rel in CACHES[stage])]:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


#: The stages whose one process runs its model on torch's threads (a worker uses ``threads`` of them
#: well): also measured on processes of one thread each (the models' ``threads: 1``).
TORCH = ("score_candidates", "evaluate")


def _set_threads(project: Path, threads: int | None) -> None:
    """Every models entry's ``threads`` (a runtime knob: no output changes) set to ``threads``; None
    puts the params back as generated."""
    import yaml

    path, saved = project / "params.yaml", project / "params.generated.yaml"
    if not saved.exists():
        shutil.copy(path, saved)
    p = yaml.safe_load(saved.read_text())
    if threads is not None:
        for entry in p["models"].values():
            entry["threads"] = threads
    path.write_text(yaml.safe_dump(p, sort_keys=False))


def _row(project: Path, stage: str, processes: int, threads: int | None = None) -> dict:
    """Run ``stage`` with at most ``processes`` worker processes (and the models' ``threads`` set to
    ``threads``, None: as generated) after :func:`_reset`; its table row."""
    _reset(project, stage)
    _set_threads(project, threads)
    try:
        r = _gavil(project, "stage", stage, "--processes", str(processes))
    finally:
        _set_threads(project, None)
    timing = json.loads((project / f"data/metrics/timings/{stage}.json").read_text())
    log = r.pop("log").splitlines()
    return {
        "stage": stage,
        "processes_asked": processes,
        "model_threads": threads,
        "processes": timing.get("processes", 1),
        "partitions": timing.get("partitions"),
        **r,
        "peak_rss_mb": timing["peak_rss_mb"],
        "how": next((ln for ln in log if ln.startswith(f"{stage}: ") and "partition(s)" in ln), ""),
        "outputs_sha256": _outputs(project, stage),
    }


def run(project: Path, processes: list[int]) -> list[dict]:
    """Every stage in DAG order; the partitioned ones once per process count (the last count's
    outputs feed the next stages), the others once. The image server runs throughout.

    Raises:
        SystemExit: a stage failed, or a partitioned stage's outputs differ between process counts.
    """
    from benchmarks.scale import serve_images
    from gavil.pipeline.registry import STAGES

    rows = []
    server = serve_images(project)
    try:
        for spec in STAGES:
            if spec.name not in PARTITIONED:
                _gavil(project, "stage", spec.name)
                continue
            configs = [(p, None) for p in processes] + ([(max(processes), 1)] if spec.name in TORCH else [])
            mine = [_row(project, spec.name, p, t) for p, t in configs]
            print(", ".join(f"{r['stage']} P={r['processes']}: {r['wall_s']} s, {r['cpu_s']} CPU-s" for r in mine))
            if len({r["outputs_sha256"] for r in mine}) != 1:
                raise SystemExit(f"{spec.name}: the outputs differ between process counts")
            rows += mine
    finally:
        server.terminate()
        server.join()
    return rows


def main() -> None:
    from benchmarks.scale import make_project

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--concepts", type=int, default=300)
    ap.add_argument("--tasks", type=int, default=600, help="creation tasks; two instances (cues) each")
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--image-cache", type=Path, default=Path.home() / ".cache" / "gavil-bench" / "web-seed0")
    ap.add_argument(
        "--project", type=Path, default=None, help="make the project here and keep it (else a temporary one)"
    )
    args = ap.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gavil-parallel-") as tmp:
        project = args.project or Path(tmp) / "proj"
        generated = make_project(project, args.concepts, args.tasks, args.image_cache)
        rows = run(project, args.processes)
    load_after = os.getloadavg()
    print(f"{'stage':<17} {'asked':>5} {'threads':>7} {'P':>2} {'parts':>5} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}")
    for r in rows:
        threads = r["model_threads"] or "-"
        print(
            f"{r['stage']:<17} {r['processes_asked']:>5} {threads:>7} {r['processes']:>2} {r['partitions'] or 1:>5}"
            f" {r['wall_s']:>8} {r['cpu_s']:>8} {r['peak_rss_mb']:>8}"
        )
    print(
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}; outputs identical across process counts"
    )
    generated.pop("images", None)
    dest = write_result(
        "parallel",
        {
            "machine": machine(),
            "project": {"concepts": args.concepts, "tasks": args.tasks} | generated,
            "load_average_before": round(load_before[0], 2),
            "load_average_after": round(load_after[0], 2),
            "rows": rows,
        },
    )
    print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
