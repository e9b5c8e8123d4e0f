"""Rival scoring at ``models.rival.precision`` bf16 vs fp32: speed, top-K agreement, cosine differences.

The stage's own embedding path (:func:`gavil.models.loading._load_open_clip`: threaded decode and
preprocess, batches of 32, 2 threads; bf16 = autocast, plus channels-last for a ResNet tower) for
both precisions, loaded side by side in one process and interleaved chunk by chunk (fp32 on a
chunk, then bf16 on the same chunk), so that load from other jobs on the machine falls on both
sides of the ratio. Images: crops/flips of the sample photos at 256-640 px; texts: "A/An cue"
prompts of the release's SWOW cues. Agreement: synthetic instances (a cue's prompt vs 5, 6, 10 or
12 random images, K = 2-4) ranked by :func:`gavil.models.embeddings.predict` with each precision's
embeddings; top-K sets compared.

Offline there are no real weights: the model runs with random weights (``pretrained: null``,
labelled untrained). Speed does not depend on the weights; agreement does, so it is reported as
measured on random weights only - with trained weights the similarities are spread wider and
agreement is expected to be at least as high, but this benchmark cannot show it.

Usage: python benchmarks/precision.py [--model RN50] [--images 256] [--texts 256]
Writes benchmarks/results/precision.json.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, random_view, sample_photos, write_result  # noqa: E402


def make_images(d: Path, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    photos = sample_photos()
    out = []
    for i in range(n):
        path = d / f"img-{i:04d}.jpg"
        random_view(photos[i % len(photos)], rng, 0.5, (256, 448, 640)).save(path, quality=90)
        out.append(str(path))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="RN50")
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--texts", type=int, default=256)
    ap.add_argument("--chunk", type=int, default=64)
    args = ap.parse_args()

    import pandas as pd

    from gavil.domain.winogavil import prompt_for_cue
    from gavil.models.embeddings import predict
    from gavil.models.loading import ModelSpec, RuntimeOptions, _load_open_clip
    from gavil.models.precision import cpu_native_bf16

    work = Path(tempfile.mkdtemp(prefix="gavil-precision-"))
    paths = make_images(work, args.images)
    cues = sorted(set(pd.read_csv(ROOT / "data/sample/winogavil/swow.csv")["cue"].str.strip().str.lower()))
    prompts = [prompt_for_cue(c) for c in (cues * (1 + args.texts // max(1, len(cues))))[: args.texts]]
    prompts = [f"{p} {i // len(cues)}" if i >= len(cues) else p for i, p in enumerate(prompts)]  # distinct texts
    spec = ModelSpec("bench", "open_clip", args.model, None)
    models = {
        k: _load_open_clip(spec, RuntimeOptions(batch_size=32, threads=2, loader_workers=1, precision=k, device="cpu"))
        for k in ("fp32", "bf16")
    }
    for m in models.values():  # warm-up: first calls build oneDNN kernels
        assert m.embed_images is not None
        m.embed_images(paths[:32])
        m.embed_texts(prompts[:32])

    img: dict[str, list[np.ndarray]] = {k: [] for k in models}
    txt: dict[str, list[np.ndarray]] = {k: [] for k in models}
    t_img = dict.fromkeys(models, 0.0)
    t_txt = dict.fromkeys(models, 0.0)
    for i in range(0, max(len(paths), len(prompts)), args.chunk):
        for k, m in models.items():
            assert m.embed_images is not None
            if i < len(paths):
                t0 = time.perf_counter()
                img[k].append(m.embed_images(paths[i : i + args.chunk]))
                t_img[k] += time.perf_counter() - t0
            if i < len(prompts):
                t0 = time.perf_counter()
                txt[k].append(m.embed_texts(prompts[i : i + args.chunk]))
                t_txt[k] += time.perf_counter() - t0
        print(f"precision bench: {i + args.chunk} done; images {t_img}, texts {t_txt}", flush=True)
    I = {k: np.concatenate(v) for k, v in img.items()}  # noqa: E741
    T = {k: np.concatenate(v) for k, v in txt.items()}

    # agreement on synthetic instances: one per prompt, N random images, K associations
    rng = random.Random(1)
    names = [f"i{j}" for j in range(len(paths))]
    cands, queries, ks = [], [], []
    for j in range(len(prompts)):
        n = rng.choice((5, 6, 10, 12))
        cands.append(rng.sample(names, n))
        queries.append(prompts[j])
        ks.append(rng.randint(2, min(4, n - 1)))
    picks, sims = {}, {}
    for k in models:
        picks[k], sims[k] = predict(cands, queries, ks, dict(zip(names, I[k])), dict(zip(prompts, T[k])))
    same_set = sum(set(a) == set(b) for a, b in zip(picks["fp32"], picks["bf16"]))
    same_order = sum(a == b for a, b in zip(picks["fp32"], picks["bf16"]))
    jacc = [len(set(a) & set(b)) / len(set(a) | set(b)) for a, b in zip(picks["fp32"], picks["bf16"])]
    cos_img = (I["fp32"] * I["bf16"]).sum(axis=1)
    cos_txt = (T["fp32"] * T["bf16"]).sum(axis=1)
    sim_diff = np.abs(np.concatenate([np.subtract(a, b) for a, b in zip(sims["fp32"], sims["bf16"])]))
    spread = np.array([max(s) - min(s) for s in sims["fp32"]])  # how far apart a ranking's similarities are
    total = {k: t_img[k] + t_txt[k] for k in models}
    result = {
        "machine": machine(f"CPU only, native bf16 (AMX/AVX-512-BF16): {cpu_native_bf16()}"),
        "note": "one process, one run, fp32 and bf16 interleaved per chunk; the 2 cores were shared with "
        "other jobs, so absolute times are noisy; read the ratios.",
        "model": f"{args.model} (random weights, untrained: speed is real, agreement only for random weights)",
        "images": len(paths),
        "texts": len(prompts),
        **{f"images_{k}_s": round(t, 2) for k, t in t_img.items()},
        **{f"texts_{k}_s": round(t, 2) for k, t in t_txt.items()},
        **{f"images_per_s_{k}": round(len(paths) / t, 2) for k, t in t_img.items()},
        "speedup_images_bf16_vs_fp32": round(t_img["fp32"] / t_img["bf16"], 2),
        "speedup_texts_bf16_vs_fp32": round(t_txt["fp32"] / t_txt["bf16"], 2),
        "speedup_total_bf16_vs_fp32": round(total["fp32"] / total["bf16"], 2),
        "instances": len(cands),
        "topk_same_set": same_set,
        "topk_same_order": same_order,
        "topk_mean_jaccard_bf16_vs_fp32": round(float(np.mean(jacc)), 4),
        "cosine_fp32_vs_bf16_image_min": round(float(cos_img.min()), 5),
        "cosine_fp32_vs_bf16_image_mean": round(float(cos_img.mean()), 5),
        "cosine_fp32_vs_bf16_text_min": round(float(cos_txt.min()), 5),
        "cosine_fp32_vs_bf16_text_mean": round(float(cos_txt.mean()), 5),
        "similarity_abs_diff_max": round(float(sim_diff.max()), 5),
        "similarity_abs_diff_mean": round(float(sim_diff.mean()), 5),
        "similarity_spread_fp32_median": round(float(np.median(spread)), 5),
        "targets": {"speedup_total_bf16_vs_fp32": ">= 2.5"},
    }
    print(f"{'measure':40s} {'value':>10s}")
    for key in (
        "images_per_s_fp32",
        "images_per_s_bf16",
        "speedup_images_bf16_vs_fp32",
        "speedup_texts_bf16_vs_fp32",
        "speedup_total_bf16_vs_fp32",
        "topk_same_set",
        "topk_mean_jaccard_bf16_vs_fp32",
        "cosine_fp32_vs_bf16_image_min",
        "cosine_fp32_vs_bf16_text_min",
        "similarity_abs_diff_max",
        "similarity_spread_fp32_median",
    ):
        print(f"{key:40s} {result[key]:>10}")
    write_result("precision", result)


if __name__ == "__main__":
    main()
