"""score_candidates: predictions from embeddings, the cache, no-weights behaviour, weight resolution."""

import numpy as np
import pandas as pd
import pytest

from gavil.domain.winogavil import top_k
from gavil.errors import ParamsError
from gavil.io import validate
from gavil.models.canonical import CLIP_ROWS
from gavil.models.embeddings import Cache, predict, score_instances
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.params import Params, parse_params
from gavil.params.models import ModelEntry
from schemas.scores import Scores
from stages.score_candidates import with_model_columns

INSTANCES = pd.DataFrame(
    {
        "instance_id": ["swow:space", "swow:ocean", "swow:night"],
        "cue": ["space", "ocean", "night"],
        "candidates": [
            ["rocket", "cat", "moon", "coffee", "brick"],
            ["rocket", "cat", "moon", "coffee", "brick"],
            ["moon", "star", "cat", "unicorn", "brick"],
        ],
        "associations": [["rocket", "moon"], ["cat", "brick"], ["moon", "star"]],
    }
)
IMAGES = {c: (f"{c:0>64}"[-64:], f"/imgs/{c}.png") for c in ["rocket", "cat", "moon", "coffee", "brick", "star"]}
# hand-made unit embeddings: "A space" is closest to moon (0.98), then rocket (0.90); "An ocean" ties everywhere
VEC = {
    "rocket": [1, 0, 0],
    "moon": [0.8, 0.6, 0],
    "cat": [0, 1, 0],
    "coffee": [0, 0, 1],
    "brick": [0, 0.6, 0.8],
    "star": [0.6, 0.8, 0],
    "A space": [0.9, 0.436, 0],
    "An ocean": [0, 0, 0],
}
SPEC = ModelSpec("rival:RN50", "open_clip", "RN50", "openai")


def fake_model(untrained=False, calls=None):
    def emb(keys):
        if calls is not None:
            calls.append(list(keys))
        return np.array([VEC[k.rsplit("/", 1)[-1].removesuffix(".png")] for k in keys], dtype=np.float32)

    return LoadedModel(SPEC, "untrained" if untrained else "openai", untrained, emb, emb)


def scored(model, cache=None):
    df = score_instances(
        INSTANCES,
        model,
        IMAGES,
        cache if cache is not None else Cache([], None),
        "no cached weights; set models.rival.weights_path",
    )
    return validate(with_model_columns(df, SPEC, model.weights_id if model else "openai"), Scores).set_index(
        "instance_id"
    )


def test_predictions_jaccard_and_fool_score():
    out = scored(fake_model())
    space = out.loc["swow:space"]
    assert space["prompt"] == "A space" and space["predictions"] == ["moon", "rocket"]  # 0.98, 0.90
    assert space["jaccard"] == 1.0 and space["score_fool_the_ai"] == 0 and space["status"] == "ok"
    ocean = out.loc["swow:ocean"]  # all similarities tie at 0: stable order picks the first K
    assert ocean["prompt"] == "An ocean" and ocean["predictions"] == ["rocket", "cat"]
    assert ocean["jaccard"] == pytest.approx(1 / 3) and ocean["score_fool_the_ai"] == 67
    night = out.loc["swow:night"]
    assert night["status"] == "missing_image" and "unicorn" in night["reason"] and pd.isna(night["jaccard"])


def test_untrained_rows_say_so():
    out = scored(fake_model(untrained=True))
    assert out.loc["swow:space", "status"] == "untrained" and out.loc["swow:space", "pretrained"] == "untrained"
    assert "random weights" in out.loc["swow:space", "reason"]


def test_no_weights_rows_invent_nothing():
    out = scored(None)
    assert (out["status"] == "no_weights").all()
    assert out["jaccard"].isna().all() and out["score_fool_the_ai"].isna().all() and out["predictions"].isna().all()
    assert out["reason"].str.contains("models.rival.weights_path").all()


def test_schema_refuses_made_up_scores():
    df = with_model_columns(score_instances(INSTANCES[:1], None, IMAGES, Cache([], None), "none"), SPEC, "openai")
    df.loc[0, "jaccard"] = 0.5
    with pytest.raises(Exception, match="scores only where a model ran"):
        validate(df, Scores)


def test_cache_embeds_each_image_and_prompt_once(tmp_path):
    path = tmp_path / "cache.parquet"
    calls: list = []
    cache = Cache([], path)
    scored(fake_model(calls=calls), cache)
    assert sorted(len(c) for c in calls) == [2, 5]  # 5 distinct images, 2 prompts (night is missing an image)
    cache.save()
    calls.clear()
    again = Cache([], path)
    out = scored(fake_model(calls=calls), again)
    assert calls == [] and again.hits == 7 and again.computed == 0 and len(again) == 7  # pure lookup
    assert out.loc["swow:space", "predictions"] == ["moon", "rocket"]
    # another stage reading this cache read-only embeds only what is new
    calls.clear()
    layered = Cache([path], tmp_path / "other.parquet")
    more = INSTANCES.assign(cue=["space", "galaxy", "night"])
    VEC["A galaxy"] = [0.7, 0.7, 0.14]
    score_instances(more, fake_model(calls=calls), IMAGES, layered)
    assert calls == [["A galaxy"]]
    assert layered.save() == 1


def test_vectorised_predict_matches_the_reference_rule():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    vecs = {w: v / np.linalg.norm(v) for w, v in zip(words, rng.normal(size=(40, 8)).astype(np.float32))}
    vecs["tie"] = vecs["w0"]  # a duplicate vector: an exact tie
    cands, queries, ks = [], [], []
    for i in range(300):
        n = [5, 6, 10, 12][i % 4]
        cs = list(rng.choice(words, size=n, replace=False))
        if i % 7 == 0:
            cs[-1] = "tie"
            cs[0] = "w0"
        cands.append(cs)
        queries.append(words[i % 40])
        ks.append(2 + i % 3)
    picks, sims = predict(cands, queries, ks, vecs, vecs, chunk=17)
    for cs, q, k, pick, s in zip(cands, queries, ks, picks, sims):
        ref = top_k(cs, [float(np.dot(vecs[q], vecs[c])) for c in cs], k)
        assert [cs[i] for i in pick] == ref
        assert len(s) == len(cs)


P = RuntimeOptions(cache_dir=None, allow_download=False, batch_size=8, threads=1, loader_workers=0)


def test_no_cache_no_download_is_actionable(tmp_path):
    with pytest.raises(WeightsUnavailable, match="weights_path"):
        load_model(SPEC, RuntimeOptions(cache_dir=str(tmp_path), allow_download=False))


def test_known_pretrained_is_open_clips_own_config_for_every_own_entry():
    """The table that spares a stage open_clip's import says what open_clip says, and covers every
    open_clip entry of the project's params.yaml (a new one must be added, or it pays the import)."""
    import open_clip

    from gavil.models.loading import pretrained_cfg
    from gavil.models.weights import KNOWN_PRETRAINED
    from gavil.params import load_params
    from tests.helpers import ROOT

    for (model, tag), known in KNOWN_PRETRAINED.items():
        assert model in open_clip.list_models()
        cfg = open_clip.get_pretrained_cfg(model, tag)
        assert {k: cfg.get(k, False if k == "quick_gelu" else "") for k in known} == known, (model, tag)
        assert pretrained_cfg(model, tag) == known
    own = {
        (e.model, e.pretrained) for e in load_params(ROOT / "params.yaml").models.root.values() if e.kind == "open_clip"
    }
    assert own and own <= set(KNOWN_PRETRAINED), own - set(KNOWN_PRETRAINED)
    assert pretrained_cfg("RN50", "yfcc15m") == dict(open_clip.get_pretrained_cfg("RN50", "yfcc15m"))


@pytest.mark.parametrize("allow_download", [False, True])
def test_a_known_rival_without_weights_is_found_out_without_importing_open_clip(tmp_path, allow_download):
    """No cached weights (and no download: off, or the host unreachable offline) is the same
    no_weights reason as before, given before open_clip and torch are imported (2.6 CPU-s a stage)."""
    import subprocess
    import sys

    from tests.helpers import ROOT

    code = (
        "import sys\n"
        "from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model\n"
        "try:\n"
        "    load_model(ModelSpec('rival', 'open_clip', 'RN50', 'openai'),"
        " RuntimeOptions(cache_dir=sys.argv[1], allow_download=sys.argv[2] == 'True'))\n"
        "except WeightsUnavailable as e:\n"
        "    print(e.reason)\n"
        "print(sorted(m for m in ('open_clip', 'torch') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path), str(allow_download)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    reason, imported = out.stdout.strip().splitlines()
    assert "weights_path" in reason and imported == "[]"


def test_bad_params_are_errors(tmp_path):
    with pytest.raises(ParamsError, match="not an open_clip architecture"):
        load_model(ModelSpec("x", "open_clip", "NoSuchNet", "openai"), P)
    with pytest.raises(ParamsError, match="does not exist"):
        load_model(ModelSpec("x", "open_clip", "RN50", "openai", str(tmp_path / "RN50.pt")), P)
    with pytest.raises(ParamsError, match="unknown for RN50"):
        load_model(ModelSpec("x", "open_clip", "RN50", "no-such-tag"), P)
    with pytest.raises(ParamsError, match="set 'pretrained'"):
        parse_params({"models": {"x": {"kind": "open_clip", "model": "RN50"}}})


@pytest.mark.slow
def test_untrained_and_local_weights_file_run_the_real_model(tmp_path, capsys):
    """open_clip RN50 with random weights, then the same weights from a local file: same embeddings."""
    import open_clip
    import torch

    from tests.helpers import IMAGES as IMG_DIR

    torch.manual_seed(0)
    rnd = load_model(
        ModelSpec("r", "open_clip", "RN50", None), RuntimeOptions(batch_size=2, threads=1, loader_workers=1)
    )
    assert rnd.untrained and rnd.weights_id == "untrained"
    imgs = [str(IMG_DIR / "cat.png"), str(IMG_DIR / "rocket.jpg"), str(IMG_DIR / "moon.png")]
    e1 = rnd.embed_images(imgs)  # one forward pass of CLIP_ROWS rows, decoded on a prefetch thread
    assert e1.shape == (3, 1024) and np.allclose(np.linalg.norm(e1, axis=1), 1, atol=1e-5)
    assert rnd.embed_texts(["A cat"]).shape == (1, 1024)
    capsys.readouterr()
    prompts = [f"A word{i}" for i in range(CLIP_ROWS + 1)]
    assert rnd.embed_texts(prompts).shape == (CLIP_ROWS + 1, 1024)  # 2 forward passes: progress lines
    assert "embed texts (r): 100%" in capsys.readouterr().out

    torch.manual_seed(0)
    model = open_clip.create_model("RN50", pretrained=None)
    path = tmp_path / "rn50-test.pt"
    torch.save(model.state_dict(), path)
    loaded = load_model(ModelSpec("f", "open_clip", "RN50", None, str(path)), P)
    assert not loaded.untrained and loaded.weights_id.startswith("file:")
    assert np.allclose(loaded.embed_images(imgs), e1, atol=1e-5)

    from safetensors.torch import save_file

    st_path = tmp_path / "rn50-test.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(st_path))
    from_st = load_model(ModelSpec("s", "open_clip", "RN50", None, str(st_path)), P)
    assert from_st.weights_id != loaded.weights_id  # keyed by the file's own sha256
    assert np.allclose(from_st.embed_images(imgs[:1]), e1[:1], atol=1e-5)

    # the last model is kept for the process (one load per stage, not per partition) ...
    assert load_model(ModelSpec("s", "open_clip", "RN50", None, str(st_path)), P) is from_st
    # ... until its weights file changes: other weights under the same path are loaded, not reused
    torch.manual_seed(1)
    save_file(
        {k: v.contiguous() for k, v in open_clip.create_model("RN50", pretrained=None).state_dict().items()},
        str(st_path),
    )
    changed = load_model(ModelSpec("s", "open_clip", "RN50", None, str(st_path)), P)
    assert changed is not from_st and changed.weights_id != from_st.weights_id
    assert not np.allclose(changed.embed_images(imgs[:1]), e1[:1], atol=1e-3)


@pytest.mark.slow
def test_text_only_baseline_runs_offline():
    m = load_model(ModelSpec("text-minilm", "text", "all-MiniLM-L6-v2"), P)
    assert m.embed_images is None and m.weights_id == "all-MiniLM-L6-v2"
    inst = pd.DataFrame(
        {
            "instance_id": ["i"],
            "cue": ["Astronaut"],
            "candidates": [["rocket", "cat", "banana", "sofa", "moon"]],
            "associations": [["rocket", "moon"]],
        }
    )
    out = score_instances(inst, m, {}, Cache([], None))
    assert out.loc[0, "status"] == "ok" and set(out.loc[0, "predictions"]) == {"rocket", "moon"}


def test_require_weights_fails_the_stage_instead_of_writing_no_weights(in_tmp, monkeypatch):
    from gavil.pipeline import catalog
    from stages import score_candidates

    catalog.write_table(
        pd.DataFrame(
            {
                "instance_id": ["swow:space"],
                "cue": ["space"],
                "status": ["ok"],
                "reason": [None],
                "associations": [["rocket", "moon"]],
                "candidates": [["rocket", "cat", "moon", "coffee", "brick"]],
                "num_associations": [2],
                "num_candidates": [5],
                "associations_mean_weight": [None],
                "candidates_connectivity_score": [None],
                "dropped_words": [[]],
            }
        ),
        "swow_instances",
    )
    catalog.write_table(
        pd.DataFrame(
            {
                "concept": ["rocket"],
                "sha256": ["a" * 64],
                "path": ["x.png"],
                "status": ["accepted"],
                "reason": [None],
                "ocr_text": [""],
                "ocr_confidence": [None],
                "match_token": [None],
                "match_score": [None],
                "source_url": ["u"],
                "rank": [1],
                "candidates_read": [1],
            }
        ),
        "ocr",
    )
    rival = {"cache_dir": str(in_tmp / "empty-cache"), "allow_download": False, "batch_size": 8, "threads": 1}
    params = Params().replace(
        models={"rival": {**rival, "loader_workers": 0}}, score={"require_weights": True, "partition_size": 100}
    )
    with pytest.raises(WeightsUnavailable, match="weights_path"):
        score_candidates.run(params)
    assert not (in_tmp / catalog.entry("scores").path).exists()  # nothing half-written
    metrics = score_candidates.run(params.replace(score={"require_weights": False}))
    assert metrics["by_status"] == {"no_weights": 1} and "weights_path" in metrics["message"]


def test_partitions_embed_every_image_and_prompt_so_reduce_embeds_nothing(in_tmp, monkeypatch):
    """plan() splits images *and* prompts into partitions (prompts cost about what images cost with
    RN50, so the flow maps them too); after the partitions ran, reduce() only looks up and ranks."""
    import hashlib

    from gavil.pipeline import catalog
    from stages import score_candidates

    concepts = ["rocket", "cat", "moon", "coffee", "brick", "star"]  # "unicorn" has no accepted image
    sha = {c: hashlib.sha256(c.encode()).hexdigest() for c in concepts}
    n = len(INSTANCES)
    catalog.write_table(
        INSTANCES.assign(
            status="ok",
            reason=None,
            num_associations=INSTANCES["associations"].map(len),
            num_candidates=5,
            associations_mean_weight=None,
            candidates_connectivity_score=None,
            dropped_words=[[] for _ in range(n)],
        ),
        "swow_instances",
    )
    catalog.write_table(
        pd.DataFrame(
            {
                "concept": concepts,
                "sha256": [sha[c] for c in concepts],
                "path": [f"/imgs/{c}.png" for c in concepts],
                "status": "accepted",
                "reason": None,
                "ocr_text": "",
                "ocr_confidence": None,
                "match_token": None,
                "match_score": None,
                "source_url": "u",
                "rank": 1,
                "candidates_read": 1,
            }
        ),
        "ocr",
    )
    assert n == 3
    params = Params().replace(
        models={"rival": {"allow_download": False, "batch_size": 8, "threads": 1, "loader_workers": 0}},
        score={"require_weights": True, "partition_size": 4},
    )

    parts = score_candidates.plan(params)
    by_path = sorted((sha[c], f"/imgs/{c}.png") for c in concepts)
    # 6 candidate images, then the prompts of the two instances whose images all exist, in parts of 4
    assert parts == [
        {"images": by_path[:4], "prompts": []},
        {"images": by_path[4:], "prompts": ["A space", "An ocean"]},
    ]
    calls: list[list[str]] = []
    monkeypatch.setattr(score_candidates, "load_model", lambda spec, opt: fake_model(calls=calls))
    results = [score_candidates.work(params, part) for part in parts]
    assert calls == [[p for _, p in by_path[:4]], [p for _, p in by_path[4:]], ["A space", "An ocean"]]
    with pytest.raises(ValueError, match="expected images and prompts"):
        score_candidates.work(params, {"kind": "audio", "items": ["x"]})

    def refuse(keys):
        raise AssertionError(f"reduce embedded {list(keys)}")

    monkeypatch.setattr(
        score_candidates, "load_model", lambda spec, opt: LoadedModel(SPEC, "openai", False, refuse, refuse)
    )
    metrics = score_candidates.reduce(params, results)
    assert metrics["by_status"] == {"missing_image": 1, "ok": 2} and metrics["embeddings_in_cache"] == 8
    out = pd.read_parquet(catalog.entry("scores").path).set_index("instance_id")
    assert out.loc["swow:space", "predictions"].tolist() == ["moon", "rocket"]  # the same ranking as score_instances
    assert out.loc["swow:night", "status"] == "missing_image"


def test_omp_num_threads_caps_the_model_threads(monkeypatch):
    """A Dask worker's OMP_NUM_THREADS (its share of the cores) caps a models entry's threads; unset or junk: params rule."""
    p = ModelEntry(kind="open_clip", model="RN50", pretrained=None, allow_download=False, batch_size=8, threads=2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert RuntimeOptions.of(p).threads == 2
    for env, expected in (("1", 1), ("8", 2), ("junk", 2), ("0", 2)):
        monkeypatch.setenv("OMP_NUM_THREADS", env)
        assert RuntimeOptions.of(p).threads == expected, env


@pytest.mark.parametrize("arch", ["RN50", "ViT-B-32"])
def test_array_preprocess_is_open_clips_preprocess_bit_for_bit(arch):
    """The loader's NumPy preprocess gives exactly open_clip's tensors (web-sized, odd-sized, tiny,
    non-RGB-source images), so switching to it changed no embedding."""
    import open_clip
    from PIL import Image

    from gavil.models.image_input import array_preprocess

    _, _, preprocess = open_clip.create_model_and_transforms(arch, pretrained=None)
    fast = array_preprocess(preprocess)
    rng = np.random.default_rng(0)
    for w, h, mode in [(1600, 1067, "RGB"), (503, 700, "RGB"), (224, 224, "RGB"), (225, 97, "L"), (640, 480, "RGBA")]:
        channels = {"RGB": 3, "L": 1, "RGBA": 4}[mode]
        arr = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        im = Image.fromarray(arr[..., 0] if channels == 1 else arr, mode).convert("RGB")
        want = preprocess(im).numpy()
        got = fast(im)
        assert got.dtype == np.float32 and got.shape == want.shape == (3, 224, 224)
        assert np.array_equal(got, want), (w, h, mode)


def test_array_preprocess_leaves_other_pipelines_to_torchvision():
    """A preprocess it does not recognise (no ToTensor + Normalize tail) runs as it is."""
    import torch
    from PIL import Image
    from torchvision.transforms import CenterCrop, Compose, Normalize, ToTensor

    from gavil.models.image_input import array_preprocess

    im = Image.fromarray(np.random.default_rng(1).integers(0, 256, (40, 50, 3), dtype=np.uint8))
    odd = Compose([CenterCrop(32), ToTensor(), Normalize((0.5, 0.5, 0.5), (0.2, 0.2, 0.2)), lambda t: t * 2])
    assert np.array_equal(array_preprocess(odd)(im), odd(im).numpy())
    plain = Compose([CenterCrop(32), ToTensor()])
    assert np.array_equal(array_preprocess(plain)(im), plain(im).numpy())
    assert isinstance(array_preprocess(lambda x: torch.zeros(3, 2, 2))(im), np.ndarray)


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_prefetch_keeps_every_loader_thread_busy_and_yields_in_order(workers):
    """``loader_workers`` threads decode that many batches at once (each load waits at a barrier
    until ``workers`` loads run together: a bounded look-ahead below that breaks the barrier),
    and the batches come out in the order of the chunks, whatever order the loads finish in."""
    import threading
    import time

    from gavil.models.image_input import prefetched

    barrier = threading.Barrier(workers, timeout=10)
    chunks = list(range(4 * workers))

    def load(c: int) -> int:
        if c < workers:  # the first ``workers`` chunks must all be in flight together
            barrier.wait()
        time.sleep(0.001 * ((c * 7) % 5))  # finish out of order
        return c * 10

    assert list(prefetched(chunks, load, workers)) == [c * 10 for c in chunks]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["RN50", "ViT-B-32"])
def test_a_vector_is_a_function_of_its_input_alone(arch):
    """The same image or prompt gets the same bytes whether it is embedded alone, among others,
    in another partition, with another batch_size or with 1 or 2 threads (RN50's convolutions
    pick their kernels by batch size: unpadded, the last batch of a partition came out 1.5e-8 off,
    so 1 and 2 worker processes wrote other similarities)."""
    import torch

    from tests.helpers import IMAGES as IMG_DIR

    imgs = sorted(str(p) for p in IMG_DIR.iterdir() if p.suffix in {".png", ".jpg", ".jpeg", ".webp"})[:20]
    prompts = [f"A word{i}" for i in range(CLIP_ROWS + 3)]
    spec = ModelSpec(f"det-{arch}", "open_clip", arch, None)
    runs = {}
    for batch_size, threads in [(32, 2), (2, 1), (5, 2)]:
        torch.manual_seed(0)
        m = load_model(spec, RuntimeOptions(batch_size=batch_size, threads=threads, loader_workers=1))
        whole_i, whole_t = m.embed_images(imgs), m.embed_texts(prompts)
        cut = len(imgs) // 3  # partitions of another size: each call's last forward pass is padded
        parts_i = np.concatenate([m.embed_images(imgs[:cut]), m.embed_images(imgs[cut:])])
        parts_t = np.concatenate([m.embed_texts(prompts[:1]), m.embed_texts(prompts[1:])])
        assert whole_i.tobytes() == parts_i.tobytes() and whole_t.tobytes() == parts_t.tobytes()
        runs[(batch_size, threads)] = (whole_i.tobytes(), whole_t.tobytes())
    assert len(set(runs.values())) == 1, "batch_size or threads changed a vector"
