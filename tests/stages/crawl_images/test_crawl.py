"""crawl_images: validation and fates, and icrawler's real code paths (UrlList, Bing, Greedy) against
an HTTP server on 127.0.0.1 throwing the faults of the real web at it; kill-and-resume."""

import io
import json
import logging
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from gavil.errors import ParamsError
from gavil.io import validate
from gavil.params import parse_params
from gavil.pipeline import catalog
from schemas.crawl import Candidates, Images
from stages.crawl_images import crawl
from stages.crawl_images.register import register
from stages.crawl_images.sources import local_candidates
from stages.crawl_images.validate import InvalidImage, inspect_image, opted_out, safe_concept_name
from tests.helpers import IMAGES, ROOT, send
from tests.stages.crawl_images.hostile_web import HostileWeb

STORE = catalog.entry("image_store").path
JOURNAL = catalog.entry("crawl_journal").path

CRAWL = {
    "source": "local",
    "local_dir": str(IMAGES),
    "urllist_path": "",
    "top_n": 3,
    "threads": 4,
    "partition_size": 500,
    "timeout_s": 5,
    "retries": 2,
    "backoff_s": 0.05,
    "max_retry_after_s": 5,
    "max_redirects": 5,
    "max_bytes": 5_000_000,
    "per_host": {"max_connections": 4, "delay_s": 0.0},
    "user_agent": "winogavil-pipeline/test (research crawler)",
    "respect_robots": True,
    "min_side": 64,
    "max_pixels": 50_000_000,
    "phash_max_distance": 4,
    "allow_private_hosts": True,
    "bing": {"endpoint": ""},
    "greedy": {"url_template": "http://127.0.0.1:9/{concept}"},  # CrawlParams requires the placeholder
}


def params(**over):
    return parse_params({"crawl": {**CRAWL, **over}})


@pytest.fixture
def http_server():
    """The fault-injecting loopback web of tests/stages/crawl_images/hostile_web.py (HTTP/1.1 keep-alive, 127.0.0.1 only),
    as ``(base URL, routes)``; tests/stages/crawl_images/test_crawl_hostile.py uses the same server for issue 15's faults."""
    web = HostileWeb()
    try:
        yield web.base, web.routes
    finally:
        web.close()


def cf(*concepts, profane=()):
    return pd.DataFrame(
        {
            "concept": list(concepts),
            "status": ["profane" if c in profane else "ok" for c in concepts],
            "reason": [f"flagged {c}" if c in profane else None for c in concepts],
        }
    )


def checked(result):
    cands, images = result
    return validate(cands, Candidates), validate(images, Images).set_index("concept")


def jpeg_bytes(size=(120, 90), color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    im = Image.new("RGB", size, color)
    for x in range(0, size[0], 7):  # some structure, so perceptual hashes differ between images
        for y in range(0, size[1], 11):
            im.putpixel((x, y), ((x * 5) % 255, (y * 3) % 255, (color[2] + x) % 255))
    im.save(buf, "JPEG", quality=95)
    return buf.getvalue()


def png_header_only(w: int, h: int) -> bytes:
    """A PNG whose IHDR claims w x h (a decompression-bomb header) with no real pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )


class Log:
    """Per-path request log of the test server: hits, times, User-Agents, concurrency."""

    def __init__(self):
        self.hits: dict[str, list[float]] = {}
        self.agents: set[str] = set()
        self.inflight = 0
        self.max_inflight = 0
        self.lock = threading.Lock()

    def wrap(self, fn):
        def handler(req):
            path = req.path.split("?", 1)[0]
            with self.lock:
                self.hits.setdefault(path, []).append(time.monotonic())
                self.agents.add(req.headers.get("User-Agent", ""))
                self.inflight += 1
                self.max_inflight = max(self.max_inflight, self.inflight)
            try:
                fn(req)
            finally:
                with self.lock:
                    self.inflight -= 1

        return handler

    def n(self, path):
        return len(self.hits.get(path, []))


def serve(routes, log, table):
    for path, fn in table.items():
        routes[path] = log.wrap(fn)


def redirect(to):
    def fn(req):
        req.send_response(302)
        req.send_header("Location", to)
        req.send_header("Content-Length", "0")
        req.end_headers()

    return fn


def fail_first(status, then, headers=None, times=1):
    state = {"n": 0}

    def fn(req):
        state["n"] += 1
        if state["n"] <= times:
            req.send_response(status)
            for k, v in (headers or {}).items():
                req.send_header(k, v)
            req.send_header("Content-Length", "0")
            req.end_headers()
        else:
            send(req, then)

    return fn


# --------------------------------------------------------------------------- local source, pure core
def test_local_source_stores_content_addressed(in_tmp):
    cands, df = checked(crawl(cf("cat", "moon", "unicorn", "weed", profane=("weed",)), params()))
    assert df.loc["cat", "status"] == "ok" and df.loc["cat", "format"] == "PNG"
    assert (df.loc["cat", "width"], df.loc["cat", "height"]) == (451, 300)
    stored = Path(df.loc["cat", "path"])
    assert (
        stored.exists()
        and stored.name.startswith(df.loc["cat", "sha256"])
        and stored.parent.name == df.loc["cat", "sha256"][:2]
    )
    assert df.loc["cat", "source_url"].endswith("data/sample/images/cat.png")
    assert df.loc["unicorn", "status"] == "no_results" and "unicorn" in df.loc["unicorn", "reason"]
    assert df.loc["weed", "status"] == "profane" and df.loc["weed", "reason"] == "flagged weed"
    assert set(cands["concept"]) == {"cat", "moon"} and (cands["status"] == "kept").all()


def test_invalid_files_and_duplicates_get_their_fate(in_tmp):
    d = in_tmp / "imgs"
    d.mkdir()
    (d / "page.jpg").write_text("<html><body>not an image</body></html>")
    (d / "empty.jpg").write_bytes(b"")
    Image.new("RGB", (1, 1)).save(d / "dot.png")
    full = jpeg_bytes((200, 150))
    (d / "truncated.jpg").write_bytes(full[: len(full) // 2])
    (d / "bomb.png").write_bytes(png_header_only(20000, 20000))
    (d / "red.png").write_bytes((IMAGES / "cat.png").read_bytes())
    (d / "scarlet.png").write_bytes((IMAGES / "cat.png").read_bytes())  # same bytes as red
    Image.open(IMAGES / "cat.png").resize((300, 200)).save(d / "vermilion.png")  # same picture, other bytes
    _, df = checked(
        crawl(
            cf("page", "empty", "dot", "truncated", "bomb", "red", "scarlet", "vermilion", "../../etc/passwd"),
            params(local_dir=str(d)),
        )
    )
    reasons = df["reason"].to_dict()
    assert df.loc["page", "status"] == "invalid_image" and "not a decodable image" in reasons["page"]
    assert df.loc["empty", "status"] == "invalid_image" and "zero-byte" in reasons["empty"]
    assert df.loc["dot", "status"] == "invalid_image" and "smaller than" in reasons["dot"]
    assert df.loc["truncated", "status"] == "invalid_image"
    assert df.loc["bomb", "status"] == "invalid_image" and "pixels" in reasons["bomb"]
    assert df.loc["red", "status"] == "ok"
    assert (
        df.loc["scarlet", "status"] == "duplicate" and "'red'" in reasons["scarlet"] and "sha256" in reasons["scarlet"]
    )
    assert df.loc["vermilion", "status"] == "duplicate" and "near-duplicate of 'red'" in reasons["vermilion"]
    assert df.loc["../../etc/passwd", "status"] == "no_results" and "safe file name" in reasons["../../etc/passwd"]
    # red, vermilion (stored, not used), nothing invalid
    assert len([p for p in (in_tmp / STORE).rglob("*") if p.is_file()]) == 2


def test_register_first_kept_wins_and_mixed_failures_are_all_rejected():
    kept = {
        "status": "kept",
        "reason": None,
        "sha256": "a" * 64,
        "path": "p/a.jpg",
        "width": 100,
        "height": 90,
        "format": "JPEG",
        "bytes": 10,
        "phash": "0" * 16,
    }
    downloads = {
        "u1": {"status": "download_failed", "reason": "HTTP 404"},
        "u2": {"status": "invalid_image", "reason": "zero-byte file"},
        "u3": kept,
        "v1": {"status": "opted_out", "reason": "X-Robots-Tag: noai"},
        "v2": {"status": "download_failed", "reason": "HTTP 500 after 2 retries"},
        "w1": {**kept, "sha256": "b" * 64, "phash": "0" * 15 + "1"},  # 1 bit from u3: a near-duplicate
    }
    cands = {
        "moon": (["u1", "u2", "u3"], None),
        "sun": (["v1", "v2"], None),
        "star": (["w1"], None),
        "sky": ([], "search page HTTP 503"),
    }
    c, df = register(cf("moon", "sun", "star", "sky"), cands, downloads, "bing", 4)
    c, df = validate(c, Candidates), validate(df, Images).set_index("concept")
    assert (
        df.loc["moon", "status"] == "ok"
        and df.loc["moon", "source_url"] == "u3"
        and "#1 u1: HTTP 404" in df.loc["moon", "reason"]
    )
    assert (
        df.loc["sun", "status"] == "all_rejected"
        and "noai" in df.loc["sun", "reason"]
        and "HTTP 500" in df.loc["sun", "reason"]
    )
    assert df.loc["star", "status"] == "duplicate" and "phash distance 1" in df.loc["star", "reason"]
    assert df.loc["sky", "status"] == "search_failed"
    _, exact_only = register(cf("moon", "star"), cands, downloads, "bing", None)
    assert exact_only.set_index("concept").loc["star", "status"] == "ok"
    assert list(c[c.concept == "moon"]["rank"]) == [1, 2, 3]


def test_safe_names_and_opt_out_header():
    assert safe_concept_name("fast food")
    for bad in ("../x", "a/b", "a\x00b", "..", "x" * 300):
        assert not safe_concept_name(bad)
    assert opted_out("noai") == "noai" and opted_out("googlebot: nofollow, otherbot: noimageai") == "noimageai"
    assert opted_out("noindex") == "noindex" and opted_out("NoImageIndex") == "noimageindex"
    assert opted_out("none") == "none" and not opted_out("index, follow") and not opted_out("nofollow")
    assert opted_out("noindex, nofollow") == "noindex" and opted_out("nosnippet, max-image-preview:large") is None
    assert opted_out(None) is None


def test_inspect_rejects_bomb_before_decoding(tmp_path):
    p = tmp_path / "b.png"
    p.write_bytes(png_header_only(20000, 20000))
    with pytest.raises(InvalidImage, match="400000000 pixels"):
        inspect_image(p, 1, 50_000_000)


def _photo_jpeg(mode: str, progressive: bool) -> bytes:
    """A 900x600 sample photo as a JPEG in ``mode`` (RGB, CMYK, L), baseline or progressive: large
    enough that validation decodes it at 1/8 scale (draft mode)."""
    with Image.open(IMAGES / "horse.png") as im:
        photo = im.convert("RGB").resize((900, 600))
    buf = io.BytesIO()
    photo.convert(mode).save(buf, "JPEG", quality=85, progressive=progressive)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("mode", "progressive"), [("RGB", False), ("RGB", True), ("CMYK", False), ("CMYK", True), ("L", True)]
)
def test_draft_decoding_still_catches_every_truncation(tmp_path, mode, progressive):
    """Validation decodes JPEGs at 1/8 scale (DCT scaling), yet walks all of the entropy-coded data:
    a file cut anywhere, down to its last 2 bytes (the EOI marker), is invalid_image, exactly where
    a full decode fails too; the whole file passes, with its perceptual hash. Validating the bytes a
    download holds in memory (``data``) decides and hashes exactly as validating the file."""
    full = _photo_jpeg(mode, progressive)
    whole = tmp_path / "whole.jpg"
    whole.write_bytes(full)
    info = inspect_image(whole, 64, 50_000_000, with_phash=True)
    assert (info.width, info.height, info.format) == (900, 600, "JPEG") and info.phash
    assert inspect_image(whole, 64, 50_000_000, with_phash=True, data=full) == info
    for cut in (len(full) // 3, len(full) * 9 // 10, len(full) - 40, len(full) - 2):
        part = _write(tmp_path, f"cut-{cut}.jpg", full[:cut])
        with Image.open(part) as im, pytest.raises(OSError):
            im.load()  # a full decode refuses it ...
        with pytest.raises(InvalidImage, match="not a decodable image"):
            inspect_image(part, 64, 50_000_000, with_phash=True)  # ... and so does the draft decode
        with pytest.raises(InvalidImage, match="not a decodable image"):
            inspect_image(part, 64, 50_000_000, with_phash=True, data=full[:cut])  # ... from memory too
    for data, reason in ((b"", "zero-byte file"), (b"<html>no</html>", "no image format recognised")):
        with pytest.raises(InvalidImage, match=reason):
            inspect_image(whole, 64, 50_000_000, data=data)  # the bytes decide, not the file


def _write(folder: Path, name: str, data: bytes) -> Path:
    (folder / name).write_bytes(data)
    return folder / name


def test_google_and_unknown_sources_are_refused_clearly(in_tmp):
    with pytest.raises(ParamsError, match="Google parser is broken"):
        crawl(cf("cat"), params(source="google"))
    with pytest.raises(
        ParamsError, match=r"crawl\.source = 'flickr': Input should be 'local', 'urllist', 'bing' or 'greedy'"
    ):
        crawl(cf("cat"), params(source="flickr"))


def test_local_source_needs_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="crawl.local_dir"):
        local_candidates(["cat"], tmp_path / "missing")


# --------------------------------------------------------------------------- the web's faults on 127.0.0.1
def test_urllist_faults_on_loopback(in_tmp, http_server):
    base, routes = http_server
    log = Log()
    red = jpeg_bytes((160, 120))
    full = jpeg_bytes((200, 150), (10, 200, 10))

    def slow(req):
        time.sleep(1.5)
        send(req, jpeg_bytes())

    def noai(req):
        req.send_response(200)
        req.send_header("X-Robots-Tag", "noai")
        body = jpeg_bytes()
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    serve(
        routes,
        log,
        {
            "/robots.txt": lambda r: send(r, b"User-agent: *\nDisallow: /private/\n", "text/plain"),
            "/cat.jpg": lambda r: send(r, (IMAGES / "cat.png").read_bytes(), "image/png"),
            "/flaky.jpg": fail_first(500, jpeg_bytes((150, 150), (1, 2, 200))),
            "/busy.jpg": fail_first(429, jpeg_bytes((150, 140), (90, 2, 20)), {"Retry-After": "1"}),
            "/down.jpg": fail_first(503, b"", times=99),
            "/slow.jpg": slow,
            "/loop-a.jpg": redirect("/loop-b.jpg"),
            "/loop-b.jpg": redirect("/loop-a.jpg"),
            "/to-ftp.jpg": redirect("ftp://127.0.0.1/x.jpg"),
            "/page.jpg": lambda r: send(r, b"<html>oops</html>", "image/jpeg"),
            "/trunc.jpg": lambda r: send(r, full[: len(full) // 2]),
            "/empty.jpg": lambda r: send(r, b""),
            "/dot.png": lambda r: send(r, _png_1px(), "image/png"),
            "/bomb.png": lambda r: send(r, png_header_only(20000, 20000), "image/png"),
            "/red.jpg": lambda r: send(r, red),
            "/red-again.jpg": lambda r: send(r, red),
            "/noai.jpg": noai,
            "/private/secret.jpg": lambda r: send(r, jpeg_bytes()),
            "/passwd.jpg": lambda r: send(r, jpeg_bytes((100, 100), (5, 5, 5))),
        },
    )
    url_map = {
        "cat": "/cat.jpg",
        "flaky": "/flaky.jpg",
        "busy": "/busy.jpg",
        "down": "/down.jpg",
        "slow": "/slow.jpg",
        "loop": "/loop-a.jpg",
        "ftp redirect": "/to-ftp.jpg",
        "page": "/page.jpg",
        "trunc": "/trunc.jpg",
        "empty": "/empty.jpg",
        "dot": "/dot.png",
        "bomb": "/bomb.png",
        "red": "/red.jpg",
        "scarlet": "/red-again.jpg",
        "noai": "/noai.jpg",
        "secret": "/private/secret.jpg",
        "missing": "/missing.jpg",
        "../../etc/passwd": "/passwd.jpg",
    }
    (in_tmp / "map.json").write_text(
        json.dumps({k: base + v for k, v in url_map.items()} | {"eye": "file:///etc/passwd"})
    )
    p = params(source="urllist", urllist_path="map.json", timeout_s=0.5, retries=2)
    refused_c, refused = checked(crawl(cf("cat"), p.replace(crawl={"allow_private_hosts": False})))
    assert (
        refused.loc["cat", "status"] == "refused_url" and "non-public address 127.0.0.1" in refused.loc["cat", "reason"]
    )
    assert log.n("/cat.jpg") == 0

    cands, df = checked(crawl(cf(*url_map, "eye", "unmapped"), p))
    st, why = df["status"].to_dict(), df["reason"].to_dict()
    assert st["cat"] == "ok" and df.loc["cat", "format"] == "PNG"
    assert st["flaky"] == "ok" and log.n("/flaky.jpg") == 2  # 500, then success on the retry
    assert st["busy"] == "ok" and log.n("/busy.jpg") == 2
    t = log.hits["/busy.jpg"]
    assert t[1] - t[0] >= 0.9  # waited for Retry-After: 1
    assert st["down"] == "download_failed" and "HTTP 503 after 2 retries" in why["down"] and log.n("/down.jpg") == 3
    assert st["slow"] == "download_failed" and "timed out" in why["slow"].lower()
    assert st["loop"] == "download_failed" and "redirect loop" in why["loop"]
    assert st["ftp redirect"] == "refused_url" and "scheme 'ftp' refused" in why["ftp redirect"]
    assert st["page"] == "invalid_image" and "not a decodable image" in why["page"]
    assert st["trunc"] == "invalid_image"
    assert st["empty"] == "invalid_image" and "zero-byte" in why["empty"]
    assert st["dot"] == "invalid_image" and "smaller than" in why["dot"]
    assert st["bomb"] == "invalid_image" and "400000000 pixels" in why["bomb"]
    assert st["red"] == "ok" and st["scarlet"] == "duplicate" and "'red'" in why["scarlet"]
    assert st["noai"] == "opted_out" and "X-Robots-Tag: noai" in why["noai"]
    assert st["secret"] == "opted_out" and "robots.txt" in why["secret"] and log.n("/private/secret.jpg") == 0
    assert st["missing"] == "download_failed" and "HTTP 404" in why["missing"]
    assert st["eye"] == "refused_url" and "scheme 'file' refused" in why["eye"]
    assert st["unmapped"] == "no_results"
    # a hostile concept name is only a search key: the image is stored by its sha256, inside the store
    assert st["../../etc/passwd"] == "ok" and Path(df.loc["../../etc/passwd", "path"]).resolve().is_relative_to(
        in_tmp / STORE
    )
    assert log.agents == {CRAWL["user_agent"]}
    assert log.n("/robots.txt") == 1  # fetched once per host
    assert not list((in_tmp / STORE).rglob(".*.tmp"))

    # a re-run downloads nothing that was settled; only transient failures are tried again
    before = {k: len(v) for k, v in log.hits.items()}
    _, again = checked(crawl(cf(*url_map, "eye", "unmapped"), p))
    grown = {k for k, v in log.hits.items() if len(v) > before.get(k, 0)}
    assert grown <= {"/down.jpg", "/slow.jpg", "/robots.txt"}
    assert again["status"].to_dict() == st


@pytest.mark.parametrize("keep", [100, None])
def test_bodies_spilled_to_disk_or_written_once_after_validation_store_the_same(in_tmp, http_server, monkeypatch, keep):
    """A body up to ``fetch.KEEP_IN_MEMORY`` bytes is validated from memory and written once, only
    if kept and new; a larger one streams to its staging file. Both roads give the same tables, the
    same store (bytes, names, mode 0644), and nothing left behind for rejected or duplicate bodies."""
    from stages.crawl_images import fetch

    base, routes = http_server
    log = Log()
    photo = _photo_jpeg("RGB", True)
    small = jpeg_bytes((160, 120))
    serve(
        routes,
        log,
        {
            "/photo.jpg": lambda r: send(r, photo),
            "/small.jpg": lambda r: send(r, small),
            "/small-again.jpg": lambda r: send(r, small),
            "/cut.jpg": lambda r: send(r, photo[: len(photo) // 2]),
            "/page.jpg": lambda r: send(r, b"<html>" + b"x" * 500 + b"</html>", "image/jpeg"),
        },
    )
    names = {
        "photo": "/photo.jpg",
        "small": "/small.jpg",
        "again": "/small-again.jpg",
        "cut": "/cut.jpg",
        "page": "/page.jpg",
    }
    (in_tmp / "map.json").write_text(json.dumps({k: base + v for k, v in names.items()}))
    if keep is not None:
        monkeypatch.setattr(fetch, "KEEP_IN_MEMORY", keep)  # every body here is larger: all spill
    _, df = checked(crawl(cf(*names), params(source="urllist", urllist_path="map.json")))
    st = df["status"].to_dict()
    assert st == {"again": "ok", "cut": "invalid_image", "page": "invalid_image", "photo": "ok", "small": "duplicate"}
    stored = sorted(
        p for p in (in_tmp / STORE).rglob("*") if p.is_file() and ".staging" not in str(p) and p.name != ".lock"
    )
    assert sorted(Path(x).resolve() for x in df.loc[["photo", "again"], "path"]) == [p.resolve() for p in stored]
    assert {p.read_bytes() for p in stored} == {photo, small}
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in stored)
    assert int(df.loc["photo", "bytes"]) == len(photo) and int(df.loc["again", "bytes"]) == len(small)
    assert not [p for p in (in_tmp / STORE).rglob("*.part")]  # no body left in a staging folder


def _png_1px() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (1, 1)).save(buf, "PNG")
    return buf.getvalue()


def test_per_host_politeness(in_tmp, http_server):
    base, routes = http_server
    log = Log()

    def img(i):
        def fn(req):
            time.sleep(0.02)
            send(req, jpeg_bytes((100 + i, 100), (i * 20, 50, 50)))

        return fn

    serve(routes, log, {f"/i{i}.jpg": img(i) for i in range(8)})
    (in_tmp / "map.json").write_text(json.dumps({f"c{i}": f"{base}/i{i}.jpg" for i in range(8)}))
    p = params(
        source="urllist",
        urllist_path="map.json",
        threads=8,
        per_host={"max_connections": 1, "delay_s": 0.2},
        respect_robots=False,
    )
    _, df = checked(crawl(cf(*[f"c{i}" for i in range(8)]), p))
    assert (df["status"] == "ok").all()
    assert log.max_inflight == 1  # 8 threads, but one connection to this host at a time
    starts = sorted(t for v in log.hits.values() for t in v)
    # delay_s (0.2 s) between request starts; arrival jitter at the server is allowed for, while
    # without the delay the gaps would be ~0.02 s (the handler's own time)
    assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.1


def bing_page(urls):
    divs = "".join(f'<div class="imgpt"><a m=\'{{"murl":"{u}"}}\' href="#">x</a></div>' for u in urls)
    return f"<html><body>{divs}</body></html>".encode()


def test_bing_top_n_on_loopback(in_tmp, http_server):
    base, routes = http_server
    log = Log()

    def results(req):
        q = req.path.split("q=", 1)[1].split("&", 1)[0]
        if q == "broken":
            return send(req, b"", "text/html", 500)
        urls = [f"{base}/{q}-{i}.jpg" for i in (1, 2, 3, 4)] if q == "rocket" else []
        send(req, bing_page(urls), "text/html")

    serve(
        routes,
        log,
        {
            "/images/async": results,
            "/rocket-1.jpg": lambda r: send(r, b"<html>", "text/html"),
            "/rocket-2.jpg": lambda r: send(r, (IMAGES / "rocket.jpg").read_bytes()),
            "/rocket-3.jpg": lambda r: send(r, jpeg_bytes((300, 200))),
            "/rocket-4.jpg": lambda r: send(r, jpeg_bytes((300, 200))),
        },
    )
    p = params(source="bing", top_n=3, bing={"endpoint": f"{base}/images/async"}, respect_robots=False)
    parser_log = logging.getLogger("parser")  # icrawler's parser logger: process-global
    handlers, level = list(parser_log.handlers), parser_log.level
    cands, df = checked(crawl(cf("rocket", "nothing", "broken"), p))
    assert parser_log.handlers == handlers and parser_log.level == level  # the crawl left it as it found it
    assert df.loc["rocket", "status"] == "ok" and df.loc["rocket", "source_url"] == f"{base}/rocket-2.jpg"
    assert df.loc["rocket", "candidates_kept"] == 2 and "#1" in df.loc["rocket", "reason"]  # the top result was HTML
    assert list(cands[cands.concept == "rocket"]["status"]) == ["invalid_image", "kept", "kept"]
    assert log.n("/rocket-4.jpg") == 0  # only the top 3
    assert df.loc["nothing", "status"] == "no_results"
    assert df.loc["broken", "status"] == "search_failed" and "HTTP 500" in df.loc["broken", "reason"]
    searches = log.n("/images/async")
    crawl(cf("rocket", "nothing", "broken"), p)  # settled searches are not repeated; the 500 is
    assert log.n("/images/async") == searches + 1 + CRAWL["retries"]
    assert log.n("/rocket-2.jpg") == 1


def test_greedy_site_on_loopback(in_tmp, http_server):
    base, routes = http_server
    log = Log()

    def page(req):
        concept = req.path.rsplit("/", 1)[1]
        imgs = "".join(f'<img src="{base}/img/{concept}-{i}.jpg">' for i in (1, 2)) if concept == "moon" else ""
        send(req, f'<html><body>{imgs}<a href="{base}/site/other">next</a></body></html>'.encode(), "text/html")

    serve(
        routes,
        log,
        {
            "/site/moon": page,
            "/site/sun": page,
            "/img/moon-1.jpg": lambda r: send(r, jpeg_bytes((200, 100))),
            "/img/moon-2.jpg": lambda r: send(r, jpeg_bytes((100, 200), (0, 0, 255))),
        },
    )
    p = params(source="greedy", greedy={"url_template": f"{base}/site/{{concept}}"}, respect_robots=False)
    cands, df = checked(crawl(cf("moon", "sun"), p))
    assert (
        df.loc["moon", "status"] == "ok"
        and df.loc["moon", "source_url"] == f"{base}/img/moon-1.jpg"
        and df.loc["moon", "candidates_kept"] == 2
    )
    assert df.loc["sun", "status"] == "no_results"
    assert log.n("/site/other") == 0  # one page per concept: links are not followed


# --------------------------------------------------------------------------- kill and resume
RESUME_SCRIPT = """
import json, sys
import pandas as pd
sys.path.insert(0, {root!r})
from stages.crawl_images import crawl
from gavil.params import parse_params
p = parse_params(json.loads(open("params.json").read()))
concepts = json.loads(open("concepts.json").read())
crawl(pd.DataFrame({{"concept": concepts, "status": ["ok"] * len(concepts), "reason": [None] * len(concepts)}}), p)
"""


def test_crawl_killed_half_way_resumes_without_loss_or_duplicates(in_tmp, http_server):
    base, routes = http_server
    log = Log()
    n = 40

    def img(i):
        def fn(req):
            time.sleep(0.1)
            send(req, jpeg_bytes((100 + i, 100), ((i * 37) % 255, (i * 91) % 255, 60)))

        return fn

    serve(routes, log, {f"/i{i}.jpg": img(i) for i in range(n)})
    concepts = [f"concept {i:02d}" for i in range(n)]
    (in_tmp / "map.json").write_text(json.dumps({c: f"{base}/i{i}.jpg" for i, c in enumerate(concepts)}))
    p = params(source="urllist", urllist_path="map.json", threads=2, respect_robots=False, phash_max_distance=None)
    (in_tmp / "params.json").write_text(json.dumps({"crawl": p.crawl.model_dump()}))
    (in_tmp / "concepts.json").write_text(json.dumps(concepts))
    proc = subprocess.Popen([sys.executable, "-c", RESUME_SCRIPT.format(root=str(ROOT))], cwd=in_tmp)
    journal = in_tmp / JOURNAL
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lines = sum(f.read_text().count("\n") for f in journal.glob("*.jsonl")) if journal.is_dir() else 0
        if lines >= 10:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = {k for k, v in log.hits.items() if v}
    assert 10 <= len(done_before) < n  # killed half-way
    stored_before = {f.name for f in (in_tmp / STORE).rglob("*") if f.is_file() and not f.name.startswith(".")}

    cands, df = checked(crawl(cf(*concepts), p))
    assert len(df) == n and (df["status"] == "ok").all() and not cands.duplicated(["concept", "rank"]).any()
    refetched = [k for k in done_before if log.n(k) > 1]
    assert len(refetched) <= 2  # at most the downloads in flight (2 threads) when it was killed
    assert all(log.n(f"/i{i}.jpg") >= 1 for i in range(n))
    files = [f for f in (in_tmp / STORE).rglob("*") if f.is_file()]
    assert not [f for f in files if f.name.startswith(".")]  # no half-written temp file left
    assert stored_before <= {f.name for f in files} and len(files) == n
    for row in df.itertuples():
        Image.open(row.path).load()  # every stored image decodes

    hits = sum(len(v) for v in log.hits.values())
    _, again = checked(crawl(cf(*concepts), p))
    assert sum(len(v) for v in log.hits.values()) == hits  # same params: nothing downloaded
    assert again.equals(df)


def test_a_crawl_that_reaches_no_network_says_so(in_tmp):
    """Offline (here: the search endpoint is a closed port on 127.0.0.1), a web crawl ends with no image
    and every concept search_failed; the stage's closing line says no request reached the web and
    what to do offline, instead of ending quietly with 0 images."""
    import socket

    from stages.crawl_images.stage import no_image_warning

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = params(source="bing", bing={"endpoint": f"http://127.0.0.1:{port}/images/async"}, retries=0)
    _, df = checked(crawl(cf("rocket", "moon"), p))
    assert set(df["status"]) == {"search_failed"}
    line = no_image_warning(df.reset_index(), "bing")
    assert line is not None and "none of 2 concept(s) got an image" in line and "offline" in line, line
    assert "crawl.source: local" in line
    ok = pd.DataFrame({"concept": ["a", "b"], "status": ["ok", "search_failed"], "reason": [None, "x"]})
    assert no_image_warning(ok, "bing") is None and no_image_warning(ok.iloc[:0], "bing") is None


def test_a_local_crawl_is_partitioned_by_its_files_not_its_concepts(in_tmp):
    """A concept without a file costs nothing; sized by the concepts, the sample's 29 files among
    hundreds of concepts went to two worker processes whose start cost more than the work."""
    from gavil.pipeline import catalog, parallel
    from stages.crawl_images.stage import MIN_PARTITION, plan

    concepts = [f"c{i:04d}" for i in range(1000)]
    catalog.write_table(cf(*concepts), "concept_filter")
    folder = in_tmp / "local"
    folder.mkdir()
    src = (ROOT / "data/sample/images/cat.png").read_bytes()
    for files, want in ((0, 1), (MIN_PARTITION * 2 - 1, 1), (MIN_PARTITION * 2, 2), (1000, 8)):
        for f in folder.iterdir():
            f.unlink()
        for c in concepts[:files]:
            (folder / f"{c}.png").write_bytes(src)
        with parallel.planning_for(2):
            parts = plan(params(local_dir=str(folder), partition_size=None))
        assert len(parts) == want and sum(parts, []) == concepts, (files, len(parts))
    with parallel.planning_for(2):  # a web source's work is every concept's search
        assert len(plan(params(source="urllist", urllist_path=str(folder / "none.json"), partition_size=None))) == 8
