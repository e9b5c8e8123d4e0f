"""The crawl against img2dataset 1.47, the peer users would otherwise pick (issues 20 and 27).

Inputs are web-shaped (:mod:`benchmarks._web`: photos, long side 500-1,600 px, 30-400 KB; default
2,000 of them, cached under ``--cache``), served by **one** separate server process on 127.0.0.1
(keep-alive, TCP_NODELAY; robots.txt is a 404). Both sides run 8 download threads and are timed the
way a user waits for them: the wall time of the whole command, a new interpreter each time (its
start and imports included), and its CPU time (``RUSAGE_CHILDREN``: the command and every process
it waited for). In each round, in an order that rotates from round to round:

- ``i2d_skip_reencode``: ``img2dataset --resize_mode no --skip_reencode True`` (decodes each image
  with OpenCV to check it, keeps the original bytes: the peer configuration doing the same work as
  the stage, which checks every image and keeps its bytes);
- ``i2d_no_decode``: ``--disable_all_reencoding True`` (no decode at all: bytes straight to disk);
- ``i2d_default`` (``--with-default``): its default (decode, resize to 256 px with borders, re-encode);
- ``stage``: ``gavil stage crawl_images`` in a scratch project (``crawl.source: urllist``, 8 threads,
  ``per_host`` 8 connections and no delay, loopback allowed; ``concept_filter`` written directly),
  its outputs removed before each round so nothing is reused: robots.txt, the guarded client, Pillow
  validation (format, size, truncation), sha256 + perceptual hash, the store, the journal, and the
  ``candidates`` / ``images`` tables.

``--memo-validation`` adds ``stage_validation_memo``: the same command with ``inspect_image``'s
results computed beforehand and served from memory (a ``sitecustomize`` on ``PYTHONPATH`` swaps the
function the store calls for a lookup by the body's length and ends). It is an experiment, not a mode of
the stage: the difference between it and ``stage`` is what validation (decode, size check,
perceptual hash) costs inside the crawl, the work no-decode img2dataset does not do.

``--profile`` adds two in-process stage runs: one summing each thread's CPU time per role (main,
downloader threads, ...: where the cores go), one with every thread under cProfile (wall time:
where threads wait), written to ``benchmarks/results/crawl_vs_img2dataset_profile.txt``. Every run
also measures the CPU of the stage's start alone (``gavil stage`` imports) and of validation alone
per image (one thread).

img2dataset is not a project dependency: install it in its own venv
(``python3 -m venv /work/venv-i2d && /work/venv-i2d/bin/pip install img2dataset==1.47.0``) and pass
``--img2dataset /work/venv-i2d/bin/img2dataset``.

Usage (project root, venv):  python benchmarks/crawl_vs_img2dataset.py [--images 2000] [--rounds 3]
    [--img2dataset PATH] [--with-default] [--profile] [--gavil-venv VENV]

``--gavil-venv``: the venv of the README's first command (``pip install -c constraints.txt -e .``, no
test extras), so the stage starts as a user's does: with the test extras installed, pandera imports
dask (0.4 s) the first time it builds a schema.
Prints a table and writes benchmarks/results/crawl_vs_img2dataset.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing as mp
import os
import pstats
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import copy_project, machine, tool_env, write_result  # noqa: E402

I2D_COMMON = ["--resize_mode", "no", "--thread_count", "8", "--processes_count", "1"]
I2D_RUNS = {
    "i2d_skip_reencode": [*I2D_COMMON, "--skip_reencode", "True"],
    "i2d_no_decode": [*I2D_COMMON, "--disable_all_reencoding", "True"],
    "i2d_default": ["--thread_count", "8", "--processes_count", "1"],
}


# ------------------------------------------------------------------------------------------ server
def start_server(folder: Path, timeout_s: float = 120) -> tuple[mp.Process, str]:
    """``folder``'s files, held in memory, at ``/img/<name>`` on 127.0.0.1 (:func:`benchmarks._web.start_file_server`)."""
    from benchmarks._web import start_file_server

    return start_file_server({f"/img/{p.name}": str(p) for p in folder.iterdir()}, True, timeout_s)


# ------------------------------------------------------------------------------------------ inputs
def image_set(cache: Path, n: int, seed: int) -> Path:
    """``n`` web-shaped JPEGs (:func:`benchmarks._web.write_web_photos`), made once into ``cache``."""
    from benchmarks._web import write_web_photos

    folder = cache / f"web-{n}-seed{seed}"
    if not folder.is_dir():
        part = cache / f"{folder.name}.part-{os.getpid()}"
        write_web_photos(part, n, seed=seed)
        os.rename(part, folder)
    return folder


def make_project(dest: Path, urllist: Path, threads: int) -> Path:
    """A scratch project in ``dest``: the code, params for a loopback urllist crawl, and the
    ``concept_filter`` table of the map's concepts (all ``ok``)."""
    import pandas as pd
    import yaml

    copy_project(dest, with_params=False)
    p = yaml.safe_load((ROOT / "params.yaml").read_text())
    p["crawl"] |= {
        "source": "urllist",
        "urllist_path": str(urllist),
        "threads": threads,
        "allow_private_hosts": True,  # the benchmark's host is loopback
        "per_host": {"max_connections": threads, "delay_s": 0.0},  # no politeness delay
    }
    (dest / "params.yaml").write_text(yaml.safe_dump(p, sort_keys=False))
    concepts = sorted(json.loads(urllist.read_text()))
    cf = pd.DataFrame({"concept": concepts, "status": ["ok"] * len(concepts), "reason": [None] * len(concepts)})
    cwd = os.getcwd()
    os.chdir(dest)
    try:
        from gavil.pipeline import catalog

        catalog.write_table(cf, "concept_filter")
    finally:
        os.chdir(cwd)
    return dest


STAGE_FATES: dict[str, int] = {}  # the last stage run's concepts by status
_STAGE_OUTPUTS = ("image_store", "crawl_journal", "candidates", "images")


def _clean_stage_outputs(project: Path) -> None:
    from gavil.pipeline import catalog

    for name in _STAGE_OUTPUTS:
        target = project / catalog.entry(name).path
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------------ runs
def _cpu_children() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _timed(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[float, float, str]:
    """Run ``cmd``; (wall s, CPU s of it and its waited-for descendants, stdout)."""
    c0, t0 = _cpu_children(), time.perf_counter()
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _cpu_children() - c0
    if out.returncode:
        raise RuntimeError(f"{cmd[0]} failed:\n{out.stderr[-3000:]}")
    return wall, cpu, out.stdout


def run_img2dataset(exe: str, kind: str, urls: Path, out: Path) -> tuple[float, float, int]:
    """One img2dataset command; (wall s, CPU s, images written)."""
    cmd = [exe, "--url_list", str(urls), "--output_folder", str(out), "--input_format", "txt"]
    cmd += ["--output_format", "files", *I2D_RUNS[kind]]
    wall, cpu, _ = _timed(cmd, out.parent, {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"})
    got = sum(1 for _ in out.rglob("*.jpg"))
    shutil.rmtree(out, ignore_errors=True)
    return wall, cpu, got


def _stage_env(project: Path) -> dict[str, str]:
    return tool_env(PYTHONPATH=str(project))  # the project's own copy of the code


#: The venv whose ``gavil`` runs the stage (``--gavil-venv``): by default this interpreter's.
GAVIL_BIN = Path(sys.executable).parent


def run_stage(project: Path, memo: Path | None = None) -> tuple[float, float, int]:
    """``gavil stage crawl_images`` in ``project`` from a new interpreter, outputs removed first;
    (wall s, CPU s, concepts with an ok image). The concepts' fates go to :data:`STAGE_FATES`.
    ``memo``: a folder from :func:`validation_memo` (validation results served from memory)."""
    _clean_stage_outputs(project)
    gavil = str(GAVIL_BIN / "gavil")
    env = _stage_env(project)
    if memo is not None:
        env |= {"PYTHONPATH": f"{memo}{os.pathsep}{project}", "GAVIL_VALIDATION_MEMO": str(memo / "memo.pkl")}
    hits = memo / "memo.pkl.hits" if memo is not None else None
    if hits is not None:
        hits.unlink(missing_ok=True)
    wall, cpu, _ = _timed([gavil, "stage", "crawl_images"], project, env)
    details = json.loads((project / "data/metrics/details/crawl_images.json").read_text())
    STAGE_FATES.update(details["by_status"])
    if hits is not None:  # the memo must have answered every validation, or the row times the plain stage
        served = int(hits.read_text()) if hits.exists() else 0
        if served == 0 or served < details["by_status"].get("ok", 0):
            raise RuntimeError(f"the validation memo answered {served} validations: not in use (sitecustomize?)")
    return wall, cpu, int(details["by_status"].get("ok", 0))


_MEMO_SITE = """
import atexit, itertools, os, pickle
import stages.crawl_images.store as store
_file = os.environ["GAVIL_VALIDATION_MEMO"]
_memo = pickle.load(open(_file, "rb"))
_hits = itertools.count()
def _inspect(path, *a, data=None, **k):
    info = _memo[(len(data), data[:256], data[-256:])]
    next(_hits)
    return info
store.inspect_image = _inspect
atexit.register(lambda: open(_file + ".hits", "w").write(str(next(_hits))))
"""


def validation_memo(folder: Path, dest: Path) -> Path:
    """``dest`` holding ``memo.pkl`` (``inspect_image`` of every file in ``folder``, with the
    stage's default checks and phash, keyed by the bytes' length and ends) and the
    ``sitecustomize.py`` that serves it (see the module docstring); returns ``dest``."""
    import pickle

    import yaml

    from stages.crawl_images.validate import inspect_image

    c = yaml.safe_load((ROOT / "params.yaml").read_text())["crawl"]
    memo = {}
    for f in sorted(folder.iterdir()):
        data = f.read_bytes()
        info = inspect_image(f, c["min_side"], c["max_pixels"], c["accept_formats"], with_phash=True, data=data)
        memo[(len(data), data[:256], data[-256:])] = info
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "memo.pkl").write_bytes(pickle.dumps(memo))
    (dest / "sitecustomize.py").write_text(_MEMO_SITE)
    return dest


def start_cpu(project: Path) -> tuple[float, float]:
    """(wall s, CPU s) of the ``gavil stage crawl_images`` start alone: a new interpreter importing
    what the command and the stage import, nothing run."""
    code = (
        "import gavil.cli\nfrom gavil.params import load_params\nfrom gavil.pipeline.dvc import check_stage_params\n"
        "from gavil.pipeline.runner import run_stage\nimport stages.crawl_images\n"
        "load_params('params.yaml')\n"
    )
    wall, cpu, _ = _timed([str(GAVIL_BIN / "python"), "-c", code], project, _stage_env(project))
    return wall, cpu


# ------------------------------------------------------------------------------------------ profile
_NAMED = {  # label: (file suffix, function); "~" marks a C function
    "download (fetch.download, per image)": ("fetch.py", "download"),
    "HTTP client fetch (guarded urllib3)": ("client.py", "fetch"),
    "socket recv_into": ("~", "<method 'recv_into' of '_socket.socket' objects>"),
    "keep_file (validate, hash, store)": ("store.py", "keep_file"),
    "inspect_image (Pillow decode + phash)": ("validate.py", "inspect_image"),
    "phash (grey 32x32 + DCT)": ("validate.py", "_phash"),
    "Pillow decode": ("~", "<method 'decode' of 'ImagingDecoder' objects>"),
    "sha256 update": ("~", "<method 'update' of '_hashlib.HASH' objects>"),
    "journal append": ("journal.py", "append"),
    "robots check": ("robots.py", "check"),
    "register (tables)": ("register.py", "register"),
    "reduce (register, write tables)": ("stage.py", "reduce"),
    "lock acquire (threads waiting)": ("~", "<method 'acquire' of '_thread.lock' objects>"),
}


def _role(name: str) -> str:
    """A thread's role from its name (icrawler names its workers ``downloader-001`` ...)."""
    return name.rsplit("-", 1)[0] if name[-3:].isdigit() else name


def profiled_stage(project: Path, dest: Path) -> dict[str, Any]:
    """One stage run (:func:`gavil.pipeline.runner.run_stage`, in this process, imports already
    done), twice: first with each thread's CPU time (``time.thread_time`` at its end) summed per
    role (main, feeder, parser, downloader, crawl-deadline ...: where the cores go); then with every
    thread under cProfile (wall time, summed over threads: where threads wait), whose named
    costs and cumulative / own-time top 30 go to ``dest``. Returns
    ``{"cpu_s_by_thread_role": ..., "cprofile_wall_s": ...}``."""
    from gavil.pipeline.runner import run_stage as run

    cwd = os.getcwd()
    os.chdir(project)
    try:
        # 1. per-thread CPU, no profiler
        _clean_stage_outputs(project)
        by_role: dict[str, float] = {}
        lock = threading.Lock()
        orig_run = threading.Thread.run

        def counted_run(self: threading.Thread) -> None:
            try:
                orig_run(self)
            finally:
                with lock:
                    role = _role(self.name)
                    by_role[role] = by_role.get(role, 0.0) + time.thread_time()

        threading.Thread.run = counted_run  # type: ignore[method-assign]
        c0, t0 = time.process_time(), time.perf_counter()
        m0 = time.thread_time()
        try:
            run("crawl_images")
        finally:
            threading.Thread.run = orig_run  # type: ignore[method-assign]
        by_role["main"] = time.thread_time() - m0
        cpu_roles = {k: round(by_role[k], 3) for k in sorted(by_role, key=by_role.__getitem__, reverse=True)}
        cpu_roles["process_total"] = round(time.process_time() - c0, 3)
        cpu_roles["wall"] = round(time.perf_counter() - t0, 3)

        # 2. cProfile of every thread, wall clock; 3. the same with each thread's CPU clock
        wall_stats = _profiled_run(project, run, lock, time.perf_counter)
        cpu_stats = _profiled_run(project, run, lock, time.thread_time)
    finally:
        os.chdir(cwd)
    buf = io.StringIO()
    wall_stats.stream = buf  # type: ignore[attr-defined]
    wall_stats.sort_stats("cumulative").print_stats(30)
    wall_stats.sort_stats("tottime").print_stats(30)
    cpu_buf = io.StringIO()
    cpu_stats.stream = cpu_buf  # type: ignore[attr-defined]
    cpu_stats.sort_stats("tottime").print_stats(40)
    costs, cpu_costs = _named(wall_stats), _named(cpu_stats)
    dest.write_text(
        "One crawl_images stage run (in-process, imports done).\n\n"
        "CPU seconds by thread role (time.thread_time of each thread, no profiler):\n"
        + "".join(f"  {k:40s} {v:8.3f}\n" for k, v in cpu_roles.items())
        + "\ncProfile, all threads merged, wall time summed over threads (8 workers waiting at once count 8 times)."
        + "\nNamed costs (s, cumulative):\n"
        + "".join(f"  {k:40s} {v:8.3f}\n" for k, v in costs.items())
        + "\nThe same named costs in CPU seconds (cProfile on each thread's own CPU clock, time.thread_time):\n"
        + "".join(f"  {k:40s} {v:8.3f}\n" for k, v in cpu_costs.items())
        + "\n"
        + buf.getvalue()
        + "\nCPU clock, own time (tottime) per function, all threads:\n"
        + cpu_buf.getvalue()
    )
    return {"cpu_s_by_thread_role": cpu_roles, "cprofile_wall_s": costs, "cprofile_cpu_s": cpu_costs}


def _profiled_run(project: Path, run: Any, lock: threading.Lock, timer: Any) -> pstats.Stats:
    """One stage run with every thread under its own cProfile on ``timer``; their merged stats."""
    _clean_stage_outputs(project)
    profiles: list[cProfile.Profile] = []

    def start(frame: Any, event: str, arg: Any) -> None:  # a new thread's first event: switch to cProfile
        prof = cProfile.Profile(timer)
        with lock:
            profiles.append(prof)
        prof.enable()

    threading.setprofile(start)
    main = cProfile.Profile(timer)
    main.enable()
    try:
        run("crawl_images")
    finally:
        main.disable()
        threading.setprofile(None)
    stats = pstats.Stats(main)
    for prof in profiles:
        try:
            stats.add(prof)
        except TypeError:  # a thread that never recorded anything
            pass
    return stats


def _named(stats: pstats.Stats) -> dict[str, float]:
    """The cumulative seconds of each :data:`_NAMED` cost in ``stats``."""
    raw = stats.stats  # type: ignore[attr-defined]
    return {
        label: round(
            sum(
                ct for (file, _l, func), (_cc, _nc, _tt, ct, _c) in raw.items() if func == fn and file.endswith(suffix)
            ),
            3,
        )
        for label, (suffix, fn) in _NAMED.items()
    }


def validation_cpu_ms(folder: Path, limit: int = 300) -> dict[str, float]:
    """CPU ms per image (one thread) of the stage's validation (:func:`inspect_image`: open, size
    check, draft decode, phash) and, for comparison, of a full Pillow decode and of OpenCV's
    ``imdecode`` (what img2dataset's check does), on the first ``limit`` files."""
    from PIL import Image

    from stages.crawl_images.validate import inspect_image

    files = sorted(folder.iterdir())[:limit]

    def per_image(fn: Any) -> float:
        fn(files[0])
        t0 = time.thread_time()
        for f in files:
            fn(f)
        return round((time.thread_time() - t0) / len(files) * 1e3, 3)

    def full(f: Path) -> None:
        with Image.open(f) as im:
            im.load()

    return {
        "inspect_image": per_image(lambda f: inspect_image(f, 64, 50_000_000, with_phash=True)),
        "pillow_full_decode": per_image(full),
    }


# ------------------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "gavil-web-photos"))
    ap.add_argument("--img2dataset", default="img2dataset", help="the img2dataset executable (own venv)")
    ap.add_argument("--with-default", action="store_true", help="also img2dataset's default (re-encode)")
    ap.add_argument("--profile", action="store_true", help="also profile one in-process stage run")
    ap.add_argument("--memo-validation", action="store_true", help="also the stage with validation served from memory")
    ap.add_argument(
        "--gavil-venv",
        help="the venv whose gavil runs the stage: the README's first command's install (no test extras), as users"
        " have it; default: this interpreter's (a dev venv with the test extras imports dask through pandera)",
    )
    args = ap.parse_args()
    global GAVIL_BIN
    if args.gavil_venv:
        GAVIL_BIN = Path(args.gavil_venv).resolve() / "bin"

    folder = image_set(Path(args.cache), args.images, args.seed)
    from benchmarks._web import describe

    files = sorted(folder.iterdir())
    exe = shutil.which(args.img2dataset)
    kinds = [k for k in I2D_RUNS if k != "i2d_default" or args.with_default] if exe else []
    load_before = os.getloadavg()
    server, base = start_server(folder)
    tmp = Path(tempfile.mkdtemp(prefix="gavil-i2d-bench-"))
    try:
        urls = [f"{base}/img/{p.name}" for p in files]
        (tmp / "urls.txt").write_text("\n".join(urls) + "\n")
        (tmp / "urllist.json").write_text(json.dumps({f"concept {i:05d}": u for i, u in enumerate(urls)}))
        project = make_project(tmp / "project", tmp / "urllist.json", args.threads)
        run_stage(project)  # warm-up: page cache, .pyc files of the copied code
        runs: list[dict[str, Any]] = []
        memo = validation_memo(folder, tmp / "memo") if args.memo_validation else None
        order = ["stage", *(["stage_validation_memo"] if memo else []), *kinds]
        for r in range(args.rounds):
            for tool in order[r % len(order) :] + order[: r % len(order)]:
                if tool.startswith("stage"):
                    wall, cpu, got = run_stage(project, memo if tool == "stage_validation_memo" else None)
                else:
                    wall, cpu, got = run_img2dataset(exe or "", tool, tmp / "urls.txt", tmp / f"{tool}-{r}")
                runs.append({"round": r, "tool": tool, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2), "images": got})
                print(f"round {r} {tool:18s} {wall:7.2f} s wall {cpu:7.2f} s CPU  {got} images", flush=True)
        load_after = os.getloadavg()
        start_wall, start_cpu_s = start_cpu(project)
        i2d_help = _timed([exe, "--help"], tmp, {**os.environ, "NO_ALBUMENTATIONS_UPDATE": "1"}) if exe else None
        costs = None
        if args.profile:
            sys.path.insert(0, str(project))
            costs = profiled_stage(project, ROOT / "benchmarks/results/crawl_vs_img2dataset_profile.txt")
        validation = validation_cpu_ms(folder)
    finally:
        server.terminate()
        shutil.rmtree(tmp, ignore_errors=True)

    def mean(tool: str, key: str = "wall_s") -> float | None:
        xs = [x[key] for x in runs if x["tool"] == tool]
        return round(sum(xs) / len(xs), 2) if xs else None

    tools = ["stage", *(["stage_validation_memo"] if args.memo_validation else []), *kinds]
    stage_wall = mean("stage")
    ratios = {k: round(stage_wall / mean(k), 3) for k in kinds if stage_wall and mean(k)}  # type: ignore[operator]
    n = args.images
    result = {
        "machine": machine(),
        "image_set": describe(files) | {"seed": args.seed, "maker": "benchmarks/_web.py write_web_photos"},
        "threads": args.threads,
        "gavil": str(GAVIL_BIN / "gavil"),
        "img2dataset": exe or "not installed",
        "img2dataset_flags": {k: I2D_RUNS[k] for k in kinds},
        "runs": runs,
        "stage_concepts_by_status": STAGE_FATES,  # e.g. near-duplicate crops of the same photos: duplicate
        "wall_s_mean": {t: mean(t) for t in tools},
        "cpu_s_mean": {t: mean(t, "cpu_s") for t in tools},
        "cpu_ms_per_image": {t: round(mean(t, "cpu_s") / n * 1e3, 2) for t in tools},  # type: ignore[operator]
        "stage_over": ratios,  # stage wall / img2dataset wall, means over rounds, same run
        "stage_validation_memo_over": {k: round(mean("stage_validation_memo") / mean(k), 3) for k in kinds}  # type: ignore[operator]
        if args.memo_validation
        else None,
        "targets": {"i2d_skip_reencode": "<= 0.8", "i2d_no_decode": "<= 1.0"},
        "stage_start_s": {"wall": round(start_wall, 2), "cpu": round(start_cpu_s, 2)},  # gavil stage imports
        "img2dataset_help_s": {"wall": round(i2d_help[0], 2), "cpu": round(i2d_help[1], 2)} if i2d_help else None,
        "validation_cpu_ms_per_image": validation,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after_runs": [round(x, 2) for x in load_after],
        "profile_named_costs_s": costs,
    }
    print(f"\n{'command':20s} {'wall s':>8s} {'CPU s':>8s} {'CPU ms/img':>11s}  stage / it (target)")
    for t in tools:
        ratio = f"{ratios[t]:.3f} ({result['targets'].get(t, '-')})" if t in ratios else ""
        print(f"{t:20s} {mean(t):8.2f} {mean(t, 'cpu_s'):8.2f} {result['cpu_ms_per_image'][t]:11.2f}  {ratio}")
    print(f"image set: {result['image_set']}")
    print(f"gavil stage start (imports): {result['stage_start_s']}; img2dataset --help: {result['img2dataset_help_s']}")
    print(f"validation CPU ms per image (one thread): {validation}")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after_runs']}")
    if costs:
        print("profile (s, summed over threads):", json.dumps(costs, indent=1))
    write_result("crawl_vs_img2dataset", result)


if __name__ == "__main__":
    main()
