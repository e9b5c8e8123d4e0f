"""Why the OCR stage is not 10x faster than ``readtext`` while missing nothing, on this CPU (issue 27).

Three measurements, on the stage's own bf16 CRAFT detector (``gavil.models.craft.fast_detector``) and on
EasyOCR's fp32 one (``readtext``'s) and an int8 one:

1. **Arithmetic.** CRAFT's multiply-accumulates per megapixel of input (``torch.utils.flop_counter``
   on a 1,024 x 1,024 input) and the rate the bf16 detector reaches here (GMAC/s, best of 3). Reading
   every pixel at full size, as ``readtext`` does, costs at least MACs / rate seconds per megapixel.
2. **Skipping pixels.** For the OCR set (:mod:`benchmarks._ocrset`: web photos, half of them with
   their word at 1-8 % cap height), CRAFT's text score (the region map, 0-1) at full size and at half
   size (the image downscaled 2x, a quarter of the work): the peak inside each word's box, and the
   peak over each text-free photo. A cascade that reads at half size and re-reads at full size
   only where the half-size score passes a threshold must set the threshold below the half-size peak
   of the weakest word that full-size CRAFT finds; the table says how many text-free photos that threshold would send to the full-size pass.
3. **int8, the fastest arithmetic here.** CRAFT quantized to int8 as ``ocr.precision: int8`` does
   (:func:`gavil.models.craft.quantize_int8`: PyTorch FX post-training quantization, ``x86`` engine,
   oneDNN/FBGEMM kernels on AVX-512 VNNI, per-channel weights, the stored activation scales), timed against the fp32 and bf16 detectors
   on the same input in interleaved rounds; and its full-size text score inside each word's box, to
   count the words it still finds. Its speed-up over fp32 is the most any full-size reading can gain
   on this CPU's arithmetic (int8 is its densest format); the count says what that costs.

Usage (project root, venv):  python benchmarks/ocr_limits.py [--images 48] [--seed 1]
Prints the tables and writes benchmarks/results/ocr_limits.json.
"""

from __future__ import annotations

import argparse
import copy
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

    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import cv2
    import easyocr
    import easyocr_en_models
    import numpy as np
    import torch
    from easyocr.imgproc import normalizeMeanVariance
    from torch.utils.flop_counter import FlopCounterMode

    from gavil.models.craft import fast_detector, quantize_int8
    from gavil.models.ocr_engine import load_for_ocr
    from gavil.models.precision import cpu_native_bf16

    reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    x = torch.randn(1, 3, 1024, 1024)
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        reader.detector(x)
    gmac_per_mpx = fc.get_total_flops() / 2 / 1e9 / (1024 * 1024 / 1e6)
    fp32 = copy.deepcopy(reader.detector).eval()  # readtext's detector, as EasyOCR builds it
    fast_detector(reader, "bf16", "cpu")
    net = reader.detector
    int8 = quantize_int8(fp32)  # ocr.precision: int8, the stored scales (gavil/models/craft.py)
    detectors = {"fp32": fp32, "bf16": net, "int8": int8}
    secs: dict[str, list[float]] = {k: [] for k in detectors}
    with torch.no_grad():
        for d in detectors.values():
            d(x)  # warm-up
        for r in range(3):  # interleaved rounds, the order rotating
            names = list(detectors)[r:] + list(detectors)[:r]
            for k in names:
                t0 = time.perf_counter()
                detectors[k](x)
                secs[k].append(time.perf_counter() - t0)
    s_per_mpx = {k: min(v) / 1.048576 for k, v in secs.items()}
    best = min(secs["bf16"])
    gmac_per_s = gmac_per_mpx * 1.048576 / best

    def text_score(img: np.ndarray, detector: torch.nn.Module = net) -> np.ndarray:
        """CRAFT's region score for an RGB image: half the input's height and width."""
        t = torch.from_numpy(normalizeMeanVariance(img)).permute(2, 0, 1)[None]
        with torch.no_grad():
            y, _ = detector(t)
        return y[0, :, :, 0].float().numpy()

    items = write_ocr_set(Path(tempfile.mkdtemp(prefix="gavil-ocr-limits-")), args.images, args.seed)
    words: list[dict] = []
    free: list[dict] = []
    for it in items:
        img = load_for_ocr(it.path, 2560)[..., :3]  # RGB, full size for every web image (long side <= 1,600)
        h, w = img.shape[:2]
        full = text_score(img)
        half = text_score(cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_LINEAR))
        if it.shows_word and it.box:
            x0, y0, x1, y1 = it.box  # full-size pixels; the maps are at 1/2 and 1/4 of that
            full8 = text_score(img, int8)
            words.append(
                {
                    "image": Path(it.path).name,
                    "cap_height_percent": it.cap_height_percent,
                    "cap_height_px": it.cap_height_px,
                    "full_size_peak": round(float(full[y0 // 2 : y1 // 2 + 1, x0 // 2 : x1 // 2 + 1].max()), 3),
                    "half_size_peak": round(float(half[y0 // 4 : y1 // 4 + 1, x0 // 4 : x1 // 4 + 1].max()), 3),
                    "int8_full_size_peak": round(float(full8[y0 // 2 : y1 // 2 + 1, x0 // 2 : x1 // 2 + 1].max()), 3),
                }
            )
        elif not it.shows_word:
            free.append({"image": Path(it.path).name, "half_size_peak": round(float(half.max()), 3)})

    # the words full-size CRAFT finds (peak >= EasyOCR's text_threshold, 0.7): the ones a cascade must keep
    seen = [r for r in words if r["full_size_peak"] >= 0.7]
    lost8 = [r for r in seen if r["int8_full_size_peak"] < 0.7]
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
        "detector_s_per_megapixel": {k: round(v, 3) for k, v in s_per_mpx.items()},
        "detector_rounds_s": {k: [round(t, 3) for t in v] for k, v in secs.items()},
        "speedup_over_fp32": {k: round(s_per_mpx["fp32"] / v, 2) for k, v in s_per_mpx.items()},
        "int8_words_lost": f"{len(lost8)}/{len(seen)}",
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
    print("detector at full size, s per megapixel (best of 3 interleaved rounds), and its speed-up over fp32:")
    for k, v in s_per_mpx.items():
        print(f"  {k:5s} {v:6.2f}  {s_per_mpx['fp32'] / v:5.2f}x")
    print(f"{'cap height':>10s}  half-size text score inside the word's box (full-size peak)")
    for c in CAP_HEIGHTS_PERCENT:
        rows = [r for r in words if r["cap_height_percent"] == c]
        cells = ", ".join(f"{r['half_size_peak']:.3f} ({r['full_size_peak']:.2f})" for r in rows)
        print(f"{c:9g}%  {cells}")
    print(f"text-free photos, half-size peak: {sorted(r['half_size_peak'] for r in free)}")
    print(f"words full-size CRAFT finds (peak >= 0.7): {len(seen)}/{len(words)}")
    print(f"a threshold that keeps the weakest of them ({weakest:.3f}) re-reads {flagged}/{len(free)} text-free photos")
    print(f"int8 detector: {len(lost8)}/{len(seen)} of those words fall below 0.7 at full size")
    for r in lost8:
        print(
            f"  {r['image']}: cap {r['cap_height_percent']:g}% ({r['cap_height_px']} px), peak {r['full_size_peak']} -> {r['int8_full_size_peak']}"
        )
    write_result("ocr_limits", result)


if __name__ == "__main__":
    main()
