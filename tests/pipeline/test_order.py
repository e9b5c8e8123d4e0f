"""Order never matters (issue 26): shuffling the rows of any user file a stage reads gives
byte-identical output tables and metrics, and a vector in the embedding cache is a function of
its content alone.

Each test writes a file twice, once with its rows shuffled (same content), runs the stage's pure
core on both and compares the outputs as Parquet bytes (:func:`frame_bytes`) and the metrics as
JSON. Where a column records *where* a row was read (``source_line``: provenance, by design a
property of the file's layout), the test drops that column and says so.
"""

from __future__ import annotations

import csv
import io
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gavil.models.embeddings import Cache
from tests.helpers import RELEASE

KEY = b"order-test-key"


def frame_bytes(df: pd.DataFrame) -> bytes:
    """``df`` as Parquet bytes (index dropped): equal bytes = equal rows, order and dtypes."""
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(df.reset_index(drop=True), preserve_index=False), buf)
    return buf.getvalue()


def shuffled_csv(src: Path, dest: Path, seed: int, extra: list[list[str]] | None = None) -> Path:
    """``src``'s data rows (plus ``extra``) in a seeded random order under ``dest`` (header first)."""
    with open(src, newline="", encoding="utf-8-sig") as f:
        rows = list(csv.reader(f))
    head, body = rows[0], rows[1:] + (extra or [])
    random.Random(seed).shuffle(body)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([head, *body])
    return dest


def write_rows(path: Path, header: list[str], rows: list[list[Any]], seed: int | None, sep: str = ",") -> Path:
    """``rows`` under ``header``, shuffled with ``seed`` (None: as given)."""
    body = [list(map(str, r)) for r in rows]
    if seed is not None:
        random.Random(seed).shuffle(body)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter=sep, lineterminator="\n").writerows([header, *body])
    return path


# --------------------------------------------------------------------------- ingest_concepts


def _ingest_outputs(path: Path) -> tuple[bytes, bytes, bytes, str]:
    from stages.ingest_concepts import ingest

    res = ingest(path)
    metrics = {k: v for k, v in res.metrics.items() if k != "input"}  # input: the file's path
    assert res.rejects is not None
    return frame_bytes(res.edges), frame_bytes(res.concepts), frame_bytes(res.rejects), json.dumps(metrics)


def test_ingest_strength_file_rank_ties_and_merges_do_not_follow_row_order(tmp_path):
    # equal counts (ties), a case-merge (Moon/moon) and a word the name policy refuses
    header = ["cue", "response", "R1", "N", "R1.Strength"]
    rows = [
        ["moon", "sun", 2, 10, 0.2],
        ["moon", "night", 2, 10, 0.2],
        ["moon", "star", 2, 10, 0.2],
        ["moon", "cheese", 1, 10, 0.1],
        ["Moon", "crater", 1, 10, 0.1],
        ["moon", "sky\u200b", 1, 10, 0.1],
        ["rocket", "space", 3, 9, 0.333333],
        ["rocket", "fuel", 3, 9, 0.333333],
        ["rocket", "nasa", 3, 9, 0.333333],
    ]
    outs = [
        _ingest_outputs(write_rows(tmp_path / str(s) / "strength.SWOW-EN.R1.csv", header, rows, s, "\t"))
        for s in (None, 1, 2)
    ]
    assert outs[0] == outs[1] == outs[2]
    edges = pd.read_parquet(io.BytesIO(outs[0][0]))
    moon = edges[edges["cue"] == "moon"].sort_values("rank")["response"].tolist()
    assert moon[:3] == ["night", "star", "sun"]  # a count tie ranks by name


def test_ingest_r100_file_does_not_follow_row_order(tmp_path):
    from stages.ingest_concepts.formats import R100_HEADER

    header = list(R100_HEADER)
    rows = [
        [i, i, 100 + i, 30, "Fe", "en", "x", 3, "2020", cue, r1, r2, r3]
        for i, (cue, r1, r2, r3) in enumerate(
            [
                ("moon", "sun", "night", "star"),
                ("moon", "night", "sun", "cheese"),
                ("moon", "star", "crater", "NA"),
                ("rocket", "space", "fuel", "nasa"),
                ("rocket", "nasa", "space", "fire"),
                ("rocket", "fire", "fuel", "smoke"),
            ]
        )
    ]
    outs = [_ingest_outputs(write_rows(tmp_path / str(s) / "SWOW-EN.R100.csv", header, rows, s)) for s in (None, 3, 4)]
    assert outs[0] == outs[1] == outs[2]


def test_ingest_release_swow_csv_does_not_follow_row_order(tmp_path):
    with open(RELEASE / "swow.csv", newline="", encoding="utf-8") as f:
        first = list(csv.reader(f))[1]
    again = list(first)  # the same cue on a second row, other associations: its ranks must not follow the rows
    again[0], again[2] = "99999", json.dumps(list(reversed(json.loads(first[2]))))
    outs = [
        _ingest_outputs(shuffled_csv(RELEASE / "swow.csv", tmp_path / str(s) / "swow.csv", s, [again])) for s in (5, 6)
    ]
    assert outs[0] == outs[1]


# --------------------------------------------------------------------------- crawl_images


def test_crawl_url_map_merges_colliding_keys_in_key_order(tmp_path):
    from stages.crawl_images.sources import load_url_map

    data = {
        "moon": ["https://a.test/moon1.jpg"],
        "Moon": "https://a.test/Moon.jpg",
        " moon": ["https://a.test/moon2.jpg"],
        "rocket": ["https://a.test/r1.jpg", "https://a.test/r2.jpg"],
        "cat": "https://a.test/cat.jpg",
    }
    maps = []
    for s in (7, 8, 9):
        items = list(data.items())
        random.Random(s).shuffle(items)
        path = tmp_path / f"{s}.json"
        path.write_text(json.dumps(dict(items)))
        maps.append(load_url_map(str(path)))
    assert maps[0] == maps[1] == maps[2]
    assert maps[0]["rocket"].urls == ["https://a.test/r1.jpg", "https://a.test/r2.jpg"]  # within a key: as given


def test_crawl_local_folder_does_not_follow_file_creation_order(tmp_path):
    from stages.crawl_images.sources import local_candidates

    names = ["moon.jpg", "Moon.png", "rocket.jpg", "cat.webp", "notes.txt"]
    found = []
    for s in (10, 11):
        folder = tmp_path / str(s)
        folder.mkdir()
        order = list(names)
        random.Random(s).shuffle(order)
        for n in order:
            (folder / n).write_bytes(b"x")
        got = local_candidates(["moon", "rocket", "cat", "dog"], folder)
        found.append({c: ([Path(u).name for u in f.urls], f.note) for c, f in got.items()})
    assert found[0] == found[1]


# --------------------------------------------------------------------------- import_annotations

CREATIONS = [
    ["b1-0001", "worker-A17", "space", '["rocket", "cat", "moon", "coffee", "brick"]', '["rocket", "moon"]', 0],
    ["b1-0002", "worker-A17", "meow", '["rocket", "cat", "moon", "coffee", "brick"]', '["cat", "coffee"]', 67],
    ["b1-0003", "worker-B02", "wall", '["rocket", "cat", "moon", "coffee", "brick"]', '["brick", "coffee"]', 20],
    [
        "b1-0004",
        "worker-B02",
        "night",
        '["rocket", "cat", "moon", "coffee", "brick", "clock"]',
        '["moon", "clock"]',
        50,
    ],
    ["b1-0005", "worker-C03", "", '["rocket", "cat", "moon", "coffee", "brick"]', '["rocket", "moon"]', 0],  # rejected
]
SOLVES = [
    [iid, f"worker-S{j:02d}", sel]
    for iid, sel in [
        ("b1-0001", '["rocket", "moon"]'),
        ("b1-0002", '["cat", "coffee"]'),
        ("b1-0003", '["brick", "coffee"]'),
        ("b1-0004", '["moon", "clock"]'),
    ]
    for j in range(1, 4)
] + [["b1-0404", "worker-S09", '["moon", "rocket"]']]  # an unknown instance: rejected
FIXED = ["SubmitTime", "WorkTimeInSeconds"]
CROWD_COLS = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", *FIXED]
CROWD_COLS += ["Input.candidates", "Answer.cue1", "Answer.associations1", "Answer.fool1"]
CROWD_COLS += ["Answer.cue2", "Answer.associations2", "Answer.fool2"]
CANDS = '["cat", "moon", "coffee", "brick", "rocket"]'


def _hit(n: int, status: str, cue1: str, assoc1: str, cue2: str, assoc2: str) -> list[Any]:
    """One crowd creation HIT row (two cues on one candidate set)."""
    return [f"H{n}", f"A{n}", f"W{n}", status, f"t{n}", 60 + n, CANDS, cue1, assoc1, 10 * n, cue2, assoc2, 20 * n]


CROWD = [
    _hit(1, "Approved", "milk", '["cat", "coffee"]', "launch", '["rocket", "moon"]'),
    _hit(2, "Submitted", "red", '["brick", "rocket"]', "cup", '["coffee", "cat"]'),
    _hit(3, "Rejected", "x", '["cat", "coffee"]', "y", '["rocket", "moon"]'),
]
CROWD_SOLVE_COLS = ["HITId", "AssignmentId", "WorkerId", "AssignmentStatus", *FIXED, "Input.instance_id"]
CROWD_SOLVE_COLS += ["Answer.selection"]
CROWD_SOLVES = [
    [f"S{i}{k}{j}", f"SA{i}{k}{j}", f"W{j}9", "Approved", "t", 9, f"A{i}:{k}", sel]
    for i in (1, 2)
    for k, sel in ((1, '["cat", "coffee"]'), (2, '["rocket", "moon"]'))
    for j in range(3)
]


def _annotations(root: Path, seed: int | None):
    from gavil.params import Params
    from stages.import_annotations import import_all
    from stages.select_instances import select

    batch = root / "raw" / "batch-0001"
    write_rows(
        batch / "creations.csv",
        ["instance_id", "spymaster_id", "cue", "candidates", "associations", "score_fool_the_ai"],
        CREATIONS,
        seed,
    )
    write_rows(batch / "solves.csv", ["instance_id", "solver_id", "selection"], SOLVES, seed)
    write_rows(batch / "crowd_creations.csv", CROWD_COLS, CROWD, seed)
    write_rows(batch / "crowd_solves.csv", CROWD_SOLVE_COLS, CROWD_SOLVES, seed)
    crowd = Params().annotations.crowd.model_dump()
    res = import_all(None, [], root / "raw", KEY, crowd)
    sel = select(res.instances, res.solves, 0.8)
    return res, sel


def _content(df: pd.DataFrame, by: list[str]) -> bytes:
    """``df`` without its ``source_line`` (where a row was read: provenance), rows sorted by ``by``."""
    out = df.drop(columns=["source_line", "source_file"], errors="ignore").astype({c: str for c in by})
    return frame_bytes(out.sort_values(by, kind="stable"))


def test_import_annotations_raw_and_crowd_batches_do_not_follow_row_order(tmp_path):
    (a, sel_a), (b, sel_b) = _annotations(tmp_path / "a", None), _annotations(tmp_path / "b", 12)
    assert len(a.instances) == 8 and len(a.solves) == 24 and len(a.rejects) == 3  # the test's inputs
    assert _content(a.instances, ["instance_uid"]) == _content(b.instances, ["instance_uid"])
    assert _content(a.solves, ["instance_uid", "solver"]) == _content(b.solves, ["instance_uid", "solver"])
    assert _content(a.rejects, ["kind", "reason", "row"]) == _content(b.rejects, ["kind", "reason", "row"])
    strip = {k: v for k, v in a.metrics.items() if k not in ("batches", "ignored_files")}
    assert json.dumps(strip, sort_keys=True) == json.dumps(
        {k: v for k, v in b.metrics.items() if k not in ("batches", "ignored_files")}, sort_keys=True
    ).replace(str(tmp_path / "b"), str(tmp_path / "a"))
    # the selection (benchmark IDs included) is byte-identical
    assert (sel_a["status"] == "selected").sum() == 6
    assert frame_bytes(sel_a) == frame_bytes(sel_b)


def test_import_annotations_release_files_import_the_same_instances_in_any_row_order(tmp_path):
    from stages.import_annotations import import_all

    files = [{"file": "game_5_6.csv", "dataset": "game"}, {"file": "swow.csv", "dataset": "swow_baseline"}]
    res = []
    for s in (13, 14):
        for f in files:
            shuffled_csv(RELEASE / f["file"], tmp_path / str(s) / f["file"], s)
        res.append(import_all(tmp_path / str(s), files, None, KEY))
    a, b = res
    assert len(a.instances) == 2709 + 998
    # by design the release's row order names its instances' published IDs (the round trip stays
    # byte-identical); what a row *is* never depends on where it stands
    assert _content(a.instances, ["instance_uid"]) == _content(b.instances, ["instance_uid"])
    assert a.metrics["rows_read"].keys() != b.metrics["rows_read"].keys()  # the two folders' paths
    assert list(a.metrics["rows_read"].values()) == list(b.metrics["rows_read"].values())


# --------------------------------------------------------------------------- evaluate


def _shuffled_release(dest: Path, seed: int) -> Path:
    src = RELEASE / "test_sets_with_zero_shot_predictions"
    for f in sorted(src.glob("*.csv")):
        shuffled_csv(f, dest / f.name, seed)
    return dest


def test_evaluate_release_predictions_do_not_follow_row_order(tmp_path):
    from stages.evaluate import paired, release_predictions

    outs = []
    for s in (15, 16):
        folder = _shuffled_release(tmp_path / str(s), s)
        rows = release_predictions(folder)
        rel_inst, rel_pred = paired.release_game_predictions(
            folder, ["game_5_6_with_predictions.csv", "game_10_12_with_predictions.csv"]
        )
        both = paired.both_solved(rel_inst, rel_pred, "release", 50, 0)
        outs.append((frame_bytes(rows), frame_bytes(both), json.dumps(paired.find_pairs(rel_inst)[1])))
    assert outs[0] == outs[1]


def test_evaluate_paper_files_do_not_follow_row_order(tmp_path):
    from stages.evaluate import association_types, captions

    outs = []
    for s in (17, 18):
        caps = captions.load_captions(
            shuffled_csv(RELEASE / "ofa_image_caption_predictions.csv", tmp_path / str(s) / "caps.csv", s)
        )
        types = association_types.load_types(
            shuffled_csv(
                RELEASE / "model_analysis_on_different_association_types.csv", tmp_path / str(s) / "types.csv", s
            )
        )
        table6 = association_types.by_type(types, dict(zip(types["ID"], types["predictions"])))
        outs.append((json.dumps(sorted(caps.items())), frame_bytes(types.astype(str)), json.dumps(table6)))
    assert outs[0] == outs[1]


# --------------------------------------------------------------------------- adversarial_filter


def test_adversarial_filter_pools_are_drawn_per_instance_id_not_position():
    from stages.adversarial_filter import pools_for

    accepted = [f"w{i:03d}" for i in range(300)]
    swow = pd.DataFrame(
        {
            "instance_id": ["swow:a", "swow:b", "swow:c"],
            "cue": ["a", "b", "c"],
            "candidates": [["w000", "w001", "w002", "w003", "w004"]] * 3,
            "associations": [["w000", "w001"]] * 3,
        }
    )
    edges = pd.DataFrame({"cue": ["a"], "response": ["w005"]})
    pools, _ = pools_for(swow, accepted, edges, 40, 0)
    alone, _ = pools_for(swow.iloc[[2]], accepted, edges, 40, 0)  # without the other instances
    flipped, _ = pools_for(swow.iloc[::-1], accepted, edges, 40, 0)
    assert alone[0] == pools[2] and flipped[::-1] == pools
    assert pools[1] != pools[2]  # each instance has its own draw


# --------------------------------------------------------------------------- the embedding cache


def _fake_embedder(calls: list[list[str]]):
    def embed(texts: list[str]) -> np.ndarray:
        calls.append(list(texts))
        out = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return embed


def test_cache_file_depends_on_the_run_not_on_history_or_order(tmp_path):
    key = ("m", "w|fp32-cpu", "text")
    words = ["moon", "sun", "rocket", "cat", "brick"]
    fresh = Cache([], tmp_path / "fresh.parquet")
    calls: list[list[str]] = []
    fresh.ensure(key, {w: w for w in reversed(words)}, _fake_embedder(calls))
    assert calls == [sorted(words)]  # the embedder sees the sorted unique keys
    fresh.save()
    # a cache that saw other words first, and this run's words in another order, in two calls
    old = Cache([], tmp_path / "old.parquet")
    old.ensure(key, {w: w for w in ["zebra", "moon", "quay"]}, _fake_embedder([]))
    old.save()
    again = Cache([], tmp_path / "old.parquet")
    again.ensure(key, {w: w for w in ["cat", "brick", "moon"]}, _fake_embedder([]))
    again.ensure(key, {w: w for w in ["sun", "rocket"]}, _fake_embedder([]))
    assert len(again) == 5 and again.hits == 1
    again.save()
    assert (tmp_path / "old.parquet").read_bytes() == (tmp_path / "fresh.parquet").read_bytes()


def test_cache_ignores_vectors_of_another_recipe(tmp_path):
    from gavil.io import write_parquet
    from schemas.embeddings import EmbeddingCache

    stale = (np.ones(3) / np.sqrt(3)).astype("<f4")
    row = {"model": "m", "weights_id": "w|fp32-cpu", "kind": "text", "key": "moon", "dim": 3}
    write_parquet(pd.DataFrame([{**row, "vector": stale.tobytes()}]), tmp_path / "c.parquet", EmbeddingCache)
    cache = Cache([], tmp_path / "c.parquet")
    calls: list[list[str]] = []
    got = cache.ensure(("m", "w|fp32-cpu", "text"), {"moon": "moon"}, _fake_embedder(calls))
    assert calls == [["moon"]] and got["moon"].tobytes() != stale.tobytes()  # recomputed, never looked up
    cache.save()
    saved = pd.read_parquet(tmp_path / "c.parquet")
    assert saved["weights_id"].tolist() == [f"w|fp32-cpu|{cache.recipe}"]


@pytest.fixture(scope="module")
def minilm():
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model

    return load_model(ModelSpec("text-minilm-l6", "text", "all-MiniLM-L6-v2"), RuntimeOptions(threads=2))


def test_a_text_vector_is_a_function_of_its_text_alone(minilm):
    words = ["moon", "sun", "rocket ship", "a cat on a mat", "brick", "lord of the rings", "tea", "x", "astronaut"]
    words += [f"word{i} and a longer phrase {i}" for i in range(12)]
    base = Cache([], None).ensure(minilm.cache_key("text"), {w: w for w in words}, minilm.embed_texts)
    rng = random.Random(19)
    for size in (1, 3, 11, len(words)):
        subset = rng.sample(words, size) + [f"other text {rng.random()}" for _ in range(5)]
        got = Cache([], None).ensure(minilm.cache_key("text"), {w: w for w in subset}, minilm.embed_texts)
        for w in subset:
            if w in base:
                assert got[w].tobytes() == base[w].tobytes(), (w, size)


@pytest.mark.slow
def test_an_image_vector_is_a_function_of_its_image_alone():
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from tests.helpers import IMAGES

    model = load_model(ModelSpec("rival", "open_clip", "RN50", None), RuntimeOptions(batch_size=4, threads=2))
    assert model.untrained and model.embed_images is not None
    paths = {p.stem: str(p) for p in sorted(IMAGES.glob("*")) if p.suffix in (".png", ".jpg")}
    paths = {k: paths[k] for k in sorted(paths)[:7]}
    assert len(paths) == 7
    base = Cache([], None).ensure(model.cache_key("image"), paths, model.embed_images)
    for keys in ([list(paths)[3]], list(paths)[::-2], list(paths)[1:4]):
        got = Cache([], None).ensure(model.cache_key("image"), {k: paths[k] for k in keys}, model.embed_images)
        assert all(got[k].tobytes() == base[k].tobytes() for k in keys), keys
