"""OCR text-image rejection: the rule on hand-made readings, and real EasyOCR (offline weights)."""

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageDraw, ImageFont

from gavil.io import validate
from schemas.ocr import Ocr
from stages.ocr_filter import MatchRule, decide, match_text, targets
from tests.helpers import IMAGES

RULE = MatchRule(match_threshold=80, min_confidence=0.3, min_word_len=4)


def test_rule_on_paper_example_and_near_misses():
    assert match_text("library", [("brary", 0.9)], RULE).rejected  # the paper's example
    assert match_text("page", [("PAGES", 0.8)], RULE).rejected
    assert not match_text("moon", [("mood", 0.99)], RULE).rejected  # ratio 75
    assert not match_text("text", [("test", 0.99)], RULE).rejected
    assert not match_text("library", [("brary", 0.1)], RULE).rejected  # below min confidence
    assert not match_text("cat", [("at", 0.99)], RULE).rejected  # too short to count
    d = match_text("library", [("THE", 0.9), ("brary", 0.9)], RULE)
    assert d.token == "brary" and d.score == pytest.approx(83.33, abs=0.01)


def test_multi_word_concepts():
    assert targets("fast food", RULE) == ["fastfood", "fast", "food"]
    assert match_text("fast food", [("FAST", 0.9), ("FOOD", 0.9)], RULE).token in ("fastfood", "fast", "food")
    assert match_text("fast food", [("FASTFOOD", 0.9)], RULE).rejected
    assert match_text("fast food", [("best food in town", 0.9)], RULE).rejected  # shows "food"
    assert not match_text("ice cream", [("ice", 0.9)], RULE).rejected  # "ice" < min_word_len


def render(word: str, path):
    im = Image.new("RGB", (400, 300), "white")
    ImageDraw.Draw(im).text((20, 110), word, fill="black", font=ImageFont.load_default(size=64))
    im.save(path)
    return str(path)


#: Rendered words (hits and the paper's near miss "brary") and two sample photos, for comparing readers.
READ_WORDS = ["LIBRARY", "brary", "fast food", "MOON", "rocket", "Coffee", "pages", "zebra"]


def reader_set(tmp_path) -> tuple[list[str], list[str]]:
    """(concepts, image paths): :data:`READ_WORDS` rendered by :func:`render`, then cat.png and
    rocket.jpg from the sample (concepts "cat", "rocket")."""
    paths = [render(w, tmp_path / f"w{i}.png") for i, w in enumerate(READ_WORDS)]
    return [*READ_WORDS, "cat", "rocket"], [*paths, str(IMAGES / "cat.png"), str(IMAGES / "rocket.jpg")]


def tables(cands: dict[str, list[str]], crawl_fail: dict[str, str] | None = None):
    """(images, candidates) tables: each concept's candidate files in rank order (sha256 from the path)."""
    import hashlib

    crawl_fail = crawl_fail or {}
    img_rows, cand_rows = [], []
    for concept, paths in cands.items():
        for rank, path in enumerate(paths, start=1):
            cand_rows.append(
                {
                    "concept": concept,
                    "rank": rank,
                    "url": f"http://127.0.0.1/{concept}/{rank}",
                    "status": "kept",
                    "sha256": hashlib.sha256(str(path).encode()).hexdigest(),
                    "path": str(path),
                }
            )
        img_rows.append({"concept": concept, "status": "ok", "reason": None})
    for concept, status in crawl_fail.items():
        img_rows.append({"concept": concept, "status": status, "reason": f"no local result for {concept}"})
    return pd.DataFrame(img_rows), pd.DataFrame(
        cand_rows, columns=["concept", "rank", "url", "status", "sha256", "path"]
    )


@pytest.mark.slow
def test_easyocr_rejects_rendered_library_and_keeps_photos(tmp_path, ocr_reader):
    images, cands = tables(
        {
            "library": [render("LIBRARY", tmp_path / "lib.png")],
            "cat": [str(IMAGES / "cat.png")],
            "moon": [render("BRARY", tmp_path / "brary.png")],
        },
        {"unicorn": "no_results"},
    )
    # moon's image reads "BRARY": unrelated text is not a reason to reject
    out = validate(decide(images, cands, RULE, 640, {}, ocr_reader), Ocr).set_index("concept")
    assert out.loc["library", "status"] == "rejected_text"
    assert out.loc["library", "match_token"] == "library" and out.loc["library", "ocr_confidence"] > 0.5
    assert "LIBRARY" in out.loc["library", "ocr_text"].upper()
    assert out.loc["cat", "status"] == "accepted" and pd.isna(out.loc["cat", "reason"]) and out.loc["cat", "rank"] == 1
    assert out.loc["moon", "status"] == "accepted" and "BRARY" in out.loc["moon", "ocr_text"].upper()
    assert out.loc["unicorn", "status"] == "no_image" and "no_results" in out.loc["unicorn", "reason"]


@pytest.mark.slow
def test_easyocr_brary_image_is_rejected_for_library(tmp_path, ocr_reader):
    images, cands = tables({"library": [render("brary", tmp_path / "b.png")]})
    out = decide(images, cands, RULE, 640, {}, ocr_reader)
    assert out.loc[0, "status"] == "rejected_text" and "brary" in out.loc[0, "reason"]


@pytest.mark.slow
def test_batched_detector_first_reader_decides_like_readtext(tmp_path, ocr_reader):
    """The stage's reader (batched detect, recognise only boxes) vs EasyOCR's own readtext."""
    from gavil.models.ocr_engine import load_for_ocr

    words = ["LIBRARY", "brary", "fast food", "MOON", "rocket", "Coffee", "pages", "zebra"]
    paths = [render(w, tmp_path / f"w{i}.png") for i, w in enumerate(words)] + [
        str(IMAGES / "cat.png"),
        str(IMAGES / "rocket.jpg"),
    ]
    arrays = [load_for_ocr(p, 640) for p in paths]
    ours = ocr_reader(arrays, 640)
    import easyocr
    import easyocr_en_models

    reader = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    for concept, arr, dets in zip(words + ["cat", "rocket"], arrays, ours):
        ref = [(t, float(c)) for _, t, c in reader.readtext(arr, canvas_size=640)]
        assert [t for t, _ in dets] == [t for t, _ in ref]
        assert match_text(concept, dets, RULE) == match_text(concept, ref, RULE)


@pytest.mark.slow
def test_fp32_stage_reader_reads_exactly_what_readtext_reads_from_the_file(tmp_path, ocr_reader):
    """The stage's inputs are ``readtext(path)``'s: RGB for the detector and, for the recogniser, the
    file's own grey (a JPEG's luma, as ``cv2.imread(IMREAD_GRAYSCALE)`` decodes it), so at fp32 the
    stage reads the same texts with the same confidences. Coloured words on coloured grounds make
    the grey matter: the channel-swapped grey the stage once used reads them differently."""
    import cv2
    import easyocr
    import easyocr_en_models

    from gavil.models.ocr_engine import load_for_ocr

    peer = easyocr.Reader(
        ["en"], gpu=False, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )
    paths = []
    for i, (word, fg, bg) in enumerate(
        [
            ("library", (220, 30, 30), (40, 140, 40)),
            ("Coffee", (30, 40, 210), (200, 120, 40)),
            ("zebra", (0, 0, 0), (255, 255, 255)),
        ]
    ):
        im = Image.new("RGB", (520, 300), bg)
        ImageDraw.Draw(im).text((20, 110), word, fill=fg, font=ImageFont.load_default(size=60))
        for ext in ("jpg", "png"):
            im.save(tmp_path / f"w{i}.{ext}", quality=75)
            paths.append(str(tmp_path / f"w{i}.{ext}"))
    paths.append(web_sized(tmp_path / "lib.jpg", "beach.png", "LIBRARY", 2.0))
    read = 0
    for p in paths:
        arr = load_for_ocr(p, 2560)
        assert np.array_equal(arr[..., 3], cv2.imread(p, cv2.IMREAD_GRAYSCALE)), p
        ours = ocr_reader([arr], 2560)[0]
        theirs = [(str(t), float(c)) for _, t, c in peer.readtext(p)]
        assert ours == theirs, (p, ours, theirs)
        read += bool(ours)
    assert read >= 6  # the words were read


def test_one_image_at_a_time_reads_what_a_stacked_batch_reads(tmp_path, ocr_reader):
    """``ocr.batch_size`` is a runtime knob: the default (1, one ``detect`` call per image) and a
    stacked batch of same-shaped images (the session reader: 8) give the same detections."""
    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr

    arrays = [
        load_for_ocr(render(w, tmp_path / f"b{i}.png"), 640) for i, w in enumerate(["LIBRARY", "Coffee", "zebra"])
    ]
    assert len({a.shape for a in arrays}) == 1  # one shape: the session reader stacks all three
    single = make_reader(batch_size=1)(arrays, 640)
    assert single == ocr_reader(arrays, 640)
    assert [t for dets in single for t, _ in dets] == ["LIBRARY", "Coffee", "zebra"]


def test_fall_through_reads_candidates_in_rank_order_and_stops(tmp_path):
    images, cands = tables({"library": ["l1.png", "l2.png", "l3.png"], "moon": ["m1.png", "m2.png"]})
    texts = {
        "l1.png": [("LIBRARY", 0.9)],
        "l2.png": [("a tree", 0.9)],
        "l3.png": [],
        "m1.png": [("MOON", 0.95)],
        "m2.png": [("moon", 0.9)],
    }
    read_log: list[list[str]] = []

    def fake_read(arrays, canvas):
        names = [a.tobytes().decode() for a in arrays]
        read_log.append(names)
        return [texts[n] for n in names]

    def fake_load(path, canvas):  # the engine's image loader: the file name's bytes
        return np.frombuffer(path.encode(), dtype=np.uint8)

    out = validate(decide(images, cands, RULE, 640, {}, fake_read, batch_size=8, load=fake_load), Ocr)
    out = out.set_index("concept")
    assert [sorted(b) for b in read_log] == [
        ["l1.png", "m1.png"],
        ["l2.png", "m2.png"],
    ]  # one batch per rank; l3 never read
    assert (
        out.loc["library", "status"] == "accepted"
        and out.loc["library", "rank"] == 2
        and out.loc["library", "path"] == "l2.png"
    )
    assert out.loc["library", "candidates_read"] == 2 and "#1: OCR read 'library'" in out.loc["library", "reason"]
    assert (
        out.loc["moon", "status"] == "rejected_text" and out.loc["moon", "rank"] == 2
    )  # every kept candidate showed the word
    assert "#1" in out.loc["moon", "reason"] and "#2" in out.loc["moon", "reason"]


def test_detections_are_cached_by_image_and_canvas(tmp_path):
    from stages.ocr_filter import load_cache, save_cache

    images, cands = tables({"library": [render("LIBRARY", tmp_path / "l.png")], "cat": [str(IMAGES / "cat.png")]})
    calls = []

    def fake_read(arrays, canvas):
        out = []
        for a in arrays:
            calls.append(a.shape)
            out.append([("LIBRARY", 0.99)] if a.shape[0] == 240 else [])  # the 400x300 rendering at canvas 320
        return out

    cache: dict = {}
    first = decide(images, cands, RULE, 320, cache, fake_read)
    assert len(calls) == 2 and all(max(c[:2]) <= 320 for c in calls)  # downscaled to the canvas before OCR
    assert first.set_index("concept").loc["library", "status"] == "rejected_text"
    path = str(tmp_path / "cache.parquet")
    save_cache(path, "engine-x", cache, load_cache(path, "engine-x")[1])
    cache2, _ = load_cache(path, "engine-x")
    strict = MatchRule(match_threshold=101, min_confidence=0.3, min_word_len=4)  # a rule change: no re-OCR
    second = decide(images, cands, strict, 320, cache2, read=None)
    assert second.set_index("concept").loc["library", "status"] == "accepted"
    assert load_cache(path, "engine-y")[0] == {}  # another OCR engine does not reuse these
    calls.clear()
    decide(images, cands, RULE, 640, cache2, fake_read)  # another canvas size is another reading
    assert len(calls) == 2
    with pytest.raises(KeyError, match="not in the OCR cache"):
        decide(images, cands, RULE, 800, cache2, read=None)


@pytest.fixture(scope="module")
def params_reader():
    """The EasyOCR reader (``ocr.engine: easyocr``) at the default EasyOCR params (precision ``fp32``, ``readtext``'s)."""
    from gavil.models.easyocr_reader import make_reader
    from gavil.params.ocr import OcrParams

    p = OcrParams()
    return make_reader(p.batch_size, p.precision, p.device)


def web_sized(path, photo: str, word: str | None, cap_percent: float = 1.0):
    """A sample photo at 1,600 x 1,200 (web size), optionally showing ``word`` with capitals
    ``cap_percent`` of the height (12 px at 1 %), in black on a light strip the photo shows through."""
    im = Image.open(IMAGES / photo).convert("RGB").resize((1600, 1200), Image.Resampling.BICUBIC)
    if word:
        size = 8
        while True:  # the font size whose capital H is cap_percent of the height
            font = ImageFont.load_default(size=size)
            top, bottom = font.getbbox("H")[1::2]
            if bottom - top >= 1200 * cap_percent / 100:
                break
            size += 1
        draw = ImageDraw.Draw(im, "RGBA")
        draw.rectangle((300, 500, 300 + 14 * size, 500 + 2 * size), fill=(255, 255, 255, 170))
        draw.text((310, 505), word, fill=(20, 20, 20), font=font)
    im.save(path, quality=88)
    return str(path)


@pytest.mark.slow
def test_default_params_reject_a_small_word_on_a_web_sized_photo(tmp_path, params_reader):
    """Issue 27: a word with capitals 1 % of a 1,600 x 1,200 photo's height (12 px) is read at the
    default canvas (readtext's 2,560: full size), so the image is rejected; the plain photo is kept.
    The 640 px canvas (the faster setting) misses that word: what the default buys."""
    from gavil.params.ocr import OcrParams

    p = OcrParams()
    assert p.canvas_size >= 1600  # the default reads web images at full size
    images, cands = tables(
        {
            "library": [web_sized(tmp_path / "lib.jpg", "beach.png", "library")],
            "beach": [web_sized(tmp_path / "beach.jpg", "beach.png", None)],
        }
    )
    out = validate(decide(images, cands, RULE, p.canvas_size, {}, params_reader), Ocr).set_index("concept")
    assert out.loc["library", "status"] == "rejected_text", out.loc["library", "ocr_text"]
    assert out.loc["beach", "status"] == "accepted"
    small = decide(images, cands, RULE, 640, {}, params_reader).set_index("concept")
    assert small.loc["library", "status"] == "accepted"  # 4.8 px capitals at 640: not read
