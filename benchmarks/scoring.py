"""Scoring performance (issue targets), each against a baseline measured in the same run, on
web-sized JPEGs (``benchmarks/_web.py``: 500-1,600 px long side, 30-400 KB, as a crawl brings):

0. Where an image's time goes in the stage's path: Pillow decode, open_clip's preprocess as
   torchvision runs it (the pre-issue-27 loader) and as the loader runs it now
   (:func:`gavil.models.image_input.array_preprocess`, bit-identical), and the model's forward pass;
   then the whole stage path with either preprocess, interleaved, so both share the same load.
1. Throughput: the stage's embedding path (cache -> threaded decode/preprocess prefetch ->
   batched encode_image) on N images vs a bare ``encode_image`` loop over the same, already
   preprocessed tensors. Target: stage <= 1.25x the bare loop.
2. Re-scoring after adding 10 % new images costs <= 15 % of the first run.
3. Scoring 3,563 instances x up to 12 candidates from cached embeddings (cache load included): < 2 s.
4. Peak RSS of a process embedding 10,000 images with one model: < 2 GB (128 px files; ``--memory-images 0``
   keeps the previous run's figures, marked as such).

Weights do not change speed, so the model runs with random weights (``pretrained: null``).
Usage: python benchmarks/scoring.py [--model RN50] [--images 128] [--reps 2] [--memory-images 10000]
Writes benchmarks/results/scoring.json.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402


def make_images(d: Path, n: int, start: int = 0, size: int = 256) -> list[str]:
    from PIL import Image

    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(start)
    paths = []
    for i in range(start, start + n):
        p = d / f"img{i:05d}.jpg"
        if not p.exists():
            arr = (rng.random((size, size, 3)) * 255).astype(np.uint8)
            Image.fromarray(arr).save(p, quality=85)
        paths.append(str(p))
    return paths


def web_images(d: Path, n: int, start: int = 0) -> list[str]:
    """``n`` web-sized JPEGs (``benchmarks/_web.py`` seeds ``start`` .. ``start + n - 1``), made once per folder."""
    from benchmarks._web import web_photo

    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(start, start + n):
        p = d / f"web{i:05d}.jpg"
        if not p.exists():
            p.write_bytes(web_photo(i))
        paths.append(str(p))
    return paths


def per_image_costs(model_name: str, paths: list[str], reps: int, batch_size: int = 32) -> dict:
    """0. Per-image ms of decode, both preprocesses and the forward pass (each step timed over all
    ``paths`` in the main thread, ``reps`` interleaved repetitions, the median kept), and the stage
    path (:func:`gavil.models.loading._load_open_clip`'s ``embed_images``, loader thread on) with the
    torchvision preprocess vs the NumPy one, interleaved; checks both give the same bytes."""
    import statistics

    import torch
    from PIL import Image

    import gavil.models.image_input as image_input
    import gavil.models.loading as loading
    from gavil.models.image_input import array_preprocess
    from gavil.models.loading import ModelSpec, RuntimeOptions

    opt = RuntimeOptions(batch_size=batch_size, threads=2, loader_workers=1)
    spec = ModelSpec("bench", "open_clip", model_name, None)
    new = loading._load_open_clip(spec, opt)
    real = image_input.array_preprocess
    image_input.array_preprocess = lambda pre: lambda im: pre(im).numpy()  # the torchvision recipe
    try:
        old = loading._load_open_clip(spec, opt)
    finally:
        image_input.array_preprocess = real
    import open_clip

    torch.manual_seed(0)
    model, _, preprocess = open_clip.create_model_and_transforms(model_name, pretrained=None)
    model.eval()
    fast = array_preprocess(preprocess)
    n = len(paths)
    times: dict[str, list[float]] = {
        k: [] for k in ("decode", "preprocess_torchvision", "preprocess_numpy", "forward", "stage_old", "stage_new")
    }
    same = True
    with torch.inference_mode():  # warm-up: oneDNN builds its kernels on the first call of a shape
        model.encode_image(torch.stack([preprocess(Image.open(p).convert("RGB")) for p in paths[:batch_size]]))
    old.embed_images(paths[:batch_size])
    new.embed_images(paths[:batch_size])
    for _ in range(reps):
        t0 = time.perf_counter()
        ims = []
        for p in paths:
            with Image.open(p) as im:
                ims.append(im.convert("RGB"))
        times["decode"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        tv = [preprocess(im) for im in ims]
        times["preprocess_torchvision"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        npy = [fast(im) for im in ims]
        times["preprocess_numpy"].append(time.perf_counter() - t0)
        same &= all(np.array_equal(a.numpy(), b) for a, b in zip(tv, npy))
        x = torch.stack(tv)
        del ims, tv, npy
        t0 = time.perf_counter()
        with torch.inference_mode():
            for i in range(0, n, batch_size):
                model.encode_image(x[i : i + batch_size])
        times["forward"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        e_old = old.embed_images(paths)
        times["stage_old"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        e_new = new.embed_images(paths)
        times["stage_new"].append(time.perf_counter() - t0)
        same &= bool(np.array_equal(e_old, e_new))
    ms = {k: round(1000 * statistics.median(v) / n, 1) for k, v in times.items()}
    return {
        "per_image_ms": ms,
        "stage_new_vs_old_ratio": round(ms["stage_new"] / ms["stage_old"], 3),
        "prompt_ms": prompt_ms(new, reps),
        "embeddings_identical": same,
        "reps": reps,
    }


def prompt_ms(model, reps: int, n: int = 64) -> float:
    """Per-prompt ms of the stage's ``embed_texts`` ("A/An <word>", batches of 32; median of ``reps``)."""
    import statistics

    from benchmarks._common import sample_photos
    from gavil.domain.winogavil import prompt_for_cue

    words = sorted({p.stem.replace("_", " ") for p in sample_photos()})
    prompts = [prompt_for_cue(f"{w} {i}") for i, w in enumerate((words * (n // max(1, len(words)) + 1))[:n])]
    model.embed_texts(prompts[:32])  # warm-up
    runs = []
    for _ in range(reps):
        t0 = time.perf_counter()
        model.embed_texts(prompts)
        runs.append(time.perf_counter() - t0)
    return round(1000 * statistics.median(runs) / n, 1)


def stage_embed(model, paths: list[str], cache) -> float:
    from gavil.io import sha256_file

    t0 = time.perf_counter()
    items = {sha256_file(p): p for p in paths}
    cache.ensure(model.cache_key("image"), items, model.embed_images)
    return time.perf_counter() - t0


def memory_child(model_name: str, n: int, workdir: str) -> None:
    from gavil.models.embeddings import Cache
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model

    paths = sorted(str(p) for p in (Path(workdir) / "mem").glob("*.jpg"))[:n]  # made by the parent, not here
    model = load_model(
        ModelSpec("bench", "open_clip", model_name, None), RuntimeOptions(batch_size=32, threads=2, loader_workers=1)
    )
    cache = Cache([], Path(workdir) / "mem_cache.parquet")
    t = stage_embed(model, paths, cache)
    cache.save()
    print(json.dumps({"seconds": t, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def measure_memory(args: argparse.Namespace, work: Path) -> dict:
    """4. Peak RSS of a fresh process that embeds ``args.memory_images`` images (made beforehand,
    in this process, so image generation does not count)."""
    make_images(work / "mem", args.memory_images, start=100_000, size=128)
    out = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            "--model",
            args.model,
            "--memory-images",
            str(args.memory_images),
            "--workdir",
            str(work),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    mem = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "memory_images": args.memory_images,
        "memory_embed_s": round(mem["seconds"], 1),
        "memory_peak_rss_mb": round(mem["peak_rss_mb"], 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="RN50")
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--reps", type=int, default=2, help="interleaved repetitions of the per-image measures")
    ap.add_argument("--cost-models", default="RN50,ViT-B-32", help="models whose per-image costs (0.) are measured")
    ap.add_argument("--memory-images", type=int, default=10_000)
    ap.add_argument(
        "--memory-only", action="store_true", help="re-measure only the peak-memory run; merge into the results file"
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        memory_child(args.model, args.memory_images, args.workdir)
        return

    if args.memory_only:
        work = Path(tempfile.mkdtemp(prefix="gavil-score-"))
        dest = ROOT / "benchmarks/results/scoring.json"
        result = json.loads(dest.read_text()) if dest.exists() else {}
        result.update(measure_memory(args, work))
        dest.write_text(json.dumps(result, indent=2) + "\n")
        print(json.dumps({k: v for k, v in result.items() if k.startswith("memory")}, indent=2))
        return

    import torch
    from PIL import Image

    from gavil.models.embeddings import Cache, score_instances
    from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, load_model

    work = Path(tempfile.mkdtemp(prefix="gavil-score-"))
    paths = web_images(work / "imgs", args.images)
    costs = {"per_image": {m: per_image_costs(m, paths, args.reps) for m in args.cost_models.split(",") if m}}
    print(json.dumps(costs, indent=1))
    opt = RuntimeOptions(batch_size=32, threads=2, loader_workers=1)
    model = load_model(ModelSpec("bench", "open_clip", args.model, None), opt)

    # 1. bare loop over preprocessed tensors (what the model alone costs)
    import open_clip

    _, _, preprocess = open_clip.create_model_and_transforms(args.model, pretrained=None)
    raw_model = open_clip.create_model(args.model, pretrained=None).eval()
    tensors = [preprocess(Image.open(p).convert("RGB")) for p in paths]
    torch.set_num_threads(2)
    t0 = time.perf_counter()
    with torch.inference_mode():
        for i in range(0, len(tensors), 32):
            raw_model.encode_image(torch.stack(tensors[i : i + 32]))
    t_bare = time.perf_counter() - t0
    cache = Cache([], work / "cache.parquet")
    t_stage = stage_embed(model, paths, cache)
    cache.save()

    # 2. add 10 % new images and re-embed through the cache
    new = web_images(work / "imgs", max(1, args.images // 10), start=args.images)
    cache2 = Cache([], work / "cache.parquet")
    t_rescore = stage_embed(model, paths + new, cache2)

    # 3. 3,563 instances x up to 12 candidates from cached embeddings (text-only path: no image decode)
    import pandas as pd

    bench = pd.read_csv(ROOT / "data/sample/winogavil/winogavil_dataset.csv")
    inst = pd.DataFrame(
        {
            "instance_id": bench["ID"].astype(str),
            "cue": bench["cue"],
            "candidates": bench["candidates"].map(json.loads),
            "associations": bench["associations"].map(json.loads),
        }
    )
    words = sorted({c for cs in inst["candidates"] for c in cs} | {c.strip().lower() for c in inst["cue"]})
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(words), 512)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lookup = dict(zip(words, vecs))

    def must_not_embed(_texts):
        raise AssertionError("everything should come from the cache")

    spec = ModelSpec("text-bench", "text", "bench-words")
    cached_model = LoadedModel(spec, "bench", False, None, must_not_embed)
    seed_cache = Cache([], work / "text_cache.parquet")
    seed_cache.ensure(
        cached_model.cache_key("text"), {w: w for w in words}, lambda ws: np.stack([lookup[w] for w in ws])
    )
    seed_cache.save()
    t0 = time.perf_counter()
    loaded_cache = Cache([], work / "text_cache.parquet")
    scored = score_instances(inst, cached_model, {}, loaded_cache)
    t_cached = time.perf_counter() - t0
    assert (scored["status"] == "ok").all()

    if args.memory_images:
        mem = measure_memory(args, work)
    else:  # kept from the previous results file, marked as such
        old = json.loads((ROOT / "benchmarks/results/scoring.json").read_text())
        mem = {k: v for k, v in old.items() if k.startswith("memory_") and k != "memory_note"}
        mem["memory_note"] = "not re-measured in this run (--memory-images 0): the previous run's figures"

    result = {
        "machine": machine("CPU only"),
        "model": f"{args.model} (random weights; speed does not depend on them)",
        "images": f"{args.images} web-sized JPEGs (benchmarks/_web.py)",
        "load_average": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
        **costs,
        "bare_encode_image_s": round(t_bare, 2),
        "stage_embed_s": round(t_stage, 2),
        "stage_vs_bare_ratio": round(t_stage / t_bare, 3),
        "images_per_s_stage": round(args.images / t_stage, 2),
        "rescore_after_10pct_new_s": round(t_rescore, 2),
        "rescore_vs_first_ratio": round(t_rescore / t_stage, 3),
        "cached_scoring_instances": len(inst),
        "cached_scoring_s": round(t_cached, 3),
        **mem,
        "targets": {
            "stage_vs_bare_ratio": 1.25,
            "rescore_vs_first_ratio": 0.15,
            "cached_scoring_s": 2.0,
            "memory_peak_rss_mb": 2048,
        },
    }
    print(f"{'measure':38s} {'value':>10s} {'target':>8s}")
    for k, tgt in result["targets"].items():
        print(f"{k:38s} {result[k]:10.3f} {tgt:8}")
    print(
        f"bare loop {t_bare:.1f} s, stage {t_stage:.1f} s for {args.images} images ({args.images / t_stage:.1f} img/s)"
    )
    write_result("scoring", result)


if __name__ == "__main__":
    main()
