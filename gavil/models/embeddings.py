"""Embedding cache and vectorised rival-model prediction, shared by ``score_candidates`` and
``evaluate``.

Each image (by sha256) and each text is embedded once per (model, weights): the cache is a
Parquet table (:class:`schemas.embeddings.EmbeddingCache`), read from one or more files and
written back atomically; adding instances or images embeds only what is new. Scoring is then a
lookup, a batched dot product and a stable arg-sort (ties keep candidate order).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from gavil.domain.winogavil import cue_key, fool_the_ai_score, jaccard, prompt_for_cue, rank_by_score
from gavil.io import write_parquet
from gavil.models.loading import LoadedModel
from schemas.embeddings import EmbeddingCache

Key = tuple[str, str, str]  # (model, weights_id|numerics, kind): LoadedModel.cache_key


class _InstanceRow(Protocol):
    """An ``instances`` row of :func:`predict` as ``itertuples`` yields it (the fields read)."""

    instance_id: str
    cue: str
    candidates: Iterable[str]
    associations: Iterable[str]


#: The embedding recipe (how batches are formed, :func:`canonical_batches`). Part of every cache
#: key with the versions of the libraries that compute vectors, so vectors computed another way
#: (an older release of this code, another torch) are never looked up: they are recomputed and
#: dropped from the file on the next save.
RECIPE = "canonical-v2"
_NUMERIC_LIBS = ("torch", "transformers", "sentence-transformers", "open_clip_torch")


def recipe_id() -> str:
    """``RECIPE`` plus the installed releases of the libraries that compute vectors, e.g.
    ``canonical-v2 torch=2.13.0 transformers=5.23.0 ...`` (missing ones are left out).

    A release is its public version (PEP 440): a local label such as torch's ``+cpu`` or ``+cu126``
    names which accelerator the build supports, and the device that computed a vector is already in
    its key (:meth:`gavil.models.loading.LoadedModel.cache_key`), so the public index's torch and
    a CPU-only build of the same release share entries (the sample's shipped vectors among them)."""
    from importlib import metadata

    parts = [RECIPE]
    for dist in _NUMERIC_LIBS:
        try:
            parts.append(f"{dist}={metadata.version(dist).split('+', 1)[0]}")
        except metadata.PackageNotFoundError:
            continue
    return " ".join(parts)


def canonical_batches(keys: Sequence[str], size: int) -> list[list[str]]:
    """``keys`` sorted and deduplicated, cut into chunks of ``size`` (the last may be shorter).

    Only the composition of what is embedded is made canonical here; whether a vector also
    depends on its batch neighbours is the embedder's business (see :class:`Cache`)."""
    uniq = sorted(set(keys))
    return [uniq[i : i + size] for i in range(0, len(uniq), max(1, size))]


class Cache:
    """In-memory view of cache files; new embeddings are written to ``write_path`` only.

    Keyed by content: (model, weights_id|numerics, kind) and the text itself or the image's
    sha256, with :func:`recipe_id` appended to the weights_id, so a row is a function of its key.
    What is missing is embedded in sorted key order (:meth:`ensure`), deduplicated, so the set
    and order of what an embedder sees depends only on the keys asked for, never on the callers'
    row order. :meth:`save` writes the rows this run *used* that no read-only file holds, sorted
    by key: the file's bytes depend on the run's inputs, not on what earlier runs left in it.

    Args:
        read_paths: cache files to read (missing files are fine), e.g. another stage's cache.
        write_path: this stage's cache file (also read).
    """

    def __init__(self, read_paths: Sequence[str | os.PathLike[str]], write_path: str | os.PathLike[str] | None):
        self.write_path = Path(write_path) if write_path else None
        self.recipe = recipe_id()
        self._vec: dict[Key, dict[str, np.ndarray]] = {}
        self._shared: set[tuple[Key, str]] = set()  # held by a read-only file: never written here
        self._used: set[tuple[Key, str]] = set()
        self.hits = 0
        self.computed = 0
        paths = [Path(p) for p in read_paths]
        if self.write_path is not None and self.write_path not in paths:
            paths.append(self.write_path)
        for p in paths:
            if p.exists():
                df = self._read(p)
                # cast: pandas-stubs types groupby keys as tuple[Hashable, ...]; here (model, weights_id, kind)
                groups = cast(
                    "Iterable[tuple[Key, pd.DataFrame]]", df.groupby(["model", "weights_id", "kind"], sort=False)
                )
                for (m, w, k), g in groups:
                    store = self._vec.setdefault((m, w, k), {})
                    for key, blob in zip(g["key"], g["vector"]):
                        store[key] = np.frombuffer(blob, dtype="<f4")
                        if p != self.write_path:
                            self._shared.add(((m, w, k), key))

    @staticmethod
    def _read(path: Path) -> pd.DataFrame:
        t = pq.read_table(path)
        df = t.drop(["vector"]).to_pandas()
        df["vector"] = t.column("vector").to_pylist()
        return EmbeddingCache.validate(df)

    def full_key(self, key: Key) -> Key:
        """``key`` as stored: the weights_id followed by ``|`` and :func:`recipe_id`."""
        return key[0], f"{key[1]}|{self.recipe}", key[2]

    def __len__(self) -> int:
        """Distinct embeddings this run used (asked for or added): a function of the run's inputs."""
        return len(self._used)

    def ensure(
        self, key: Key, items: dict[str, Any], compute: Callable[[list[Any]], np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Embeddings for every item key; computes (in one call) only the missing ones.

        Args:
            key: (model, weights_id, kind) (:meth:`gavil.models.loading.LoadedModel.cache_key`).
            items: cache key -> what ``compute`` needs for it (an image path, a text); the key must
                identify the content (the text itself, the image's sha256).
            compute: payloads -> (n, d) float32, rows in the same order; called once with the
                missing payloads in sorted key order.

        Raises:
            RuntimeError: ``compute`` returned another number of rows than it was given.
        """
        fk = self.full_key(key)
        store = self._vec.setdefault(fk, {})
        missing = sorted(k for k in items if k not in store)
        self.hits += len(items) - len(missing)
        if missing:
            vecs = np.asarray(compute([items[k] for k in missing]), dtype="<f4")
            if vecs.shape[0] != len(missing):
                raise RuntimeError(f"embedder returned {vecs.shape[0]} rows for {len(missing)} inputs")
            for k, v in zip(missing, vecs):
                store[k] = np.ascontiguousarray(v)
            self.computed += len(missing)
        self._used.update((fk, k) for k in items)
        return {k: store[k] for k in items}

    def new_rows(self) -> list[dict[str, Any]]:
        """Rows used by this cache that no read-only file holds (to hand to another process's cache:
        :meth:`add_rows`), sorted by key."""
        rows = []
        for fk, k in sorted(self._used - self._shared):
            v = self._vec[fk][k]
            rows.append(
                {
                    "model": fk[0],
                    "weights_id": fk[1],
                    "kind": fk[2],
                    "key": k,
                    "dim": int(v.shape[0]),
                    "vector": v.astype("<f4").tobytes(),
                }
            )
        return rows

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Add cache rows computed elsewhere (a partition, :meth:`new_rows`); they count as used.
        A key already held keeps its vector."""
        for r in rows:
            fk = (r["model"], r["weights_id"], r["kind"])
            store = self._vec.setdefault(fk, {})
            if r["key"] not in store:
                store[r["key"]] = np.frombuffer(r["vector"], dtype="<f4")
                self.computed += 1
            self._used.add((fk, r["key"]))

    def save(self) -> int:
        """Write this stage's cache file atomically: the rows used this run that no read-only file
        holds, sorted by (model, weights_id, kind, key). Returns rows written (0: no write_path)."""
        if self.write_path is None:
            return 0
        cols = list(EmbeddingCache.to_schema().columns)
        df = pd.DataFrame(self.new_rows(), columns=cols)
        df["dim"] = df["dim"].astype(int)
        self.write_path.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(df, self.write_path, EmbeddingCache)
        return len(df)


def predict(
    candidates: Sequence[Sequence[str]],
    queries: Sequence[str],
    ks: Sequence[int],
    cand_vecs: dict[str, np.ndarray],
    query_vecs: dict[str, np.ndarray],
    chunk: int = 2048,
) -> tuple[list[list[int]], list[list[float]]]:
    """Top-K candidate positions and similarities for many instances at once.

    Instances are grouped by N; similarities = batched dot products of unit vectors (cosine);
    :func:`gavil.domain.winogavil.rank_by_score` keeps candidate order on ties (reference "Formulas").

    Returns:
        (per instance: the K chosen candidate positions in rank order, all N similarities).
    """
    keys = sorted({c for cs in candidates for c in cs})
    index = {k: i for i, k in enumerate(keys)}
    mat = np.stack([cand_vecs[k] for k in keys]) if keys else np.zeros((0, 1), "<f4")
    qkeys = sorted(set(queries))
    qindex = {k: i for i, k in enumerate(qkeys)}
    qmat = np.stack([query_vecs[k] for k in qkeys]) if qkeys else np.zeros((0, 1), "<f4")
    picks: list[list[int]] = [[] for _ in candidates]
    sims_out: list[list[float]] = [[] for _ in candidates]
    by_n: dict[int, list[int]] = {}
    for i, cs in enumerate(candidates):
        by_n.setdefault(len(cs), []).append(i)
    for rows in by_n.values():
        for start in range(0, len(rows), chunk):
            part = rows[start : start + chunk]
            idx = np.array([[index[c] for c in candidates[i]] for i in part])
            q = qmat[[qindex[queries[i]] for i in part]]
            sims = np.einsum("mnd,md->mn", mat[idx], q)
            order = rank_by_score(sims)
            for j, i in enumerate(part):
                picks[i] = order[j, : ks[i]].tolist()
                sims_out[i] = sims[j].astype(float).tolist()
    return picks, sims_out


def score_instances(
    instances: pd.DataFrame,
    model: LoadedModel | None,
    images: dict[str, tuple[str, str]],
    cache: Cache,
    no_weights: str = "no weights",
) -> pd.DataFrame:
    """Score instances with one model (rows in input order).

    Args:
        instances: instance_id, cue, candidates (list[str]), associations (list[str]).
        model: loaded model, or None when its weights were unavailable (``no_weights`` says why).
        images: concept -> (sha256, path) of every accepted image (open_clip models need them).
        cache: embedding cache (consulted first, extended with what is computed).

    Returns:
        Columns of :class:`schemas.scores.Scores` except model/pretrained/model_name: instance_id,
        cue, prompt, candidates, associations, status (ok, untrained, no_weights, missing_image),
        reason, predictions, similarities, jaccard (fraction), score_fool_the_ai (0-100).
    """
    rows = _unscored_rows(instances)
    if model is None:
        for r in rows:
            r.update(status="no_weights", reason=no_weights)
        return _frame(rows)
    is_text = model.spec.kind == "text"
    scorable = []
    for r in rows:
        missing = [] if is_text else [c for c in r["candidates"] if c not in images]
        if missing:
            r.update(status="missing_image", reason=f"no accepted image for {missing}")
        else:
            scorable.append(r)
    if scorable:
        cand_keys, qkeys, cand_vecs, query_vecs = _embedded(scorable, model, images, cache)
        picks, sims = predict(cand_keys, qkeys, [len(r["associations"]) for r in scorable], cand_vecs, query_vecs)
        for r, pick, s in zip(scorable, picks, sims):
            pred = [r["candidates"][i] for i in pick]
            r.update(
                status="untrained" if model.untrained else "ok",
                reason="random weights (pretrained: null): not a real model score" if model.untrained else None,
                predictions=pred,
                similarities=s,
                jaccard=jaccard(pred, r["associations"]),
                score_fool_the_ai=fool_the_ai_score(pred, r["associations"]),
            )
    return _frame(rows)


def _unscored_rows(instances: pd.DataFrame) -> list[dict[str, Any]]:
    """One output row per instance (input order): its instance_id, cue, prompt, candidates and
    associations (lists), the score columns still None and no status yet."""
    rows: list[dict[str, Any]] = []
    # cast: pandas-stubs types every itertuples field as a scalar; list columns hold lists
    for rec in cast("Iterator[_InstanceRow]", instances.itertuples(index=False)):
        rows.append(
            {
                "instance_id": rec.instance_id,
                "cue": rec.cue,
                "prompt": prompt_for_cue(rec.cue),
                "candidates": list(rec.candidates),
                "associations": list(rec.associations),
                "predictions": None,
                "similarities": None,
                "jaccard": None,
                "score_fool_the_ai": None,
            }
        )
    return rows


def _embedded(
    scorable: list[dict[str, Any]], model: LoadedModel, images: dict[str, tuple[str, str]], cache: Cache
) -> tuple[list[list[str]], list[str], dict[str, np.ndarray], dict[str, np.ndarray]]:
    """What :func:`predict` needs for the ``scorable`` rows, embedded through ``cache``: each row's
    candidate keys, its query key, and the candidate and query vectors by key.

    A text model embeds the candidates' names and the cues (:func:`cue_key`) in one call; an
    open_clip model embeds the candidates' images (by sha256, from ``images``) and then the prompts.
    """
    cand_keys = [r["candidates"] for r in scorable]
    if model.spec.kind == "text":
        words = {c: c for r in scorable for c in r["candidates"]}
        queries = {cue_key(r["cue"]): cue_key(r["cue"]) for r in scorable}
        both = cache.ensure(model.cache_key("text"), {**words, **queries}, model.embed_texts)
        return cand_keys, [cue_key(r["cue"]) for r in scorable], both, both
    assert model.embed_images is not None
    shas = {images[c][0]: images[c][1] for r in scorable for c in r["candidates"]}
    sha_vecs = cache.ensure(model.cache_key("image"), shas, model.embed_images)
    cand_vecs = {c: sha_vecs[images[c][0]] for r in scorable for c in r["candidates"]}
    query_vecs = cache.ensure(
        model.cache_key("text"),
        {r["prompt"]: r["prompt"] for r in scorable},
        model.embed_texts,
    )
    return cand_keys, [r["prompt"] for r in scorable], cand_vecs, query_vecs


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    cols = [
        "instance_id",
        "status",
        "reason",
        "cue",
        "prompt",
        "candidates",
        "associations",
        "predictions",
        "similarities",
        "jaccard",
        "score_fool_the_ai",
    ]
    df = pd.DataFrame(rows, columns=cols)
    df["score_fool_the_ai"] = df["score_fool_the_ai"].astype("Int64")
    df["jaccard"] = df["jaccard"].astype(float)
    return df


def ship_text_vectors(
    read_paths: Sequence[str | os.PathLike[str]], out_path: str | os.PathLike[str], model: str
) -> int:
    """Write ``out_path``, a read-only embedding cache to ship in git (``sample_embeddings``): the
    rows of the cache files ``read_paths`` (and of ``out_path`` when it exists) whose ``model`` is
    ``model`` and whose ``weights_id`` ends with this installation's :func:`recipe_id`, one per
    (model, weights_id, kind, key), sorted by them; written atomically.

    Only a text model's vectors are exact enough to ship: it runs in float64 and rounds to float32,
    so its vectors are the same bytes on every CPU kernel and thread count
    (``tests/pipeline/test_determinism.py``); a stage that finds a row here would have computed
    those bytes itself. Rows of another recipe (another torch or transformers) are left out: no
    run would look them up.

    Args:
        read_paths: the stages' embedding caches after a run that computed the sample's vectors.
        out_path: the shipped file (``data/sample/embeddings.parquet``).
        model: the text model id, e.g. ``all-MiniLM-L6-v2``.

    Returns:
        The number of rows written.

    Raises:
        pandera.errors.SchemaErrors: a cache file breaks :class:`schemas.embeddings.EmbeddingCache`.
    """
    paths = [Path(p) for p in (*read_paths, out_path)]
    suffix = "|" + recipe_id()
    frames = [Cache._read(p) for p in paths if p.exists()]
    cols = list(EmbeddingCache.to_schema().columns)
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=cols)
    df = df[(df["model"] == model) & df["weights_id"].str.endswith(suffix)]
    df = df.drop_duplicates(["model", "weights_id", "kind", "key"]).sort_values(["model", "weights_id", "kind", "key"])
    df = df.reset_index(drop=True)[cols]
    df["dim"] = df["dim"].astype(int)
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    write_parquet(df, Path(out_path), EmbeddingCache)
    return len(df)
