"""Time every stage on the embedded sample, a first and a no-op `dvc repro` (the OCR speed
target is measured by benchmarks/ocr.py, the crawl's by benchmarks/crawl.py).

Usage (from the project root, in the venv):  python benchmarks/pipeline_stages.py
Prints a table and writes benchmarks/results/pipeline_stages.json.
"""

from __future__ import annotations

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


def main() -> None:
    from gavil.pipeline.registry import STAGES
    from gavil.pipeline.runner import run_stage

    work = Path(tempfile.mkdtemp(prefix="gavil-bench-"))
    copy_project(work)
    params = (work / "params.yaml").read_text().replace("allow_download: true", "allow_download: false")
    (work / "params.yaml").write_text(params)
    os.chdir(work)
    os.environ["DVC_NO_ANALYTICS"] = "1"
    rows = []
    for s in STAGES:
        t0 = time.perf_counter()
        m = run_stage(s.name)
        rows.append(
            {
                "stage": s.name,
                "seconds": round(time.perf_counter() - t0, 3),
                "summary": {
                    k: v for k, v in m.items() if k in ("concepts", "images", "instances", "by_status", "edges")
                },
            }
        )

    # DVC: a first repro (all stages) then a no-op repro
    for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(cmd, check=True)
    env = tool_env()
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "dvc", "repro", "-q"], check=True, env=env, capture_output=True)
    t_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "dvc", "repro"], check=True, env=env, capture_output=True, text=True)
    t_noop = time.perf_counter() - t0
    assert "Running stage" not in out.stdout

    result = {
        "machine": machine(),
        "stages": rows,
        "dvc_repro_first_s": round(t_first, 2),
        "dvc_repro_noop_s": round(t_noop, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }
    print(f"{'stage':22s} {'seconds':>8s}")
    for r in rows:
        print(f"{r['stage']:22s} {r['seconds']:8.3f}")
    print(
        f"dvc repro: first {result['dvc_repro_first_s']} s, no-op {result['dvc_repro_noop_s']} s; peak RSS {result['peak_rss_mb']} MB"
    )
    write_result("pipeline_stages", result)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
