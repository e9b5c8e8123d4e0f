"""crawl_images: validation and fates on the local source, and icrawler's real code path
(UrlListCrawler, BingImageCrawler) against an HTTP server on 127.0.0.1."""

import io
import json
import struct
import zlib
from pathlib import Path

import pandas as pd
import pytest
from PIL import Image

from schemas.crawl import Images
from stages._io import validate
from stages.crawl_images import Candidate, crawl, fetch_local, inspect_image, InvalidImage, register_images, safe_concept_name
from tests.conftest import IMAGES, send

PARAMS = {
    "source": "local", "local_dir": str(IMAGES), "urllist_path": "", "top_n": 3, "threads": 2,
    "timeout_s": 5, "min_side": 64, "max_pixels": 50_000_000, "allow_private_hosts": False, "bing": {"endpoint": ""},
}  # fmt: skip


def cf(*concepts, profane=()):
    return pd.DataFrame(
        {"concept": list(concepts), "status": ["profane" if c in profane else "ok" for c in concepts],
         "reason": [f"flagged {c}" if c in profane else None for c in concepts]}
    )  # fmt: skip


def jpeg_bytes(size=(120, 90), color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, "JPEG")
    return buf.getvalue()


def png_header_only(w: int, h: int) -> bytes:
    """A PNG whose IHDR claims w x h (a decompression-bomb header) with no real pixel data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")


def test_local_source_stores_content_addressed(in_tmp):
    df = validate(crawl(cf("cat", "moon", "unicorn", "weed", profane=("weed",)), PARAMS), Images).set_index("concept")
    assert df.loc["cat", "status"] == "ok" and df.loc["cat", "format"] == "PNG"
    assert (df.loc["cat", "width"], df.loc["cat", "height"]) == (451, 300)
    stored = Path(df.loc["cat", "path"])
    assert stored.exists() and stored.name.startswith(df.loc["cat", "sha256"]) and stored.parent.name == df.loc["cat", "sha256"][:2]
    assert df.loc["cat", "source_url"].endswith("data/sample/images/cat.png")
    assert df.loc["unicorn", "status"] == "no_results" and "unicorn" in df.loc["unicorn", "reason"]
    assert df.loc["weed", "status"] == "profane" and df.loc["weed", "reason"] == "flagged weed"


def test_invalid_files_and_duplicates_get_their_fate(in_tmp):
    d = in_tmp / "imgs"
    d.mkdir()
    (d / "page.jpg").write_text("<html><body>not an image</body></html>")
    (d / "empty.jpg").write_bytes(b"")
    Image.new("RGB", (1, 1)).save(d / "dot.png")
    full = jpeg_bytes((200, 150))
    (d / "truncated.jpg").write_bytes(full[: len(full) // 2])
    (d / "bomb.png").write_bytes(png_header_only(20000, 20000))
    (d / "red.jpg").write_bytes(jpeg_bytes())
    (d / "scarlet.jpg").write_bytes(jpeg_bytes())  # same bytes as red
    df = crawl(cf("page", "empty", "dot", "truncated", "bomb", "red", "scarlet", "../../etc/passwd"), {**PARAMS, "local_dir": str(d)})
    df = validate(df, Images).set_index("concept")
    reasons = df["reason"].to_dict()
    assert df.loc["page", "status"] == "invalid_image" and "not a decodable image" in reasons["page"]
    assert df.loc["empty", "status"] == "invalid_image" and "zero-byte" in reasons["empty"]
    assert df.loc["dot", "status"] == "invalid_image" and "smaller than" in reasons["dot"]
    assert df.loc["truncated", "status"] == "invalid_image"
    assert df.loc["bomb", "status"] == "invalid_image" and "pixels" in reasons["bomb"]
    assert df.loc["red", "status"] == "ok"
    assert df.loc["scarlet", "status"] == "duplicate" and "'red'" in reasons["scarlet"]
    assert df.loc["../../etc/passwd", "status"] == "no_results"
    assert len(list((in_tmp / "data/images").rglob("*.jpg"))) == 1  # nothing invalid stored


def test_first_valid_candidate_wins(in_tmp, tmp_path):
    bad = tmp_path / "bad.jpg"
    bad.write_text("<html>")
    good = tmp_path / "good.jpg"
    good.write_bytes(jpeg_bytes())
    cands = {"moon": [Candidate("http://127.0.0.1/1.jpg", error="HTTP 404"), Candidate("http://127.0.0.1/2.jpg", bad), Candidate("http://127.0.0.1/3.jpg", good)]}
    df = register_images(cf("moon"), cands, "bing", in_tmp / "store", 64, 10**8)
    row = df.iloc[0]
    assert row["status"] == "ok" and row["source_url"] == "http://127.0.0.1/3.jpg"
    assert "#1" in row["reason"] and "#2" in row["reason"]  # what was skipped is kept


def test_safe_names():
    assert safe_concept_name("fast food")
    for bad in ("../x", "a/b", "a\x00b", "..", "x" * 300):
        assert not safe_concept_name(bad)


def test_inspect_rejects_bomb_before_decoding(tmp_path):
    p = tmp_path / "b.png"
    p.write_bytes(png_header_only(20000, 20000))
    with pytest.raises(InvalidImage, match="400000000 pixels"):
        inspect_image(p, 1, 50_000_000)


def test_urllist_with_icrawler_on_loopback(in_tmp, http_server):
    base, routes = http_server
    routes["/cat.jpg"] = lambda r: send(r, (IMAGES / "cat.png").read_bytes(), "image/png")
    routes["/moon.jpg"] = lambda r: send(r, jpeg_bytes((300, 200)))
    routes["/html.jpg"] = lambda r: send(r, b"<html>oops</html>", "text/html")
    routes["/boom.jpg"] = lambda r: send(r, b"err", "text/plain", 500)
    url_map = {"cat": f"{base}/cat.jpg", "moon": f"{base}/moon.jpg", "page": f"{base}/html.jpg", "clock": f"{base}/missing.jpg",
               "coin": f"{base}/boom.jpg", "eye": "ftp://example.invalid/eye.jpg"}  # fmt: skip
    (in_tmp / "map.json").write_text(json.dumps(url_map))
    refused = crawl(cf("cat"), {**PARAMS, "source": "urllist", "urllist_path": "map.json"})
    assert refused.loc[0, "status"] == "download_failed" and "non-public address 127.0.0.1" in refused.loc[0, "reason"]
    df = crawl(cf(*url_map, "unmapped"), {**PARAMS, "source": "urllist", "urllist_path": "map.json", "allow_private_hosts": True})
    df = validate(df, Images).set_index("concept")
    assert df.loc["cat", "status"] == "ok" and df.loc["cat", "source_url"] == f"{base}/cat.jpg" and df.loc["cat", "format"] == "PNG"
    assert df.loc["moon", "status"] == "ok" and df.loc["moon", "width"] == 300
    assert df.loc["page", "status"] == "invalid_image"
    assert df.loc["clock", "status"] == "download_failed" and "HTTP 404" in df.loc["clock", "reason"]
    assert df.loc["coin", "status"] == "download_failed" and "HTTP 500" in df.loc["coin", "reason"]
    assert df.loc["eye", "status"] == "download_failed" and "scheme 'ftp' refused" in df.loc["eye", "reason"]
    assert df.loc["unmapped", "status"] == "no_results"


def test_bing_with_icrawler_on_loopback(in_tmp, http_server):
    base, routes = http_server
    routes["/rocket-1.jpg"] = lambda r: send(r, b"<html>", "text/html")
    routes["/rocket-2.jpg"] = lambda r: send(r, (IMAGES / "rocket.jpg").read_bytes())

    def results(req):
        q = req.path.split("q=", 1)[1].split("&", 1)[0]
        if q != "rocket":
            return send(req, b"<html><body></body></html>", "text/html")
        divs = "".join(
            f'<div class="imgpt"><a m=\'{{"murl":"{base}/rocket-{i}.jpg"}}\' href="#">x</a></div>' for i in (1, 2, 3)
        )
        send(req, f"<html><body>{divs}</body></html>".encode(), "text/html")

    routes["/images/async"] = results
    p = {**PARAMS, "source": "bing", "top_n": 2, "bing": {"endpoint": f"{base}/images/async"}}
    df = validate(crawl(cf("rocket", "nothing"), p), Images).set_index("concept")
    assert df.loc["rocket", "status"] == "ok" and df.loc["rocket", "source_url"] == f"{base}/rocket-2.jpg"
    assert "#1" in df.loc["rocket", "reason"]  # the top result was HTML and fell through
    assert df.loc["nothing", "status"] == "no_results"


def test_google_is_refused_clearly(in_tmp):
    from stages._io import ParamsError

    with pytest.raises(ParamsError, match="Google parser is broken"):
        crawl(cf("cat"), {**PARAMS, "source": "google"})


def test_fetch_local_needs_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="crawl.local_dir"):
        fetch_local(["cat"], tmp_path / "missing")
