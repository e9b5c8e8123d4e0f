"""OCR on real shapes (issue 27): the stage's reader vs EasyOCR's ``readtext`` on the OCR set.

Images: :func:`benchmarks._ocrset.write_ocr_set`: web-shaped photos (500-1,600 px long side, JPEG),
half text-free, half showing their concept word at a cap height of 1, 1.5, 2, 3, 5 or 8 % of the
image height, rotated in [-15, 15] degrees, several fonts, light-on-dark or dark-on-light, drawn
onto the photo.

Sides, each timed the same way: from the image file to its detections (decode, any downscale,
detection, recognition), one image at a time, in one process, models loaded before timing (model
load excluded on every side); the sides take turns image by image (the order rotates), so load from
anything else on the machine falls on all of them alike:

- ``readtext``: ``Reader.readtext(path)`` with EasyOCR's defaults (canvas 2,560, mag_ratio 1): the
  decision target;
- ``readtext@640``: ``Reader.readtext(path, canvas_size=640)``, what any EasyOCR user can pass;
- ``stage``: :func:`gavil.models.ocr_engine.load_for_ocr` + :func:`gavil.models.easyocr_reader.make_reader` at the
  params' ``ocr.canvas_size`` and ``ocr.precision`` (resolved on this machine);
- ``stage@<c>`` for each ``--extra-canvas`` c: the faster settings and what they lose.

Decisions: :func:`stages.ocr_filter.match_text` with the params' rule on every image, compared with
``readtext``'s; every disagreement is listed with its cap height.

Usage (project root, venv):  python benchmarks/ocr.py [--images 48] [--extra-canvas 640]
Prints a table and writes benchmarks/results/ocr.json (rewritten after every image).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402
from benchmarks._ocrset import CAP_HEIGHTS_PERCENT, write_ocr_set  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra-canvas", type=int, nargs="*", default=[640], help="stage canvases (px) to time too")
    ap.add_argument("--no-readtext-640", action="store_true", help="leave readtext(canvas_size=640) out")
    args = ap.parse_args()

    import yaml

    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import easyocr
    import easyocr_en_models
    import torch

    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr
    from gavil.models.precision import cpu_native_bf16, resolve
    from stages.ocr_filter import MatchRule, match_text

    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    canvas = int(p["canvas_size"])
    prec = resolve(str(p["precision"]), "cpu")[0]
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-bench-"))
    items = write_ocr_set(work, args.images, args.seed)

    rt = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    stage = make_reader(int(p["batch_size"]), prec, "cpu")

    def readtext(path: str, **kw: int) -> list[tuple[str, float]]:
        return [(str(t), float(c)) for _, t, c in rt.readtext(path, **kw)]

    def staged(c: int):
        return lambda path: stage([load_for_ocr(path, c)], c)[0]

    sides = {"readtext": readtext}
    if not args.no_readtext_640:
        sides["readtext@640"] = lambda path: readtext(path, canvas_size=640)
    sides["stage"] = staged(canvas)
    sides |= {f"stage@{c}": staged(c) for c in args.extra_canvas if c != canvas}
    names = list(sides)
    seconds: dict[str, list[float]] = {k: [] for k in names}
    rejected: dict[str, list[bool]] = {k: [] for k in names}
    texts: dict[str, list[str]] = {k: [] for k in names}
    for path in (items[0].path,):  # warm-up (first-call allocations), untimed and uncounted
        for k in names:
            sides[k](path)

    def report() -> dict:
        n = len(seconds["readtext"])
        done = items[:n]
        free = [i for i, it in enumerate(done) if not it.shows_word]
        t = {k: sum(v) for k, v in seconds.items()}

        def per_cap(k: str) -> dict[str, str]:
            out = {}
            for cap in CAP_HEIGHTS_PERCENT:
                idx = [i for i, it in enumerate(done) if it.cap_height_percent == cap]
                out[f"{cap:g}%"] = f"{sum(rejected[k][i] for i in idx)}/{len(idx)}"
            return out

        def disagreements(k: str) -> list[dict]:
            return [
                {
                    "image": Path(it.path).name,
                    "concept": it.concept,
                    "cap_height_percent": it.cap_height_percent,
                    "cap_height_px": it.cap_height_px,
                    "long_side_px": max(it.width, it.height),
                    "readtext_rejects": rejected["readtext"][i],
                    "readtext_read": texts["readtext"][i],
                    "this_read": texts[k][i],
                }
                for i, it in enumerate(done)
                if rejected[k][i] != rejected["readtext"][i]
            ]

        return {
            "machine": machine(f"CPU native bf16 (AMX/AVX-512-BF16): {cpu_native_bf16()}"),
            "torch_threads": torch.get_num_threads(),
            "note": "one process; every side timed from the image file to its detections (decode, downscale, "
            "detect, recognise), one image at a time, models loaded before timing (load excluded on every side); "
            "the sides take turns image by image, the order rotating, so machine load falls on all alike. "
            "Absolute seconds depend on the load; compare ratios.",
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "images": n,
            "text_free": len(free),
            "with_word": n - len(free),
            "stage_canvas_size": canvas,
            "stage_precision": prec,
            "seconds_total": {k: round(v, 2) for k, v in t.items()},
            "seconds_per_image_mean": {k: round(v / max(1, n), 3) for k, v in t.items()},
            "seconds_per_text_free_photo_median": {
                k: round(statistics.median([seconds[k][i] for i in free]), 3) if free else None for k in names
            },
            "speedup_vs_readtext": {k: round(t["readtext"] / t[k], 2) for k in names if t[k]},
            "speedup_vs_readtext_640": {k: round(t["readtext@640"] / t[k], 2) for k in names if t[k]}
            if "readtext@640" in t
            else None,
            "same_decision_as_readtext": {
                k: f"{sum(a == b for a, b in zip(rejected[k], rejected['readtext']))}/{n}" for k in names
            },
            "rejected_by_cap_height": {k: per_cap(k) for k in names},
            "rejected_text_free": {k: sum(rejected[k][i] for i in free) for k in names},
            "disagreements_with_readtext": {k: disagreements(k) for k in names if k != "readtext"},
            "targets": {"same_decision_as_readtext": "every image", "speedup_vs_readtext": ">= 10"},
        }

    for i, it in enumerate(items):
        order = names[i % len(names) :] + names[: i % len(names)]
        for k in order:
            t0 = time.perf_counter()
            dets = sides[k](it.path)
            seconds[k].append(time.perf_counter() - t0)
            rejected[k].append(match_text(it.concept, dets, rule).rejected)
            texts[k].append(" ".join(t for t, c in dets if c >= rule.min_confidence)[:200])
        print(
            f"ocr bench {i + 1}/{len(items)} {Path(it.path).name} ({max(it.width, it.height)} px): "
            + ", ".join(f"{k} {seconds[k][-1]:.2f} s {'R' if rejected[k][-1] else '-'}" for k in names),
            flush=True,
        )
        write_result("ocr", report())

    r = report()
    n = r["images"]
    print(f"\n{'side':16s} {'s/image':>8s} {'s/text-free':>11s} {'vs readtext':>11s} {'same decision':>14s}")
    for k in names:
        print(
            f"{k:16s} {r['seconds_per_image_mean'][k]:8.3f} {r['seconds_per_text_free_photo_median'][k] or 0:11.3f} "
            f"{r['speedup_vs_readtext'][k]:10.2f}x {r['same_decision_as_readtext'][k]:>14s}"
        )
    print("rejected by cap height:", r["rejected_by_cap_height"])
    for k, d in r["disagreements_with_readtext"].items():
        for x in d:
            print(f"  {k}: {x['image']} cap {x['cap_height_percent']} % ({x['cap_height_px']} px)")
    print(f"load average: {r['load_average_1_5_15']}, images {n}")
    write_result("ocr", r)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
