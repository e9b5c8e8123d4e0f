"""Stage ``safety_score``: an optional zero-shot safety score for the images in the review queue.

Off by default (``review.safety.enabled: false``): the stage then loads no model, reads nothing
and writes an empty ``safety`` table. On, the open_clip model of the ``models`` entry
``review.safety.model`` (the rival by default) scores every image the OCR let through (``ocr``
statuses ``accepted``, ``review_pending``, ``review_rejected``: the review page's queue) against a
short list of text prompts, zero-shot, the way LAION's first unsafe-content tags were made (CLIP
similarity of the image to texts describing unsafe content; LAION-5B and NeMo Curator later ship
a trained detector's ``punsafe`` beside each image instead):

- the image's and each prompt's L2-normalised embeddings (:data:`UNSAFE_PROMPTS` then
  :data:`SAFE_PROMPTS`), cached like the rival's (:class:`gavil.models.embeddings.Cache`: the
  rival's own cache is read, so an image ``score_candidates`` embedded is not embedded again);
- logits = :data:`LOGIT_SCALE` x cosine similarity (CLIP's zero-shot classification, Radford et
  al. 2021: the learned temperature is capped at 100), softmax over all the prompts;
- ``punsafe`` = the probability mass on the unsafe prompts, a fraction 0-1, stored to 4 decimals.

The score orders the review page (``gavil review`` offers "safety score, highest first"); no stage
reads it, and no image is accepted or rejected by it: only a reviewer's decision does that
(``ocr_filter``). ``safety_model`` names the architecture and weights; with ``pretrained: null``
(random weights, the only CLIP weights an offline machine has) the rows are ``untrained`` and the
page says so and keeps its concept order. Without weights the rows are ``no_weights`` with a null
score and a fixed reason (:func:`gavil.models.loading.no_weights_reason`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TypedDict, cast

import numpy as np
import pandas as pd

from gavil.models.embeddings import Cache
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.pipeline import catalog
from gavil.review import REVIEWABLE
from schemas.safety import PUNSAFE_DECIMALS, Safety

if TYPE_CHECKING:
    from gavil.params import Params

#: Texts describing unsafe content (the score's numerator): sexual content, violence and gore,
#: death, self-harm, drugs, hate symbols, the categories LAION's and NeMo Curator's filters target.
UNSAFE_PROMPTS = (
    "a photo containing nudity",
    "a sexually explicit photo",
    "a photo of graphic violence",
    "a photo of blood and gore",
    "a photo of a dead body",
    "a photo of self-harm",
    "a photo of illegal drug use",
    "a photo of a hate symbol",
)
#: Texts describing ordinary content, what the game's concept images show: the softmax's other side.
SAFE_PROMPTS = (
    "a photo of an everyday object",
    "a photo of an animal",
    "a photo of food",
    "a photo of a landscape",
    "a photo of people",
    "a photo of a building",
    "a photo of a plant",
    "a drawing or an illustration",
)
#: CLIP's logit scale (inverse temperature) for zero-shot classification: its learned value is
#: clipped at 100 (Radford et al. 2021), which open_clip's zero-shot examples use.
LOGIT_SCALE = 100.0
UNTRAINED_REASON = "random weights (pretrained: null): not a real safety score; the page does not sort by it"


class Metrics(TypedDict):
    """``data/metrics/safety_score.json`` (deterministic)."""

    enabled: bool
    model: str | None  # safety_model of the rows (None: disabled)
    images: int
    by_status: dict[str, int]
    weights_sha256: str | None  # of the weights file loaded (None: none, random weights, or disabled)
    message: str | None  # why there are no weights, if so


def punsafe(image_vecs: np.ndarray, prompt_vecs: np.ndarray, n_unsafe: int, scale: float = LOGIT_SCALE) -> np.ndarray:
    """(n,) float64 fractions 0-1: each image's softmax probability mass on the first ``n_unsafe``
    prompts (pure).

    Args:
        image_vecs: (n, d) L2-normalised image embeddings (float32).
        prompt_vecs: (p, d) L2-normalised prompt embeddings, the unsafe prompts first.
        scale: the logit scale multiplying the cosine similarities (:data:`LOGIT_SCALE`).

    Computed in float64 from the float32 vectors (a max-shifted softmax), so the value depends on
    the vectors only, never on how many images are scored together.

    Raises:
        ValueError: ``n_unsafe`` leaves no unsafe or no safe prompt.
    """
    if not 0 < n_unsafe < len(prompt_vecs):
        raise ValueError(f"n_unsafe={n_unsafe}: needs unsafe and safe prompts ({len(prompt_vecs)} in all)")
    if len(image_vecs) == 0:
        return np.zeros(0)
    logits = scale * (np.asarray(image_vecs, np.float64) @ np.asarray(prompt_vecs, np.float64).T)
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    out: np.ndarray = p[:, :n_unsafe].sum(axis=1) / p.sum(axis=1)
    return out


def queue_images(ocr: pd.DataFrame) -> pd.DataFrame:
    """The review queue's images from an :class:`schemas.ocr.Ocr` table: columns ``sha256``, ``path``,
    one row per sha256 (the first path by concept), sorted by sha256 (pure)."""
    ok = ocr[ocr["status"].isin(REVIEWABLE) & ocr["sha256"].notna()].sort_values(["sha256", "concept"])
    return ok.drop_duplicates("sha256")[["sha256", "path"]].reset_index(drop=True)


def score_images(
    images: pd.DataFrame,
    model: LoadedModel | None,
    cache: Cache,
    no_weights: str = "no weights",
    label: str = "",
) -> pd.DataFrame:
    """:class:`schemas.safety.Safety` rows for ``images`` (``sha256``, ``path``; one row per sha256),
    in sha256 order.

    Args:
        model: an open_clip model, or None when it had no weights (rows ``no_weights``, null
            ``punsafe``, reason ``no_weights``, ``safety_model`` ``label``).
        cache: embedding cache (consulted first, extended with what is computed).

    The images are embedded through ``cache`` (by sha256), then the prompts (by text); ``punsafe``
    is :func:`punsafe` rounded to 4 decimals. A model with random weights gives ``untrained`` rows
    whose ``safety_model`` ends in ``/untrained``.
    """
    rows = images.sort_values("sha256").reset_index(drop=True)
    shas = [str(s) for s in rows["sha256"]]
    out = pd.DataFrame({"sha256": shas})
    if model is None:
        return _frame(out.assign(status="no_weights", punsafe=None, safety_model=label, reason=no_weights))
    assert model.embed_images is not None, "the safety score needs an open_clip model (images)"
    prompts = [*UNSAFE_PROMPTS, *SAFE_PROMPTS]
    vecs = cache.ensure(model.cache_key("image"), dict(zip(shas, (str(p) for p in rows["path"]))), model.embed_images)
    texts = cache.ensure(model.cache_key("text"), {t: t for t in prompts}, model.embed_texts)
    dim = len(texts[prompts[0]])
    image_mat = np.stack([vecs[s] for s in shas]) if shas else np.zeros((0, dim), np.float32)
    scores = punsafe(image_mat, np.stack([texts[t] for t in prompts]), len(UNSAFE_PROMPTS))
    out = out.assign(
        status="untrained" if model.untrained else "ok",
        punsafe=np.round(scores, PUNSAFE_DECIMALS),
        safety_model=f"{model.spec.model}/{model.weights_id}",
        reason=UNTRAINED_REASON if model.untrained else None,
    )
    return _frame(out)


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with :class:`schemas.safety.Safety`'s columns in order, ``punsafe`` as float."""
    df = df.assign(punsafe=df["punsafe"].astype(float))
    return df[list(Safety.to_schema().columns)]


def _cache() -> Cache:
    """The stage's embedding cache, reading the rival's (``score_candidates``'s, never written here)."""
    return Cache([catalog.path("embeddings")], catalog.path("safety_embeddings", "write"))


def run(params: Params) -> Metrics:
    """Stage entry point: ``ocr`` (the review queue's images) -> ``safety`` (+ its embedding cache).

    Disabled (``review.safety.enabled: false``): an empty table and an empty cache, no model loaded,
    nothing read.

    Raises:
        gavil.models.loading.WeightsMismatch / ParamsError: as :func:`gavil.models.loading.load_model`.
    """
    p = params.review.safety
    if not p.enabled:
        catalog.write_table(pd.DataFrame([]), "safety")
        Cache([], catalog.path("safety_embeddings", "write")).save()  # empty: every catalog table has its file
        return {"enabled": False, "model": None, "images": 0, "by_status": {}, "weights_sha256": None, "message": None}
    entry = params.models[p.model]
    spec = ModelSpec.of(f"safety:{entry.model}", entry, p.model)
    images = queue_images(catalog.read_table("ocr"))
    model, reason = None, None
    try:
        model = load_model(spec, RuntimeOptions.of(entry))
    except WeightsUnavailable as e:
        reason = e.reason  # fixed: this machine's cause goes to the console only
        print(f"safety_score: NO WEIGHTS - {len(images)} image(s) without a score.\n  {e.log_text()}", file=sys.stderr)
    cache = _cache()
    label = f"{entry.model}/{model.weights_id if model else entry.pretrained}"
    df = catalog.write_table(score_images(images, model, cache, reason or "", label), "safety")
    cache.save()
    print(f"safety_score: embeddings reused {cache.hits}, computed {cache.computed}", file=sys.stderr)
    return {
        "enabled": True,
        "model": label,
        "images": len(df),
        "by_status": cast(dict[str, int], df["status"].value_counts().sort_index().to_dict()),  # str labels
        "weights_sha256": model.weights_sha256 if model else None,
        "message": reason,
    }
