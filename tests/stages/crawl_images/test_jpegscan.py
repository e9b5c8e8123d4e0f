"""Progressive JPEGs validated from their DC scans (issue 27): same pixels, same decisions, same hash.

``stages.crawl_images.jpegscan.dc_stream`` leaves the AC scans out; at the 1/8 scale validation
decodes web-sized JPEGs at, libjpeg's output is then the whole file's, pixel for pixel. These tests
hold that on real photos in every layout Pillow writes, check that ``inspect_image`` decides and
hashes exactly as the whole-file decode, and that every file the walk cannot vouch for (cut, no
EOI, a scan libjpeg would refuse) goes back to the whole-file decode and its verdict.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from stages.crawl_images import jpegscan, validate
from stages.crawl_images.validate import InvalidImage, inspect_image
from tests.helpers import IMAGES

LAYOUTS = [
    {"mode": "RGB", "subsampling": 2},  # 4:2:0, Pillow's default
    {"mode": "RGB", "subsampling": 0},  # 4:4:4
    {"mode": "RGB", "subsampling": 1, "restart_marker_blocks": 7},  # 4:2:2, restart intervals
    {"mode": "L"},
    {"mode": "CMYK"},
]


def _photo(name: str, size: tuple[int, int], quality: int, **save) -> bytes:
    mode = save.pop("mode")
    with Image.open(IMAGES / name) as im:
        photo = im.convert("RGB").resize(size, Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    photo.convert(mode).save(buf, "JPEG", quality=quality, progressive=True, **save)
    return buf.getvalue()


def _draft_pixels(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as im:
        im.draft("L", (64, 64))
        im.load()
        return np.asarray(im).copy()


def _photos() -> list[bytes]:
    names = sorted(p.name for p in IMAGES.iterdir() if p.suffix in (".png", ".jpg"))[:3]
    out = []
    for i, layout in enumerate(LAYOUTS):
        for j, (size, q) in enumerate((((900, 600), 85), ((1600, 1067), 92), ((640, 853), 70))):
            out.append(_photo(names[(i + j) % len(names)], size, q, **dict(layout)))
    return out


PHOTOS = _photos()


def test_dc_scans_decode_to_the_whole_files_pixels():
    for data in PHOTOS:
        stream = jpegscan.dc_stream(data)
        assert stream is not None and len(stream) < len(data)  # the fast path applies, and skips bytes
        assert np.array_equal(_draft_pixels(stream), _draft_pixels(data))


def test_without_the_quantiser_trick_libjpeg_smooths_and_pixels_differ(monkeypatch):
    """The zeroed first AC quantiser is what stops libjpeg's block smoothing (module docstring):
    without it the DC-only decode is not the whole file's."""
    monkeypatch.setattr(jpegscan, "_zero_first_ac", lambda seg: seg)
    differ = [not np.array_equal(_draft_pixels(jpegscan.dc_stream(d) or d), _draft_pixels(d)) for d in PHOTOS]
    assert any(differ)


def _inspect_both(path: Path, data: bytes, monkeypatch) -> tuple[object, object]:
    """inspect_image's result (or its InvalidImage reason) with the DC path and with whole-file decoding."""

    def run() -> object:
        try:
            return inspect_image(path, 64, 50_000_000, with_phash=True, data=data)
        except InvalidImage as e:
            return ("invalid", e.status, e.reason)

    fast = run()
    with monkeypatch.context() as m:
        m.setattr(validate, "dc_stream", lambda _data: None)
        whole = run()
    return fast, whole


def test_inspect_image_decides_and_hashes_as_the_whole_file(tmp_path, monkeypatch):
    for i, data in enumerate(PHOTOS):
        path = tmp_path / f"p{i}.jpg"
        path.write_bytes(data)
        fast, whole = _inspect_both(path, data, monkeypatch)
        assert fast == whole and not isinstance(fast, tuple), (i, fast, whole)


def _scans(data: bytes) -> list[int]:
    """Offsets of the SOS markers of ``data``."""
    return [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xDA]


def test_files_the_walk_cannot_vouch_for_get_the_whole_file_verdict(tmp_path, monkeypatch):
    data = PHOTOS[0]
    sos = _scans(data)
    ac = next(p for p in sos if data[p + 5 + 2 * data[p + 4]] > 0)  # the first AC scan (Ss > 0)
    ta = ac + 6  # its one component's table selector byte
    broken = {
        "cut in an AC scan": data[: ac + 200],
        "cut in the last scan": data[: len(data) - 40],
        "no EOI": data[:-2],
        "undefined AC table": data[:ta] + bytes([(data[ta] & 0xF0) | 3]) + data[ta + 1 :],
        "AC scan of two components": data[: ac + 4] + b"\x02" + data[ac + 5 :],
        "bad successive approximation": data[: ac + 9] + b"\x35" + data[ac + 10 :],
        "trailing bytes after EOI": data + b"\x00garbage",
    }
    for name, bad in broken.items():
        path = tmp_path / "bad.jpg"
        path.write_bytes(bad)
        if name != "trailing bytes after EOI":
            assert jpegscan.dc_stream(bad) is None, name
        fast, whole = _inspect_both(path, bad, monkeypatch)
        assert fast == whole, (name, fast, whole)
    for name in ("cut in an AC scan", "cut in the last scan", "no EOI"):
        path.write_bytes(broken[name])
        with pytest.raises(InvalidImage, match="not a decodable image"):
            inspect_image(path, 64, 50_000_000, with_phash=True)


def test_baseline_small_and_odd_inputs_are_left_to_the_whole_decode():
    with Image.open(IMAGES / sorted(p.name for p in IMAGES.iterdir() if p.suffix in (".png", ".jpg"))[0]) as im:
        buf = io.BytesIO()
        im.convert("RGB").resize((900, 600)).save(buf, "JPEG", quality=85)
    for data in (buf.getvalue(), b"", b"\xff\xd8", b"\xff\xd8\xff\xd9", b"\xff\xd8\xff\xc2\x00", bytes(range(256)) * 4):
        assert jpegscan.dc_stream(data) is None
