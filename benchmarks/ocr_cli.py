"""OCR as users wait for it (issue 27): ``gavil stage ocr_filter`` from a new interpreter against a
new interpreter running EasyOCR's ``readtext`` on the same files.

``benchmarks/ocr.py`` times every side in one process with the models already loaded, image by
image. This script times what a user's command costs end to end, for both sides alike: a new
Python process that imports its libraries, loads the OCR models, reads every image and exits.

- Images: the OCR set (:mod:`benchmarks._ocrset`, ``--images`` 36, ``--seed`` 0; web photos,
  half with their word at 1-8 % cap height). Each image is named after its concept, in a scratch
  project's ``crawl.local_dir`` (word images: the drawn word; text-free photos: a word of
  :data:`FREE_CONCEPTS`).
- Untimed set-up: ``gavil stage crawl_images`` (the ``local`` source) validates and stores them,
  so the stage and the peer read the very files in the store (``data/crawl/candidates.parquet``,
  rank 1, kept).
- ``stage``: ``gavil stage ocr_filter`` with the params' defaults (canvas 2,560, ``precision:
  fp32``), its outputs and detection cache removed before each run; ``stage-fp32``, ``stage-auto``,
  ``stage-int8`` ...: the same with ``ocr.precision`` set to each of ``--precisions`` (default
  ``fp32 auto int8``; ``auto`` is bf16 on a CPU with ``avx512_bf16``; none: ``stage``, the params'
  default). ``stage_speedup`` is the default precision's.
- ``readtext`` / ``readtext@640``: ``python -c`` that builds ``easyocr.Reader(["en"])`` on the
  same offline weights and calls ``reader.readtext(path)`` (or ``canvas_size=640``) per image,
  printing the detections; this script then applies the stage's rule
  (:func:`stages.ocr_filter.match_text`, params' thresholds) to them.
- The sides take turns (``--rounds``, the order rotating); wall and CPU seconds (the child's
  ``RUSAGE_CHILDREN``) per run.

Usage (project root, venv):  python benchmarks/ocr_cli.py [--images 36] [--seed 0] [--rounds 1] [--precisions fp32 auto int8]
  [--out ocr_cli]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import copy_project, machine, tool_env, write_result  # noqa: E402
from benchmarks._ocrset import write_ocr_set  # noqa: E402

#: Concepts of the text-free photos (distinct from the set's drawn words, which name word images).
FREE_CONCEPTS = (
    "meadow",
    "harbor",
    "valley",
    "pillow",
    "basket",
    "ladder",
    "marble",
    "carpet",
    "jacket",
    "kettle",
    "saddle",
    "tunnel",
    "wallet",
    "bucket",
    "cactus",
    "feather",
    "lantern",
    "orchard",
    "pebble",
    "quarry",
)

PEER = """
import json, sys
from gavil.compat.torchvision_bridge import ensure_torchvision
ensure_torchvision()
import easyocr, easyocr_en_models
jobs = json.load(open(sys.argv[1]))
kw = {"canvas_size": int(sys.argv[2])} if len(sys.argv) > 2 else {}
reader = easyocr.Reader(["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(),
                        download_enabled=False, verbose=False)
print(json.dumps({c: [(str(t), float(p)) for _, t, p in reader.readtext(path, **kw)] for c, path in jobs}))
"""


def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """Run ``cmd`` in ``cwd``; (wall s, CPU s, stdout). Raises RuntimeError with its stderr's tail."""
    c0, t0 = _cpu_children(), time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=tool_env(PYTHONPATH=str(cwd)), capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} failed:\n{out.stderr[-3000:]}")
    return wall, cpu, out.stdout


def make_project(dest: Path, items: list[Any]) -> tuple[Path, dict[str, Any]]:
    """A scratch project whose ``crawl.local_dir`` holds the set's images named after their
    concepts, crawled (untimed); returns it and {concept: item} of the images stored."""
    import pandas as pd
    import yaml

    copy_project(dest, with_params=False)
    folder = dest / "ocrset"
    folder.mkdir()
    by_concept: dict[str, Any] = {}
    free = iter(FREE_CONCEPTS)
    for it in items:
        concept = it.concept if it.shows_word else next(free)
        if concept in by_concept:
            continue  # a word drawn twice (sets larger than the word list): its first image only
        shutil.copy(it.path, folder / f"{concept}.jpg")
        by_concept[concept] = it
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["crawl"] |= {"source": "local", "local_dir": str(folder), "top_n": 1}
    (dest / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    concepts = sorted(by_concept)
    cf = pd.DataFrame({"concept": concepts, "status": ["ok"] * len(concepts), "reason": [None] * len(concepts)})
    cwd = os.getcwd()
    os.chdir(dest)
    try:
        from gavil.pipeline import catalog

        catalog.write_table(cf, "concept_filter")
    finally:
        os.chdir(cwd)
    _timed([str(Path(sys.executable).parent / "gavil"), "stage", "crawl_images"], dest)
    return dest, by_concept


def _stored(project: Path) -> list[tuple[str, str]]:
    """(concept, absolute path) of every kept rank-1 candidate, sorted by concept."""
    import pandas as pd

    c = pd.read_parquet(project / "data/crawl/candidates.parquet")
    c = c[(c["status"] == "kept") & (c["rank"] == 1)].sort_values("concept")
    return [(r.concept, str(project / r.path)) for r in c.itertuples()]


def run_stage(project: Path, precision: str | None = None) -> tuple[float, float, dict[str, bool]]:
    """``gavil stage ocr_filter`` from a new interpreter, its outputs and cache removed first, with
    ``ocr.precision`` set to ``precision`` (None: the params' default); (wall s, CPU s, {concept: rejected})."""
    import pandas as pd
    import yaml

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    if precision is not None:
        params["ocr"]["precision"] = precision
    p = yaml.safe_load((project / "params.yaml").read_text())
    p["ocr"] = params["ocr"]
    (project / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))

    cwd = os.getcwd()
    os.chdir(project)
    try:
        from gavil.pipeline import catalog

        for name in ("ocr", "ocr_detections", "plot_ocr_fates"):
            target = project / catalog.entry(name).path
            shutil.rmtree(target) if target.is_dir() else target.unlink(missing_ok=True)
    finally:
        os.chdir(cwd)
    wall, cpu, _ = _timed([str(Path(sys.executable).parent / "gavil"), "stage", "ocr_filter"], project)
    df = pd.read_parquet(project / "data/ocr/ocr.parquet")
    return wall, cpu, {r.concept: r.status == "rejected_text" for r in df.itertuples() if r.status != "no_image"}


def run_peer(project: Path, jobs: Path, canvas: int | None, rule: Any) -> tuple[float, float, dict[str, bool], dict]:
    """The ``readtext`` command on ``jobs``; (wall s, CPU s, {concept: rejected}, {concept: text})."""
    from stages.ocr_filter import match_text

    cmd = [sys.executable, "-c", PEER, str(jobs), *([str(canvas)] if canvas else [])]
    wall, cpu, out = _timed(cmd, project)
    found = json.loads(out.strip().splitlines()[-1])
    decided = {c: match_text(c, [tuple(d) for d in dets], rule).rejected for c, dets in found.items()}
    return wall, cpu, decided, {c: " ".join(t for t, _ in dets) for c, dets in found.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=36)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--precisions", nargs="*", default=["fp32", "auto", "int8"])
    ap.add_argument("--out", default="ocr_cli")
    args = ap.parse_args()
    if args.images > 2 * len(FREE_CONCEPTS):  # one concept per image: the text-free photos need names
        ap.error(f"--images is at most {2 * len(FREE_CONCEPTS)} (one distinct concept per image)")

    import yaml

    from stages.ocr_filter import MatchRule

    p = yaml.safe_load((ROOT / "params.yaml").read_text())["ocr"]
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    work = Path(tempfile.mkdtemp(prefix="gavil-ocr-cli-"))
    try:
        items = write_ocr_set(work / "set", args.images, args.seed)
        project, by_concept = make_project(work / "project", items)
        stored = _stored(project)
        jobs = work / "jobs.json"
        jobs.write_text(json.dumps(stored))
        stages = [f"stage-{x}" for x in args.precisions] or ["stage"]  # "stage": the params' default
        sides = [*stages, "readtext", "readtext@640"]
        runs: list[dict[str, Any]] = []
        decisions: dict[str, dict[str, bool]] = {}
        texts: dict[str, dict] = {}
        for r in range(args.rounds):
            for side in sides[r % len(sides) :] + sides[: r % len(sides)]:
                if side.startswith("stage"):
                    wall, cpu, dec = run_stage(project, side.removeprefix("stage-") if "-" in side else None)
                else:
                    wall, cpu, dec, texts[side] = run_peer(project, jobs, 640 if side.endswith("640") else None, rule)
                decisions[side] = dec
                runs.append({"round": r, "side": side, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
                print(f"round {r} {side:13s} {wall:8.2f} s wall {cpu:8.2f} s CPU", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def mean(side: str, key: str) -> float:
        v = [x[key] for x in runs if x["side"] == side]
        return sum(v) / len(v)

    target = decisions["readtext"]
    default = f"stage-{p['precision']}" if f"stage-{p['precision']}" in sides else stages[0]
    concepts = sorted(target)

    def differ(side: str) -> list[dict[str, Any]]:
        out = []
        for c in concepts:
            if decisions[side].get(c) != target[c]:
                it = by_concept[c]
                out.append(
                    {
                        "concept": c,
                        "cap_height_percent": it.cap_height_percent,
                        "cap_height_px": it.cap_height_px,
                        "readtext_rejects": target[c],
                        "readtext_read": texts["readtext"].get(c, ""),
                    }
                )
        return out

    result = {
        "machine": machine(),
        "note": "each run a new interpreter: imports, model load, every image, exit; the sides take turns",
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "images": len(concepts),
        "seed": args.seed,
        "with_word": sum(by_concept[c].shows_word for c in concepts),
        "stage_params": {k: p[k] for k in ("canvas_size", "precision", "device", "batch_size")},
        "runs": runs,
        "wall_s_mean": {s: round(mean(s, "wall_s"), 2) for s in sides},
        "cpu_s_mean": {s: round(mean(s, "cpu_s"), 2) for s in sides},
        "stage_speedup": {
            "vs_readtext": round(mean("readtext", "wall_s") / mean(default, "wall_s"), 2),
            "vs_readtext@640": round(mean("readtext@640", "wall_s") / mean(default, "wall_s"), 2),
        },
        "speedup_vs_readtext": {s: round(mean("readtext", "wall_s") / mean(s, "wall_s"), 2) for s in sides},
        "same_decision_as_readtext": {
            s: f"{sum(decisions[s].get(c) == target[c] for c in concepts)}/{len(concepts)}" for s in sides
        },
        "rejected": {s: sum(decisions[s].get(c, False) for c in concepts) for s in sides},
        "disagreements_with_readtext": {s: differ(s) for s in sides if s != "readtext"},
        "targets": {"stage_speedup.vs_readtext": ">= 10", "same_decision_as_readtext": "every image"},
    }
    print(f"{'side':14s} {'wall s':>8s} {'CPU s':>8s}  same decision as readtext")
    for s in sides:
        print(
            f"{s:14s} {result['wall_s_mean'][s]:8.2f} {result['cpu_s_mean'][s]:8.2f}  "
            f"{result['same_decision_as_readtext'][s]}"
        )
    print(f"speed-up vs readtext: {result['speedup_vs_readtext']}")
    write_result(args.out, result)


if __name__ == "__main__":
    main()
