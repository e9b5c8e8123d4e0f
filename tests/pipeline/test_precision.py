"""precision (fp32 | bf16 | auto) and device (auto | cpu | cuda): resolution, params, cache keys,
and that bf16 changes no OCR decision and keeps the rival model's rankings."""

from pathlib import Path

import numpy as np
import pytest
import torch

from gavil.errors import ParamsError
from gavil.models.embeddings import Cache
from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
from gavil.models.precision import (
    cpu_native_bf16,
    flags_native_bf16,
    numerics_id,
    resolve,
    resolve_device,
    torch_is_cpu_only,
)
from gavil.params import Params, load_params, parse_params
from gavil.params.models import ModelEntry
from gavil.params.ocr import OcrParams
from gavil.pipeline.registry import STAGES
from tests.helpers import IMAGES, ROOT


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


def test_a_cpu_only_torch_build_is_known_from_its_files(tmp_path, monkeypatch):
    """What the files say is what torch itself says (CUDA and ROCm builds name their version);
    a folder with a GPU library of any platform is no CPU-only build, one without is."""
    assert torch_is_cpu_only() == (torch.version.cuda is None and getattr(torch.version, "hip", None) is None)
    import importlib.util
    from types import SimpleNamespace

    cases = {(): True, ("libtorch_cuda.so",): False, ("libtorch_hip.so",): False, ("torch_cuda.dll",): False}
    for i, (libs, cpu_only) in enumerate(cases.items()):
        (tmp_path / str(i) / "lib").mkdir(parents=True)
        for name in ("libtorch_cpu.so", *libs):
            (tmp_path / str(i) / "lib" / name).write_bytes(b"")
        fake = SimpleNamespace(submodule_search_locations=[str(tmp_path / str(i))])
        monkeypatch.setattr(importlib.util, "find_spec", lambda name, f=fake: f)
        torch_is_cpu_only.cache_clear()
        assert torch_is_cpu_only() is cpu_only, libs
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    torch_is_cpu_only.cache_clear()
    assert torch_is_cpu_only() is False  # not found: ask torch
    monkeypatch.undo()
    torch_is_cpu_only.cache_clear()


@pytest.mark.skipif(not torch_is_cpu_only(), reason="needs a CPU-only torch build")
def test_a_text_model_whose_vectors_are_cached_never_imports_torch(tmp_path):
    """A stage whose text vectors are all in a cache loads its text model, keys and looks them up
    without importing torch or sentence-transformers (0.9 and 5 CPU-s of its start)."""
    code = (
        "import sys, numpy as np\n"
        "from gavil.models.embeddings import Cache\n"
        "from gavil.models.loading import ModelSpec, RuntimeOptions, load_model\n"
        "m = load_model(ModelSpec('t', 'text', 'all-MiniLM-L6-v2'), RuntimeOptions(device='auto', threads=1))\n"
        "c = Cache([], sys.argv[1])\n"
        "c.add_rows([{'model': m.spec.model, 'weights_id': c.full_key(m.cache_key('text'))[1], 'kind': 'text',"
        " 'key': 'moon', 'dim': 2, 'vector': np.ones(2, '<f4').tobytes()}])\n"
        "got = c.ensure(m.cache_key('text'), {'moon': 'moon'}, m.embed_texts)\n"
        "print(m.numerics, got['moon'].tolist(), [x for x in ('torch', 'sentence_transformers') if x in sys.modules])\n"
    )
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.parquet")], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fp64-cpu", "[1.0,", "1.0]", "[]"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_a_gpu_is_a_params_error():
    with pytest.raises(ParamsError, match="no CUDA device"):
        resolve_device("cuda")


def test_params_defaults_and_refusals():
    p = Params()
    assert (p.ocr.precision, p.ocr.device) == ("fp32", "auto")  # readtext's numerics: misses nothing it reads
    rival = p.models[p.score.model]
    assert (rival.precision, rival.device) == ("fp32", "auto")  # the rival defines the benchmark
    for name in p.evaluate.models:
        assert (p.models[name].precision, p.models[name].device) == ("fp32", "auto")
    with pytest.raises(ParamsError, match="precision"):
        parse_params({"ocr": {"precision": "fp16"}})
    with pytest.raises(ParamsError, match=r"models\.rival\.device"):
        Params().replace(models={"rival": {"device": "gpu"}})
    # numerics change outputs: they are dvc params, not runtime knobs
    for keys in (OcrParams.output_keys(), ModelEntry.output_keys()):
        assert "precision" in keys and "device" in keys


def _params_naming(p: Params, name: str) -> set[str]:
    """The stages whose dvc.yaml params hold ``models.<name>.precision``."""
    return {s.name for s in STAGES if f"models.{name}.precision" in s.param_keys(p)}


def test_each_model_setting_is_a_param_of_exactly_the_stages_that_use_the_model():
    """The numerics a stage embeds at are its own model entry's: the shipped rival's precision is a
    param of the stages that run the rival and of no other (evaluate runs its own clip-rn50 entry;
    safety_score runs the rival when review.safety is on)."""
    p = load_params(ROOT / "params.yaml")
    assert _params_naming(p, "rival") == {"score_candidates", "adversarial_filter", "safety_score"}
    assert _params_naming(p, "clip-rn50") == {"evaluate"}
    device = {s.name for s in STAGES if "models.text-minilm-l6.device" in s.param_keys(p)}
    assert device == {"adversarial_filter", "aflite", "evaluate"}
    export = next(s for s in STAGES if s.name == "export").param_keys(p)  # the dataset card names the rival
    assert [k for k in export if k.startswith("models.")] == ["models.rival.model", "models.rival.pretrained"]


def test_aflite_can_run_bf16_without_touching_the_rivals_scores():
    """aflite names its own entry: giving it a bf16 model changes aflite's params and runtime options,
    while score_candidates' params and the rival's numerics stay as they were."""
    shipped = load_params(ROOT / "params.yaml")
    bf16 = shipped.replace(
        models={"clip-bf16": {"kind": "open_clip", "model": "RN50", "pretrained": "openai", "precision": "bf16"}},
        aflite={"model": "clip-bf16"},
    )
    by_name = {s.name: s for s in STAGES}
    assert "models.clip-bf16.precision" in by_name["aflite"].param_keys(bf16)
    assert "models.text-minilm-l6.kind" not in by_name["aflite"].param_keys(bf16)
    for name in ("score_candidates", "adversarial_filter", "evaluate", "export"):
        assert by_name[name].param_keys(bf16) == by_name[name].param_keys(shipped), name
    assert RuntimeOptions.of(bf16.models[bf16.aflite.model]).precision == "bf16"
    assert RuntimeOptions.of(bf16.models[bf16.score.model]).precision == "fp32"


def test_a_reference_to_an_unknown_model_names_the_entries():
    with pytest.raises(ParamsError) as e:
        parse_params({"aflite": {"model": "text-minilm"}})
    assert "aflite.model" in str(e.value) and "did you mean text-minilm-l6?" in str(e.value)
    assert "rival, clip-rn50" in str(e.value) and len(str(e.value).splitlines()) == 1
    with pytest.raises(ParamsError, match=r"score\.model: models\.text-mpnet is kind text; it must be kind: open_clip"):
        parse_params({"score": {"model": "text-mpnet"}})


def test_ocr_cache_engine_names_the_numerics():
    from gavil.models.ocr_engine import engine_from_params

    fp32 = engine_from_params(OcrParams(engine="easyocr", precision="fp32", device="cpu")).label
    bf16 = engine_from_params(OcrParams(engine="easyocr", precision="bf16", device="cpu")).label
    assert fp32.endswith("|fp32-cpu") and bf16.endswith("|bf16-cpu") and fp32 != bf16


def test_batch_norm_folding_keeps_craft_outputs():
    """fold_batch_norm on EasyOCR's real CRAFT (shipped weights): no BatchNorm left, same maps (fp32)."""
    import copy

    import easyocr_en_models
    from easyocr.detection import get_detector

    from gavil.compat.torchvision_bridge import ensure_torchvision
    from gavil.models.craft import fold_batch_norm

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
    from gavil.models.easyocr_reader import make_reader
    from gavil.models.ocr_engine import load_for_ocr
    from stages.ocr_filter import MatchRule, match_text
    from tests.stages.ocr_filter.test_ocr import READ_WORDS, reader_set

    rule = MatchRule(match_threshold=80, min_confidence=0.3, min_word_len=4)
    concepts, paths = reader_set(tmp_path)
    arrays = [load_for_ocr(p, 640) for p in paths]
    fp32 = ocr_reader(arrays, 640)
    bf16 = make_reader(8, "bf16", "cpu")(arrays, 640)
    for concept, a, b in zip(concepts, fp32, bf16):
        assert [t for t, _ in a] == [t for t, _ in b], concept
        assert np.allclose([c for _, c in a], [c for _, c in b], atol=0.05), concept
        assert match_text(concept, a, rule).rejected == match_text(concept, b, rule).rejected
    assert sum(match_text(c, d, rule).rejected for c, d in zip(READ_WORDS, bf16)) >= 5  # the words were read


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
