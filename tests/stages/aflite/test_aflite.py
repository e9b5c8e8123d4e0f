"""AfLite (stages/aflite/) on synthetic instances with a planted artifact: it flags the planted
instances and (almost) nothing else, the same rows whatever the input order, deterministically per
seed; a clean control changes little; the KL assessment falls with AfLite and not with a random
reduction of the same size; draws are keyed by instance id (a removed instance moves no other
instance's split); the ``plant`` audit measures precision and recall. Also the stage on the release
sample (text model, offline), and the stage's outputs byte-identical under shuffles of every table
it reads."""

import numpy as np
import pandas as pd
import pytest

from gavil.io import validate
from gavil.models.features import Layout, pair_features
from gavil.models.keyed import id_hashes
from gavil.params.adversarial import AfliteParams
from schemas.adversarial import AflitePhases
from stages.aflite import aflite, kl_assessment, plant_feature, plant_mask, splits

D = 8
P = AfliteParams(n_classifiers=12, train_size=200, cutoff=30, tau=0.75, seed=3)


def synthetic(n: int, planted: int, seed: int = 0) -> dict:
    """n instances, 6 candidates, 2 associations. In ``planted`` of them the associations carry a
    marker (dimension 0 = 5); elsewhere nothing tells associations from distractors."""
    rng = np.random.default_rng(seed)
    inst = []
    for i in range(n):
        cands = rng.normal(size=(6, D))
        cands[:, 0] = 0.0
        if i < planted:
            cands[:2, 0] = 5.0
        inst.append({"id": f"i{i:04d}", "cue": rng.normal(size=D), "cands": cands, "planted": i < planted})
    return {"inst": inst}


def arrays(inst: list[dict]) -> tuple[np.ndarray, Layout, np.ndarray, list[set[str]]]:
    names = [[f"{d['id']}c{j}" for j in range(6)] for d in inst]
    lay = Layout.build(names, [n[:2] for n in names])
    cues = np.vstack([np.repeat(d["cue"][None, :], 6, 0) for d in inst])
    x = pair_features(cues, np.vstack([d["cands"] for d in inst]))
    return x, lay, np.array([d["id"] for d in inst]), [set(n) for n in names]


@pytest.fixture(scope="module")
def planted_run():
    data = synthetic(600, 150)["inst"]
    x, lay, ids, sets = arrays(data)
    return data, x, lay, ids, sets, aflite(x, lay, ids, sets, P)


def test_removes_planted_artifacts_and_little_else(planted_run):
    data, x, lay, ids, sets, res = planted_run
    planted = np.array([d["planted"] for d in data])
    flagged = res.phase > 0
    assert flagged[planted].mean() >= 0.9
    assert flagged[~planted].mean() <= 0.10
    assert res.phases[0]["above_tau"] >= 0.9 * 150 and res.phases[0]["flagged"] == 30  # k per phase
    assert validate(pd.DataFrame(res.phases), AflitePhases)["flagged"].sum() == flagged.sum()
    kl = kl_assessment(x, lay, ids, ~flagged, 20, 0)
    before, after, rand = kl["before"], kl["aflite"], kl["random"]
    assert before is not None and after is not None and rand is not None
    assert before > 0.5 and after < before / 4 and rand > before / 2


def test_permuted_input_flags_the_same_rows_and_seed_is_deterministic(planted_run):
    data, x, lay, ids, sets, res = planted_run
    perm = np.random.default_rng(9).permutation(len(data))
    x2, lay2, ids2, sets2 = arrays([data[i] for i in perm])
    res2 = aflite(x2, lay2, ids2, sets2, P)
    assert set(ids2[res2.phase > 0]) == set(ids[res.phase > 0])
    np.testing.assert_array_equal(res2.score, res.score[perm])
    again = aflite(x, lay, ids, sets, P)
    np.testing.assert_array_equal(again.phase, res.phase)
    np.testing.assert_array_equal(again.score, res.score)


def test_clean_control_changes_little():
    data = synthetic(400, 0, seed=1)["inst"]
    x, lay, ids, sets = arrays(data)
    res = aflite(x, lay, ids, sets, P)
    assert (res.phase > 0).mean() <= 0.02
    assert len(res.phases) == 1  # fewer than k above tau: AfLite stops after one phase
    assert np.nanmean(res.score) < 0.5  # near chance Jaccard (0.3 for 2 of 6)


def test_splits_are_keyed_by_instance_id_not_position(planted_run):
    """Removing one instance changes each classifier's training set by at most that instance and
    the one that takes its place (positional draws reshuffle everything); the KL's random
    reduction and the plant mask of an instance do not depend on the other instances either."""
    data, x, lay, ids, sets, res = planted_run
    h = id_hashes(ids)
    full = splits(lay, np.arange(len(ids)), 200, P, 1, sets, h)
    sub = splits(lay, np.arange(1, len(ids)), 200, P, 1, sets, h)  # instance 0 gone
    assert len(full) == len(sub) == P.n_classifiers
    moved = [len(set(a[0]) ^ set(b[0])) for a, b in zip(full, sub)]
    assert max(moved) <= 2 and sum(m > 0 for m in moved) >= 1  # 0 was in some training set
    mask = plant_mask(ids, 0.2, 7)
    assert 0.15 < mask.mean() < 0.25
    np.testing.assert_array_equal(plant_mask(ids[1:], 0.2, 7), mask[1:])
    np.testing.assert_array_equal(plant_mask(ids[::-1], 0.2, 7), mask[::-1])
    assert not plant_mask(ids, 0.0, 7).any() and not np.array_equal(plant_mask(ids, 0.2, 8), mask)
    keep = np.zeros(len(ids), dtype=bool)
    keep[: len(ids) // 2] = True
    perm = np.random.default_rng(4).permutation(len(ids))
    x2, lay2 = permuted(x, lay, perm)
    assert kl_assessment(x2, lay2, ids[perm], keep[perm], 20, 0) == kl_assessment(x, lay, ids, keep, 20, 0)


def test_plant_audit_finds_the_planted_instances_on_a_clean_control():
    """No natural artifact; a spurious column planted in ~10 % of instances: AfLite flags them and
    little else (precision and recall of the flags against the plant both high); a weak plant
    (strength 0.01, below the embeddings' scale) is mostly missed."""
    data = synthetic(600, 0, seed=5)["inst"]
    x, lay, ids, sets = arrays(data)
    planted = plant_mask(ids, 0.1, 0)
    assert 40 <= planted.sum() <= 80
    xp = plant_feature(x, lay, planted, 1.0)
    assert xp.shape == (len(x), x.shape[1] + 1) and xp[:, -1].sum() == 2 * planted.sum()  # 2 associations each
    flagged = aflite(xp, lay, ids, sets, P).phase > 0
    hit = (flagged & planted).sum()
    assert hit / planted.sum() >= 0.9 and hit / flagged.sum() >= 0.9
    weak = aflite(plant_feature(x, lay, planted, 0.01), lay, ids, sets, P).phase > 0
    assert (weak & planted).sum() / planted.sum() <= 0.5


def test_exact_credit_and_image_disjoint_split_run():
    data = synthetic(300, 60, seed=2)["inst"]
    x, lay, ids, sets = arrays(data)
    p = P.model_copy(update={"correct": "exact", "image_disjoint": True, "cutoff": 0.1, "train_size": 0.4})
    res = aflite(x, lay, ids, sets, p)  # names are unique per instance, so every other instance is disjoint
    planted = np.array([d["planted"] for d in data])
    assert (res.phase > 0)[planted].mean() >= 0.9 and (res.phase > 0)[~planted].mean() <= 0.1


@pytest.mark.slow
def test_stage_on_the_release_sample(tmp_path, monkeypatch):
    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage
    from tests.helpers import mini_project

    root = mini_project(tmp_path / "p", [])
    monkeypatch.chdir(root)
    run_stage("import_annotations")
    run_stage("select_instances")
    from gavil.params import load_params

    # 150 selected instances of each dataset (the rest marked not selected) keep the test fast
    sel = catalog.read_table("selection")
    keep = sel.groupby("dataset").head(150).index
    sel.loc[~sel.index.isin(keep), ["status", "reason"]] = ["below_threshold", "left out by the test"]
    sel.loc[~sel.index.isin(keep), "ID"] = pd.NA
    catalog.write_table(sel, "selection")
    params = load_params().replace(aflite={"n_classifiers": 8, "cutoff": 10, "write_debiased": True})
    m = run_stage("aflite", params)
    table = catalog.read_table("aflite")
    assert m["status"] == "ok" and m["instances"] == 300
    assert (table["status"] == "not_selected").sum() == len(sel) - 300
    assert set(table["status"]) == {"kept", "flagged", "not_selected"}
    assert m["flagged"] == (table["status"] == "flagged").sum() > 0
    # the text model solves SWOW-baseline instances far more often than game ones (87.9 vs 50.8)
    by = m["by_dataset"]
    assert by["swow_baseline"]["mean_score"] > by["game"]["mean_score"] + 0.15
    assert by["swow_baseline"]["flagged_percent"] > by["game"]["flagged_percent"]
    assert set(m["probes"]) == {"full", "cue_free", "image_free"}
    assert sum(b["instances"] for b in m["by_batch"].values()) == 300 and "release:swow" in m["by_batch"]
    assert m["plant"] is None and not table["planted"].any()  # the audit is off by default
    debiased = pd.read_csv("data/export/debiased.csv")
    assert len(debiased) == (table["status"] == "kept").sum()


# --- the batched solver (gavil/models/batched_logistic.py) ------------------------------------


def test_batched_fit_is_sklearns_optimum():
    """Each column of a batched fit is the minimiser of scikit-learn's objective (C=1, L2 on the
    weights, unpenalised intercept) on that column's rows: the same coefficients as a tightly
    converged per-classifier scikit-learn fit."""
    from sklearn.linear_model import LogisticRegression

    from gavil.models.batched_logistic import fit_logistic_batched

    rng = np.random.default_rng(0)
    x = rng.normal(size=(900, 12))
    y = (x[:, 0] + 0.5 * x[:, 1] + rng.normal(size=900) > 0.8).astype(bool)
    masks = rng.random((900, 5)) < 0.35
    fit = fit_logistic_batched(x, y, masks, tol=1e-7)
    assert fit.converged.all() and fit.coef.shape == (5, 12)
    for c in range(5):
        ref = LogisticRegression(tol=1e-12, max_iter=10_000).fit(x[masks[:, c]], y[masks[:, c]])
        np.testing.assert_allclose(fit.coef[c], ref.coef_[0], atol=1e-6)
        np.testing.assert_allclose(fit.intercept[c], ref.intercept_[0], atol=1e-6)
    np.testing.assert_allclose(fit.decision_function(x)[:, 2], ref_decision(x, masks[:, 2], y), atol=1e-6)
    # warm start elsewhere, float32 features: the same optimum within the tolerance
    warm = fit_logistic_batched(x.astype(np.float32), y, masks, tol=1e-4, init=np.ones(13))
    np.testing.assert_allclose(warm.coef, fit.coef, atol=1e-3)


def ref_decision(x: np.ndarray, mask: np.ndarray, y: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(tol=1e-12, max_iter=10_000).fit(x[mask], y[mask]).decision_function(x)


def test_batched_fit_refuses_a_single_label_column():
    from gavil.models.batched_logistic import fit_logistic_batched

    x = np.eye(4)
    masks = np.array([[True, True], [True, False], [False, True], [False, True]])
    with pytest.raises(ValueError, match="both labels"):
        fit_logistic_batched(x, np.array([1, 0, 1, 1], dtype=bool), masks)


@pytest.fixture(scope="module")
def release_features():
    """Pair features of 200 SWOW-baseline and 200 game instances of the release (text model,
    offline), as the stage builds them."""
    import json

    from gavil.models.embeddings import Cache
    from gavil.models.features import embed
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from gavil.params import Params
    from stages.aflite.stage import _features
    from tests.helpers import RELEASE

    frames = []
    for name in ("swow", "game_5_6"):
        df = pd.read_csv(RELEASE / f"{name}.csv").head(200)
        df["instance_uid"] = [f"{name}:{i}" for i in df["ID"]]
        frames.append(df)
    sel = pd.concat(frames, ignore_index=True).sample(frac=1, random_state=0).reset_index(drop=True)
    sel["candidates"] = sel["candidates"].map(json.loads)
    sel["associations"] = sel["associations"].map(json.loads)
    entry = Params().models[AfliteParams().model]
    model = load_model(ModelSpec.of(AfliteParams().model, entry), RuntimeOptions.of(entry))
    concepts = sorted({c for cs in sel["candidates"] for c in cs})
    cue_vecs, cand_vecs = embed(model, list(sel["cue"]), concepts, Cache([], None))
    lay = Layout.build(list(sel["candidates"]), list(sel["associations"]))
    ids = sel["instance_uid"].to_numpy().astype(str)
    x, shared = _features(sel, cue_vecs, cand_vecs, "full")
    return x, lay, ids, [set(cs) for cs in sel["candidates"]], shared


def test_batched_solver_flags_what_per_classifier_sklearn_fits_flag(release_features):
    """WinoGrande's n = 64 classifiers per phase and m = 0.3409 on 400 release instances (k = 5 %
    per phase to keep the phases few): the batched fit and 64 separate scikit-learn fits per phase
    give the same phases table and the same flags; scores agree except where one held-out top-K
    flips on a near tie (decision values agree to ~1e-4, the solvers' tolerance): at most 1 % of
    instances, by one prediction's share of the mean (< 0.05). The full release (4,561 instances,
    k = 0.0114): benchmarks/aflite.py."""
    x, lay, ids, sets, _ = release_features
    p = AfliteParams(cutoff=0.05)
    batched = aflite(x, lay, ids, sets, p)
    reference = aflite(x, lay, ids, sets, p.model_copy(update={"solver": "sklearn"}))
    assert len(batched.phases) >= 2 and sum(ph["flagged"] for ph in batched.phases) >= 40
    assert batched.phases == reference.phases
    np.testing.assert_array_equal(batched.phase, reference.phase)
    for field in ("score", "first_score"):
        a, b = getattr(batched, field), getattr(reference, field)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        differ = ~np.isnan(a) & (a != b)
        assert differ.mean() <= 0.01 and np.abs(a - b)[differ].max(initial=0) < 0.05, field


def permuted(x: np.ndarray, lay: Layout, perm: np.ndarray) -> tuple[np.ndarray, Layout]:
    """The instances in ``perm`` order, their pair rows renumbered (x's rows moved with them)."""
    rows = lay.rows[perm]
    new = np.full_like(rows, -1)
    new[rows >= 0] = np.arange((rows >= 0).sum())
    return x[rows[rows >= 0]], Layout(new, lay.label[perm], lay.k[perm])


def test_shared_candidate_rows_give_the_plain_fit(release_features):
    """The candidate columns multiplied once per concept (:class:`SharedRows`) fit the classifiers
    the plain GEMMs fit: coefficients and decision values within 1e-9, and AfLite's phases, flags
    and scores identical, in any instance order."""
    from gavil.models.batched_logistic import Design, fit_logistic_batched

    x, lay, ids, sets, shared = release_features
    assert shared.table.shape[0] < len(x) / 2  # the concepts repeat: there is work to save
    rng = np.random.default_rng(3)
    y = lay.label[lay.rows >= 0]
    masks = rng.random((len(x), 8)) < 0.34
    design = Design(x, shared)
    plain, fast = fit_logistic_batched(x, y, masks), fit_logistic_batched(x, y, masks, design=design)
    np.testing.assert_allclose(fast.coef, plain.coef, atol=1e-9)
    np.testing.assert_allclose(fast.decision_function(x, design), plain.decision_function(x), atol=1e-9)
    p = AfliteParams(cutoff=0.05, n_classifiers=16)
    a, b = aflite(x, lay, ids, sets, p), aflite(x, lay, ids, sets, p, shared=shared)
    assert a.phases == b.phases and sum(ph["flagged"] for ph in a.phases) > 0
    perm = np.random.default_rng(1).permutation(len(ids))
    x2, lay2 = permuted(x, lay, perm)
    rows = lay.rows[perm]
    c = aflite(x2, lay2, ids[perm], [sets[i] for i in perm], p, shared=shared.rows(rows[rows >= 0]))
    for field in ("score", "phase", "first_score"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        np.testing.assert_array_equal(getattr(a, field)[perm], getattr(c, field))


def test_shared_rows_that_are_not_the_features_are_refused(release_features):
    """A :class:`SharedRows` whose table, index or columns do not give ``x``'s columns is a
    ValueError naming the fix, never a fit of other features."""
    from gavil.models.batched_logistic import Design, SharedRows

    x, _, _, _, shared = release_features
    swapped = shared.index.copy()
    swapped[[0, 1]] = swapped[[1, 0]] if swapped[0] != swapped[1] else (swapped[0] + 1, swapped[1])
    bad = [
        SharedRows(shared.start, shared.stop, shared.table, swapped),
        SharedRows(0, shared.stop - shared.start, shared.table, shared.index),
        SharedRows(shared.start, shared.stop, shared.table, shared.index[:-1]),
        SharedRows(shared.start, shared.stop + 1, shared.table, shared.index),
    ]
    for s in bad:
        with pytest.raises(ValueError, match="table|fit"):
            Design(x, s)


def test_shuffled_instances_give_bit_identical_results(release_features):
    """The same instances in another order (x's rows, lay, ids and concepts permuted together):
    the same phases table and bit-identical per-instance scores, phases and phase-1 scores."""
    x, lay, ids, sets, _ = release_features
    p = AfliteParams(cutoff=0.05, n_classifiers=16)
    perm = np.random.default_rng(1).permutation(len(ids))
    x2, lay2 = permuted(x, lay, perm)
    a = aflite(x, lay, ids, sets, p)
    b = aflite(x2, lay2, ids[perm], [sets[i] for i in perm], p)
    assert a.phases == b.phases and sum(ph["flagged"] for ph in a.phases) > 0
    for field in ("score", "phase", "first_score"):
        np.testing.assert_array_equal(getattr(a, field)[perm], getattr(b, field))


@pytest.mark.slow
def test_stage_outputs_are_byte_identical_under_shuffles_of_every_input(tmp_path, monkeypatch):
    """The stage on the release sample plus a raw batch, then three times more with every table it
    reads shuffled (selection, instances, and its own embedding cache, written by the first run):
    every output (table, phases, plot, debiased CSV, cache, metrics with probes, KL and the plant
    audit) byte for byte the same. The embedding cache and ``embed`` are the real ones; the model
    is a fixed table (a vector per text, derived from the text; cues near their associations, so
    AfLite has something to flag)."""
    import hashlib
    import json
    import shutil
    from types import SimpleNamespace

    import stages.aflite.stage as stage
    from gavil.domain.winogavil import cue_key
    from gavil.io import read_parquet, write_parquet
    from gavil.params import load_params
    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage
    from schemas.embeddings import EmbeddingCache
    from tests.helpers import ROOT, mini_project

    root = mini_project(tmp_path / "p", [])
    shutil.copytree(ROOT / "data/sample/raw_example/batch-0001", root / "data/sample/raw/batch-0001")
    monkeypatch.chdir(root)
    run_stage("import_annotations")
    run_stage("select_instances")
    sel = catalog.read_table("selection")
    keep = sel[sel["origin"] == "release"].groupby("split").head(100).index.union(sel.index[sel["origin"] == "raw"])
    sel.loc[~sel.index.isin(keep), ["status", "reason"]] = ["below_threshold", "left out by the test"]
    sel.loc[~sel.index.isin(keep), "ID"] = pd.NA
    raw = sel["origin"] == "raw"
    assert raw.sum() >= 2
    sel.loc[raw, ["status", "reason"]] = ["selected", "selected by the test"]
    sel.loc[raw, "ID"] = pd.array(range(10_000, 10_000 + int(raw.sum())), dtype="Int64")

    def vec(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        v = np.random.default_rng(seed).normal(size=16)
        return (v / np.linalg.norm(v)).astype(np.float32)

    cue_table: dict[str, np.ndarray] = {}
    for cue, assoc in sorted(zip(sel["cue"].map(cue_key), sel["associations"].map(tuple))):
        cue_table.setdefault(cue, vec(cue) + sum(vec(a) for a in assoc))

    def embed_texts(texts: list[str]) -> np.ndarray:
        return np.stack([cue_table[t] if t in cue_table else vec(t) for t in texts])

    model = SimpleNamespace(
        spec=SimpleNamespace(kind="text"),
        weights_sha256="0" * 64,
        cache_key=lambda kind: ("fixed-table", "test|fp32-cpu", kind),
        embed_texts=embed_texts,
    )
    monkeypatch.setattr(stage, "load_model", lambda spec, opt: model)
    params = load_params().replace(
        aflite={"n_classifiers": 16, "cutoff": 10, "write_debiased": True, "plant": {"fraction": 0.1}}
    )
    outputs = [
        "data/aflite/aflite.parquet",
        "data/aflite/phases.parquet",
        "data/plots/aflite_phases.csv",
        "data/export/debiased.csv",
        "data/cache/aflite_embeddings.parquet",
        "data/metrics/details/aflite.json",
        "data/metrics/aflite.json",
    ]
    instances = catalog.read_table("instances")
    cache = root / "data/cache/aflite_embeddings.parquet"
    runs = []
    for shuffle in (None, 1, 2, 3):
        catalog.write_table(sel if shuffle is None else sel.sample(frac=1, random_state=shuffle), "selection")
        if shuffle is not None:
            catalog.write_table(instances.sample(frac=1, random_state=shuffle), "instances")
            rows = read_parquet(cache, EmbeddingCache)
            write_parquet(rows.sample(frac=1, random_state=shuffle), cache, EmbeddingCache)
        m = run_stage("aflite", params)
        runs.append({path: (root / path).read_bytes() for path in outputs})
    for path in outputs:
        assert all(r[path] == runs[0][path] for r in runs[1:]), path
    assert m["flagged"] > 0 and m["phases"] >= 2 and m["kl"]["before"] is not None
    details = json.loads(runs[0]["data/metrics/details/aflite.json"])
    assert set(details["probes"]) == {"full", "cue_free", "image_free"}
    assert set(details["by_batch"]) == {"raw:batch-0001", "release:game_10_12", "release:game_5_6", "release:swow"}
    assert set(details["probes"]["full"]["by_batch"]) == set(details["by_batch"])
    assert sum(b["instances"] for b in details["by_batch"].values()) == m["instances"] == 300 + raw.sum()
    table = catalog.read_table("aflite")
    planted = table["planted"]
    assert details["plant"]["planted"] == planted.sum() > 0
    flagged = table["status"] == "flagged"
    assert details["plant"]["flagged_planted"] == (flagged & planted).sum()
    assert details["plant"]["recall"] == round((flagged & planted).sum() / planted.sum(), 4)
    assert set(details["plant"]["by_dataset"]) == {"game", "swow_baseline"}


@pytest.mark.parametrize("solver", ["batched", "sklearn"])
def test_a_phase_with_no_usable_split_fits_nothing_and_scores_nothing(solver):
    """Two instances and m = 2: every draw trains on all of them, so no split has a test instance
    (a game-only project's first rebuild); the probes' phase must score nothing, not divide by zero."""
    from stages.aflite.core import Fitter, predictability

    rng = np.random.default_rng(0)
    lay = Layout.build([["a", "b", "c"], ["d", "e", "f"]], [["a"], ["e"]])
    x = pair_features(rng.normal(size=(6, 8)).astype(np.float32), rng.normal(size=(6, 8)).astype(np.float32))
    p = AfliteParams(n_classifiers=4, solver=solver)
    h = id_hashes(np.array(["a", "b"]))
    total, count = predictability(Fitter(x, p, 1), lay, np.arange(2), 2, p, 1, [set("abc"), set("def")], h)
    assert count.tolist() == [0, 0] and total.tolist() == [0.0, 0.0]


def test_a_text_model_is_built_only_when_a_text_is_embedded():
    """Loading a sentence-transformers entry resolves its weights hash and cache key only: a run
    whose texts are all cached (AfLite's second run) never imports sentence-transformers; the first
    text embedded builds the network, once, and gives the vector a fresh process gives."""
    import subprocess
    import sys

    code = """
import sys
import numpy as np
from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
from gavil.params import Params
entry = Params().models["text-minilm-l6"]
model = load_model(ModelSpec.of("text-minilm-l6", entry), RuntimeOptions.of(entry))
print(model.weights_sha256 is not None, "sentence_transformers" in sys.modules)
v = model.embed_texts(["dog", "bone"])
w = model.embed_texts(["bone"])
print("sentence_transformers" in sys.modules, v.shape, v.dtype, np.array_equal(v[1], w[0]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "True False"
    assert out[1] == "True (2, 384) float32 True"
