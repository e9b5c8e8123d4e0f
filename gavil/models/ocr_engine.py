"""The OCR engine interface of stage ``ocr_filter``: what the stage needs from an engine
(:class:`OcrEngine`: its cache label, its reader and its image loader), built once from the ``ocr``
params by :func:`engine_from_params`, and the engine-neutral pieces every engine shares:
:data:`Detection`, :data:`BatchReader`, :func:`load_for_ocr`.

The stage asks the engine and never names one; each engine module provides its own:
``ppocr`` (the default, :func:`gavil.models.ppocr.engine`) and ``easyocr`` (the reference engine,
:func:`gavil.models.easyocr_reader.engine`). A new engine is a module with an ``engine(p) ->
OcrEngine`` function, a value of ``ocr.engine`` (:mod:`gavil.params.ocr`) and a line in
:data:`ENGINES`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

if TYPE_CHECKING:
    from gavil.params.ocr import OcrParams

#: One OCR detection: (text, confidence in [0, 1]).
Detection = tuple[str, float]

#: Reads a batch of images (:func:`load_for_ocr`'s H x W x 4 RGB + grey, or H x W x 3 RGB whose grey is
#: then OpenCV's RGB-to-grey; already downscaled) -> detections per image.
BatchReader = Callable[[list[np.ndarray], int], list[list[Detection]]]

#: Decodes an image file for OCR: ``(path, canvas_size) -> array`` (:func:`load_for_ocr`).
ImageLoader = Callable[[str, int], np.ndarray]


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


@dataclass(frozen=True)
class OcrEngine:
    """An OCR engine as the stage uses it, built from the ``ocr`` params (:func:`engine_from_params`).

    Attributes:
        label: the detection cache's engine label: it names everything that changes a reading
            besides the image and ``ocr.canvas_size`` (package version, models, numerics, settings),
            so readings of different engines or settings are never mixed.
        read: the engine's :data:`BatchReader`; it loads the engine's models on its first call
            only (an all-cached run loads nothing), once per process and settings (:func:`lazy_reader`).
        load: decodes an image file for ``read`` (:data:`ImageLoader`).
    """

    label: str
    read: BatchReader
    load: ImageLoader = load_for_ocr


_READERS: dict[tuple[object, ...], BatchReader] = {}  # one reader per engine and settings per process


def lazy_reader(key: tuple[object, ...], make: Callable[[], BatchReader]) -> BatchReader:
    """A :data:`BatchReader` that calls ``make()`` (which loads an engine: PP-OCR ~1 s, EasyOCR ~3 s)
    on its first call, and reuses that reader for every later call with the same ``key`` (the
    engine's name and settings) in this process."""

    def read(images: list[np.ndarray], canvas: int) -> list[list[Detection]]:
        if key not in _READERS:
            _READERS[key] = make()
        return _READERS[key](images, canvas)

    return read


def _ppocr(p: OcrParams) -> OcrEngine:
    from gavil.models.ppocr import engine

    return engine(p)


def _easyocr(p: OcrParams) -> OcrEngine:
    from gavil.models.easyocr_reader import engine

    return engine(p)


#: ``ocr.engine`` value -> the function that builds that engine from the ``ocr`` params (each
#: imports its engine module only when called).
ENGINES: dict[str, Callable[[OcrParams], OcrEngine]] = {"ppocr": _ppocr, "easyocr": _easyocr}


def engine_from_params(p: OcrParams) -> OcrEngine:
    """The engine ``p.engine`` names, at the settings of ``p`` (the ``ocr`` params section).

    Nothing heavy is loaded here (the reader loads its models on first use); the label may resolve
    ``ocr.precision``/``ocr.device`` (``auto``) for EasyOCR, or hash PP-OCR's model files.

    Raises:
        ParamsError: numerics this machine lacks (:func:`gavil.models.craft.resolve_ocr`).
        RuntimeError: PP-OCR's package or model files are missing (:func:`gavil.models.ppocr.model_files`).
    """
    return ENGINES[p.engine](p)
