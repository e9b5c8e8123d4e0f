"""Smallest text each OCR setting still catches: the recall side of ``ocr.canvas_size``.

``benchmarks/ocr.py`` measures speed on words drawn large (70-140 px on a 1,024 px canvas), where
every canvas agrees. This script draws each of 8 concept words at shrinking sizes (cap height as a
percent of the image's height) on 1,280 x 960 web-sized images and counts, per size, how many each
setting rejects for showing its word: EasyOCR's default ``readtext`` (canvas 2,560: full
resolution here) and the stage's reader (bf16 where this CPU runs it natively) at canvas 640 and
512. Below some size every setting misses the word; the point where a canvas starts missing words
that ``readtext`` still reads is what a smaller canvas costs.

Usage (project root, venv):  python benchmarks/ocr_text_size.py
Prints a table and writes benchmarks/results/ocr_text_size.json.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402

WORDS = ["library", "coffee", "rocket", "garden", "castle", "pencil", "guitar", "bridge"]
HEIGHTS_PERCENT = [1.0, 1.5, 2.0, 2.5, 3.0, 4.0]  # cap height / image height
SIZE = (1280, 960)


def render(word: str, height_percent: float, path: Path, seed: int) -> None:
    """``word`` in dark grey on a light background, cap height = ``height_percent`` of the image."""
    import random

    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    w, h = SIZE
    im = Image.new("RGB", SIZE, tuple(rng.randint(190, 250) for _ in range(3)))
    target = h * height_percent / 100
    size = 8
    while True:  # the font size whose capital letters are ``target`` px tall
        font = ImageFont.load_default(size=size)
        box = font.getbbox("H")
        if box[3] - box[1] >= target:
            break
        size += 1
    draw = ImageDraw.Draw(im)
    tw = draw.textbbox((0, 0), word, font=font)[2]
    draw.text(
        (rng.randint(10, max(11, w - tw - 10)), rng.randint(10, h - 2 * size)), word, fill=(30, 30, 30), font=font
    )
    im.save(path)


def main() -> None:
    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import easyocr
    import easyocr_en_models
    import yaml

    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr
    from gavil.models.precision import resolve
    from stages.ocr_filter import MatchRule, match_text

    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    prec = resolve("auto", "cpu")[0]
    default = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    stage = make_reader(int(p["batch_size"]), prec, "cpu")
    settings = ["readtext", "stage@640", "stage@512"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for hp in HEIGHTS_PERCENT:
            caught = dict.fromkeys(settings, 0)
            seconds = dict.fromkeys(settings, 0.0)
            for i, word in enumerate(WORDS):
                path = Path(d) / f"{word}-{hp}.png"
                render(word, hp, path, seed=i)
                t0 = time.perf_counter()
                dets = [(t, float(c)) for _, t, c in default.readtext(str(path))]
                seconds["readtext"] += time.perf_counter() - t0
                caught["readtext"] += match_text(word, dets, rule).rejected
                for canvas in (640, 512):
                    t0 = time.perf_counter()
                    dets = stage([load_for_ocr(str(path), canvas)], canvas)[0]
                    seconds[f"stage@{canvas}"] += time.perf_counter() - t0
                    caught[f"stage@{canvas}"] += match_text(word, dets, rule).rejected
            rows.append(
                {
                    "cap_height_percent": hp,
                    "cap_height_px_full": round(SIZE[1] * hp / 100, 1),
                    "cap_height_px_at_640": round(SIZE[1] * hp / 100 * 640 / SIZE[0], 1),
                    "cap_height_px_at_512": round(SIZE[1] * hp / 100 * 512 / SIZE[0], 1),
                    "rejected": caught,
                    "seconds": {k: round(v, 2) for k, v in seconds.items()},
                }
            )
            print(f"cap height {hp:4.1f} %: rejected of {len(WORDS)}: {caught}", flush=True)
    result = {
        "machine": machine(),
        "image_size": list(SIZE),
        "words": WORDS,
        "stage_precision": prec,
        "rows": rows,
    }
    print(f"\n{'cap height (% of 960 px)':26s} " + " ".join(f"{s:>10s}" for s in settings))
    for r in rows:
        print(
            f"{r['cap_height_percent']:>5.1f} % ({r['cap_height_px_full']:5.1f} px)       "
            + " ".join(f"{r['rejected'][s]:>10d}" for s in settings)
        )
    write_result("ocr_text_size", result)


if __name__ == "__main__":
    main()
