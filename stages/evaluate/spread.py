"""The evaluated models' embedding work, spread over workers (the stage's ``plan`` / ``work``).

Scoring the benchmark with one model is independent of every other model, and an open_clip
model's vectors are a function of each image or prompt alone (every forward pass has one shape:
:func:`gavil.models.loading.forward_rows`). So :func:`plan` cuts each open_clip model of
``evaluate.models`` with at least :data:`MIN_PARTITION` embeddings to compute into partitions of
its own images and prompts, as many as :func:`gavil.pipeline.parallel.partition` gives the workers
(when there are workers to share them; otherwise one partition holds every model, run in one
process); the other models share one partition. :func:`work` loads a partition's models and embeds
its share (a whole-model partition: what scoring the benchmark with each model needs), and the
stage's ``reduce`` scores every model from the cache alone (:func:`stand_in`: a model that
refuses to embed), exactly as one process would.

The Table 7 text baselines and Table 5's classifiers (:mod:`stages.evaluate.paper`) stay in
``reduce``: they share one text model with the rest of the paper's analyses, and their work is
small next to the image models'.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import pandas as pd

from gavil.domain.winogavil import cue_key, prompt_for_cue
from gavil.models.embeddings import Cache, score_instances
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline.parallel import partition, planned_workers
from gavil.progress import step

if TYPE_CHECKING:
    import numpy as np

    from gavil.params import Params

#: The fewest embeddings that earn a model a partition (and a worker process) of its own: a worker
#: pays ~5 s of imports and loading the model, which 128 images (4 batches of 32; RN50 on a CPU:
#: ~0.1 s an image) repay.
MIN_PARTITION = 128


class Partition(TypedDict, total=False):
    """One partition of :func:`plan`: ``models`` always; ``images`` ([sha256, path] pairs) and
    ``prompts`` only in a share of one open_clip model's embeddings."""

    models: list[str]
    images: list[list[str]]
    prompts: list[str]


def clip_work(inst: pd.DataFrame, images: dict[str, tuple[str, str]]) -> tuple[list[tuple[str, str]], list[str]]:
    """What scoring ``inst`` with an open_clip model embeds: the (sha256, path) of every accepted
    image of the instances whose candidates all have one, and their prompts, each sorted and unique
    (:func:`gavil.models.embeddings.score_instances`)."""
    scorable = [(cue, cands) for cue, cands in zip(inst["cue"], inst["candidates"]) if all(c in images for c in cands)]
    shas = sorted({images[c] for _, cands in scorable for c in cands})
    return shas, sorted({prompt_for_cue(cue) for cue, _ in scorable})


def embeddings_needed(spec: ModelSpec, inst: pd.DataFrame, images: dict[str, tuple[str, str]]) -> int:
    """How many embeddings scoring ``inst`` with ``spec`` asks the cache for (cached ones included):
    a text model's candidate words and cues; an open_clip model's accepted images and prompts of the
    instances whose candidates all have one (:func:`clip_work`)."""
    if spec.kind == "text":
        words = {c for cands in inst["candidates"] for c in cands}
        return len(words | {cue_key(cue) for cue in inst["cue"]})
    shas, prompts = clip_work(inst, images)
    return len(shas) + len(prompts)


def plan(
    params: Params, inst: pd.DataFrame, images: dict[str, tuple[str, str]], names: Sequence[str] | None = None
) -> list[Partition]:
    """Partitions of ``names`` (default ``evaluate.models``; the stage adds the rounds' rivals,
    :func:`stages.evaluate.rivals.models_to_score`; see the module docstring): ``{"models": [name],
    "images": [[sha256, path], ...], "prompts": [...]}`` for a share of one open_clip model's
    embeddings, ``{"models": [names]}`` for models scored whole. One partition without workers."""
    names = list(params.evaluate.models if names is None else names)
    specs = {n: ModelSpec.of(n, params.models[n]) for n in names}
    heavy = [
        n for n in names if specs[n].kind == "open_clip" and embeddings_needed(specs[n], inst, images) >= MIN_PARTITION
    ]
    if planned_workers() <= 1 or not heavy:
        return [{"models": names}]
    shas, prompts = clip_work(inst, images)
    items: list[tuple[str, ...]] = [("image", sha, path) for sha, path in shas] + [("prompt", q) for q in prompts]
    parts: list[Partition] = []
    for n in heavy:
        for chunk in partition(items, None, MIN_PARTITION):
            parts.append(
                {
                    "models": [n],
                    "images": [[it[1], it[2]] for it in chunk if it[0] == "image"],
                    "prompts": [it[1] for it in chunk if it[0] == "prompt"],
                }
            )
    rest = [n for n in names if n not in heavy]
    return parts + ([{"models": rest}] if rest else [])


class ModelInfo(TypedDict, total=False):
    """What :func:`work` learned of one model: its identity (``weights_id``, ``untrained``,
    ``numerics``, ``weights_sha256``), or only ``reason`` (the fixed no-weights sentence)."""

    weights_id: str
    untrained: bool
    numerics: str
    weights_sha256: str | None
    reason: str


class PartResult(TypedDict):
    """One partition's result: each model's :class:`ModelInfo` and the new embedding cache rows
    (:meth:`gavil.models.embeddings.Cache.new_rows`)."""

    models: dict[str, ModelInfo]
    rows: list[dict[str, Any]]


def work(
    params: Params,
    part: Partition,
    inst: pd.DataFrame,
    images: dict[str, tuple[str, str]],
    cache_paths: Sequence[str | os.PathLike[str]],
    allowed: Sequence[str] | None = None,
) -> PartResult:
    """Load the partition's models and embed its share (cache files ``cache_paths`` read first,
    nothing written): a share partition's images and prompts, or what scoring ``inst`` needs with
    each model of a whole-model partition.

    Returns:
        ``{"models": {name: {"weights_id", "untrained", "numerics", "weights_sha256"} or
        {"reason": the fixed no-weights sentence}}, "rows": new cache rows}``
        (:meth:`gavil.models.embeddings.Cache.new_rows`).

    Raises:
        ValueError: a partition not made by :func:`plan` (no ``models`` list of ``allowed``, default
            evaluate.models; a share of more than one model, or of a text model).
    """
    names = part.get("models") if isinstance(part, dict) else None
    if not isinstance(names, list) or not set(names) <= set(params.evaluate.models if allowed is None else allowed):
        raise ValueError(f"evaluate partition {part!r}: expected {{'models': [names of evaluate.models]}} (from plan)")
    share = "images" in part or "prompts" in part
    if share and (len(names) != 1 or params.models[names[0]].kind != "open_clip"):
        raise ValueError(
            f"evaluate partition of models {names}: a share of images and prompts is one open_clip model's"
        )
    cache = Cache(cache_paths, None)
    out: dict[str, ModelInfo] = {}
    for name in names:
        spec = ModelSpec.of(name, params.models[name])
        step(f"loading {name}")
        try:
            model = load_model(spec, RuntimeOptions.of(params.models[name]))
        except WeightsUnavailable as e:
            out[name] = {"reason": e.reason}  # a fixed sentence; the machine's cause goes to the log only
            print(
                f"evaluate: {name}: NO WEIGHTS - its rows are no_weights with null scores. {e.log_text()}",
                file=sys.stderr,
            )
            continue
        if share:
            _embed_share(model, cache, part)
        else:
            step(f"embedding for {len(inst)} instances with {name}")
            score_instances(inst, model, images, cache)
        out[name] = {
            "weights_id": model.weights_id,
            "untrained": model.untrained,
            "numerics": model.numerics,
            "weights_sha256": model.weights_sha256,
        }
    return {"models": out, "rows": cache.new_rows()}


def _embed_share(model: LoadedModel, cache: Cache, part: Partition) -> None:
    """Embed a share partition's images (``[[sha256, path], ...]``) and prompts into ``cache``,
    under the keys :func:`gavil.models.embeddings.score_instances` looks up."""
    step(
        f"embedding {len(part.get('images', []))} images and {len(part.get('prompts', []))} prompts with {model.spec.name}"
    )
    if part.get("images"):
        assert model.embed_images is not None
        cache.ensure(model.cache_key("image"), {sha: path for sha, path in part["images"]}, model.embed_images)
    if part.get("prompts"):
        cache.ensure(model.cache_key("text"), {q: q for q in part["prompts"]}, model.embed_texts)


def _refuse(what: str) -> Any:
    def embed(keys: Sequence[str]) -> np.ndarray:
        raise RuntimeError(f"evaluate: {what} asked to embed {len(keys)} item(s) in reduce: its partition embeds them")

    return embed


def stand_in(spec: ModelSpec, info: ModelInfo) -> tuple[LoadedModel | None, str | None]:
    """The model :func:`work` loaded, as far as scoring from the cache needs it (its embedders
    refuse to run), or (None, the no-weights reason)."""
    if "reason" in info:
        return None, str(info["reason"])
    images = _refuse(f"{spec.name} (images)") if spec.kind == "open_clip" else None
    model = LoadedModel(
        spec,
        info["weights_id"],
        bool(info["untrained"]),
        images,
        _refuse(f"{spec.name} (texts)"),
        info["numerics"],
        info["weights_sha256"],
    )
    return model, None
