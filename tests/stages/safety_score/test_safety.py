"""safety_score (docs/review.md "The safety score"): the zero-shot score orders images by their
probability mass on unsafe prompts, random weights are labelled untrained, off costs nothing, and
the score decides nothing: only a reviewer's decision accepts or rejects an image."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pandas as pd
import pytest

from gavil.io import validate
from gavil.models.embeddings import Cache
from gavil.models.loading import LoadedModel, ModelSpec
from gavil.params import Params
from schemas.safety import Safety
from stages.safety_score import SAFE_PROMPTS, UNSAFE_PROMPTS, punsafe, queue_images, score_images
from tests.helpers import IMAGES

SPEC = ModelSpec("safety:RN50", "open_clip", "RN50", "openai")
#: Three images: "gore" points at the first unsafe prompt, "cat" at the first safe one, "fog" in between.
DIM = len(UNSAFE_PROMPTS) + len(SAFE_PROMPTS) + 1


def _unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, np.float32)
    v[i] = 1
    return v


PROMPT_VECS = {t: _unit(i) for i, t in enumerate([*UNSAFE_PROMPTS, *SAFE_PROMPTS])}
IMAGE_VECS = {
    "gore.png": _unit(0),
    "cat.png": _unit(len(UNSAFE_PROMPTS)),
    "fog.png": (0.6 * _unit(0) + 0.62 * _unit(len(UNSAFE_PROMPTS)) + 0.5 * _unit(DIM - 1)).astype(np.float32),
}
IMAGES_TABLE = pd.DataFrame(
    {"sha256": [c * 64 for c in "cab"], "path": [f"/imgs/{n}" for n in ("gore.png", "cat.png", "fog.png")]}
)


def stub_model(untrained: bool = False, calls: list[list[str]] | None = None) -> LoadedModel:
    """An open_clip stand-in: images by file name, prompts by text, from the tables above."""

    def embed(keys: list[str]) -> np.ndarray:
        if calls is not None:
            calls.append(list(keys))
        vecs = [IMAGE_VECS.get(k.rsplit("/", 1)[-1], PROMPT_VECS.get(k)) for k in keys]
        return np.stack([v / np.linalg.norm(v) for v in vecs]).astype(np.float32)

    return LoadedModel(SPEC, "untrained" if untrained else "openai", untrained, embed, embed)


def test_the_score_orders_images_by_their_mass_on_the_unsafe_prompts():
    out = validate(score_images(IMAGES_TABLE, stub_model(), Cache([], None)), Safety).set_index("sha256")
    by_name = dict(zip(IMAGES_TABLE["path"].str.rsplit("/", n=1).str[-1], out.loc[IMAGES_TABLE["sha256"], "punsafe"]))
    assert by_name["gore.png"] > by_name["fog.png"] > by_name["cat.png"]
    assert by_name["gore.png"] > 0.99 and by_name["cat.png"] < 0.01  # cosine 1 vs 0 at logit scale 100
    assert set(out["status"]) == {"ok"} and set(out["safety_model"]) == {"RN50/openai"}
    assert out["reason"].isna().all()
    assert list(out.index) == sorted(out.index)  # rows in sha256 order, whatever the input order
    # the hand computation: softmax over the 16 prompts of 100 x cosine, mass on the first 8
    fog = IMAGE_VECS["fog.png"] / np.linalg.norm(IMAGE_VECS["fog.png"])
    logits = 100 * np.array([fog @ v for v in PROMPT_VECS.values()], np.float64)
    p = np.exp(logits - logits.max())
    assert by_name["fog.png"] == round(float(p[: len(UNSAFE_PROMPTS)].sum() / p.sum()), 4)


def test_a_score_depends_on_its_image_alone():
    """One image scored alone or among others: the same value (same bytes on every batch shape)."""
    mats = np.stack([IMAGE_VECS[n] / np.linalg.norm(IMAGE_VECS[n]) for n in ("gore.png", "cat.png", "fog.png")])
    prompts = np.stack(list(PROMPT_VECS.values()))
    together = punsafe(mats, prompts, len(UNSAFE_PROMPTS))
    alone = [punsafe(mats[i : i + 1], prompts, len(UNSAFE_PROMPTS))[0] for i in range(3)]
    assert together.tolist() == alone and punsafe(mats[:0], prompts, 8).shape == (0,)
    with pytest.raises(ValueError, match="unsafe and safe prompts"):
        punsafe(mats, prompts, len(prompts))


def test_random_weights_are_marked_untrained_and_no_weights_invent_no_score():
    calls: list[list[str]] = []
    cache = Cache([], None)
    out = validate(score_images(IMAGES_TABLE, stub_model(untrained=True, calls=calls), cache), Safety)
    assert set(out["status"]) == {"untrained"} and set(out["safety_model"]) == {"RN50/untrained"}
    assert out["reason"].str.contains("random weights").all() and out["punsafe"].notna().all()
    # the embedding cache: a second scoring embeds nothing
    n = len(calls)
    score_images(IMAGES_TABLE, stub_model(untrained=True, calls=calls), cache)
    assert len(calls) == n == 2  # one call for the images, one for the prompts
    none = validate(score_images(IMAGES_TABLE, None, cache, "no RN50/openai weights", "RN50/openai"), Safety)
    assert set(none["status"]) == {"no_weights"} and none["punsafe"].isna().all()
    assert set(none["reason"]) == {"no RN50/openai weights"}
    # the schema refuses an untrained score that does not say so, and a score without weights
    bad = out.assign(safety_model="RN50/openai")
    with pytest.raises(Exception, match="untrained score says so"):
        validate(bad, Safety)
    with pytest.raises(Exception, match="score exactly when"):
        validate(none.assign(punsafe=0.5), Safety)


def _ocr(rows: list[tuple[str, str | None, str | None, str]]) -> pd.DataFrame:
    """An :class:`schemas.ocr.Ocr` table of (concept, sha256, path, status) rows."""
    return pd.DataFrame(
        {
            "concept": [r[0] for r in rows],
            "sha256": [r[1] for r in rows],
            "path": [r[2] for r in rows],
            "source_url": [None if r[1] is None else "u" for r in rows],
            "rank": pd.array([None if r[1] is None else 1 for r in rows], dtype="Int64"),
            "candidates_read": pd.array([0 if r[1] is None else 1 for r in rows], dtype="Int64"),
            "status": [r[3] for r in rows],
            "reason": [None if r[3] == "accepted" else "why" for r in rows],
            "ocr_text": [None] * len(rows),
            "ocr_confidence": [None] * len(rows),
            "match_token": [None] * len(rows),
            "match_score": [None] * len(rows),
        }
    )


def test_the_queue_is_the_images_the_ocr_let_through():
    ocr = _ocr(
        [
            ("cat", "c" * 64, "c.png", "accepted"),
            ("moon", "b" * 64, "b.png", "review_pending"),
            ("sun", "a" * 64, "a.png", "review_rejected"),
            ("sea", "d" * 64, "d.png", "rejected_text"),
            ("sky", None, None, "no_image"),
            ("kitty", "c" * 64, "c2.png", "accepted"),  # the same bytes for two concepts: one row
        ]
    )
    q = queue_images(ocr)
    assert list(q["sha256"]) == ["a" * 64, "b" * 64, "c" * 64] and list(q["path"]) == ["a.png", "b.png", "c.png"]


def _project_ocr(root) -> dict[str, str]:
    """Three sample images in ``root`` and an ``ocr`` table naming them (cat accepted, moon pending,
    rocket rejected by a reviewer); returns concept -> sha256."""
    from gavil.pipeline import catalog

    shas, rows = {}, []
    for concept, name, status in [
        ("cat", "cat.png", "accepted"),
        ("moon", "moon.png", "review_pending"),
        ("rocket", "rocket.jpg", "review_rejected"),
    ]:
        shutil.copy(IMAGES / name, root / name)
        shas[concept] = hashlib.sha256((IMAGES / name).read_bytes()).hexdigest()
        rows.append((concept, shas[concept], name, status))
    catalog.write_table(_ocr(rows), "ocr")
    return shas


@pytest.mark.slow
def test_off_by_default_it_loads_no_model_and_writes_an_empty_table(in_tmp, monkeypatch):
    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage
    from stages import safety_score

    assert Params().review.safety.enabled is False
    _project_ocr(in_tmp)
    monkeypatch.setattr(safety_score, "load_model", lambda *a: pytest.fail("a model was loaded while the score is off"))
    metrics = run_stage("safety_score", Params())
    assert metrics["enabled"] is False and metrics["images"] == 0
    assert len(catalog.read_table("safety")) == 0
    assert len(catalog.read_table("safety_embeddings")) == 0  # an empty cache: the query sees every table


def test_no_stage_reads_the_score():
    """The score orders the review page only: no stage reads the ``safety`` table."""
    from gavil.pipeline.registry import STAGES

    assert [s.name for s in STAGES if "safety" in s.writes] == ["safety_score"]
    assert [s.name for s in STAGES if "safety" in s.reads] == []


@pytest.mark.slow
def test_real_open_clip_random_weights_fill_the_column_marked_untrained(in_tmp):
    """The stage with open_clip's RN50 and random weights (pretrained: null, offline): every image
    in the queue has a score, marked untrained; the embeddings are cached, a re-run computes none."""
    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage

    shas = _project_ocr(in_tmp)
    rival = {"pretrained": None, "allow_download": False, "batch_size": 2, "threads": 1, "loader_workers": 0}
    params = Params().replace(review={"safety": {"enabled": True}}, models={"rival": rival})
    metrics = run_stage("safety_score", params)
    out = catalog.read_table("safety").set_index("sha256")
    assert set(out.index) == set(shas.values()) and out["punsafe"].between(0, 1).all()
    assert set(out["status"]) == {"untrained"} and set(out["safety_model"]) == {"RN50/untrained"}
    assert metrics["model"] == "RN50/untrained" and metrics["by_status"] == {"untrained": 3}
    first = (in_tmp / catalog.entry("safety").path).read_bytes()
    cached = pd.read_parquet(in_tmp / catalog.entry("safety_embeddings").path, columns=["kind"])
    assert cached["kind"].value_counts().to_dict() == {"text": len(UNSAFE_PROMPTS) + len(SAFE_PROMPTS), "image": 3}
    run_stage("safety_score", params)
    assert (in_tmp / catalog.entry("safety").path).read_bytes() == first  # same bytes from the cache


def _items(status: str = "ok") -> list:
    """Review items for four sample images with safety scores (moon highest, sun without one)."""
    from gavil.review.web import Item
    from gavil.review.web import Safety as Score

    model = "RN50/untrained" if status == "untrained" else "RN50/openai"
    scores = {"cat": 0.12, "moon": 0.91, "rocket": 0.4, "sun": None}
    return [
        Item(
            hashlib.sha256(c.encode()).hexdigest(),
            c,
            IMAGES / ("rocket.jpg" if c == "rocket" else f"{c}.png"),
            "local",
            Score(p, model, status) if p is not None else None,
        )
        for c, p in scores.items()
    ]


def test_the_highest_score_decides_nothing(tmp_path):
    """The image with the highest score stays pending until a reviewer decides, and is accepted when a
    reviewer accepts it: the page's state and the pipeline's status follow the decisions only."""
    from gavil.review.decisions import Decision, append_decision, latest, read_decisions
    from gavil.review.web import queue
    from stages.ocr_filter import apply_review

    items, decisions = _items(), tmp_path / "decisions.csv"
    top = max((i for i in items if i.safety), key=lambda i: i.safety.punsafe)
    assert top.concept == "moon"
    q = queue(items, decisions)
    assert {r["concept"]: r["state"] for r in q["items"]}["moon"] == "pending"
    assert {r["concept"]: r["punsafe"] for r in q["items"]} == {"cat": 0.12, "moon": 0.91, "rocket": 0.4, "sun": None}
    ocr = _ocr([(i.concept, i.sha256, str(i.path), "accepted") for i in items])
    pending = apply_review(ocr, latest(read_decisions(decisions)), required=True).set_index("concept")
    assert set(pending["status"]) == {"review_pending"}  # the score rejected nothing
    append_decision(decisions, Decision("ann", "2024-01-01T00:00:00Z", "accept", "", top.sha256, "moon"))
    assert {r["concept"]: r["state"] for r in queue(items, decisions)["items"]}["moon"] == "accepted"
    done = apply_review(ocr, latest(read_decisions(decisions)), required=True).set_index("concept")
    assert done.at["moon", "status"] == "accepted" and done.at["cat", "status"] == "review_pending"
    assert queue(items, decisions)["safety"] == {"scored": True, "untrained": False, "model": "RN50/openai"}
    unscored = queue([i for i in items if i.safety is None], decisions)["safety"]
    assert unscored["scored"] is False


def test_the_page_reads_the_scores_from_the_safety_table(in_tmp):
    from gavil.pipeline import catalog
    from gavil.review.web import review_items

    shas = _project_ocr(in_tmp)
    catalog.write_table(_images(list(shas)), "images")
    assert all(i.safety is None for i in review_items(in_tmp))  # no safety table yet
    catalog.write_table(pd.DataFrame([]), "safety")  # the stage while the score is off
    assert all(i.safety is None for i in review_items(in_tmp))
    rows = validate(
        pd.DataFrame(
            {
                "sha256": [shas["moon"], shas["cat"]],
                "status": ["untrained", "untrained"],
                "punsafe": [0.6, 0.3],
                "safety_model": ["RN50/untrained"] * 2,
                "reason": ["random weights"] * 2,
            }
        ),
        Safety,
    )
    catalog.write_table(rows, "safety")
    got = {i.concept: i.safety for i in review_items(in_tmp)}
    assert got["moon"].punsafe == 0.6 and got["moon"].status == "untrained" and got["rocket"] is None


def _images(concepts: list[str]) -> pd.DataFrame:
    """A :class:`schemas.crawl.Images` table naming ``concepts`` (crawl source ``local``; the page
    reads only the source)."""
    n = len(concepts)
    return pd.DataFrame(
        {
            "concept": concepts,
            "status": ["no_results"] * n,
            "reason": ["the review page reads the source only"] * n,
            "source": ["local"] * n,
            **{c: [None] * n for c in ("source_url", "sha256", "path", "format")},
            **{c: pd.array([None] * n, dtype="Int64") for c in ("width", "height", "bytes")},
            "candidates_kept": [0] * n,
        }
    )


@pytest.mark.slow
def test_the_review_page_sorts_by_the_score_and_names_untrained_scores(browser):
    from playwright.sync_api import expect

    from gavil.review.web import create_app
    from tests.helpers import serve_app

    def order(page) -> list[str]:
        return page.locator("#grid .tile").evaluate_all("ts => ts.map(t => t.dataset.concept)")

    for status in ("ok", "untrained"):
        with serve_app(create_app(_items(status), "decisions.csv")) as url:
            page = browser.new_page()
            page.goto(url + "/")
            expect(page.locator("#grid .tile")).to_have_count(4)
            expect(page.locator("#sort-box")).to_be_visible()
            if status == "ok":  # a real score orders the queue by default: highest first, unscored last
                expect(page.locator("#safety-note")).to_contain_text("they decide nothing")
                assert order(page) == ["moon", "rocket", "cat", "sun"]
                page.select_option("#sort", "concept")
                expect(page.locator("#grid .tile").first).to_have_attribute("data-concept", "cat")
                assert order(page) == ["cat", "moon", "rocket", "sun"]
            else:  # random weights: said so, and the concept order stays the default
                expect(page.locator("#safety-note")).to_contain_text("random weights (untrained)")
                expect(page.locator("#grid .tile[data-concept='moon']")).to_contain_text("0.91 (untrained)")
                assert order(page) == ["cat", "moon", "rocket", "sun"]
                page.select_option("#sort", "safety")
                expect(page.locator("#grid .tile").first).to_have_attribute("data-concept", "moon")
                assert order(page) == ["moon", "rocket", "cat", "sun"]
            page.close()
    with serve_app(create_app(_items("ok")[3:], "decisions.csv")) as url:  # no score: no sort offered
        page = browser.new_page()
        page.goto(url + "/")
        expect(page.locator("#grid .tile")).to_have_count(1)
        expect(page.locator("#sort-box")).to_be_hidden()
        expect(page.locator("#safety-note")).to_be_hidden()
        page.close()


@pytest.mark.slow
def test_without_weights_the_rows_have_no_score_and_a_fixed_reason(in_tmp):
    """Enabled on a machine without the rival's weights (no cache, no download): every image is
    ``no_weights`` with a null score, and the stage goes on, naming the key to set."""
    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage

    _project_ocr(in_tmp)
    rival = {"cache_dir": str(in_tmp / "empty-cache"), "allow_download": False, "threads": 1, "loader_workers": 0}
    metrics = run_stage("safety_score", Params().replace(review={"safety": {"enabled": True}}, models={"rival": rival}))
    out = catalog.read_table("safety")
    assert len(out) == 3 and set(out["status"]) == {"no_weights"} and out["punsafe"].isna().all()
    assert set(out["safety_model"]) == {"RN50/openai"} and out["reason"].str.contains("weights_path").all()
    assert metrics["by_status"] == {"no_weights": 3} and "models.rival.weights_path" in metrics["message"]
