"""Web-shaped benchmark inputs (issue 27): photos the size and weight of image-search results.

:func:`web_photo` makes one JPEG the way search results look: a photo (a random crop of one of the
sample's photos, or a 2 x 2 mosaic of four, so the detail is that of a real photo and not an
upscaled blur), long side uniform in 500-1,600 px, aspect 4:3, 3:2, 1:1 or 3:4, a little sensor
noise, saved at a JPEG quality picked so the file weighs 30-400 KB (the range of web images;
the quality is lowered or raised until it fits). Deterministic in ``seed``.

:func:`write_web_photos` writes ``n`` of them to a folder (``photo-00000.jpg``, ...) and returns the
paths; :func:`describe` summarises a set (pixels and KB: min, median, max) for the result JSON.
"""

from __future__ import annotations

import io
import random
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._common import random_view, sample_photos

MIN_SIDE, MAX_SIDE = 500, 1600  # long side, pixels
MIN_KB, MAX_KB = 30, 400  # file size, KB (1,000 bytes)
_ASPECTS = (4 / 3, 3 / 2, 1.0, 3 / 4)


def _canvas(rng: random.Random, photos: Sequence[Path]) -> Any:
    """An RGB PIL image of web size and aspect: one photo or a 2 x 2 mosaic of four."""
    import numpy as np
    from PIL import Image

    long_side = rng.randint(MIN_SIDE, MAX_SIDE)
    aspect = rng.choice(_ASPECTS)
    w, h = (long_side, round(long_side / aspect)) if aspect >= 1 else (round(long_side * aspect), long_side)
    if rng.random() < 0.5:
        view = random_view(rng.choice(photos), rng, 0.6, (max(w, h),))
        im = view.resize((w, h), Image.Resampling.BICUBIC)
    else:
        im = Image.new("RGB", (w, h))
        hw, hh = w // 2, h // 2
        for x, y in ((0, 0), (hw, 0), (0, hh), (hw, hh)):
            tile = random_view(rng.choice(photos), rng, 0.5, (max(hw, hh) + 1,))
            im.paste(tile.resize((w - hw if x else hw, h - hh if y else hh), Image.Resampling.BICUBIC), (x, y))
    arr = np.asarray(im, dtype=np.int16)
    noise = np.random.default_rng(rng.getrandbits(32)).normal(0, rng.uniform(1.5, 5.0), arr.shape)
    return Image.fromarray(np.clip(arr + noise, 0, 255).astype(np.uint8))


def encode_jpeg(im: Any, rng: random.Random) -> bytes:
    """``im`` as a baseline or progressive JPEG of 30-400 KB (quality searched from a random start)."""
    q = rng.randint(70, 92)
    progressive = rng.random() < 0.3
    for _ in range(12):
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=q, progressive=progressive, optimize=False)
        kb = buf.tell() / 1000
        if kb > MAX_KB and q > 20:
            q -= 8
        elif kb < MIN_KB and q < 97:
            q += 4
        else:
            break
    return buf.getvalue()


def web_photo(seed: int, photos: Sequence[Path] | None = None) -> bytes:
    """One web-shaped JPEG (see the module docstring), deterministic in ``seed``."""
    rng = random.Random(seed)
    return encode_jpeg(_canvas(rng, photos or sample_photos()), rng)


def _write_one(job: tuple[Path, int, Sequence[Path]]) -> Path:
    path, seed, photos = job
    path.write_bytes(web_photo(seed, photos))
    return path


def write_web_photos(
    folder: Path, n: int, seed: int = 0, names: Sequence[str] | None = None, processes: int = 1
) -> list[Path]:
    """Write ``n`` web-shaped JPEGs into ``folder`` (``names[i]`` + ``.jpg``, else ``photo-%05d.jpg``),
    on ``processes`` processes (the same bytes whatever the number: each file has its own seed)."""
    from concurrent.futures import ProcessPoolExecutor

    folder.mkdir(parents=True, exist_ok=True)
    photos = sample_photos()
    jobs = [(folder / f"{names[i] if names else f'photo-{i:05d}'}.jpg", seed * 1_000_003 + i, photos) for i in range(n)]
    if processes <= 1:
        return [_write_one(j) for j in jobs]
    with ProcessPoolExecutor(processes) as pool:
        return list(pool.map(_write_one, jobs, chunksize=8))


def describe(paths: Sequence[Path]) -> dict[str, Any]:
    """Long side (px) and file size (KB) of ``paths``: min, median, max."""
    from PIL import Image

    sides, kbs = [], []
    for p in paths:
        with Image.open(p) as im:
            sides.append(max(im.size))
        kbs.append(p.stat().st_size / 1000)
    return {
        "images": len(paths),
        "long_side_px": {"min": min(sides), "median": statistics.median(sides), "max": max(sides)},
        "kb": {"min": round(min(kbs), 1), "median": round(statistics.median(kbs), 1), "max": round(max(kbs), 1)},
    }


def _serve_files(files: dict[str, str], preload: bool, port_q: Any, port: int = 0) -> None:
    """Serve ``files`` (URL path -> file) on 127.0.0.1:``port`` (0: a free one), keep-alive, TCP_NODELAY;
    other paths (robots.txt included) are 404. ``preload``: hold the bodies in memory (else read per
    request: page cache)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    bodies = {k: Path(f).read_bytes() for k, f in files.items()} if preload else {}

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like real image hosts
        disable_nagle_algorithm = True  # TCP_NODELAY, as real servers set it (see benchmarks/crawl.py)

        def do_GET(self) -> None:
            path = self.path.partition("?")[0]
            f = files.get(path)
            body = (bodies.get(path) or Path(f).read_bytes()) if f else b""
            self.send_response(200 if f else 404)
            self.send_header("Content-Type", "image/jpeg" if f else "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), H)
    server.daemon_threads = True
    port_q.put(server.server_address[1])
    server.serve_forever()


def start_file_server(
    files: dict[str, str], preload: bool = False, timeout_s: float = 120, port: int = 0
) -> tuple[Any, str]:
    """:func:`_serve_files` in a daemon process (spawned) on ``port`` (0: a free one): (the process, its
    base URL once it listens). Raises ``queue.Empty`` if it does not listen within ``timeout_s``
    seconds (a ``port`` in use: the process exits)."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    q: Any = ctx.Queue()
    server = ctx.Process(target=_serve_files, args=(files, preload, q, port), daemon=True)
    server.start()
    return server, f"http://127.0.0.1:{q.get(timeout=timeout_s)}"
