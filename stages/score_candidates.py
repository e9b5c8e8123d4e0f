"""Stage 6, ``score_candidates``: the rival model's predictions and fool-the-AI scores.

The rival model is CLIP RN50 with OpenAI weights (paper §2.1), via open_clip
(:mod:`gavil.models.loading`). For each SWOW-baseline instance: prompt = "A/An cue"
(:func:`gavil.domain.winogavil.prompt_for_cue`); L2-normalised text and image embeddings; cosine
similarity; top-K with stable ties; Jaccard against the associations; fool-the-AI =
``100 - int(100 * J)`` (reference "Formulas"). Embeddings live in a persistent cache
(``data/cache/embeddings.parquet``, :mod:`gavil.models.embeddings`): a re-run or new instances
embed only new images and prompts. The embedding is partitioned (:func:`plan`: images, then
prompts, ``score.partition_size`` items each; :func:`work` embeds one partition), so ``gavil stage``
runs it on every core and the Prefect flow maps it over workers; :func:`reduce` only looks
embeddings up and ranks.

Model and weights: the ``models`` entry ``score.model`` names (``models.rival``): its
``weights_path``, else the local cache, else a download (if allowed and the host answers). With
none, every row is ``no_weights`` with null scores and a fixed reason naming
``models.<entry>.weights_path`` (:func:`gavil.models.loading.no_weights_reason`: the same bytes on
every machine; this machine's cause goes to the console only), and the pipeline goes on
(``score.require_weights: true`` makes it fail instead). ``pretrained: null`` in that entry runs
random weights and every row says ``untrained``. The sha256 of the weights file loaded is in the
metrics (``weights_sha256``); the entry's ``sha256`` pins it.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING, Any, TypedDict, cast

import pandas as pd

from gavil.domain.winogavil import prompt_for_cue
from gavil.models.embeddings import Cache, score_instances
from gavil.models.loading import ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline import catalog
from gavil.pipeline.parallel import partition
from schemas.ocr import accepted_images
from schemas.scores import Scores

if TYPE_CHECKING:
    from gavil.params import Params
    from gavil.params.models import ModelEntry


class Metrics(TypedDict):
    """``data/metrics/score_candidates.json`` (deterministic: run-dependent numbers go to the console)."""

    model: str
    pretrained: str
    instances: int
    by_status: dict[str, int]
    mean_jaccard_percent: float | None
    mean_fool_the_ai: float | None
    embeddings_in_cache: int
    weights_sha256: str | None  # of the weights file loaded (None: none, or random weights)
    message: str | None  # why there are no weights, if so (a fixed sentence; the cause is in the log)


def rival_spec(rival: ModelEntry, key: str = "rival") -> ModelSpec:
    """The rival model: the ``models`` entry ``key`` (``score.model``), labelled ``rival:<architecture>``."""
    return ModelSpec.of(f"rival:{rival.model}", rival, key)


def with_model_columns(df: pd.DataFrame, spec: ModelSpec, pretrained: str) -> pd.DataFrame:
    """Add model/pretrained/model_name and order columns as :class:`schemas.scores.Scores`."""
    out = df.assign(model=spec.model, pretrained=pretrained, model_name=spec.name)
    return out[list(Scores.to_schema().columns)]


def _inputs() -> tuple[pd.DataFrame, dict[str, tuple[str, str]]]:
    instances = catalog.read_table("swow_instances")
    return instances[instances["status"] == "ok"], accepted_images(catalog.read_table("ocr"))


def _cache_path() -> str:
    return str(catalog.path("embeddings", "write"))


#: The smallest automatic partition (images and prompts): a worker process pays ~5 s of imports
#: and loading the model, which 128 items (4 batches of 32; RN50 on a CPU: ~0.1 s an image) repay.
MIN_PARTITION = 128


def worker_threads(params: Params) -> int:
    """The threads one worker uses well: the rival's ``threads`` (torch's intra-op pool), so
    ``gavil stage`` runs ``cores // threads`` workers (:func:`gavil.pipeline.runner.worker_threads`).
    On 2 cores, 300 concepts, one process of 2 threads took 26 s and 44 CPU-s where two processes of
    one thread took 33 s and 58 CPU-s (``benchmarks/parallel.py``, docs/benchmarks.md "One process or
    two")."""
    return params.models[params.score.model].threads


def plan(params: Params) -> list[dict[str, Any]]:
    """The embedding work of the stage, in partitions ``gavil stage`` runs on its worker processes
    and the Prefect flow maps (on Dask if asked).

    Returns:
        Partitions ``{"images": [(sha256, path), ...], "prompts": [prompt, ...]}``: the candidate
        images of the ok instances (sorted), then the prompts of the instances whose candidates all
        have an accepted image (the only ones :func:`reduce` scores; sorted), cut in that order into
        ``score.partition_size`` items (None: sized for the workers,
        :func:`gavil.pipeline.parallel.partition`, at least :data:`MIN_PARTITION`); a partition may
        end the images and start the prompts. A prompt costs a sizeable fraction of an image with
        RN50 on a CPU (docs/benchmarks.md), too much to leave to the one reduce task, so prompts are
        partitioned too. Always at least one partition.
    """
    p = params.score
    instances, images = _inputs()
    shas = sorted({images[c] for cands in instances["candidates"] for c in cands if c in images})
    prompts = sorted(
        {
            prompt_for_cue(cue)
            for cue, cands in zip(instances["cue"], instances["candidates"])
            if all(c in images for c in cands)
        }
    )
    items: list[tuple[str, Any]] = [("image", s) for s in shas] + [("text", t) for t in prompts]
    return [
        {"images": [x for k, x in chunk if k == "image"], "prompts": [x for k, x in chunk if k == "text"]}
        for chunk in partition(items, p.partition_size, MIN_PARTITION)
    ]


def work(params: Params, part: dict[str, Any]) -> list[dict[str, Any]]:
    """Embed one partition's images and prompts missing from the cache (images first, each in sorted
    order, in batches of the entry's ``batch_size``); returns new cache rows
    (:class:`schemas.embeddings.EmbeddingCache` dicts). No weights: nothing to embed.

    Raises:
        ValueError: a partition not made by :func:`plan` (other keys than ``images`` and ``prompts``).
    """
    p = params.score
    if not isinstance(part, dict) or set(part) != {"images", "prompts"}:
        keys = sorted(part) if isinstance(part, dict) else type(part).__name__
        raise ValueError(f"score_candidates partition with keys {keys}: expected images and prompts (from plan)")
    if not part["images"] and not part["prompts"]:
        return []
    rival = params.models[p.model]
    try:
        model = load_model(rival_spec(rival, p.model), RuntimeOptions.of(rival))
    except WeightsUnavailable:
        return []  # reduce() decides (no_weights rows or an error)
    cache = Cache([_cache_path()], None)
    if part["images"]:
        assert model.embed_images is not None
        cache.ensure(model.cache_key("image"), {sha: path for sha, path in part["images"]}, model.embed_images)
    if part["prompts"]:
        cache.ensure(model.cache_key("text"), {prompt: prompt for prompt in part["prompts"]}, model.embed_texts)
    return cache.new_rows()


def run(params: Params) -> Metrics:
    """Stage entry point: swow_instances (ok rows) + accepted images -> scores (+ cache)."""
    return reduce(params, [work(params, part) for part in plan(params)])


def reduce(params: Params, results: list[list[dict[str, Any]]]) -> Metrics:
    """Add the partitions' embeddings to the cache, then score every instance from it.

    Returns the metrics (model, pretrained, instances, by_status, mean Jaccard in percent, mean
    fool-the-AI score, cached embeddings, the no-weights message).

    Raises:
        WeightsUnavailable: no weights and ``score.require_weights`` (nothing is written)."""
    p = params.score
    rival = params.models[p.model]
    spec = rival_spec(rival, p.model)
    instances, images = _inputs()
    cache = Cache([], _cache_path())
    for rows in results:
        cache.add_rows(rows)
    model, reason = None, None
    t0 = time.perf_counter()
    if len(instances):
        try:
            model = load_model(spec, RuntimeOptions.of(rival))
        except WeightsUnavailable as e:
            if p.require_weights:
                raise
            reason = e.reason  # fixed: the machine's cause goes to the console only
            print(
                f"score_candidates: NO WEIGHTS - {len(instances)} instance(s) written as no_weights with null scores.\n  {e.log_text()}",
                file=sys.stderr,
            )
    df = score_instances(instances, model, images, cache, reason or "")
    label = model.weights_id if model else str(rival.pretrained)
    df = catalog.write_table(with_model_columns(df, spec, label), "scores")
    cache.save()
    scored = df[df["status"].isin(["ok", "untrained"])]
    metrics: Metrics = {
        "model": rival.model,
        "pretrained": label,
        "instances": len(df),
        "by_status": cast(dict[str, int], df["status"].value_counts().sort_index().to_dict()),  # str labels
        "mean_jaccard_percent": round(100 * float(scored["jaccard"].mean()), 2) if len(scored) else None,
        "mean_fool_the_ai": round(float(scored["score_fool_the_ai"].mean()), 2) if len(scored) else None,
        "embeddings_in_cache": len(cache),
        "weights_sha256": model.weights_sha256 if model else None,
        "message": reason,
    }
    # run-dependent numbers go to the console, not the (DVC-tracked, deterministic) metrics file
    print(
        f"score_candidates: embeddings reused {cache.hits}, computed {cache.computed}, scoring {time.perf_counter() - t0:.2f} s",
        file=sys.stderr,
    )
    return metrics
