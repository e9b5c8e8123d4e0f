"""``ocr.precision: int8`` (gavil/models/craft.py): the stored activation scales rebuild the calibrated
detector exactly, the result does not depend on the thread count, it reads what fp32 reads, and
its params and cache label refuse what they cannot honour."""

import json
from pathlib import Path

import pytest
import torch

from gavil.errors import ParamsError
from gavil.io import validate
from gavil.params import parse_params
from gavil.params.ocr import OcrParams
from tests.stages.ocr_filter.test_ocr import READ_WORDS, RULE, reader_set, tables, web_sized


@pytest.fixture(scope="module")
def craft():
    """EasyOCR's CRAFT on the shipped offline weights (fp32, eval)."""
    import easyocr_en_models
    from easyocr.detection import get_detector

    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    return get_detector(str(Path(easyocr_en_models.model_dir()) / "craft_mlt_25k.pth"), device="cpu").eval()


def _inputs(seed: int, n: int, h: int = 96, w: int = 128) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.rand(1, 3, h, w, generator=g) * 4 - 2 for _ in range(n)]


def test_stored_scales_rebuild_the_calibrated_detector(craft):
    """Scales written as JSON and read back give the very model that calibrating in memory gives,
    and scales from other data give another one (the file is what decides)."""
    from torch.ao.quantization.quantize_fx import convert_fx

    from gavil.models.craft import calibrate_int8, prepare_int8, quantize_int8

    calib = _inputs(0, 2)
    prepared = prepare_int8(craft)
    with torch.no_grad():
        for x in calib:
            prepared(x)
        direct = convert_fx(prepared)
        stored = json.loads(json.dumps(calibrate_int8(craft, calib)))  # through JSON, as the file is
        rebuilt = quantize_int8(craft, stored)
        other = quantize_int8(craft, calibrate_int8(craft, [x * 3 for x in calib]))
        x = _inputs(1, 1)[0]
        (a, fa), (b, fb), (c, _) = direct(x), rebuilt(x), other(x)
    assert a.dtype == torch.float32 and torch.equal(a, b) and torch.equal(fa, fb)
    assert not torch.equal(a, c)


def test_shipped_scales_fit_this_torch_and_threads_do_not_change_the_maps(craft):
    """The committed file matches the observers this torch traces (else every int8 run would fail),
    and the int8 maps are the same bytes with 1 and 2 threads (integer accumulation)."""
    from gavil.models.craft import QPARAMS_PATH, quantize_int8

    stored = json.loads(QPARAMS_PATH.read_text())
    assert stored["observers"] and all(q["scale"] > 0 for q in stored["observers"].values())
    net = quantize_int8(craft)
    x = _inputs(2, 1, 160, 224)[0]
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        with torch.no_grad():
            one, _ = net(x)
        torch.set_num_threads(2)
        with torch.no_grad():
            two, _ = net(x)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, two)
    with torch.no_grad():
        ref, _ = craft(x)
    assert float((one - ref).abs().max()) < 0.2  # the same maps, to int8's resolution


def test_scales_for_another_trace_are_refused_with_the_fix(craft):
    from gavil.models.craft import QPARAMS_PATH, quantize_int8

    stored = json.loads(QPARAMS_PATH.read_text())
    name = sorted(stored["observers"])[-1]
    stored["observers"]["activation_post_process_999"] = stored["observers"].pop(name)
    with pytest.raises(RuntimeError, match="recalibrate with `python benchmarks/ocr_int8_calibrate.py`"):
        quantize_int8(craft, stored)


def test_int8_params_resolution_and_cache_label():
    from gavil.models.craft import numerics_label, qparams_digest, resolve_ocr
    from gavil.models.ocr_engine import engine_from_params

    assert resolve_ocr("int8", "auto") == ("int8", "cpu") == resolve_ocr("int8", "cpu")
    with pytest.raises(ParamsError, match="int8 runs on the CPU only|no CUDA device"):
        resolve_ocr("int8", "cuda")
    assert parse_params({"ocr": {"precision": "int8"}}).ocr.precision == "int8"
    with pytest.raises(ParamsError, match="precision"):
        parse_params({"ocr": {"precision": "int4"}})
    label = engine_from_params(OcrParams(engine="easyocr", precision="int8", device="cpu")).label
    assert label.endswith(f"|int8-cpu-q{qparams_digest()}") and len(qparams_digest()) == 8
    assert numerics_label("bf16", "cpu") == "bf16-cpu"  # the other labels are unchanged
    assert label != engine_from_params(OcrParams(engine="easyocr", precision="fp32", device="cpu")).label


@pytest.mark.slow
def test_int8_reads_what_fp32_reads(tmp_path, ocr_reader):
    """Rendered words, two sample photos and a 12 px word on a 1,600 x 1,200 web-sized photo: the
    int8 detector (fp32 recogniser) gives fp32's decisions, with the words read."""
    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr
    from schemas.ocr import Ocr
    from stages.ocr_filter import decide, match_text

    concepts, paths = reader_set(tmp_path)
    arrays = [load_for_ocr(p, 640) for p in paths]
    int8_reader = make_reader(1, "int8", "cpu")
    fp32, int8 = ocr_reader(arrays, 640), int8_reader(arrays, 640)
    for concept, a, b in zip(concepts, fp32, int8):
        assert match_text(concept, a, RULE).rejected == match_text(concept, b, RULE).rejected, (concept, a, b)
    assert sum(match_text(c, d, RULE).rejected for c, d in zip(READ_WORDS, int8)) >= 5  # the words were read

    images, cands = tables(
        {
            "library": [web_sized(tmp_path / "lib.jpg", "beach.png", "library")],
            "beach": [web_sized(tmp_path / "beach.jpg", "beach.png", None)],
        }
    )
    out = validate(decide(images, cands, RULE, 2560, {}, int8_reader), Ocr).set_index("concept")
    assert out.loc["library", "status"] == "rejected_text", out.loc["library", "ocr_text"]
    assert out.loc["beach", "status"] == "accepted"
