"""Which OCR numerics miss a word ``readtext`` reads (issue 27): decisions on more images than the timing runs.

``benchmarks/ocr_cli.py`` times the sides as users run them, on 36-48 images. A default that
"misses nothing ``readtext`` reads" needs more images than that, and the misses sit where the
text is small. This script makes only decisions, on fresh seeds of the OCR set
(:mod:`benchmarks._ocrset`: web photos, half with their word at 1-8 % cap height, ±15°, 8 fonts,
both polarities), all sides in one process with their models loaded once:

- ``readtext``: EasyOCR's ``readtext(path)`` with its defaults (fp32, canvas 2,560): the target;
- the stage's reader (:func:`gavil.models.easyocr_reader.make_reader`) at canvas 2,560 with ``precision``
  ``bf16`` (what ``auto`` is on this CPU) and ``int8`` (the stored scales), and ``fp32`` with
  ``--fp32`` (EasyOCR's networks as shipped: it should agree everywhere; slow);

With ``--device cuda`` (a GPU machine): ``readtext`` and ``readtext@640`` (``canvas_size=640``) on
``easyocr.Reader(gpu=True)``, and the stage's reader at ``fp32`` and ``bf16`` on the GPU; every side
reads the first image once, untimed, before the timed pass (CUDA context, cuDNN's kernel choice).

then the stage's rule (:func:`stages.ocr_filter.match_text`, params' thresholds) on each. For every
side: the images where it **misses** (``readtext`` rejects, the side accepts: an image that shows
its word would enter the benchmark) and where it is **stricter** (it rejects, ``readtext`` does not),
by cap height, and seconds per image (in process, the sides taking turns image by image).

Usage (project root, venv):  python benchmarks/ocr_agreement.py [--seeds 2 3 4] [--images 48] [--fp32]
  [--device cpu|cuda] [--out ocr_agreement]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import gpu_name, machine, write_result  # noqa: E402
from benchmarks._ocrset import write_ocr_set  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--images", type=int, default=48)
    ap.add_argument("--fp32", action="store_true")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--out", default="ocr_agreement")
    args = ap.parse_args()

    import easyocr
    import easyocr_en_models
    import yaml

    from gavil.compat.torchvision_bridge import ensure_torchvision
    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr
    from stages.ocr_filter import MatchRule, match_text

    ensure_torchvision()
    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    cuda = args.device == "cuda"
    peer = easyocr.Reader(
        ["en"], gpu=cuda, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    peers = {"readtext": {}, **({"readtext@640": {"canvas_size": 640}} if cuda else {})}
    precisions = ["fp32", "bf16"] if cuda else ["bf16", "int8", *(["fp32"] if args.fp32 else [])]
    readers = {s: make_reader(1, s, args.device) for s in precisions}
    sides = [*peers, *readers]
    others = [s for s in sides if s != "readtext"]

    def read(side: str, path: str) -> list[tuple[str, float]]:
        if side in peers:
            return [(str(t), float(c)) for _, t, c in peer.readtext(path, **peers[side])]
        return readers[side]([load_for_ocr(path, 2560)], 2560)[0]

    rows: list[dict[str, Any]] = []
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-agree-"))
    for seed in args.seeds:
        for k, it in enumerate(write_ocr_set(work / str(seed), args.images, seed)):
            if cuda and not rows:
                for side in sides:  # untimed warm-up (CUDA context, cuDNN's kernel choice)
                    read(side, it.path)
            row: dict[str, Any] = {
                "seed": seed,
                "image": Path(it.path).name,
                "sha256": hashlib.sha256(Path(it.path).read_bytes()).hexdigest()[:16],  # same set on every machine?
                "concept": it.concept,
                "shows_word": it.shows_word,
                "cap_height_percent": it.cap_height_percent,
                "cap_height_px": it.cap_height_px,
            }
            for side in sides[k % len(sides) :] + sides[: k % len(sides)]:
                t0 = time.perf_counter()
                dets = read(side, it.path)
                row[f"{side}_s"] = round(time.perf_counter() - t0, 4)
                d = match_text(it.concept, dets, rule)
                row[side] = d.rejected
                row[f"{side}_read"] = d.token
            rows.append(row)
            print(
                f"{seed} {row['image']:24s} " + " ".join(f"{s}={int(row[s])}/{row[s + '_s']:.2f}s" for s in sides),
                flush=True,
            )

    def differ(side: str, missed: bool) -> list[dict[str, Any]]:
        """Rows where ``side`` accepts what ``readtext`` rejects (``missed``), or the reverse."""
        keys = ("seed", "image", "cap_height_percent", "cap_height_px", "readtext_read", f"{side}_read")
        return [
            {k: r[k] for k in keys}
            for r in rows
            if (r["readtext"] and not r[side] if missed else r[side] and not r["readtext"])
        ]

    total = {s: sum(r[f"{s}_s"] for r in rows) for s in sides}
    result = {
        "machine": machine(gpu_name() if cuda else ""),
        "device": args.device,
        "seeds": args.seeds,
        "images": len(rows),
        "with_word": sum(r["shows_word"] for r in rows),
        "readtext_rejects": sum(r["readtext"] for r in rows),
        "s_per_image": {s: round(total[s] / len(rows), 3) for s in sides},
        "speedup_vs_readtext_in_process": {s: round(total["readtext"] / total[s], 2) for s in sides},
        "misses": {s: differ(s, True) for s in others},
        "stricter": {s: differ(s, False) for s in others},
        "rows": rows,
    }
    print(f"{len(rows)} images, {result['with_word']} with a word; readtext rejects {result['readtext_rejects']}")
    print(f"{'side':12s} {'s/image':>8s} {'speed-up':>8s} {'misses':>7s} {'stricter':>8s}")
    for s in sides:
        m = len(result["misses"].get(s, []))
        st = len(result["stricter"].get(s, []))
        print(
            f"{s:12s} {result['s_per_image'][s]:8.3f} {result['speedup_vs_readtext_in_process'][s]:7.2f}x {m:7d} {st:8d}"
        )
    write_result(args.out, result)


if __name__ == "__main__":
    main()
