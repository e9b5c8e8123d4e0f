"""OCR throughput: the stage's reader vs EasyOCR's default ``readtext`` on the same 200 mixed images.

Images: half photos (the sample's photos, randomly cropped/flipped and resized to 1,024, 1,280 or
1,600 px on the long side, the sizes of typical web search results) and half rendered words (the
concept on a 1,024 x 768, 1,280 x 960 or 1,600 x 1,200 canvas, random size, position, colours). Baseline: ``Reader.readtext(path)`` with
EasyOCR's defaults (canvas 2,560). Stage: ``load_for_ocr`` (Pillow downscale to
``ocr.canvas_size``) + :func:`stages.ocr_filter.make_reader` (batched detection, recognition
only where text was found), at ``precision`` fp32 and bf16 (autocast, CRAFT channels-last). The readers are loaded before timing; same process, same run, interleaved in
chunks of 20 images so that machine noise falls on both sides of the ratio.
Decisions: :func:`stages.ocr_filter.match_text` with the params' rule on all images (photos and
rendered words), compared between readers; ``--extra-canvas`` also times the bf16 stage at smaller
canvases (faster, but small text is read less): the trade-off, not the default; "stage default" is the stage at ``ocr.precision``
as resolved on this machine (``auto``: bf16 on AMX/AVX-512-BF16 CPUs).

Usage (project root, venv):  python benchmarks/ocr.py [--images 200]
Prints a table and writes benchmarks/results/ocr.json.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, random_view, sample_photos, write_result  # noqa: E402

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
    from PIL import Image, ImageDraw, ImageFont

    rng = random.Random(seed)
    photos = sample_photos()
    out = []
    for i in range(n // 2):
        src = photos[i % len(photos)]
        path = d / f"photo-{i:03d}.jpg"
        random_view(src, rng, 0.7, (1024, 1280, 1600)).save(path, quality=90)
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
    ap.add_argument(
        "--extra-canvas",
        type=int,
        nargs="*",
        default=[512],
        help="also time the bf16 stage at these canvas sizes (px, long side): the speed/recall trade-off",
    )
    args = ap.parse_args()

    import yaml

    from gavil.models.torchvision_compat import ensure_torchvision

    ensure_torchvision()
    import easyocr
    import easyocr_en_models

    from gavil.models.precision import cpu_native_bf16, resolve
    from stages.ocr_filter import MatchRule, load_for_ocr, make_reader, match_text

    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    canvas = int(p["canvas_size"])
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-bench-"))
    made = make_images(work, args.images)
    half = args.images // 2  # alternate photo, word, photo, ...: every chunk holds both kinds
    items = [x for pair in zip(made[:half], made[half:]) for x in pair] + made[2 * half :]

    default_reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    batch = int(p["batch_size"])
    bf16_reader = make_reader(batch, "bf16", "cpu")
    readers = {"fp32": make_reader(batch, "fp32", "cpu"), "bf16": bf16_reader}
    readers |= {f"bf16@{c}": bf16_reader for c in args.extra_canvas if c != canvas}
    canvas_of = {k: int(k.split("@")[1]) if "@" in k else canvas for k in readers}
    auto = resolve(str(p["precision"]), "cpu")[0]  # what the stage runs by default on this machine

    def report() -> dict:
        """The results so far (written after every chunk: a run cut short still leaves its figures)."""
        done = items[: len(default)]

        def rejected(dets: list[list[tuple[str, float]]]) -> list[bool]:
            return [match_text(c, d, rule).rejected for (_, c, _), d in zip(done, dets)]

        dec = {"default": rejected(default), **{k: rejected(v) for k, v in ours.items()}}
        is_word = [kind == "word" for kind, _, _ in done]

        def same(a: str, b: str) -> int:
            return sum(x == y for x, y in zip(dec[a], dec[b]))

        result = {
            "machine": machine(f"CPU native bf16 (AMX/AVX-512-BF16): {cpu_native_bf16()}"),
            "note": "one process, one run; default readtext and every stage variant interleaved in chunks of 20 "
            "images, so machine noise falls on both sides of each ratio",
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
            "images": len(done),
            "rendered_words": sum(is_word),
            "photos": len(done) - sum(is_word),
            "canvas_size": canvas,
            "ocr_precision_param": p["precision"],
            "ocr_precision_resolved": auto,
            "default_readtext_s": round(t_default, 2),
            **{f"stage_{k}_s": round(t, 2) for k, t in t_stage.items()},
            "default_images_per_s": round(len(done) / t_default, 3),
            **{f"stage_{k}_images_per_s": round(len(done) / t, 3) for k, t in t_stage.items()},
            "speedup_stage_default_vs_readtext": round(t_default / t_stage[auto], 2),
            "speedup_stage_fp32_vs_readtext": round(t_default / t_stage["fp32"], 2),
            "speedup_stage_bf16_vs_readtext": round(t_default / t_stage["bf16"], 2),
            "same_decision_bf16_vs_readtext": same("default", "bf16"),
            "speedup_bf16_vs_fp32": round(t_stage["fp32"] / t_stage["bf16"], 2),
            "other_canvas": {
                k: {
                    "canvas_size": canvas_of[k],
                    "speedup_vs_readtext": round(t_default / t, 2),
                    "same_decision_vs_readtext": same("default", k),
                    "rejected": sum(dec[k]),
                }
                for k, t in t_stage.items()
                if "@" in k
            },
            "same_decision_stage_default_vs_readtext": same("default", auto),
            "same_decision_fp32_vs_readtext": same("default", "fp32"),
            "same_decision_bf16_vs_fp32": same("fp32", "bf16"),
            "same_text_bf16_vs_fp32": sum(
                [t for t, _ in a] == [t for t, _ in b] for a, b in zip(ours["fp32"], ours["bf16"])
            ),
            "max_confidence_diff_bf16_vs_fp32": round(
                max(
                    (
                        abs(x[1] - y[1])
                        for a, b in zip(ours["fp32"], ours["bf16"])
                        if len(a) == len(b)
                        for x, y in zip(a, b)
                    ),
                    default=0.0,
                ),
                4,
            ),
            "rejected": {k: sum(v) for k, v in dec.items()},
            "targets": {
                "speedup_stage_default_vs_readtext": ">= 15",
                "speedup_bf16_vs_fp32": ">= 2.5",
                "same_decision": "all images",
            },
        }
        return result

    # Interleaved in chunks of 20 (default on a chunk, then the stage at fp32 and at bf16 on the same
    # chunk), so that load from anything else on the machine falls on every side of the ratios alike.
    default: list[list[tuple[str, float]]] = []
    ours: dict[str, list[list[tuple[str, float]]]] = {k: [] for k in readers}
    t_default = 0.0
    t_stage = dict.fromkeys(readers, 0.0)
    for i in range(0, len(items), 20):
        chunk = items[i : i + 20]
        t0 = time.perf_counter()
        default += [[(t, float(c)) for _, t, c in default_reader.readtext(path)] for _, _, path in chunk]
        t_default += time.perf_counter() - t0
        for k, read in readers.items():
            t0 = time.perf_counter()
            c = canvas_of[k]
            ours[k] += read([load_for_ocr(path, c) for _, _, path in chunk], c)
            t_stage[k] += time.perf_counter() - t0
        print(
            f"ocr bench: {len(default)}/{len(items)} images, default {t_default:.0f} s, "
            + ", ".join(f"stage {k} {t:.0f} s" for k, t in t_stage.items()),
            flush=True,
        )
        write_result("ocr", report())

    result = report()
    n = result["images"]
    print(f"{'measure':44s} {'value':>10s}")
    print(f"{'default readtext images/s':44s} {result['default_images_per_s']:10.3f}")
    for k in readers:
        print(f"{'stage ' + k + ' images/s':44s} {result[f'stage_{k}_images_per_s']:10.3f}")
    print(
        f"{'stage (' + auto + ') vs readtext (target >= 15)':44s} {result['speedup_stage_default_vs_readtext']:10.2f}"
    )
    print(f"{'stage bf16 vs readtext':44s} {result['speedup_stage_bf16_vs_readtext']:10.2f}")
    print(f"{'stage bf16 vs fp32 (target >= 2.5)':44s} {result['speedup_bf16_vs_fp32']:10.2f}")
    print(f"{'same decision: stage bf16 vs readtext':44s} {result['same_decision_bf16_vs_readtext']:>6d}/{n}")
    print(
        f"{'same decision: stage (' + auto + ') vs readtext':44s} {result['same_decision_stage_default_vs_readtext']:>6d}/{n}"
    )
    print(f"{'same decision: stage bf16 vs fp32':44s} {result['same_decision_bf16_vs_fp32']:>6d}/{n}")
    print(f"{'same text: stage bf16 vs fp32':44s} {result['same_text_bf16_vs_fp32']:>6d}/{n}")
    for k, o in result["other_canvas"].items():
        print(
            f"{'stage ' + k + ' vs readtext; same decision':44s} {o['speedup_vs_readtext']:10.2f} "
            f"{o['same_decision_vs_readtext']:>4d}/{n}"
        )
    print(f"{'rejected (default, fp32, bf16, ...)':44s} {result['rejected']}")
    write_result("ocr", result)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
