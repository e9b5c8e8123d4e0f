"""Bounded decoding (issue 24): eight 7000 x 7000 PNGs of ~170 KB each, crawled at the default 8
threads from the 127.0.0.1 server, are all kept, and the crawl process peaks at most 600 MB (peak
RSS of the whole process: before the bound, about 2 GB). The pixel limit is read from the header
before anything is decoded, and the decode budget is shared by all threads."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from PIL import Image

from stages.crawl_images.validate import DecodeBudget, InvalidImage, decode_bytes, inspect_image
from tests.helpers import ROOT
from tests.stages.crawl_images.hostile_web import HostileWeb, big_png, serve

LIMIT_MB = 600

CHILD = r"""
import json, sys
sys.path.insert(0, {root!r})
import pandas as pd
from gavil.params import parse_params
from stages.crawl_images import crawl
from stages.crawl_images.journal import Journal
from gavil.pipeline import catalog

def status_mb(key):
    # this process's own memory: getrusage's ru_maxrss would include the parent's at fork time
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024

def rss_mb():
    return status_mb("VmHWM")  # peak resident set size

def current_mb():
    return status_mb("VmRSS")

crawl_params = {{k: v for k, v in parse_params({{}}).crawl.model_dump().items()}}
crawl_params.update(source="urllist", urllist_path="map.json", allow_private_hosts=True,
                    respect_robots=False, per_host={{"max_connections": 8, "delay_s": 0.0}})
params = parse_params({{"crawl": crawl_params}})
url_map = json.load(open("map.json"))
cf = pd.DataFrame({{"concept": list(url_map), "status": ["ok"] * len(url_map), "reason": [None] * len(url_map)}})
before, rss_mb_before = current_mb(), rss_mb()
crawl(cf, params)
_, downloads = Journal(catalog.path("crawl_journal")).load()
print(json.dumps({{"before_mb": before, "peak_before_mb": rss_mb_before, "peak_mb": rss_mb(), "threads": params.crawl.threads,
                   "max_pixels": params.crawl.max_pixels,
                   "status": {{u: [r["status"], r["reason"], r.get("width")] for u, r in downloads.items()}}}}))
"""


def _crawl_in_child(bodies: dict[str, bytes]) -> dict:
    """Serve ``bodies`` (concept -> file) on 127.0.0.1 and crawl them in a fresh process with the
    default crawl params (8 threads); returns its report (memory in MB, each URL's fate)."""
    web = HostileWeb()
    try:
        url_map = {}
        for i, (concept, body) in enumerate(bodies.items()):
            web.routes[f"/img{i}"] = serve(body, "image/png")
            url_map[concept] = f"http://127.0.0.1:{web.port}/img{i}"
        Path("map.json").write_text(json.dumps(url_map))
        out = subprocess.run(
            [sys.executable, "-c", CHILD.format(root=str(ROOT))], capture_output=True, text=True, timeout=600
        )
    finally:
        web.close()
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["threads"] == 8 and got["max_pixels"] >= 7000 * 7000  # the defaults: decoded, not refused
    got["by_concept"] = {c: got["status"][u] for c, u in url_map.items()}
    return got


@pytest.mark.slow
def test_eight_threads_of_7000px_pngs_stay_within_600_mb(in_tmp):
    got = _crawl_in_child({f"big {i}": big_png(7000, 7000, seed=i) for i in range(8)})
    assert {s for s, _, _ in got["status"].values()} == {"kept"}, got["status"]
    assert {w for _, _, w in got["status"].values()} == {7000}
    # the measurement saw the decodes (one 7000 x 7000 RGB image is 196 MB in Pillow) ...
    assert got["peak_mb"] - got["before_mb"] >= 150, got
    # ... and all eight together stayed within the bound
    assert got["peak_mb"] <= LIMIT_MB, got


@pytest.mark.slow
def test_progressive_jpegs_and_webp_of_7000px_stay_within_600_mb(in_tmp):
    """Progressive 4:4:4 JPEGs make libjpeg hold every coefficient (294 MB each at 7000 x 7000),
    and Pillow holds 16 bytes per pixel of a WebP (780 MB): the JPEGs wait their turn, the WebP
    is refused with its reason (it needs more than the whole budget), nothing crashes."""
    im = Image.open(io.BytesIO(big_png(7000, 7000, seed=3)))
    im.load()
    jpg, webp = io.BytesIO(), io.BytesIO()
    im.save(jpg, "JPEG", progressive=True, subsampling=0, quality=90)
    im.save(webp, "WEBP", quality=50, method=0)
    del im
    bodies = {f"jpeg {i}": jpg.getvalue() for i in range(6)} | {f"webp {i}": webp.getvalue() for i in range(2)}
    got = _crawl_in_child(bodies)
    for concept, (status, reason, _) in got["by_concept"].items():
        if concept.startswith("jpeg"):
            assert status == "kept", (concept, status, reason)
        else:
            assert status == "invalid_image" and "7000x7000 WEBP needs about" in reason, (status, reason)
            assert "> crawl.decode_budget_mb 384" in reason
    assert got["peak_mb"] - got["before_mb"] >= 150, got
    assert got["peak_mb"] <= LIMIT_MB, got


def test_the_pixel_limit_is_read_from_the_header_before_decoding(tmp_path):
    """A 170 KB PNG claiming 9000 x 9000 is refused without decoding: the file's pixel data is cut
    off after the header, so any decode would fail with a different reason."""
    whole = big_png(9000, 9000)
    p = tmp_path / "big.png"
    p.write_bytes(whole[:200])  # signature, IHDR and the start of IDAT
    with pytest.raises(InvalidImage, match=r"9000x9000 = 81000000 pixels > crawl.max_pixels 50000000"):
        inspect_image(p, 64, 50_000_000)
    p.write_bytes(big_png(7000, 7000)[:200])  # under the limit: decoded, found truncated
    with pytest.raises(InvalidImage, match="not a decodable image"):
        inspect_image(p, 64, 50_000_000)


def test_decode_estimates_cover_what_pillow_holds(tmp_path):
    """The reservation is at least the decoded image Pillow allocates (bytes per pixel of its
    storage) for PNG, and for JPEG at least libjpeg's coefficient buffer at full resolution."""
    p = tmp_path / "a.png"
    p.write_bytes(big_png(2000, 1500))
    with Image.open(p) as im:
        assert decode_bytes(im, im.size) >= 2000 * 1500 * 4 + 2000 * 1500
    j = tmp_path / "a.jpg"
    Image.new("RGB", (2000, 1500), (10, 20, 30)).save(j, "JPEG", progressive=True, subsampling=0)
    with Image.open(j) as im:
        full = im.size
        im.draft("L", (64, 64))
        assert im.size == (250, 188)
        assert decode_bytes(im, full) >= 2000 * 1500 * 3 * 2  # 4:4:4 coefficients, 2 bytes each


def test_the_decode_budget_never_lets_reservations_exceed_it():
    """16 threads reserve random shares (some above the whole budget) of a 100-byte budget; inside
    each reservation the reserved total is read: it never exceeds 100, and everyone got through."""
    import random

    budget = DecodeBudget(100)
    seen: list[int] = []
    lock = threading.Lock()
    state = {"held": 0}
    rnd = random.Random(24)
    shares = [rnd.choice([1, 10, 40, 60, 99, 250]) for _ in range(16 * 20)]

    def worker(mine: list[int]) -> None:
        for n in mine:
            with budget.reserve(n):
                with lock:
                    state["held"] += min(n, 100)
                    seen.append(state["held"])
                with lock:
                    state["held"] -= min(n, 100)

    threads = [threading.Thread(target=worker, args=(shares[i::16],)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads)
    assert len(seen) == len(shares) and max(seen) <= 100
