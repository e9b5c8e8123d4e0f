"""PP-OCR, the default OCR engine of stage ``ocr_filter`` (``ocr.engine: ppocr``).

What runs: PaddleOCR's PP-OCRv6 *small* text detector (DB, differentiable binarization: a
probability map of text, boxes from its thresholded contours) and its CTC text recogniser, as ONNX
models on ONNX Runtime's CPU kernels, through RapidOCR's pipeline (its pre- and post-processing:
resize to a multiple of 32, DB boxes, perspective crops, CTC greedy decoding). The models are
Apache-2.0 (Baidu / the PaddleOCR authors, converted to ONNX by RapidOCR; attribution and licence
in the ``rapidocr`` wheel's ``MODEL_LICENSES.md``) and ship inside the ``rapidocr`` wheel from the
public package index (pinned in ``pyproject.toml``/``constraints.txt``; nothing is downloaded at run
time: :func:`model_files` fails if a file is missing). RapidOCR needs ``opencv-python-headless``, the
stack's own OpenCV, so no second ``cv2`` is installed.

Settings (``ocr.*``, :mod:`gavil.params.ocr`): the image is read at most ``ocr.canvas_size`` px
on its long side (web images whole). The detector sees it scaled (:func:`detector_scale`) so its
long side is at most ``ocr.ppocr_max_side`` px (800; PaddleOCR caps at 960, near DB's training
scale: on the OCR truth sets, standard and hard, 800 found at least as many words as 960, and 960
more than the full-resolution input, each at less CPU; docs/benchmarks.md "OCR against the truth")
and its short side as close to ``ocr.ppocr_min_side`` px as that allows (small images
are scaled up: their small words are found); the boxes are mapped back, and every detected box is recognised on its own (recognition batch 1: a box's reading does not depend
on the other boxes of the image); the angle classifier is off (text within +-45 deg is read as
is; a box at least 1.5x as tall as wide is turned 90 deg by RapidOCR before recognition).

Determinism: an image's reading depends only on its pixels and these settings, never on which
images are read with it. ONNX Runtime is run with ``ocr.threads`` intra-op threads; the texts and
the confidences rounded to :data:`CONFIDENCE_DIGITS` decimals are the same for 1 and 2 threads
(``tests/stages/ocr_filter/test_ocr_ppocr.py``). Confidence is RapidOCR's: the mean of the per-character maximum
softmax probabilities over the decoded characters, in [0, 1].
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from gavil.models.ocr_engine import BatchReader, OcrEngine, lazy_reader, load_for_ocr

if TYPE_CHECKING:
    from gavil.params.ocr import OcrParams

#: The rapidocr wheel's detection and recognition models that this engine runs (its defaults).
MODEL_FILES = ("PP-OCRv6_det_small.onnx", "PP-OCRv6_rec_small.onnx")
#: Decimals a confidence is rounded to before it is stored or compared (thread- and CPU-stable).
CONFIDENCE_DIGITS = 3

#: Reads a batch of H x W x 3|4 uint8 RGB(+grey) images at ``canvas`` -> (text, confidence) per box, per image.
PPReader = BatchReader


def engine(p: OcrParams) -> OcrEngine:
    """The ``ppocr`` engine at the ``ocr`` params ``p``: :func:`make_reader` (``ocr.ppocr_min_side``,
    ``ocr.threads`` capped by this process's share of the cores), loaded on first use, and
    :func:`engine_label`. ``ocr.device`` plays no part: ``ocr.device: cuda`` with this engine is
    refused when the params load (:class:`gavil.params.ocr.OcrParams`).

    Raises:
        RuntimeError: rapidocr or its model files are missing (:func:`model_files`).
    """
    from gavil.models.loading import thread_cap

    cap = thread_cap()  # a worker process's share of the cores (processes x threads <= cores)
    threads = min(p.threads, cap) if cap else p.threads
    key: tuple[object, ...] = ("ppocr", p.ppocr_min_side, p.ppocr_max_side, threads)
    read = lazy_reader(key, lambda: make_reader(p.ppocr_min_side, threads, p.ppocr_max_side))
    return OcrEngine(label=engine_label(p.ppocr_min_side, p.ppocr_max_side), read=read, load=load_for_ocr)


def model_dir() -> Path:
    """The folder of the installed ``rapidocr`` package's models (found without importing it).

    Raises:
        RuntimeError: ``rapidocr`` is not installed (names the package to install)."""
    spec = importlib.util.find_spec("rapidocr")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("ocr.engine: ppocr needs the rapidocr package: pip install rapidocr==3.10.0")
    return Path(next(iter(spec.submodule_search_locations))) / "models"


def model_files() -> tuple[Path, Path]:
    """(detector, recogniser) ONNX files of :data:`MODEL_FILES`.

    Raises:
        RuntimeError: a file is missing (an incomplete install: reinstall rapidocr)."""
    det, rec = (model_dir() / name for name in MODEL_FILES)
    missing = [str(p) for p in (det, rec) if not p.is_file()]
    if missing:
        raise RuntimeError(f"PP-OCR model file(s) missing: {', '.join(missing)}; reinstall rapidocr==3.10.0")
    return det, rec


@cache
def models_digest() -> str:
    """First 8 hex digits of the sha256 over both model files' bytes (the cache label's model id)."""
    h = hashlib.sha256()
    for p in model_files():
        h.update(p.read_bytes())
    return h.hexdigest()[:8]


def engine_label(min_side: int, max_side: int | None = None) -> str:
    """The OCR cache's engine label, e.g. ``ppocr-rapidocr-3.10.0-v6small-1a2b3c4d-min736-max800``:
    package version, the models' digest and the settings that change readings (``canvas_size`` is in
    the cache key already; threads and batch size change nothing; no ``-max`` part: no cap)."""
    version = importlib.metadata.version("rapidocr")
    cap = f"-max{max_side}" if max_side is not None else ""
    return f"ppocr-rapidocr-{version}-v6small-{models_digest()}-min{min_side}{cap}"


def detector_scale(h: int, w: int, min_side: int, max_side: int | None) -> float:
    """The factor an ``h`` x ``w`` (pixels) image is resized by for PP-OCR's text detector: up
    until the short side is ``min_side`` (never down for it), then down if the long side would
    exceed ``max_side`` (None: no cap). RapidOCR then rounds each side to a multiple of 32."""
    ratio = max(1.0, float(min_side) / min(h, w))
    if max_side is not None and max(h, w) * ratio > max_side:
        ratio = float(max_side) / max(h, w)
    return ratio


def _bounded_preprocess(min_side: int, max_side: int | None) -> Any:
    """RapidOCR's ``DetPreProcess`` with :func:`detector_scale`'s size (its own resize knows one bound only)."""
    import cv2
    from rapidocr.ch_ppocr_det.utils import DetPreProcess

    class Bounded(DetPreProcess):
        def resize(self, img: np.ndarray) -> np.ndarray | None:
            h, w = img.shape[:2]
            r = detector_scale(h, w, min_side, max_side)
            rh, rw = int(round(int(h * r) / 32) * 32), int(round(int(w * r) / 32) * 32)
            if rh <= 0 or rw <= 0:
                return None
            out: np.ndarray = cv2.resize(img, (rw, rh))
            return out

    return Bounded(min_side, "min")


_SESSIONS = threading.Lock()


@contextmanager
def _no_spinning() -> Iterator[None]:
    """ONNX Runtime sessions created inside are told not to spin (``session.intra_op.allow_spinning``
    = 0): a thread that waits for work sleeps instead of burning its core. Measured on the OCR truth
    set with 2 threads on a loaded 2-core machine: 7.9 CPU-s instead of 14.8 for the same 36 readings
    (docs/benchmarks.md). RapidOCR builds its session options itself, so its builder is wrapped while
    our sessions are created (under a lock; restored after)."""
    from rapidocr.inference_engine.onnxruntime import main as ort_main

    cls: Any = ort_main.OrtInferSession
    with _SESSIONS:
        original = cls._init_sess_opts

        def quiet(cfg: Any) -> Any:
            opts = original(cfg)
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            return opts

        cls._init_sess_opts = staticmethod(quiet)
        try:
            yield
        finally:
            cls._init_sess_opts = staticmethod(original)


def make_reader(min_side: int = 736, threads: int = 2, max_side: int | None = 800) -> PPReader:
    """A PP-OCR reader: ``read(images, canvas) -> [[(text, confidence), ...], ...]`` (one list per image).

    ``images`` are :func:`gavil.models.ocr_engine.load_for_ocr` arrays (RGB, plus the grey channel, which
    PP-OCR does not use), already at most ``canvas`` px on the long side. Boxes come in RapidOCR's
    reading order (top to bottom in lines, then left to right); empty readings are dropped.

    Raises:
        RuntimeError: rapidocr or its model files are missing.
    """
    import cv2
    from rapidocr import RapidOCR

    det, rec = model_files()
    engine = RapidOCR(
        params={
            "Global.log_level": "error",
            "Global.text_score": 0.0,  # keep every reading: ocr.min_confidence decides
            "Global.use_cls": False,
            "Global.max_side_len": 1 << 20,  # load_for_ocr has applied ocr.canvas_size
            "Global.min_side_len": 1,
            "Det.model_path": str(det),
            "Det.limit_type": "min",
            "Det.limit_side_len": int(min_side),
            "Rec.model_path": str(rec),
            "Rec.rec_batch_num": 1,
            "EngineConfig.onnxruntime.intra_op_num_threads": int(threads),
            "EngineConfig.onnxruntime.inter_op_num_threads": 1,
        }
    )
    pre = _bounded_preprocess(min_side, max_side)
    # the models are loaded lazily; load both now, without spinning threads, and give the detector
    # the bounded resize (private rapidocr methods: rapidocr is pinned)
    loaders: Any = engine
    with _no_spinning():
        loaders._load_det_model().get_preprocess = lambda: pre
        loaders._load_rec_model()

    def read_one(im: np.ndarray) -> list[tuple[str, float]]:
        bgr = cv2.cvtColor(np.ascontiguousarray(im[..., :3]), cv2.COLOR_RGB2BGR)
        out: Any = engine(bgr)
        texts, scores = getattr(out, "txts", None) or (), getattr(out, "scores", None) or ()
        return [(str(t), round(float(s), CONFIDENCE_DIGITS)) for t, s in zip(texts, scores) if str(t).strip()]

    def read(images: list[np.ndarray], canvas_size: int) -> list[list[tuple[str, float]]]:
        return [read_one(im) for im in images]

    return read
