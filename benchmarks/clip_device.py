"""CLIP image embedding on a device (issue 27: the GPU figures the README quotes).

The stage's path (:func:`gavil.models.loading.load_model` -> ``embed_images``: decode and
open_clip's preprocess on loader threads, batched ``encode_image`` on ``--device``) against a bare
``encode_image`` loop over the same images already preprocessed into one tensor (upload to the
device included), at ``fp32`` and ``bf16``, on web-sized JPEGs (:mod:`benchmarks._web`: 500-1,600 px
long side, 30-400 KB; made in parallel processes first, untimed). The stage runs with the params'
runtime knobs (``batch_size`` 32, ``threads`` 2, ``loader_workers`` 1) and with
``--batch-size``/``--loader-workers``/all cores; those knobs change no output. The loader threads
prefetch whole batches, so at most ``images / batch_size`` of them work at once: use at least
``loader_workers`` x ``batch_size`` x 4 images (the defaults: 2,048 = 32 batches of 64), as a
SWOW-scale run has (12,000 images).

Each side: one untimed warm-up batch, then ``--reps`` timed passes (median kept; the GPU is
synchronised before the clock stops; ``--sides``/``--precisions`` pick them). Also the largest cosine
distance between a side's embedding and the first side's, image by image. Weights are random (``pretrained: null``): speed does not depend
on their values. ``images_per_s`` x 12,000 gives the SWOW-scale cost of one model's image pass.

Usage (project root, venv):  python benchmarks/clip_device.py [--device cuda] [--model RN50] [--images 2048]
  [--reps 2] [--batch-size 64] [--loader-workers 8] [--out clip_device]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import gpu_name, machine, write_result  # noqa: E402
from benchmarks._web import write_web_photos  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda")
    ap.add_argument("--model", default="RN50")
    ap.add_argument("--images", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--loader-workers", type=int, default=8)
    ap.add_argument("--sides", nargs="+", choices=["defaults", "tuned", "bare"], default=["defaults", "tuned", "bare"])
    ap.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    ap.add_argument("--out", default="clip_device")
    args = ap.parse_args()

    import torch

    from gavil.compat.torchvision_bridge import ensure_torchvision
    from gavil.models.image_input import array_preprocess
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from gavil.models.precision import autocast, channels_last, is_convolutional, resolve

    ensure_torchvision()
    import open_clip
    from PIL import Image

    work = Path(tempfile.mkdtemp(prefix="gavil-clip-device-"))
    names = [f"web{i:05d}" for i in range(args.images)]
    paths = [str(p) for p in write_web_photos(work, args.images, names=names, processes=os.cpu_count() or 1)]
    sizes = [os.path.getsize(p) for p in paths]
    cores = os.cpu_count() or 1
    spec = ModelSpec("bench", "open_clip", args.model, None)
    runs: dict[str, Any] = {}
    embeddings: dict[str, np.ndarray] = {}

    def timed(name: str, fn: Any) -> None:
        fn(warm=True)
        times = []
        for _ in range(args.reps):
            if args.device == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            e = fn(warm=False)
            if args.device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        embeddings[name] = e
        s = statistics.median(times)
        runs[name] = {"seconds": round(s, 3), "images_per_s": round(len(paths) / s, 1)}
        print(f"{name:28s} {s:8.3f} s {len(paths) / s:9.1f} images/s", flush=True)

    for prec in args.precisions:
        for side, label, opt in (
            ("defaults", "defaults", RuntimeOptions(precision=prec, device=args.device, loader_workers=1)),
            (
                "tuned",
                f"batch{args.batch_size}-workers{args.loader_workers}",
                RuntimeOptions(
                    batch_size=args.batch_size,
                    threads=cores,
                    loader_workers=args.loader_workers,
                    precision=prec,
                    device=args.device,
                ),
            ),
        ):
            if side not in args.sides:
                continue
            model = load_model(spec, opt)
            timed(
                f"stage-{prec}-{label}",
                lambda warm, m=model, b=opt.batch_size: m.embed_images(paths[:b] if warm else paths),
            )

        if "bare" not in args.sides:
            continue
        p, dev = resolve(prec, args.device)
        torch.manual_seed(0)
        net, _, preprocess = open_clip.create_model_and_transforms(args.model, pretrained=None)
        net = net.eval().to(dev)
        conv = p == "bf16" and is_convolutional(net.visual)
        if conv:
            channels_last(net.visual)
        to_input = array_preprocess(preprocess)

        def prepare(path: str, to_input: Any = to_input) -> torch.Tensor:
            with Image.open(path) as im:
                return torch.from_numpy(to_input(im.convert("RGB")))

        with ThreadPoolExecutor(cores) as threads:  # untimed: the bare loop starts from the tensor
            x = torch.stack(list(threads.map(prepare, paths)))
        fmt = torch.channels_last if conv else torch.preserve_format

        def bare(
            warm: bool, net: Any = net, x: torch.Tensor = x, p: str = p, dev: str = dev, fmt: Any = fmt
        ) -> np.ndarray:
            out = []
            with torch.inference_mode(), autocast(p, dev):
                for i in range(0, args.batch_size if warm else len(x), args.batch_size):
                    e = net.encode_image(x[i : i + args.batch_size].to(dev, memory_format=fmt))
                    out.append(torch.nn.functional.normalize(e.float(), dim=-1).cpu().numpy())
            return np.concatenate(out)

        timed(f"bare-encode-{prec}-batch{args.batch_size}", bare)
        del net, x

    ref = next(iter(embeddings.values()))
    for name, e in embeddings.items():
        runs[name][f"max_cosine_distance_vs_{next(iter(embeddings))}"] = float(np.max(1.0 - np.sum(ref * e, axis=1)))
    result = {
        "machine": machine(gpu_name()),
        "device": args.device,
        "model": args.model,
        "weights": "random (pretrained: null)",
        "images": len(paths),
        "image_kb": {"median": round(statistics.median(sizes) / 1024, 1), "max": round(max(sizes) / 1024, 1)},
        "reps": args.reps,
        "runs": runs,
        "swow_12000_images_s": {k: round(12000 / v["images_per_s"], 1) for k, v in runs.items()},
    }
    write_result(args.out, result)


if __name__ == "__main__":
    main()
