"""OCR text-image rejection: the rule on hand-made readings, and real EasyOCR (offline weights)."""

import pandas as pd
import pytest
from PIL import Image, ImageDraw, ImageFont

from schemas.ocr import Ocr
from stages._io import validate
from stages.ocr_filter import MatchRule, match_text, ocr_filter, targets
from tests.conftest import IMAGES

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


@pytest.mark.slow
def test_easyocr_rejects_rendered_library_and_keeps_photos(tmp_path, ocr_reader):
    images = pd.DataFrame(
        {
            "concept": ["library", "cat", "moon", "unicorn"],
            "status": ["ok", "ok", "ok", "no_results"],
            "reason": [None, None, None, "no local result"],
            "sha256": ["a" * 64, "b" * 64, "c" * 64, None],
            "path": [render("LIBRARY", tmp_path / "lib.png"), str(IMAGES / "cat.png"), render("BRARY", tmp_path / "brary.png"), None],
        }
    )
    # moon's image reads "BRARY": unrelated text is not a reason to reject
    out = validate(ocr_filter(images, ocr_reader, RULE, canvas_size=640), Ocr).set_index("concept")
    assert out.loc["library", "status"] == "rejected_text"
    assert out.loc["library", "match_token"] == "library" and out.loc["library", "ocr_confidence"] > 0.5
    assert "LIBRARY" in out.loc["library", "ocr_text"].upper()
    assert out.loc["cat", "status"] == "accepted" and pd.isna(out.loc["cat", "reason"])
    assert out.loc["moon", "status"] == "accepted" and "BRARY" in out.loc["moon", "ocr_text"].upper()
    assert out.loc["unicorn", "status"] == "no_image" and "no_results" in out.loc["unicorn", "reason"]


@pytest.mark.slow
def test_easyocr_brary_image_is_rejected_for_library(tmp_path, ocr_reader):
    images = pd.DataFrame({"concept": ["library"], "status": ["ok"], "reason": [None], "sha256": ["d" * 64], "path": [render("brary", tmp_path / "b.png")]})
    out = ocr_filter(images, ocr_reader, RULE, canvas_size=640)
    assert out.loc[0, "status"] == "rejected_text" and "brary" in out.loc[0, "reason"]


def test_detections_are_cached_by_image_and_canvas(tmp_path):
    from stages.ocr_filter import load_cache, save_cache

    images = pd.DataFrame({"concept": ["library", "cat"], "status": ["ok", "ok"], "reason": [None, None],
                           "sha256": ["a" * 64, "b" * 64], "path": [render("LIBRARY", tmp_path / "l.png"), str(IMAGES / "cat.png")]})  # fmt: skip
    calls = []

    def fake_read(image, canvas):
        calls.append(image.shape)
        return [("LIBRARY", 0.99)] if len(calls) == 1 else []

    cache: dict = {}
    first = ocr_filter(images, fake_read, RULE, 320, cache)
    assert len(calls) == 2 and max(calls[0][:2]) <= 320  # downscaled to the canvas before OCR
    assert first.set_index("concept").loc["library", "status"] == "rejected_text"
    path = str(tmp_path / "cache.parquet")
    save_cache(path, "engine-x", cache, load_cache(path, "engine-x")[1])
    cache2, _ = load_cache(path, "engine-x")
    strict = MatchRule(match_threshold=101, min_confidence=0.3, min_word_len=4)  # a rule change: no re-OCR
    second = ocr_filter(images, lambda im, c: pytest.fail("should come from the cache"), strict, 320, cache2)
    assert second.set_index("concept").loc["library", "status"] == "accepted"
    assert load_cache(path, "engine-y")[0] == {}  # another OCR engine does not reuse these
    calls.clear()
    ocr_filter(images, fake_read, RULE, 640, cache2)  # another canvas size is another reading
    assert len(calls) == 2
