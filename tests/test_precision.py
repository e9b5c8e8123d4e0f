"""precision (fp32 | bf16 | auto) and device (auto | cpu | cuda): resolution, params, cache keys,
and that bf16 changes no OCR decision and keeps the rival model's rankings."""

from pathlib import Path

import numpy as np
import pytest
import torch

from gavil.errors import ParamsError
from gavil.models.embeddings import Cache
from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
from gavil.models.precision import cpu_native_bf16, flags_native_bf16, numerics_id, resolve, resolve_device
from gavil.params import OcrParams, Params, parse_params
from tests.helpers import IMAGES


def test_cpu_flags_decide_native_bf16():
    assert flags_native_bf16("processor\t: 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile\n")
    assert flags_native_bf16("flags\t\t: fpu amx_bf16 amx_tile\n")
    assert not flags_native_bf16("flags\t\t: fpu sse avx2 avx512f avx512bw\nbugs\t\t: avx512_bf16\n")
    assert not flags_native_bf16("")


def test_auto_resolves_to_what_the_hardware_runs_natively():
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto") == dev and resolve_device("cpu") == "cpu"
    native = torch.cuda.is_bf16_supported() if dev == "cuda" else cpu_native_bf16()
    assert resolve("auto", "auto") == ("bf16" if native else "fp32", dev)
    assert resolve("fp32", "cpu") == ("fp32", "cpu") and resolve("bf16", "cpu") == ("bf16", "cpu")
    assert numerics_id(*resolve("bf16", "cpu")) == "bf16-cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_a_params_error():
    with pytest.raises(ParamsError, match="no CUDA device"):
        resolve_device("cuda")


def test_params_defaults_and_refusals():
    p = Params()
    assert (p.ocr.precision, p.ocr.device) == ("auto", "auto")  # the 200-image benchmark agreed
    assert (p.score.precision, p.score.device) == ("fp32", "auto")  # the rival defines the benchmark
    assert (p.evaluate.precision, p.evaluate.device) == ("fp32", "auto")
    with pytest.raises(ParamsError, match="precision"):
        parse_params({"ocr": {"precision": "fp16"}})
    with pytest.raises(ParamsError, match="device"):
        parse_params({"score": {"device": "gpu"}})
    # numerics change outputs: they are dvc params, not runtime knobs
    for section in ("ocr", "score", "evaluate"):
        keys = type(getattr(p, section)).output_keys()
        assert "precision" in keys and "device" in keys


def test_every_stage_that_embeds_lists_the_numerics_it_embeds_at():
    """A stage whose outputs hold model embeddings re-runs when the precision or device they were
    computed at changes: both keys of the section that gives its runtime options their numerics
    (``RuntimeOptions.from_params``'s last argument) are DVC params."""
    import ast
    import inspect

    from gavil.pipeline import registry as pipeline

    for spec in pipeline.STAGES:
        module = __import__(f"stages.{spec.name}", fromlist=["_"])
        tree = ast.parse(inspect.getsource(module))
        sections = {  # RuntimeOptions.from_params(params.score[, params.<numerics>]): the last one's numerics
            node.args[-1].attr
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "from_params"
            and getattr(node.func.value, "id", None) == "RuntimeOptions"
            and node.args
            and isinstance(node.args[-1], ast.Attribute)
            and getattr(node.args[-1].value, "id", None) == "params"
        }
        for section in sections:
            for key in ("precision", "device"):
                assert f"{section}.{key}" in spec.param_keys, (spec.name, f"{section}.{key}")


def test_ocr_cache_engine_names_the_numerics():
    from stages.ocr_filter import _engine

    fp32 = _engine(OcrParams(precision="fp32", device="cpu"))
    bf16 = _engine(OcrParams(precision="bf16", device="cpu"))
    assert fp32.endswith("|fp32-cpu") and bf16.endswith("|bf16-cpu") and fp32 != bf16


def test_batch_norm_folding_keeps_craft_outputs():
    """fold_batch_norm on EasyOCR's real CRAFT (shipped weights): no BatchNorm left, same maps (fp32)."""
    import copy

    import easyocr_en_models
    from easyocr.detection import get_detector

    from gavil.models.torchvision_compat import ensure_torchvision
    from stages.ocr_filter import fold_batch_norm

    ensure_torchvision()
    net = get_detector(str(Path(easyocr_en_models.model_dir()) / "craft_mlt_25k.pth"), device="cpu").eval()
    folded = fold_batch_norm(copy.deepcopy(net))
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in net.modules()) > 10
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())
    x = torch.rand(1, 3, 96, 128, generator=torch.Generator().manual_seed(0)) * 4 - 2
    with torch.inference_mode():
        (a, fa), (b, fb) = net(x), folded(x)
    assert torch.allclose(a, b, atol=1e-4) and torch.allclose(fa, fb, atol=1e-3)
    # a training-mode BatchNorm is not folded (its statistics are not fixed yet)
    train = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    wrapped = torch.nn.Module()
    wrapped.body = train
    assert isinstance(fold_batch_norm(wrapped).body[1], torch.nn.BatchNorm2d)


@pytest.mark.slow
def test_bf16_ocr_decides_like_fp32(tmp_path, ocr_reader):
    """bf16 CRAFT (channels-last), fp32 recogniser: same text, near confidences, same decisions as fp32."""
    from PIL import Image, ImageDraw, ImageFont

    from stages.ocr_filter import MatchRule, load_for_ocr, make_reader, match_text

    rule = MatchRule(match_threshold=80, min_confidence=0.3, min_word_len=4)

    def render(word, path):  # as tests/test_ocr.py renders its words
        im = Image.new("RGB", (400, 300), "white")
        ImageDraw.Draw(im).text((20, 110), word, fill="black", font=ImageFont.load_default(size=64))
        im.save(path)
        return str(path)

    words = ["LIBRARY", "brary", "fast food", "MOON", "rocket", "Coffee", "pages", "zebra"]
    paths = [render(w, tmp_path / f"w{i}.png") for i, w in enumerate(words)]
    paths += [str(IMAGES / "cat.png"), str(IMAGES / "rocket.jpg")]
    arrays = [load_for_ocr(p, 640) for p in paths]
    fp32 = ocr_reader(arrays, 640)
    bf16 = make_reader(8, "bf16", "cpu")(arrays, 640)
    for concept, a, b in zip(words + ["cat", "rocket"], fp32, bf16):
        assert [t for t, _ in a] == [t for t, _ in b], concept
        assert np.allclose([c for _, c in a], [c for _, c in b], atol=0.05), concept
        assert match_text(concept, a, rule).rejected == match_text(concept, b, rule).rejected
    assert sum(match_text(c, d, rule).rejected for c, d in zip(words, bf16)) >= 5  # the words were read


@pytest.mark.slow
def test_bf16_embeddings_are_cached_apart_and_rank_like_fp32():
    """RN50 with random weights (untrained): bf16 + channels-last vs fp32 - separate cache entries,
    cosine between the two embeddings of an image near 1."""
    spec = ModelSpec("r", "open_clip", "RN50", None)
    imgs = {n: str(IMAGES / n) for n in ("cat.png", "rocket.jpg", "moon.png")}
    cache = Cache([], None)
    fp32 = load_model(spec, RuntimeOptions(batch_size=3, threads=2, precision="fp32", device="cpu"))
    a = cache.ensure(fp32.cache_key("image"), imgs, fp32.embed_images)
    bf16 = load_model(spec, RuntimeOptions(batch_size=3, threads=2, precision="bf16", device="cpu"))
    assert fp32.cache_key("image") == ("RN50", "untrained|fp32-cpu", "image")
    assert bf16.cache_key("image") == ("RN50", "untrained|bf16-cpu", "image")
    b = cache.ensure(bf16.cache_key("image"), imgs, bf16.embed_images)
    assert cache.computed == 6 and cache.hits == 0  # bf16 did not reuse the fp32 vectors
    cos = [float(a[k] @ b[k]) for k in imgs]
    assert min(cos) > 0.99 and not all(np.array_equal(a[k], b[k]) for k in imgs)
    t = bf16.embed_texts(["A cat"])
    assert t.dtype == np.float32 and np.isclose(np.linalg.norm(t), 1, atol=1e-5)
