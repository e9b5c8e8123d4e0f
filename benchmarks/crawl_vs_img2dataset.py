"""The crawl against img2dataset, the peer users would otherwise pick (issue 20).

A separate server process on 127.0.0.1 (keep-alive, TCP_NODELAY; ``benchmarks/crawl.py``'s server)
serves N distinct 256x192 JPEGs (robots.txt is a 404). In one run, interleaved (A B A B ...):

- A: img2dataset (``--resize_mode no --disable_all_reencoding True --thread_count 8
  --processes_count 1``, a txt URL list, ``files`` output) as a subprocess: wall time of the whole
  command (its interpreter start and imports included: that is what a user waits for), and
  separately the time of ``img2dataset --help`` (start + imports only).
- bare: urllib3 on 8 threads streaming each image to a file with sha256, nothing else (the floor).
- B: this project's ``crawl_images`` core (:func:`stages.crawl_images.stage.crawl`) in
  ``urllist`` mode on the same URLs, 8 threads, no politeness delay, a fresh directory each round
  (nothing reused from the journal): robots.txt, the guarded client, Pillow validation,
  sha256 + phash, journal, staging, registration.

Then one more crawl under cProfile (every thread profiled, stats merged; profiling slows it) and
its cumulative top 25 saved to ``benchmarks/results/crawl_vs_img2dataset_profile.txt``.

img2dataset is not a project dependency: install it in its own venv
(``python3 -m venv /work/venv-i2d && /work/venv-i2d/bin/pip install img2dataset==1.47.0``) and pass
``--img2dataset /work/venv-i2d/bin/img2dataset`` (default: ``img2dataset`` on PATH; absent: the
table says "not installed").

Usage (project root, venv):  python benchmarks/crawl_vs_img2dataset.py [--images 2000] [--rounds 2]
Writes benchmarks/results/crawl_vs_img2dataset.json.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
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

from benchmarks._common import machine, write_result  # noqa: E402
from benchmarks.crawl import start_server  # noqa: E402

I2D_FLAGS = [
    "--resize_mode",
    "no",
    "--disable_all_reencoding",
    "True",
    "--thread_count",
    "8",
    "--processes_count",
    "1",
]


def _cpu(who: int) -> float:
    """User + system CPU seconds of ``resource.RUSAGE_SELF`` or ``RUSAGE_CHILDREN`` (waited-for
    descendants, img2dataset's worker process included)."""
    ru = resource.getrusage(who)
    return ru.ru_utime + ru.ru_stime


def _img2dataset(exe: str, urls: Path, out: Path) -> tuple[float, int]:
    """Run img2dataset on ``urls``; returns (wall s, jpg files written)."""
    t0 = time.perf_counter()
    subprocess.run(
        [exe, "--url_list", str(urls), "--output_folder", str(out), "--input_format", "txt", "--output_format", "files"]
        + I2D_FLAGS,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wall = time.perf_counter() - t0
    return wall, sum(1 for _ in out.rglob("*.jpg"))


def _crawl(params: Any, cf: Any, work: Path) -> tuple[float, int]:
    """Run the stage core in a fresh ``work`` directory; returns (wall s, concepts with an ok image)."""
    from stages.crawl_images.stage import crawl

    work.mkdir(parents=True)
    os.chdir(work)
    t0 = time.perf_counter()
    _, images = crawl(cf, params)
    wall = time.perf_counter() - t0
    os.chdir(ROOT)
    return wall, int((images["status"] == "ok").sum())


def _profiled_crawl(params: Any, cf: Any, work: Path, dest: Path, cpu: bool) -> dict[str, float]:
    """One crawl with every thread under cProfile; writes the cumulative and own-time top 25 (all
    threads merged) and a few named costs to ``dest``. ``cpu``: time each thread's CPU
    (``time.thread_time``: where the 2 cores go) instead of wall time (where threads wait).
    Returns {label: cumulative s summed over threads}."""
    timer = time.thread_time if cpu else time.perf_counter
    profiles: list[cProfile.Profile] = []
    lock = threading.Lock()

    def start(frame: Any, event: str, arg: Any) -> None:  # first event of a new thread: switch to cProfile
        prof = cProfile.Profile(timer)
        with lock:
            profiles.append(prof)
        prof.enable()

    threading.setprofile(start)
    main = cProfile.Profile(timer)
    main.enable()
    try:
        _crawl(params, cf, work)
    finally:
        main.disable()
        threading.setprofile(None)
    stats = pstats.Stats(main)
    for prof in profiles:
        try:
            stats.add(prof)
        except TypeError:  # a thread that never recorded anything
            pass
    buf = io.StringIO()
    stats.stream = buf  # type: ignore[attr-defined]
    stats.sort_stats("cumulative").print_stats(25)
    stats.sort_stats("tottime").print_stats(25)
    named = {  # label: (file suffix, function); "~" marks a C function
        "download (fetch.download, per image)": ("fetch.py", "download"),
        "HTTP client fetch (guarded urllib3)": ("client.py", "fetch"),
        "urllib3 is_connection_dropped poll": ("util/connection.py", "is_connection_dropped"),
        "socket recv_into": ("~", "<method 'recv_into' of '_socket.socket' objects>"),
        "socket sendall": ("~", "<method 'sendall' of '_socket.socket' objects>"),
        "keep_file (validate, hash, store)": ("store.py", "keep_file"),
        "inspect_image (Pillow decode + phash)": ("validate.py", "inspect_image"),
        "phash (grey 32x32 + DCT)": ("validate.py", "_phash"),
        "Pillow decode": ("~", "<method 'decode' of 'ImagingDecoder' objects>"),
        "sha256 update": ("~", "<method 'update' of '_hashlib.HASH' objects>"),
        "journal append": ("journal.py", "append"),
        "robots check": ("robots.py", "check"),
        "url guard addresses": ("urlguard.py", "addresses"),
        "register (tables)": ("register.py", "register"),
        "tqdm progress": ("tqdm/std.py", "__iter__"),
        "time.sleep (polls)": ("~", "<built-in method time.sleep>"),
        "lock acquire (threads waiting)": ("~", "<method 'acquire' of '_thread.lock' objects>"),
    }
    costs: dict[str, float] = {}
    raw = stats.stats  # type: ignore[attr-defined]
    for label, (suffix, fn) in named.items():
        # cumulative time (summed over threads) of the matching function
        costs[label] = round(
            sum(
                ct for (file, _l, func), (_cc, _nc, _tt, ct, _c) in raw.items() if func == fn and file.endswith(suffix)
            ),
            3,
        )
    dest.write_text(
        f"cProfile of one crawl_images run (urllist, {params.crawl.threads} threads, {len(cf)} images), all threads "
        + (
            "merged; timer: each thread's CPU time (time.thread_time)\n\n"
            if cpu
            else "merged; timer: wall time, summed over threads (8 workers waiting in parallel count 8 times)\n\n"
        )
        + "named costs (s, cumulative, summed over threads):\n"
        + "".join(f"  {k:40s} {v:8.3f}\n" for k, v in costs.items())
        + "\n"
        + buf.getvalue()
    )
    return costs


def _setup(urllist: Path, threads: int) -> tuple[Any, Any]:
    """The crawl params (urllist source, ``threads`` threads, no politeness delay, loopback allowed)
    and the concept_filter table of the map's concepts."""
    import pandas as pd
    import yaml

    from gavil.params import parse_params

    raw = yaml.safe_load((ROOT / "params.yaml").read_text())
    raw["crawl"] = raw["crawl"] | {
        "source": "urllist",
        "urllist_path": str(urllist),
        "threads": threads,
        "allow_private_hosts": True,  # the benchmark's host is loopback
        "per_host": {"max_connections": threads, "delay_s": 0.0},  # no politeness delay
    }
    concepts = sorted(json.loads(urllist.read_text()))
    n = len(concepts)
    cf = pd.DataFrame({"concept": concepts, "status": ["ok"] * n, "reason": [None] * n})
    return parse_params(raw), cf


def _bare_urllib3(urls: list[str], threads: int, work: Path) -> tuple[float, int]:
    """The floor: urllib3 on ``threads`` threads streaming each body to a file with sha256, nothing
    else (no guard, robots, validation, journal). Returns (wall s, files fetched)."""
    import hashlib
    from concurrent.futures import ThreadPoolExecutor

    import urllib3

    work.mkdir(parents=True)
    pm = urllib3.PoolManager(maxsize=threads)

    def one(url: str) -> int:
        r = pm.request("GET", url, preload_content=False)
        h = hashlib.sha256()
        with open(work / url.rsplit("/", 1)[1], "wb") as f:
            for chunk in r.stream(1 << 16):
                h.update(chunk)
                f.write(chunk)
        r.release_conn()
        return r.status

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        got = sum(status == 200 for status in pool.map(one, urls))
    return time.perf_counter() - t0, got


def _inspect_cpu_ms(folder: Path, params: Any) -> float:
    """CPU ms per image of the stage's validation (Pillow open + full decode + phash) on ``folder``'s
    files, one thread, no profiler."""
    from stages.crawl_images.validate import inspect_image

    files = sorted(folder.iterdir())
    c = params.crawl
    t0 = time.thread_time()
    for f in files:
        inspect_image(f, c.min_side, c.max_pixels, c.accept_formats, with_phash=True)
    return round((time.thread_time() - t0) / len(files) * 1e3, 3)


def _fresh_process_crawl(urllist: Path, threads: int, work: Path) -> tuple[float, int]:
    """The crawl in a new interpreter (its imports included, like img2dataset's wall time)."""
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child-crawl", str(work), "--urllist", str(urllist), "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - t0, int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--img2dataset", default="img2dataset", help="the img2dataset executable (own venv)")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--child-crawl", help=argparse.SUPPRESS)  # internal: one crawl in this directory
    ap.add_argument("--urllist", help=argparse.SUPPRESS)
    args = ap.parse_args()
    n = args.images
    if args.child_crawl:
        params, cf = _setup(Path(args.urllist), args.threads)
        print(_crawl(params, cf, Path(args.child_crawl))[1])
        return

    exe = shutil.which(args.img2dataset)
    load_before = os.getloadavg()
    server, base = start_server(n, timeout_s=120)
    tmp = Path(tempfile.mkdtemp(prefix="gavil-i2d-bench-"))
    urls = [f"{base}/img/{i}.jpg" for i in range(n)]
    (tmp / "urls.txt").write_text("\n".join(urls) + "\n")
    concepts = [f"concept {i:05d}" for i in range(n)]
    (tmp / "urllist.json").write_text(json.dumps(dict(zip(concepts, urls, strict=True))))

    params, cf = _setup(tmp / "urllist.json", args.threads)

    i2d_help_s = None
    if exe:
        t0 = time.perf_counter()
        subprocess.run([exe, "--help"], check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        i2d_help_s = round(time.perf_counter() - t0, 2)
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        if exe:
            c0 = _cpu(resource.RUSAGE_CHILDREN)
            wall, got = _img2dataset(exe, tmp / "urls.txt", tmp / f"i2d-{r}")
            cpu = round(_cpu(resource.RUSAGE_CHILDREN) - c0, 2)
            runs.append({"round": r, "tool": "img2dataset", "wall_s": round(wall, 2), "cpu_s": cpu, "images": got})
            print(f"round {r} img2dataset   {wall:6.2f} s  {got} images", flush=True)
        c0 = _cpu(resource.RUSAGE_SELF)
        wall, got = _crawl(params, cf, tmp / f"crawl-{r}")
        cpu = round(_cpu(resource.RUSAGE_SELF) - c0, 2)
        runs.append({"round": r, "tool": "crawl_images", "wall_s": round(wall, 2), "cpu_s": cpu, "images": got})
        print(f"round {r} crawl_images  {wall:6.2f} s  {got} images", flush=True)
        c0 = _cpu(resource.RUSAGE_SELF)
        wall, got = _bare_urllib3(urls, args.threads, tmp / f"bare-{r}")
        cpu = round(_cpu(resource.RUSAGE_SELF) - c0, 2)
        runs.append({"round": r, "tool": "bare_urllib3", "wall_s": round(wall, 2), "cpu_s": cpu, "images": got})
        print(f"round {r} bare urllib3 (stream + sha256 + file) {wall:6.2f} s  {got} images", flush=True)
        c0 = _cpu(resource.RUSAGE_CHILDREN)
        wall, got = _fresh_process_crawl(tmp / "urllist.json", args.threads, tmp / f"crawl-fresh-{r}")
        cpu = round(_cpu(resource.RUSAGE_CHILDREN) - c0, 2)
        runs.append(
            {"round": r, "tool": "crawl_images_fresh_process", "wall_s": round(wall, 2), "cpu_s": cpu, "images": got}
        )
        print(f"round {r} crawl_images (new interpreter, imports included) {wall:6.2f} s  {got} images", flush=True)
    load_after_runs = os.getloadavg()
    inspect_ms = _inspect_cpu_ms(tmp / "bare-0", params)
    costs: dict[str, dict[str, float]] | None = None
    if not args.no_profile:
        costs = {}
        for kind in ("cpu", "wall"):
            t0 = time.perf_counter()
            dest = ROOT / f"benchmarks/results/crawl_vs_img2dataset_profile_{kind}.txt"
            costs[kind] = _profiled_crawl(params, cf, tmp / f"crawl-profiled-{kind}", dest, cpu=kind == "cpu")
            costs[kind]["profiled_wall_s"] = round(time.perf_counter() - t0, 2)
    server.terminate()
    shutil.rmtree(tmp, ignore_errors=True)

    def best(tool: str) -> float | None:
        ws = [x["wall_s"] for x in runs if x["tool"] == tool]
        return min(ws) if ws else None

    def mean(tool: str, key: str = "wall_s") -> float | None:
        ws = [x[key] for x in runs if x["tool"] == tool]
        return round(sum(ws) / len(ws), 2) if ws else None

    i2d = mean("img2dataset")
    ratio = round(mean("crawl_images") / i2d, 2) if i2d else None  # type: ignore[operator]
    ratio_fresh = round(mean("crawl_images_fresh_process") / i2d, 2) if i2d else None  # type: ignore[operator]
    result = {
        "machine": machine(),
        "images": n,
        "threads": args.threads,
        "img2dataset": exe or "not installed",
        "img2dataset_flags": I2D_FLAGS,
        "img2dataset_help_s": i2d_help_s,  # interpreter start + imports, inside its wall time
        "runs": runs,
        "img2dataset_mean_s": mean("img2dataset"),
        "crawl_images_mean_s": mean("crawl_images"),
        "img2dataset_best_s": best("img2dataset"),
        "crawl_images_best_s": best("crawl_images"),
        "crawl_images_fresh_process_mean_s": mean("crawl_images_fresh_process"),
        "cpu_s_mean": {
            t: mean(t, "cpu_s") for t in ("img2dataset", "crawl_images", "crawl_images_fresh_process", "bare_urllib3")
        },
        "bare_urllib3_mean_s": mean("bare_urllib3"),
        "inspect_image_cpu_ms_per_image": inspect_ms,  # Pillow open + decode + phash, one thread,
        "crawl_over_img2dataset_mean": ratio,  # in-process crawl (imports done) / img2dataset command
        "crawl_fresh_process_over_img2dataset_mean": ratio_fresh,  # both with interpreter start + imports
        "target": "crawl / img2dataset <= 1.0",
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after_runs": [round(x, 2) for x in load_after_runs],
        "profile_named_costs_s": costs,
    }
    print(f"{'tool':28s} {'mean s':>8s} {'best s':>8s} {'CPU s':>8s}")
    for tool in ("img2dataset", "crawl_images", "crawl_images_fresh_process", "bare_urllib3"):
        m, b, c = mean(tool), best(tool), mean(tool, "cpu_s")
        print(f"{tool:28s} {m if m is not None else 'not installed':>8} {b or '':>8} {c or '':>8}")
    print(f"crawl / img2dataset (mean): in-process {ratio}, new interpreter {ratio_fresh} (target <= 1.0)")
    print(f"img2dataset --help (interpreter start + imports): {i2d_help_s} s")
    print(f"inspect_image (Pillow open + decode + phash): {inspect_ms} ms CPU per image")
    print(f"load average before {result['load_average_before']}, after {result['load_average_after_runs']}")
    if costs:
        print("profile (s, summed over threads):", costs)
    write_result("crawl_vs_img2dataset", result)


if __name__ == "__main__":
    main()
