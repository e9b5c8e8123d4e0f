"""OCR throughput: the stage's reader vs EasyOCR's default ``readtext`` on the same 200 mixed images.

Images: half photos (the sample's photos, randomly cropped/flipped and resized to 1,024, 1,280 or
1,600 px on the long side, the sizes of typical web search results) and half rendered words (the
concept on a 1,024 x 768, 1,280 x 960 or 1,600 x 1,200 canvas, random size, position, colours). Baseline: ``Reader.readtext(path)`` with
EasyOCR's defaults (canvas 2,560). Stage: ``load_for_ocr`` (Pillow downscale to
``ocr.canvas_size``) + :func:`stages.ocr_filter.make_reader` (batched detection, recognition
only where text was found). Both readers are loaded before timing; same process, same run, interleaved in
chunks of 20 images so that machine noise falls on both sides of the ratio.
Decisions: :func:`stages.ocr_filter.match_text` with the params' rule on every rendered-word image.

Usage (project root, venv):  python benchmarks/ocr.py [--images 200]
Prints a table and writes benchmarks/results/ocr.json.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402

WORDS = [
    "library",
    "coffee",
    "rocket",
    "moon",
    "horse",
    "bread",
    "garden",
    "castle",
    "pencil",
    "river",
    "tiger",
    "window",
    "guitar",
    "candle",
    "bridge",
    "forest",
    "orange",
    "camera",
    "anchor",
    "dragon",
    "school",
    "summer",
    "winter",
    "planet",
    "button",
    "mirror",
    "jacket",
    "violin",
    "desert",
    "island",
]


def make_images(d: Path, n: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """(kind, concept, path) for n//2 photos and n - n//2 rendered words."""
    from PIL import Image, ImageDraw, ImageFont, ImageOps

    rng = random.Random(seed)
    photos = sorted(p for p in (ROOT / "data/sample/images").iterdir() if p.suffix.lower() in (".jpg", ".png"))
    out = []
    for i in range(n // 2):
        src = photos[i % len(photos)]
        im = Image.open(src).convert("RGB")
        w, h = im.size
        cw, ch = int(w * rng.uniform(0.7, 1.0)), int(h * rng.uniform(0.7, 1.0))
        x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
        im = im.crop((x, y, x + cw, y + ch))
        if rng.random() < 0.5:
            im = ImageOps.mirror(im)
        scale = rng.choice((1024, 1280, 1600)) / max(im.size)
        im = im.resize((round(im.width * scale), round(im.height * scale)), Image.Resampling.BICUBIC)
        path = d / f"photo-{i:03d}.jpg"
        im.save(path, quality=90)
        out.append(("photo", src.stem, str(path)))
    for i in range(n - n // 2):
        word = WORDS[i % len(WORDS)]
        text = word.upper() if rng.random() < 0.5 else word
        bg = tuple(rng.randint(170, 255) for _ in range(3))
        fg = tuple(rng.randint(0, 70) for _ in range(3))
        W, H = rng.choice(((1024, 768), (1280, 960), (1600, 1200)))
        im = Image.new("RGB", (W, H), bg)
        font = ImageFont.load_default(size=int(rng.randint(70, 140) * W / 1024))
        draw = ImageDraw.Draw(im)
        box = draw.textbbox((0, 0), text, font=font)
        tw, th = box[2] - box[0], box[3] - box[1]
        draw.text(
            (rng.randint(10, max(11, W - 10 - tw)), rng.randint(10, max(11, H - 10 - th))), text, fill=fg, font=font
        )
        path = d / f"word-{i:03d}.png"
        im.save(path)
        out.append(("word", word, str(path)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=200)
    args = ap.parse_args()

    import yaml

    from stages._torchvision_compat import ensure_torchvision

    ensure_torchvision()
    import easyocr
    import easyocr_en_models

    from stages.ocr_filter import MatchRule, load_for_ocr, make_reader, match_text

    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    canvas = int(p["canvas_size"])
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-bench-"))
    items = make_images(work, args.images)

    default_reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    stage_read = make_reader(gpu=False, batch_size=int(p["batch_size"]))

    # Interleaved in chunks of 20 (default on a chunk, then the stage on the same chunk), so that
    # load from anything else on the machine falls on both sides of the ratio alike.
    default: list[list[tuple[str, float]]] = []
    ours: list[list[tuple[str, float]]] = []
    t_default = t_stage = 0.0
    for i in range(0, len(items), 20):
        chunk = items[i : i + 20]
        t0 = time.perf_counter()
        default += [[(t, float(c)) for _, t, c in default_reader.readtext(path)] for _, _, path in chunk]
        t_default += time.perf_counter() - t0
        t0 = time.perf_counter()
        ours += stage_read([load_for_ocr(path, canvas) for _, _, path in chunk], canvas)
        t_stage += time.perf_counter() - t0
        print(
            f"ocr bench: {len(ours)}/{len(items)} images, default {t_default:.0f} s, stage {t_stage:.0f} s", flush=True
        )

    words = [(c, d, o) for (kind, c, _), d, o in zip(items, default, ours) if kind == "word"]
    photos = [(c, d, o) for (kind, c, _), d, o in zip(items, default, ours) if kind == "photo"]
    word_same = sum(match_text(c, d, rule).rejected == match_text(c, o, rule).rejected for c, d, o in words)
    word_rejected_default = sum(match_text(c, d, rule).rejected for c, d, _ in words)
    word_rejected_stage = sum(match_text(c, o, rule).rejected for c, _, o in words)
    photo_same = sum(match_text(c, d, rule).rejected == match_text(c, o, rule).rejected for c, d, o in photos)
    result = {
        "machine": machine(),
        "images": len(items),
        "canvas_size": canvas,
        "default_readtext_s": round(t_default, 2),
        "stage_s": round(t_stage, 2),
        "default_images_per_s": round(len(items) / t_default, 3),
        "stage_images_per_s": round(len(items) / t_stage, 3),
        "speedup": round(t_default / t_stage, 2),
        "rendered_words": len(words),
        "rendered_words_same_decision": word_same,
        "rendered_words_rejected_default": word_rejected_default,
        "rendered_words_rejected_stage": word_rejected_stage,
        "photos": len(photos),
        "photos_same_decision": photo_same,
        "targets": {"speedup": ">= 3", "rendered_words_same_decision": "all"},
    }
    print(f"{'measure':38s} {'value':>10s}")
    print(f"{'default readtext images/s':38s} {result['default_images_per_s']:10.3f}")
    print(f"{'stage reader images/s':38s} {result['stage_images_per_s']:10.3f}")
    print(f"{'speedup (target >= 3)':38s} {result['speedup']:10.2f}")
    print(
        f"{'rendered words: same decision':38s} {word_same:>6d}/{len(words)}  (rejected: default {word_rejected_default}, stage {word_rejected_stage})"
    )
    print(f"{'photos: same decision':38s} {photo_same:>6d}/{len(photos)}")
    write_result("ocr", result)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
