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


class Cache:
    """In-memory view of cache files; new embeddings are written to ``write_path`` only.

    Args:
        read_paths: cache files to read (missing files are fine), e.g. another stage's cache.
        write_path: this stage's cache file (also read).
    """

    def __init__(self, read_paths: Sequence[str | os.PathLike], write_path: str | os.PathLike | None):
        self.write_path = Path(write_path) if write_path else None
        self._vec: dict[Key, dict[str, np.ndarray]] = {}
        self._own: list[pd.DataFrame] = []
        self._new: list[dict[str, Any]] = []
        self.hits = 0
        self.computed = 0
        paths = [Path(p) for p in read_paths]
        if self.write_path is not None and self.write_path not in paths:
            paths.append(self.write_path)
        for p in paths:
            if p.exists():
                df = self._read(p)
                if p == self.write_path:
                    self._own.append(df)
                # cast: pandas-stubs types groupby keys as tuple[Hashable, ...]; here (model, weights_id, kind)
                groups = cast(
                    "Iterable[tuple[Key, pd.DataFrame]]", df.groupby(["model", "weights_id", "kind"], sort=False)
                )
                for (m, w, k), g in groups:
                    store = self._vec.setdefault((m, w, k), {})
                    for key, blob in zip(g["key"], g["vector"]):
                        store[key] = np.frombuffer(blob, dtype="<f4")

    @staticmethod
    def _read(path: Path) -> pd.DataFrame:
        t = pq.read_table(path)
        df = t.drop(["vector"]).to_pandas()
        df["vector"] = t.column("vector").to_pylist()
        return EmbeddingCache.validate(df)

    def __len__(self) -> int:
        return sum(len(v) for v in self._vec.values())

    def ensure(
        self, key: Key, items: dict[str, Any], compute: Callable[[list[Any]], np.ndarray]
    ) -> dict[str, np.ndarray]:
        """Embeddings for every item key; computes (in one call) only the missing ones.

        Args:
            key: (model, weights_id, kind).
            items: cache key -> what ``compute`` needs for it (an image path, a text).
            compute: payloads -> (n, d) float32, rows in the same order.
        """
        store = self._vec.setdefault(key, {})
        missing = [k for k in items if k not in store]
        self.hits += len(items) - len(missing)
        if missing:
            vecs = np.asarray(compute([items[k] for k in missing]), dtype="<f4")
            if vecs.shape[0] != len(missing):
                raise RuntimeError(f"embedder returned {vecs.shape[0]} rows for {len(missing)} inputs")
            for k, v in zip(missing, vecs):
                store[k] = v
                self._new.append(
                    {
                        "model": key[0],
                        "weights_id": key[1],
                        "kind": key[2],
                        "key": k,
                        "dim": int(v.shape[0]),
                        "vector": v.tobytes(),
                    }
                )
            self.computed += len(missing)
        return {k: store[k] for k in items}

    def new_rows(self) -> list[dict[str, Any]]:
        """Rows computed since loading (to hand to another process's cache: :meth:`add_rows`)."""
        return list(self._new)

    def add_rows(self, rows: list[dict[str, Any]]) -> None:
        """Add cache rows computed elsewhere (a partition); already-known keys are ignored."""
        for r in rows:
            store = self._vec.setdefault((r["model"], r["weights_id"], r["kind"]), {})
            if r["key"] not in store:
                store[r["key"]] = np.frombuffer(r["vector"], dtype="<f4")
                self._new.append(r)
                self.computed += 1

    def save(self) -> int:
        """Write this stage's cache file (old rows + new ones) atomically; returns rows written."""
        if self.write_path is None:
            return 0
        cols = list(EmbeddingCache.to_schema().columns)
        df = (
            pd.concat([*self._own, pd.DataFrame(self._new, columns=cols)], ignore_index=True)
            if (self._own or self._new)
            else pd.DataFrame(columns=cols)
        )
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
        if is_text:
            words = {c: c for r in scorable for c in r["candidates"]}
            queries = {cue_key(r["cue"]): cue_key(r["cue"]) for r in scorable}
            both = cache.ensure(model.cache_key("text"), {**words, **queries}, model.embed_texts)
            cand_vecs, query_vecs = both, both
            cand_keys = [r["candidates"] for r in scorable]
            qkeys = [cue_key(r["cue"]) for r in scorable]
        else:
            assert model.embed_images is not None
            shas = {images[c][0]: images[c][1] for r in scorable for c in r["candidates"]}
            sha_vecs = cache.ensure(model.cache_key("image"), shas, model.embed_images)
            cand_vecs = {c: sha_vecs[images[c][0]] for r in scorable for c in r["candidates"]}
            query_vecs = cache.ensure(
                model.cache_key("text"),
                {r["prompt"]: r["prompt"] for r in scorable},
                model.embed_texts,
            )
            cand_keys = [r["candidates"] for r in scorable]
            qkeys = [r["prompt"] for r in scorable]
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
