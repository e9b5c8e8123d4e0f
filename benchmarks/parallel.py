"""Every core under ``dvc repro``: a partitioned stage run by ``gavil stage`` with 1 and with N worker
processes, each from a new interpreter, on the same web-shaped images.

A scratch project holds the sample's SWOW concepts and ``--images`` web-shaped JPEG photos (long side
500-1,600 px, :func:`benchmarks._web.web_photo`), one per concept, as ``crawl.source: local`` files.
For each stage (``crawl_images`` from scratch: journal, store and tables removed; ``ocr_filter`` with
an empty detection cache) and each ``--processes`` value, ``gavil stage NAME --processes P`` runs in a
new interpreter: wall seconds, CPU seconds (user + system of the command and every worker process
it started and waited for, ``RUSAGE_CHILDREN``), the largest single process's peak RSS, the partitions
and processes it used (``data/metrics/timings``), and the sha256 of its outputs, which must be the
same for every P. The machine's load average is recorded before and after (other users' work
counts against the wall time; the CPU seconds do not depend on it much).

Usage (from the project root, in the project's venv)::

    python benchmarks/parallel.py --images 64 --processes 1 2

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

from benchmarks._common import copy_project, machine, tool_env, write_result  # noqa: E402

STAGES = ("crawl_images", "ocr_filter")


def _gavil(project: Path, *args: str) -> dict:
    """``gavil *args`` in ``project`` from a new interpreter: wall, CPU, peak RSS and its stderr."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run(["gavil", *args], cwd=project, env=tool_env(), capture_output=True, text=True)
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


def _reset(project: Path, stage: str) -> None:
    """Remove what would let ``stage`` skip work: its outputs and caches (crawl: journal and store too)."""
    gone = {
        "crawl_images": ["data/crawl", "data/images", "data/cache/crawl_journal"],
        "ocr_filter": ["data/ocr", "data/cache/ocr_detections.parquet"],
    }[stage]
    for rel in gone:
        p = project / rel
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


def build(dest: Path, n_images: int) -> Path:
    """A scratch project whose first ``n_images`` ok concepts have a web-shaped photo each."""
    import pandas as pd
    import yaml

    from benchmarks._common import sample_photos
    from benchmarks._web import web_photo

    d = copy_project(dest)
    for stage in ("ingest_concepts", "filter_profanity"):
        _gavil(d, "stage", stage)
    concepts = pd.read_parquet(d / "data/profanity/concept_filter.parquet")
    ok = sorted(concepts.loc[concepts["status"] == "ok", "concept"])[:n_images]
    folder = d / "images"
    folder.mkdir()
    photos = sample_photos()
    for i, concept in enumerate(ok):
        (folder / f"{concept}.jpg").write_bytes(web_photo(1_000 + i, photos))
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["crawl"]["local_dir"] = str(folder)
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["gavil", "dvc-yaml", "--write"], cwd=d, env=tool_env(), check=True, capture_output=True)
    return d


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--images", type=int, default=64)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args()
    rows = []
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gavil-parallel-") as tmp:
        d = build(Path(tmp) / "proj", args.images)
        for stage in STAGES:
            for p in args.processes:
                _reset(d, stage)
                r = _gavil(d, "stage", stage, "--processes", str(p))
                timing = json.loads((d / f"data/metrics/timings/{stage}.json").read_text())
                log = r.pop("log").splitlines()
                rows.append(
                    {
                        "stage": stage,
                        "processes_asked": p,
                        "processes": timing.get("processes", 1),
                        "partitions": timing.get("partitions"),
                        **r,
                        "how": next((ln for ln in log if ln.startswith(f"{stage}: ") and "partition(s)" in ln), ""),
                        "outputs_sha256": _outputs(d, stage),
                    }
                )
            if len({r["outputs_sha256"] for r in rows if r["stage"] == stage}) != 1:
                raise SystemExit(f"{stage}: the outputs differ between process counts")
    load_after = os.getloadavg()
    print(f"{'stage':<14} {'P':>2} {'parts':>5} {'wall s':>8} {'CPU s':>8} {'peak MB':>8}")
    for r in rows:
        print(
            f"{r['stage']:<14} {r['processes']:>2} {r['partitions']:>5} {r['wall_s']:>8} {r['cpu_s']:>8} {r['max_rss_mb']:>8}"
        )
    print(
        f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}; outputs identical across process counts"
    )
    dest = write_result(
        "parallel",
        {
            "machine": machine(),
            "images": args.images,
            "load_average_before": round(load_before[0], 2),
            "load_average_after": round(load_after[0], 2),
            "rows": rows,
        },
    )
    print(f"wrote {dest.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
