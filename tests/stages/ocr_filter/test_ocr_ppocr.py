"""``ocr.engine: ppocr`` (gavil/models/ppocr.py), the default OCR engine: it reads a drawn word on a
web-sized photo, rejects a word its reader splits in two tokens, keeps text-free photos, reads the
same for 1 and 2 threads, any batch size and row order, and the ``easyocr`` switch still runs
EasyOCR's computation."""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from PIL import Image, ImageDraw, ImageFont

from gavil.errors import ParamsError
from gavil.io import validate
from gavil.models.ocr_engine import engine_from_params, load_for_ocr
from gavil.params import parse_params
from gavil.params.ocr import OcrParams
from schemas.ocr import Ocr
from stages.ocr_filter import MatchRule, _rule, decide, match_text
from tests.helpers import IMAGES
from tests.stages.ocr_filter.test_ocr import tables

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    try:
        return ImageFont.truetype(FONT, size)
    except OSError:  # no DejaVu on this machine: Pillow's own scalable font
        return ImageFont.load_default(size=size)


def photo_with(path, photo: str, words: list[tuple[str, int]] | None, size=(1200, 900), cap: int = 40) -> str:
    """A sample photo at web size (JPEG), with ``words`` [(text, x)] drawn in white on a dark strip
    (capitals ~``cap`` px), or none."""
    im = Image.open(IMAGES / photo).convert("RGB").resize(size, Image.Resampling.BICUBIC)
    if words:
        draw = ImageDraw.Draw(im)
        font = _font(int(cap * 1.38))
        y = size[1] // 2
        draw.rectangle((0, y - cap // 2, size[0], y + 2 * cap), fill=(25, 25, 30))
        for text, x in words:
            draw.text((x, y), text, fill=(245, 245, 245), font=font)
    im.save(path, quality=88)
    return str(path)


@pytest.fixture(scope="module")
def pp_params() -> OcrParams:
    return OcrParams()


@pytest.fixture(scope="module")
def pp_read(pp_params):
    """The stage's reader at the default params (engine ppocr)."""
    assert pp_params.engine == "ppocr"
    return engine_from_params(pp_params).read


def test_ppocr_is_the_default_engine_and_refuses_cuda():
    assert OcrParams().engine == "ppocr"
    label = engine_from_params(OcrParams()).label
    assert label.startswith("ppocr-rapidocr-")
    other = engine_from_params(OcrParams(engine="ppocr", ppocr_min_side=512)).label
    assert other != label  # a setting is a new reading
    with pytest.raises(ParamsError, match="ocr.engine: easyocr"):  # when the params load, not when the stage runs
        parse_params({"ocr": {"device": "cuda"}})


@pytest.mark.parametrize(
    ("h", "w", "max_side", "want"),
    [
        (1200, 1600, 960, (704, 960)),  # a web photo: long side capped (720 rounds half to even: 704)
        (300, 400, 960, (704, 960)),  # small: scaled up until the cap (x2.4)
        (300, 400, None, (736, 992)),  # no cap: short side to 736 (the whole canvas's rule)
        (1200, 1600, None, (1216, 1600)),  # no cap: a large image is read whole
        (800, 600, 640, (640, 480)),  # a lower cap bounds the long side, portrait too
        (100, 3000, 960, (32, 960)),  # a banner: the cap wins over the short side
    ],
)
def test_the_detector_sees_a_bounded_size(h, w, max_side, want):
    """:func:`gavil.models.ppocr.detector_scale`: up to ``ppocr_min_side`` on the short side, never
    past ``ppocr_max_side`` on the long side, then each side rounded to a multiple of 32 as RapidOCR does."""
    from gavil.models.ppocr import detector_scale

    r = detector_scale(h, w, 736, max_side)
    assert (int(round(int(h * r) / 32) * 32), int(round(int(w * r) / 32) * 32)) == want


def test_the_detector_cap_changes_the_engine_label_and_the_reader_uses_it(monkeypatch):
    """The cap is in the cache label (a new setting is a new reading) and reaches RapidOCR's detector."""
    from gavil.models import ppocr

    capped = engine_from_params(OcrParams(engine="ppocr")).label
    whole = engine_from_params(OcrParams(engine="ppocr", ppocr_max_side=None)).label
    assert capped.endswith("-max800") and not whole.endswith("-max800")
    seen = []
    real = ppocr.detector_scale
    monkeypatch.setattr(ppocr, "detector_scale", lambda *a: seen.append(a) or real(*a))
    read = ppocr.make_reader(736, threads=1, max_side=640)
    read([np.full((600, 800, 4), 255, dtype=np.uint8)], 2560)
    assert seen == [(600, 800, 736, 640)]


def test_our_onnx_sessions_sleep_instead_of_spinning():
    """Sessions made for the reader are told not to spin; RapidOCR's own builder is restored after."""
    from omegaconf import OmegaConf
    from rapidocr.inference_engine.onnxruntime.main import OrtInferSession

    from gavil.models.ppocr import _no_spinning

    cfg = OmegaConf.create({"enable_cpu_mem_arena": False, "intra_op_num_threads": 1, "inter_op_num_threads": 1})
    before = OrtInferSession._init_sess_opts
    with _no_spinning():
        opts = OrtInferSession._init_sess_opts(cfg)
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert OrtInferSession._init_sess_opts is before or OrtInferSession._init_sess_opts == before
    plain = OrtInferSession._init_sess_opts(cfg)
    with pytest.raises(Exception, match="allow_spinning"):  # not set: ONNX Runtime's default (spin)
        plain.get_session_config_entry("session.intra_op.allow_spinning")


def test_rule_joins_a_word_read_as_two_tokens():
    join = MatchRule(join_tokens=1)
    assert match_text("lobster", [("LOBS", 0.9), ("TER", 0.95)], join).rejected
    assert match_text("lobster", [("LOBS TER", 0.9)], join).rejected
    assert not match_text("lobster", [("LOBS", 0.9), ("TER", 0.95)], MatchRule(join_tokens=0)).rejected
    assert not match_text("lobster", [("LOBS", 0.9), ("TER", 0.1)], join).rejected  # below min confidence
    assert not match_text("castle", [("FRESH", 0.99), ("BREAD", 0.99)], join).rejected  # unrelated words stay unrelated
    assert match_text("fast food", [("FAST", 0.9), ("FO", 0.9), ("OD", 0.9)], join).rejected  # n words + 1


def test_ppocr_reads_a_drawn_word_and_keeps_a_text_free_photo(tmp_path, pp_params, pp_read):
    images, cands = tables(
        {
            "library": [photo_with(tmp_path / "lib.jpg", "beach.png", [("LIBRARY", 300)])],
            "beach": [photo_with(tmp_path / "beach.jpg", "beach.png", None)],
            "cat": [photo_with(tmp_path / "cat.jpg", "cat.png", None, size=(900, 1200))],
            "castle": [photo_with(tmp_path / "sign.jpg", "brick.png", [("FRESH BREAD", 200)])],
        }
    )
    out = validate(decide(images, cands, _rule(pp_params), pp_params.canvas_size, {}, pp_read), Ocr)
    out = out.set_index("concept")
    assert out.loc["library", "status"] == "rejected_text", out.loc["library", "ocr_text"]
    assert out.loc["library", "match_token"] == "library"
    assert out.loc["beach", "status"] == "accepted" and out.loc["cat", "status"] == "accepted"
    assert out.loc["castle", "status"] == "accepted" and "BREAD" in out.loc["castle", "ocr_text"].upper()


def test_ppocr_rejects_its_own_word_split_in_two_tokens(tmp_path, pp_params, pp_read):
    """A word drawn in two parts ("LOBS" and "TER" a gap apart) is read as two tokens; the default
    rule (``ocr.join_tokens: 1``) still rejects the image, the one-token rule does not."""
    path = photo_with(tmp_path / "lobster.jpg", "beach.png", [("LOBS", 250), ("TER", 470)])
    dets = pp_read([load_for_ocr(path, pp_params.canvas_size)], pp_params.canvas_size)[0]
    tokens = [t.lower() for text, _ in dets for t in text.split()]
    assert "lobster" not in tokens and {"lobs", "ter"} <= set(tokens), dets  # two tokens indeed
    images, cands = tables({"lobster": [path]})
    out = decide(images, cands, _rule(pp_params), pp_params.canvas_size, {}, pp_read)
    assert out.loc[0, "status"] == "rejected_text" and out.loc[0, "match_token"] == "lobster"
    one_token = decide(images, cands, MatchRule(join_tokens=0), pp_params.canvas_size, {}, pp_read)
    assert one_token.loc[0, "status"] == "accepted"


def _mixed_set(tmp_path) -> dict[str, list[str]]:
    rng = random.Random(3)
    words = ["rocket", "garden", "candle", "violin", "mirror"]
    photos = ["beach.png", "cat.png", "brick.png", "rocket.jpg", "coffee.png"]
    cands: dict[str, list[str]] = {}
    for i, (w, ph) in enumerate(zip(words, photos)):
        cap = rng.choice((14, 22, 40))
        cands[w] = [photo_with(tmp_path / f"w{i}.jpg", ph, [(w.upper(), 120 + 40 * i)], cap=cap)]
        cands[f"free{i}"] = [photo_with(tmp_path / f"f{i}.jpg", ph, None, size=(800 + 60 * i, 600))]
    return cands


@pytest.mark.slow
def test_ppocr_reads_the_same_for_1_and_2_threads_any_batch_size_and_row_order(tmp_path, pp_params):
    """Texts and confidences (rounded to gavil.models.ppocr.CONFIDENCE_DIGITS) are equal for 1 and 2
    ONNX Runtime threads; decide() gives the same table for batch sizes 1 and 4 and shuffled rows."""
    from gavil.models.ppocr import make_reader

    cands = _mixed_set(tmp_path)
    arrays = [load_for_ocr(p[0], pp_params.canvas_size) for p in cands.values()]
    one = make_reader(pp_params.ppocr_min_side, threads=1)(arrays, pp_params.canvas_size)
    two = make_reader(pp_params.ppocr_min_side, threads=2)(arrays, pp_params.canvas_size)
    assert one == two
    assert sum(bool(d) for d in one) >= 5  # the words were read
    assert all(round(c, 3) == c for d in one for _, c in d)

    rule = _rule(pp_params)
    images, table = tables(cands)
    a = decide(images, table, rule, pp_params.canvas_size, {}, engine_from_params(pp_params).read, batch_size=1)
    order = np.random.default_rng(0).permutation(len(images))
    p4 = pp_params.model_copy(update={"threads": 1})
    b = decide(
        images.iloc[order].reset_index(drop=True),
        table.sample(frac=1, random_state=1),
        rule,
        pp_params.canvas_size,
        {},
        engine_from_params(p4).read,
        batch_size=4,
    )
    key = ["concept"]
    pd.testing.assert_frame_equal(a.sort_values(key).reset_index(drop=True), b.sort_values(key).reset_index(drop=True))
    assert (
        a.set_index("concept").loc[["rocket", "garden", "candle", "violin", "mirror"], "status"] == "rejected_text"
    ).sum() >= 4


@pytest.mark.slow
def test_the_easyocr_switch_runs_easyocr_as_before(tmp_path, ocr_reader):
    """``ocr.engine: easyocr``: the stage's reader is EasyOCR's (the very detections of
    :func:`gavil.models.easyocr_reader.make_reader`), its cache label is EasyOCR's, and it rejects the word."""
    p = OcrParams(engine="easyocr", canvas_size=640)
    engine = engine_from_params(p)
    assert engine.label.startswith("easyocr-") and "|fp32-" in engine.label
    path = photo_with(tmp_path / "lib.jpg", "beach.png", [("LIBRARY", 300)], size=(640, 480))
    arr = load_for_ocr(path, 640)
    got = engine.read([arr], 640)[0]
    assert got == ocr_reader([arr], 640)[0]
    images, cands = tables({"library": [path]})
    out = decide(images, cands, _rule(p), 640, {}, engine.read)
    assert out.loc[0, "status"] == "rejected_text"
