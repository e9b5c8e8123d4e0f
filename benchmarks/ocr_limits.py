"""Why the OCR stage is not 10x faster than ``readtext`` while missing nothing, on this CPU (issue 27).

Two measurements, both on the stage's own bf16 CRAFT detector (``stages/ocr_filter._fast``):

1. **Arithmetic.** CRAFT's multiply-accumulates per megapixel of input (``torch.utils.flop_counter``
   on a 1,024 x 1,024 input) and the rate the bf16 detector reaches here (GMAC/s, best of 3). Reading
   every pixel at full size, as ``readtext`` does, costs at least MACs / rate seconds per megapixel.
2. **Skipping pixels.** For the OCR set (:mod:`benchmarks._ocrset`: web photos, half of them with
   their word at 1-8 % cap height), CRAFT's text score (the region map, 0-1) at full size and at half
   size (the image downscaled 2x, a quarter of the work): the peak inside each word's box, and the
   peak over each text-free photo. A cascade that reads at half size and re-reads at full size
   only where the half-size score passes a threshold must set the threshold below the half-size peak
   of the weakest word that full-size CRAFT finds; the table says how many text-free photos that threshold would send to the full-size pass.

Usage (project root, venv):  python benchmarks/ocr_limits.py [--images 48] [--seed 1]
Prints the tables and writes benchmarks/results/ocr_limits.json.
"""

from __future__ import annotations

import argparse
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
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    from gavil.models.torchvision_compat import ensure_torchvision

    ensure_torchvision()
    import cv2
    import easyocr
    import easyocr_en_models
    import numpy as np
    import torch
    from easyocr.imgproc import normalizeMeanVariance
    from torch.utils.flop_counter import FlopCounterMode

    from gavil.models.precision import cpu_native_bf16
    from stages.ocr_filter import _fast, load_for_ocr

    reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    x = torch.randn(1, 3, 1024, 1024)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        reader.detector(x)
    gmac_per_mpx = fc.get_total_flops() / 2 / 1e9 / (1024 * 1024 / 1e6)
    _fast(reader, "bf16", "cpu")
    net = reader.detector
    best = float("inf")
    with torch.no_grad():
        net(x)  # warm-up
        for _ in range(3):
            t0 = time.perf_counter()
            net(x)
            best = min(best, time.perf_counter() - t0)
    gmac_per_s = gmac_per_mpx * 1.048576 / best

    def text_score(img: np.ndarray) -> np.ndarray:
        """CRAFT's region score for an RGB image: half the input's height and width."""
        t = torch.from_numpy(normalizeMeanVariance(img)).permute(2, 0, 1)[None]
        with torch.no_grad():
            y, _ = net(t)
        return y[0, :, :, 0].numpy()

    items = write_ocr_set(Path(tempfile.mkdtemp(prefix="gavil-ocr-limits-")), args.images, args.seed)
    words: list[dict] = []
    free: list[dict] = []
    for it in items:
        img = load_for_ocr(it.path, 2560)  # full size for every web image (long side <= 1,600)
        h, w = img.shape[:2]
        full = text_score(img)
        half = text_score(cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_LINEAR))
        if it.shows_word and it.box:
            x0, y0, x1, y1 = it.box  # full-size pixels; the maps are at 1/2 and 1/4 of that
            words.append(
                {
                    "image": Path(it.path).name,
                    "cap_height_percent": it.cap_height_percent,
                    "cap_height_px": it.cap_height_px,
                    "full_size_peak": round(float(full[y0 // 2 : y1 // 2 + 1, x0 // 2 : x1 // 2 + 1].max()), 3),
                    "half_size_peak": round(float(half[y0 // 4 : y1 // 4 + 1, x0 // 4 : x1 // 4 + 1].max()), 3),
                }
            )
        elif not it.shows_word:
            free.append({"image": Path(it.path).name, "half_size_peak": round(float(half.max()), 3)})

    # the words full-size CRAFT finds (peak >= EasyOCR's text_threshold, 0.7): the ones a cascade must keep
    seen = [r for r in words if r["full_size_peak"] >= 0.7]
    weakest = min(r["half_size_peak"] for r in seen)
    flagged = sum(r["half_size_peak"] >= weakest for r in free)
    by_cap = {
        f"{c:g}%": sorted(r["half_size_peak"] for r in words if r["cap_height_percent"] == c)
        for c in CAP_HEIGHTS_PERCENT
    }
    result = {
        "machine": machine(f"CPU native bf16: {cpu_native_bf16()}, torch threads {torch.get_num_threads()}"),
        "craft_gmac_per_megapixel": round(gmac_per_mpx, 1),
        "bf16_detector_gmac_per_s": round(gmac_per_s, 1),
        "bf16_detector_s_per_megapixel": round(best / 1.048576, 3),
        "ocr_set": {"images": len(items), "seed": args.seed, "words": len(words), "text_free": len(free)},
        "half_size_peak_in_word_box_by_cap_height": by_cap,
        "words": words,
        "text_free": free,
        "words_found_at_full_size": f"{len(seen)}/{len(words)}",
        "weakest_found_word_half_size_peak": weakest,
        "text_free_photos_at_or_above_it": f"{flagged}/{len(free)}",
    }
    print(f"CRAFT: {gmac_per_mpx:.0f} GMAC per megapixel; bf16 detector {gmac_per_s:.0f} GMAC/s here")
    print(f"  -> {best / 1.048576:.2f} s per megapixel at full size, whatever the cascade around it")
    print(f"{'cap height':>10s}  half-size text score inside the word's box (full-size peak)")
    for c in CAP_HEIGHTS_PERCENT:
        rows = [r for r in words if r["cap_height_percent"] == c]
        cells = ", ".join(f"{r['half_size_peak']:.3f} ({r['full_size_peak']:.2f})" for r in rows)
        print(f"{c:9g}%  {cells}")
    print(f"text-free photos, half-size peak: {sorted(r['half_size_peak'] for r in free)}")
    print(f"words full-size CRAFT finds (peak >= 0.7): {len(seen)}/{len(words)}")
    print(f"a threshold that keeps the weakest of them ({weakest:.3f}) re-reads {flagged}/{len(free)} text-free photos")
    write_result("ocr_limits", result)


if __name__ == "__main__":
    main()
