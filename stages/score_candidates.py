"""Stage 6, ``score_candidates``: the rival model's predictions and fool-the-AI scores.

The rival model is CLIP RN50 with OpenAI weights (paper §2.1), via open_clip. For each
instance: prompt = "A/An cue" (:func:`stages.winogavil.prompt_for_cue`); L2-normalised text and
image embeddings; cosine similarity; top-K with stable ties; Jaccard against the
associations; fool-the-AI = ``100 - int(100 * J)`` (reference "Formulas").

Weights are resolved in this order, and nothing is ever made up:

1. ``score.weights_path``: a local file (``.pt`` incl. OpenAI JIT, ``.bin``, ``.safetensors``)
   for ``score.model`` / ``score.pretrained``; a missing file is an error.
2. the local cache (open_clip's Hugging Face / ``~/.cache/clip`` files), no network;
3. a download, if ``score.allow_download`` and the host answers within 3 s.

If none works, every row gets status ``no_weights`` and null scores, the console and
``data/metrics/score_candidates.json`` say how to provide weights, and the pipeline goes on
(``score.require_weights: true`` makes it fail instead). ``score.pretrained: null`` runs the
architecture with random weights, and every row then says ``untrained``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import numpy as np
import pandas as pd

from schemas.instances import SwowInstances
from schemas.ocr import Ocr
from schemas.scores import Scores
from stages._io import ParamsError, read_table, section, write_json, write_table
from stages.build_instances import SWOW_INSTANCES_PATH
from stages.ocr_filter import OCR_PATH
from stages.winogavil import fool_the_ai_score, jaccard, prompt_for_cue, top_k

SCORES_PATH = "data/score/scores.parquet"
METRICS_PATH = "data/metrics/score_candidates.json"
log = logging.getLogger(__name__)

#: Embeds a list of image paths / prompts -> (n, d) float32, rows L2-normalised.
Embedder = Callable[[Sequence[str]], np.ndarray]


class WeightsUnavailable(RuntimeError):
    """No weights could be loaded; the message says how to provide them."""


@dataclass(frozen=True)
class RivalModel:
    """A loaded model: its label and two embedding functions."""

    name: str
    pretrained: str  # tag, "file:<sha256[:16]>", or "untrained"
    untrained: bool
    embed_images: Embedder
    embed_texts: Embedder


# --------------------------------------------------------------------------- pure core
def score_instances(
    instances: pd.DataFrame,
    image_paths: dict[str, str],
    model: RivalModel | None,
    no_weights: tuple[str, str, str] | None = None,
) -> pd.DataFrame:
    """Score each instance with the rival model (pure given the model's embedders).

    Args:
        instances: rows with instance_id, cue, candidates (list[str]), associations (list[str]).
        image_paths: concept -> image file for every accepted image.
        model: the loaded model, or None when no weights were available.
        no_weights: (model name, pretrained tag, message) written to every row when ``model``
            is None; predictions and scores stay null.

    Returns:
        One :class:`schemas.scores.Scores` row per instance, in input order.
    """
    cols = list(Scores.to_schema().columns)
    rows: list[dict[str, Any]] = []
    base_all = []
    for rec in instances.itertuples(index=False):
        base_all.append(
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
        name, tag, message = no_weights or ("", "", "no weights")
        for b in base_all:
            rows.append({**b, "model": name, "pretrained": tag, "status": "no_weights", "reason": message})
        return _frame(rows, cols)
    scorable = [b for b in base_all if all(c in image_paths for c in b["candidates"])]
    images = sorted({c for b in scorable for c in b["candidates"]})
    prompts = sorted({b["prompt"] for b in scorable})
    img_emb = dict(zip(images, model.embed_images([image_paths[c] for c in images]))) if images else {}
    txt_emb = dict(zip(prompts, model.embed_texts(prompts))) if prompts else {}
    status = "untrained" if model.untrained else "ok"
    for b in base_all:
        row = {**b, "model": model.name, "pretrained": model.pretrained}
        missing = [c for c in b["candidates"] if c not in image_paths]
        if missing:
            rows.append({**row, "status": "missing_image", "reason": f"no accepted image for {missing}"})
            continue
        sims = [float(np.dot(txt_emb[b["prompt"]], img_emb[c])) for c in b["candidates"]]
        pred = top_k(b["candidates"], sims, len(b["associations"]))
        rows.append(
            {
                **row,
                "status": status,
                "reason": "random weights (score.pretrained: null): not a real rival-model score" if model.untrained else None,
                "predictions": pred,
                "similarities": sims,
                "jaccard": jaccard(pred, b["associations"]),
                "score_fool_the_ai": fool_the_ai_score(pred, b["associations"]),
            }
        )
    return _frame(rows, cols)


def _frame(rows: list[dict[str, Any]], cols: list[str]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=cols)
    df["score_fool_the_ai"] = df["score_fool_the_ai"].astype("Int64")
    df["jaccard"] = df["jaccard"].astype(float)
    return df


# --------------------------------------------------------------------------- model loading
def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def cached_weights(model: str, tag: str, cache_dir: str | None) -> str | None:
    """Path of already-downloaded weights for (model, tag) in open_clip's caches, or None. No network."""
    import open_clip

    cfg = open_clip.get_pretrained_cfg(model, tag)
    hf = cfg.get("hf_hub")
    if hf:
        from huggingface_hub import try_to_load_from_cache

        repo, filename = os.path.split(hf)
        for fn in [filename] if filename else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]:
            hit = try_to_load_from_cache(repo, fn, cache_dir=cache_dir)
            if isinstance(hit, str) and os.path.isfile(hit):
                return hit
    url = cfg.get("url")
    if url:
        p = os.path.join(cache_dir or os.path.expanduser("~/.cache/clip"), os.path.basename(url))
        if os.path.isfile(p):
            return p
    return None


def _reachable(model: str, tag: str, timeout_s: float = 3.0) -> str | None:
    """None if the weights host answers on 443 within ``timeout_s``, else why not."""
    import open_clip

    cfg = open_clip.get_pretrained_cfg(model, tag)
    host = "huggingface.co" if cfg.get("hf_hub") else urlparse(cfg.get("url", "")).hostname
    if not host:
        return "no download location known for this tag"
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return None
    except OSError as e:
        return f"{host} unreachable ({e})"


def how_to_provide(model: str, tag: str | None) -> str:
    return (
        f"To score with real {model}/{tag} weights: on a machine with internet run "
        f"`python -c \"import open_clip; open_clip.create_model_and_transforms('{model}', pretrained='{tag}')\"` "
        "(fills the local cache), or download the weights file (for RN50/openai: OpenAI's RN50.pt) and set "
        "score.weights_path in params.yaml. Then `dvc repro score_candidates`."
    )


def load_rival_model(p: dict[str, Any]) -> RivalModel:
    """Load ``score.model`` with weights resolved as the module docstring says.

    Raises:
        WeightsUnavailable: no weights could be had (message says how to provide them).
        ParamsError: unknown model/tag, or missing ``weights_path`` file.
    """
    from stages._torchvision_compat import ensure_torchvision

    ensure_torchvision()
    import open_clip
    import torch

    model_name, tag, weights_path = p["model"], p["pretrained"], p.get("weights_path")
    if model_name not in open_clip.list_models():
        raise ParamsError(f"score.model={model_name!r} is not an open_clip architecture")
    torch.set_num_threads(int(p["threads"]))
    quick_gelu = False
    if tag is not None:
        cfg = open_clip.get_pretrained_cfg(model_name, tag)
        if not cfg and not weights_path:
            raise ParamsError(f"score.pretrained={tag!r} unknown for {model_name}; tags: {open_clip.list_pretrained_tags_by_model(model_name)}")
        quick_gelu = bool(cfg.get("quick_gelu", False))
    if weights_path:
        if not os.path.isfile(weights_path):
            raise ParamsError(f"score.weights_path={weights_path!r} does not exist")
        source, label = weights_path, f"file:{_sha256(weights_path)[:16]}"
    elif tag is None:
        source, label = None, "untrained"
    else:
        source = cached_weights(model_name, tag, p.get("cache_dir"))
        label = tag
        if source is None:
            if not p["allow_download"]:
                raise WeightsUnavailable(f"no cached {model_name}/{tag} weights and score.allow_download is false. " + how_to_provide(model_name, tag))
            why = _reachable(model_name, tag)
            if why:
                raise WeightsUnavailable(f"no cached {model_name}/{tag} weights and no download possible: {why}. " + how_to_provide(model_name, tag))
            source = tag
    try:
        kwargs: dict[str, Any] = {"pretrained": source, "force_quick_gelu": quick_gelu and source != tag}
        if source == tag and p.get("cache_dir"):
            kwargs["cache_dir"] = p["cache_dir"]
        model, _, preprocess = open_clip.create_model_and_transforms(model_name, **kwargs)
    except (RuntimeError, OSError, FileNotFoundError) as e:
        if weights_path:
            raise
        raise WeightsUnavailable(f"loading {model_name}/{tag} failed: {e}. " + how_to_provide(model_name, tag)) from e
    model.eval()
    tokenizer = open_clip.get_tokenizer(model_name)
    batch = int(p["batch_size"])

    def embed_images(paths: Sequence[str]) -> np.ndarray:
        from PIL import Image

        out = []
        with torch.inference_mode():
            for i in range(0, len(paths), batch):
                ims = []
                for path in paths[i : i + batch]:
                    with Image.open(path) as im:
                        ims.append(preprocess(im.convert("RGB")))
                e = model.encode_image(torch.stack(ims))
                out.append(torch.nn.functional.normalize(e.float(), dim=-1).numpy())
        return np.concatenate(out)

    def embed_texts(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for i in range(0, len(texts), batch):
                e = model.encode_text(tokenizer(list(texts[i : i + batch])))
                out.append(torch.nn.functional.normalize(e.float(), dim=-1).numpy())
        return np.concatenate(out)

    return RivalModel(model_name, label, tag is None and not weights_path, embed_images, embed_texts)


# --------------------------------------------------------------------------- stage I/O
def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: swow_instances (ok rows) + accepted images -> scores."""
    p = section(params, "score", ("model", "pretrained", "weights_path", "cache_dir", "allow_download", "require_weights", "batch_size", "threads"))
    instances = read_table(SWOW_INSTANCES_PATH, SwowInstances)
    instances = instances[instances["status"] == "ok"]
    ocr = read_table(OCR_PATH, Ocr)
    accepted = ocr[ocr["status"] == "accepted"]
    image_paths = dict(zip(accepted["concept"], accepted["path"]))
    model, reason = None, None
    if len(instances):
        try:
            model = load_rival_model(p)
        except WeightsUnavailable as e:
            if p["require_weights"]:
                raise
            reason = str(e)
            print(f"score_candidates: NO WEIGHTS - {len(instances)} instance(s) written as no_weights with null scores.\n  {reason}", file=sys.stderr)
    df = score_instances(instances, image_paths, model, (p["model"], str(p["pretrained"]), reason or ""))
    write_table(df, SCORES_PATH, Scores)
    scored = df[df["status"].isin(["ok", "untrained"])]
    metrics = {
        "model": p["model"],
        "pretrained": "untrained" if p["pretrained"] is None and not p["weights_path"] else str(p["pretrained"]),
        "instances": len(df),
        "by_status": df["status"].value_counts().sort_index().to_dict(),
        "mean_jaccard_percent": round(100 * float(scored["jaccard"].mean()), 2) if len(scored) else None,
        "mean_fool_the_ai": round(float(scored["score_fool_the_ai"].mean()), 2) if len(scored) else None,
        "message": reason,
    }
    write_json(METRICS_PATH, metrics)
    return metrics
