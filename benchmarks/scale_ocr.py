"""OCR again on a project ``scale.py --dvc`` built, at another detector input size: the stage's cost
at scale and its decisions against the generated photos' truth.

``scale.py --dvc`` builds every stage of a 12,000-concept project; re-running the whole build to
measure one OCR setting takes over an hour on 2 cores. This sets ``ocr.ppocr_max_side`` in the
built project's ``params.yaml``, runs ``dvc repro -s ocr_filter`` there (that stage alone, through
DVC as users run it; the detections of the new setting are not in the OCR cache, whose entries are
labelled by the engine's settings, so every image is read again), and writes the stage's own
timing (``data/metrics/timings/ocr_filter.json``: wall, CPU of the stage and its worker processes,
peak RSS), the CPU per image read, :func:`benchmarks.scale.text_image_fates` (planted own-word and
other-word photos, plain photos rejected) and how many concepts' decisions changed against the
``ocr.parquet`` the build left (copied aside first).

Usage (from the project root, in the project's venv; the project built by ``scale.py --dvc``)::

    python benchmarks/scale_ocr.py --project /work/scale12000/proj/dvc --max-side 800 --out scale_12000_ocr800

Writes ``benchmarks/results/<out>.json`` and prints it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402
from benchmarks.scale import load_average, text_image_fates  # noqa: E402


def changed_decisions(before: pd.DataFrame, after: pd.DataFrame) -> dict[str, object]:
    """Concepts whose accepted image (rank) or status differs between two ``ocr.parquet`` tables."""
    cols = ["concept", "rank", "status"]
    a = before[cols].sort_values(cols).drop_duplicates("concept", keep="first").set_index("concept")
    b = after[cols].sort_values(cols).drop_duplicates("concept", keep="first").set_index("concept")
    both = a.index.intersection(b.index)
    diff = [c for c in both if tuple(a.loc[c]) != tuple(b.loc[c])]
    return {"concepts": len(both), "changed": len(diff), "examples": sorted(diff)[:20]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--project", type=Path, required=True, help="a project built by scale.py --dvc (its dvc folder)")
    ap.add_argument("--max-side", type=int, required=True, help="ocr.ppocr_max_side to measure")
    ap.add_argument("--out", required=True, help="results file name: benchmarks/results/<out>.json")
    args = ap.parse_args()
    project = args.project.resolve()
    params_path = project / "params.yaml"
    params = yaml.safe_load(params_path.read_text())
    before_side = params["ocr"].get("ppocr_max_side")
    before = project.parent / f"ocr_max{before_side}.parquet"
    if not before.exists():
        shutil.copyfile(project / "data/ocr/ocr.parquet", before)
    params["ocr"]["ppocr_max_side"] = args.max_side
    params_path.write_text(yaml.safe_dump(params, sort_keys=False))
    load_start = load_average()
    t0 = time.perf_counter()
    rc = subprocess.run([sys.executable, "-m", "dvc", "repro", "-s", "ocr_filter"], cwd=project).returncode
    wall = time.perf_counter() - t0
    timing = json.loads((project / "data/metrics/timings/ocr_filter.json").read_text())
    ocr = pd.read_parquet(project / "data/ocr/ocr.parquet")
    images_read = int(ocr["candidates_read"].fillna(0).sum())
    result = {
        "machine": machine(),
        "command": f"python benchmarks/scale_ocr.py --project {args.project} --max-side {args.max_side} --out {args.out}",
        "ppocr_max_side": {"before": before_side, "measured": args.max_side},
        "exit_status": rc,
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "dvc_repro_wall_s": round(wall, 1),
        "stage": timing,
        "cores_used": round(timing["cpu_seconds"] / timing["seconds"], 2) if timing.get("seconds") else None,
        "images_read": images_read,
        "cpu_s_per_image": round(timing["cpu_seconds"] / images_read, 3) if images_read else None,
        "text_images": text_image_fates(project),
        "decisions_vs_before": changed_decisions(pd.read_parquet(before), ocr),
    }
    dest = write_result(args.out, result)
    print(json.dumps(result, indent=1))
    print(f"wrote {dest.relative_to(ROOT)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
