"""``ocr.batch_size`` on this CPU: same-shaped images detected one at a time or 8 together.

The stage groups images of the same downscaled shape and runs CRAFT on up to ``ocr.batch_size`` of
them at once. This script takes 8 web photos (``benchmarks/_web.py``), resizes them to one shape
(1,280 x 960, a full-size web image at the default canvas; 640 x 480, the small canvas), and
times the stage's reader (bf16 where the CPU runs it natively, as ``precision: auto``) on all 8
with ``batch_size`` 1 and 8, 4 runs each in alternating order, after an untimed warm-up of each on
the same 8 images; it also checks that both give the same detections.

Usage (project root, venv):  python benchmarks/ocr_batch.py
Prints a table and writes benchmarks/results/ocr_batch.json.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402

SIZES = ((1280, 960), (640, 480))
BATCHES = (1, 8)
RUNS = 4


def main() -> None:
    import numpy as np
    from PIL import Image

    from benchmarks._web import write_web_photos
    from gavil.models.easyocr_reader import make_reader
    from gavil.models.precision import resolve

    prec = resolve("auto", "cpu")[0]
    files = write_web_photos(Path(tempfile.mkdtemp(prefix="gavil-ocr-batch-")), 8, seed=3)
    readers = {b: make_reader(b, prec, "cpu") for b in BATCHES}
    rows = []
    for size in SIZES:
        ims = [np.asarray(Image.open(f).convert("RGB").resize(size)) for f in files]
        secs: dict[int, list[float]] = {b: [] for b in BATCHES}
        found = {}
        for b in BATCHES:
            readers[b](ims, 2560)  # warm-up on the very batch shapes timed below
        for r in range(RUNS):
            for b in BATCHES[r % 2 :] + BATCHES[: r % 2]:  # the order alternates run by run
                t0 = time.perf_counter()
                found[b] = readers[b](ims, 2560)
                secs[b].append((time.perf_counter() - t0) / len(ims))
        rows.append(
            {
                "size": f"{size[0]}x{size[1]}",
                "s_per_image": {str(b): [round(s, 3) for s in secs[b]] for b in BATCHES},
                "batch8_over_batch1": round(min(secs[8]) / min(secs[1]), 3),
                "same_detections": found[1] == found[8],
            }
        )
    print(f"{'shape':>10s} {'batch 1 s/img':>16s} {'batch 8 s/img':>16s} {'8 / 1':>6s}  same")
    for r in rows:
        a, b = r["s_per_image"]["1"], r["s_per_image"]["8"]
        print(f"{r['size']:>10s} {min(a):16.3f} {min(b):16.3f} {r['batch8_over_batch1']:6.3f}  {r['same_detections']}")
    write_result("ocr_batch", {"machine": machine(), "precision": prec, "images": len(files), "rows": rows})


if __name__ == "__main__":
    main()
