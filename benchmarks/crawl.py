"""Crawl throughput against a local Bing-like server on 127.0.0.1 (issue 3's targets, re-measured
after issue 15).

A separate server process serves 1,000 concepts' search pages (Bing's result markup) and one
distinct web-shaped JPEG per concept (``benchmarks/_web.py``) (its robots.txt is a 404). The stage's real code path
(icrawler feeder -> parser threads reading Bing's result metadata -> downloader threads; the
guarded urllib3 client: URL guard, one DNS resolution per host, pinned connections, deadline
watchdog, retries, politeness gate; robots.txt; Pillow validation, sha256 + phash; journal;
per-run staging) crawls them with 8 threads; in the same run a bare baseline downloads the same
image URLs with ``requests`` on 8 threads (no search, no validation). Then the crawl is re-run with
the same params (nothing new: must take < 5 % of the first run).

Usage (project root, venv):  python benchmarks/crawl.py [--concepts 1000] [--threads 8]
Prints a table and writes benchmarks/results/crawl.json.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, write_result  # noqa: E402


def _image(i: int, photos: list[Path]) -> bytes:
    """Concept ``i``'s image: a web-shaped JPEG (``benchmarks/_web.py``: a photo view, long side
    500-1,600 px, 30-400 KB, some progressive), distinct per concept, as search results serve them."""
    from benchmarks._web import web_photo

    return web_photo(i, photos)


def _serve(port_q: mp.Queue, n: int) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from benchmarks._common import sample_photos

    photos = sample_photos()
    images = {f"/img/{i}.jpg": _image(i, photos) for i in range(n)}

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real image hosts
        disable_nagle_algorithm = True  # TCP_NODELAY, as nginx and other servers set it: without it every
        # keep-alive response (headers, then body: two writes) waits ~40 ms for a delayed ACK (Nagle)

        def do_GET(self) -> None:
            path, _, query = self.path.partition("?")
            if path == "/images/async":
                q = query.split("q=", 1)[1].split("&", 1)[0]
                i = int(q.replace("concept+", ""))
                body = (
                    f'<html><body><div class="imgpt"><a m=\'{{"murl":"http://127.0.0.1:{port}/img/{i}.jpg"}}\' '
                    f'href="#">x</a></div></body></html>'
                ).encode()
                ctype = "text/html"
            elif path in images:
                body, ctype = images[path], "image/jpeg"
            else:
                body, ctype = b"", "text/plain"
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), H)
    server.daemon_threads = True
    port = server.server_address[1]
    port_q.put(port)
    server.serve_forever()


def start_server(n: int, timeout_s: float) -> tuple[mp.Process, str]:
    """Start :func:`_serve` for ``n`` concepts in a daemon process: (the process, its base URL
    once it listens). Raises ``queue.Empty`` if it does not listen within ``timeout_s`` seconds."""
    q: mp.Queue = mp.Queue()
    server = mp.Process(target=_serve, args=(q, n), daemon=True)
    server.start()
    return server, f"http://127.0.0.1:{q.get(timeout=timeout_s)}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--concepts", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    n = args.concepts

    import pandas as pd
    import requests
    import yaml

    from gavil.params import parse_params
    from stages.crawl_images import crawl

    load_before = os.getloadavg()[0]  # other jobs on the machine: the figures are only as quiet as this
    server, base = start_server(n, timeout_s=600)  # making n web photos takes a while
    work = Path(tempfile.mkdtemp(prefix="gavil-crawl-bench-"))
    os.chdir(work)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    p = params["crawl"] | {
        "source": "bing",
        "bing": {"endpoint": f"{base}/images/async"},
        "threads": args.threads,
        "top_n": 1,
        "allow_private_hosts": True,  # the benchmark's host is loopback
        "per_host": {"max_connections": args.threads, "delay_s": 0.0},  # one host serves everything here
    }
    params["crawl"] = p
    params = parse_params(params)
    concepts = [f"concept {i}" for i in range(n)]
    cf = pd.DataFrame({"concept": concepts, "status": ["ok"] * n, "reason": [None] * n})

    # baseline: bare requests on the same number of threads, same image URLs
    urls = [f"{base}/img/{i}.jpg" for i in range(n)]
    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=args.threads * 2)
    session.mount("http://", adapter)
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        sizes = list(pool.map(lambda u: len(session.get(u, timeout=10).content), urls))
    t_bare = time.perf_counter() - t0
    assert all(sizes)

    t0 = time.perf_counter()
    cands, images = crawl(cf, params)
    t_first = time.perf_counter() - t0
    ok = int((images["status"] == "ok").sum())
    t0 = time.perf_counter()
    _, again = crawl(cf, params)
    t_rerun = time.perf_counter() - t0
    assert again.equals(images)
    server.terminate()

    result = {
        "machine": machine(),
        "concepts": n,
        "threads": args.threads,
        "images_ok": ok,
        "by_status": images["status"].value_counts().to_dict(),
        "first_run_s": round(t_first, 2),
        "images_per_s": round(ok / t_first, 1),
        "seconds_per_concept": round(t_first / n, 4),
        "crawl_http_requests_per_s": round((2 * n + 1) / t_first, 1),  # search page + image per concept, + robots.txt
        "bare_requests_s": round(t_bare, 2),
        "bare_images_per_s": round(n / t_bare, 1),
        "crawl_vs_bare": round(t_bare / t_first, 3),  # images/s of the crawl / of the bare baseline, same run
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],  # before, after
        "rerun_s": round(t_rerun, 3),
        "rerun_fraction": round(t_rerun / t_first, 4),
        "targets": {"images_per_s": ">= 100", "seconds_per_concept": "<= 0.2", "rerun_fraction": "< 0.05"},
    }
    print(f"{'measure':34s} {'value':>10s}  target")
    print(f"{'crawl images/s (8 threads)':34s} {result['images_per_s']:10.1f}  >= 100")
    print(f"{'seconds per concept (search+image)':34s} {result['seconds_per_concept']:10.4f}  <= 0.2")
    print(f"{'crawl HTTP requests/s':34s} {result['crawl_http_requests_per_s']:10.1f}")
    print(f"{'bare requests images/s (baseline)':34s} {result['bare_images_per_s']:10.1f}")
    print(f"{'crawl / bare baseline (same run)':34s} {result['crawl_vs_bare']:10.3f}")
    print(f"{'re-run / first run':34s} {result['rerun_fraction']:10.4f}  < 0.05")
    print(f"load average (1 min) before, after: {result['load_average_1min']}")
    print(f"first run {result['first_run_s']} s, re-run {result['rerun_s']} s, statuses {result['by_status']}")
    write_result("crawl", result)
    os.chdir(ROOT)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
