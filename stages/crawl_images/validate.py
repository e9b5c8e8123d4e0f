"""Validation of fetched files (pure): nothing is kept before it passes.

Policy (params ``crawl.*``):

- **Formats**: Pillow identifies the file (the extension and Content-Type are not trusted) and
  only ``accept_formats`` are decoded (default JPEG, PNG, WEBP, GIF; JPEG includes Pillow's MPO,
  the multi-picture JPEG of cameras; for GIF and animated WebP the first frame is what later
  stages see). A file Pillow knows in another format (PPM, ICO, TGA, PCX, SGI, BMP, TIFF...) is
  ``unsupported_format``; anything else is ``invalid_image``.
- **Size**: zero-byte, HTML, truncated files, fewer than ``min_side`` pixels on the short side, or
  more than ``max_pixels`` pixels (checked from the header, *before* decoding; Pillow's own
  decompression-bomb check, twice ``Image.MAX_IMAGE_PIXELS``, also applies) are ``invalid_image``.
- **Bounded decoding**: the whole file is decoded (a truncated one is caught), but never more
  than needed for the hash: a JPEG in Pillow's draft mode (libjpeg's DCT scaling, 1/2 to 1/8, grey),
  other formats at full size and then :meth:`PIL.Image.Image.reduce` by the same power of two. A
  progressive JPEG scaled by 1/8 is verified marker by marker to its end and decoded from its DC
  scans alone (:mod:`stages.crawl_images.jpegscan`: the same pixels, about 6x faster); any file
  that walk does not accept is decoded whole.
  Before decoding, each image reserves what its decode needs (:func:`decode_bytes`, from the
  header) from one process-wide :class:`DecodeBudget` of ``crawl.decode_budget_mb``, so however
  many threads validate at once, what they decode together stays within the budget. An image
  that needs more than the whole budget is ``invalid_image`` (e.g. a WebP above about 19
  megapixels at the default 384 MB: Pillow holds 16 bytes per pixel of a WebP).
- **Reasons are stable**: they never contain a file path or anything else that changes from run
  to run (Pillow's messages go to the log; the reason keeps the error's type).
- **Perceptual hash**: a kept image gets ``imagehash.phash`` (64 bits) of its grey version scaled
  down by a power of two (at least 64 px on the short side, as above) and the standard deviation
  of the 32 x 32 grey thumbnail the hash is computed from (``grey_std``, grey levels 0-255).
  :func:`stages.crawl_images.register.register` compares hashes only of images with
  ``grey_std >= crawl.phash_min_std``: the hash of a flat, single-colour image is the same for
  every colour, so it cannot tell such images apart (sha256 duplicates still count).

Concept names are checked before they name a file; an ``X-Robots-Tag`` opt-out (``noai``,
``noimageai``, ``noindex``, ``noimageindex`` or ``none``: img2dataset's default list, plus ``none``,
which means ``noindex, nofollow``) makes a candidate ``opted_out``, its reason naming the directive.
"""

from __future__ import annotations

import functools
import io
import re
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from stages.crawl_images.jpegscan import dc_stream

#: ``X-Robots-Tag`` directives that opt an image out of a dataset crawl (img2dataset's default
#: ``--disallowed_header_directives`` list; ``none`` = ``noindex, nofollow``).
OPT_OUT_DIRECTIVES = frozenset({"noai", "noimageai", "noindex", "noimageindex", "none"})
#: The hash is computed from the image scaled down by the largest of 8, 4, 2, 1 that leaves at
#: least this many pixels on each side (JPEG: draft mode; others: ``Image.reduce``).
HASH_SOURCE_SIDE = 64


@dataclass(frozen=True)
class ImageInfo:
    width: int
    height: int
    format: str
    phash: str | None = None  # 64-bit DCT perceptual hash (imagehash.phash), 16 hex digits
    grey_std: float | None = None  # std-dev of the 32x32 grey thumbnail phash hashes, grey levels


class InvalidImage(ValueError):
    """A downloaded file is not an acceptable image: ``status`` (``invalid_image`` or
    ``unsupported_format``) and ``reason`` (stable text, no paths)."""

    def __init__(self, reason: str, status: str = "invalid_image") -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


class DecodeBudget:
    """Bytes of decoded image data the validating threads may hold together (thread-safe, FIFO).

    ``capacity``: bytes. :meth:`reserve` waits until its share fits (a request above the capacity
    is cut to it; :func:`inspect_image` refuses such images before asking). Waiters are served in
    arrival order, so a large image is not starved by a stream of small ones.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._used = 0
        self._cv = threading.Condition()
        self._queue: deque[object] = deque()

    @contextmanager
    def reserve(self, nbytes: int) -> Iterator[None]:
        """Hold ``min(nbytes, capacity)`` bytes of the budget while the block runs."""
        n = min(max(0, nbytes), self.capacity)
        me = object()
        with self._cv:
            self._queue.append(me)
            while self._queue[0] is not me or self._used + n > self.capacity:
                self._cv.wait()
            self._queue.popleft()
            self._used += n
            self._cv.notify_all()
        try:
            yield
        finally:
            with self._cv:
                self._used -= n
                self._cv.notify_all()


_BUDGETS: dict[int, DecodeBudget] = {}
_BUDGETS_LOCK = threading.Lock()


def decode_budget(capacity: int) -> DecodeBudget:
    """The process-wide :class:`DecodeBudget` of ``capacity`` bytes (one per capacity, shared by
    every crawl and partition of this process)."""
    with _BUDGETS_LOCK:
        return _BUDGETS.setdefault(capacity, DecodeBudget(capacity))


def _pixel_bytes(mode: str) -> int:
    """Bytes per pixel of Pillow's storage for ``mode`` (1, L, P: 1; I;16*: 2; others: 4)."""
    if mode in ("1", "L", "P"):
        return 1
    return 2 if mode.startswith("I;16") else 4


def decode_bytes(im: Image.Image, full_size: tuple[int, int], scale: int = 1) -> int:
    """What decoding ``im`` (opened, draft already set, not loaded) and hashing it may hold, bytes.

    ``full_size``: the header's width and height; ``scale``: the hash's reduction (``reduce``).
    Counted: Pillow's decoded image (its current size and mode); for WebP four full RGBA copies
    (libwebp's animation decoder keeps two canvases, Pillow copies the frame to bytes and then to
    the image: measured 16 bytes per pixel); the grey copy (small when an RGB image is reduced
    first, else full size, via I for I;16); for JPEG libjpeg's whole-image coefficient buffer (2
    bytes per coefficient at full resolution, per the sampling factors: progressive and multi-scan
    files need it, and which one a file is shows only while decoding); plus a quarter for row
    buffers and the like, and 1 MB.
    """
    w, h = im.size
    fw, fh = full_size
    need = w * h * (16 if im.format == "WEBP" else _pixel_bytes(im.mode))
    if im.mode == "RGB" and scale > 1:
        need += (w // scale) * (h // scale) * 5
    elif im.mode != "L":
        need += w * h * (5 if im.mode.startswith(("I", "F")) else 1)
    if im.format in ("JPEG", "MPO"):
        layers = getattr(im, "layer", None) or [("", 1, 1, 0)] * len(im.getbands())
        hmax = max(int(lay[1]) for lay in layers) or 1
        vmax = max(int(lay[2]) for lay in layers) or 1
        blocks = sum(-(-fw * int(lay[1]) // (8 * hmax)) * -(-fh * int(lay[2]) // (8 * vmax)) for lay in layers)
        need += blocks * 64 * 2
    return need + need // 4 + (1 << 20)


def inspect_image(
    path: Path,
    min_side: int,
    max_pixels: int,
    formats: Sequence[str] = ("JPEG", "PNG", "WEBP", "GIF"),
    with_phash: bool = False,
    budget: DecodeBudget | None = None,
    data: bytes | None = None,
) -> ImageInfo:
    """Identify ``path`` with Pillow, check its format and size from the header, decode it (within
    ``budget``, at reduced resolution where the format allows), and (optionally) hash it
    perceptually from the same decode.

    Args:
        min_side: minimum of width and height, pixels.
        max_pixels: maximum width*height, pixels (checked from the header *before* decoding).
        formats: Pillow format names accepted (``crawl.accept_formats``).
        with_phash: also compute ``imagehash.phash`` and the thumbnail's ``grey_std``.
        budget: the decode memory budget to reserve from (:func:`decode_bytes`); None: none.
        data: ``path``'s bytes when the caller already holds them (a body just downloaded): read
            from memory instead of the file (same decisions, same hash); ``path`` then only names
            the file in the log.

    Raises:
        InvalidImage: ``unsupported_format`` (a format Pillow knows, not in ``formats``) or
            ``invalid_image`` (empty, not an image, truncated, too small, too many pixels, or
            needing more memory to decode than the whole ``budget``).
    """
    if (len(data) if data is not None else path.stat().st_size) == 0:
        raise InvalidImage("zero-byte file")
    allowed = _allowed(tuple(formats))
    try:
        with Image.open(io.BytesIO(data) if data is not None else path, formats=allowed) as im:
            w, h = im.size
            fmt = im.format or "unknown"
            if w * h > max_pixels:
                raise InvalidImage(f"{w}x{h} = {w * h} pixels > crawl.max_pixels {max_pixels}")
            scale = _hash_scale(w, h)
            if fmt in ("JPEG", "MPO") and im.draft("L", (HASH_SOURCE_SIDE, HASH_SOURCE_SIDE)) is not None:
                scale = 1  # libjpeg scaled it while decoding
            need = decode_bytes(im, (w, h), scale)
            if budget is not None and need > budget.capacity:
                raise InvalidImage(
                    f"{w}x{h} {fmt} needs about {need // 1_000_000} MB to decode"
                    f" > crawl.decode_budget_mb {budget.capacity // 1_000_000}"
                )
            with budget.reserve(need) if budget is not None else _nothing():
                with _dc_only(im, (w, h), path, data) as src:
                    src.load()  # decodes the whole file (the first frame): catches truncated files
                    ph, std = _phash(src, scale) if with_phash and min(w, h) >= min_side else (None, None)
    except InvalidImage:
        raise
    except UnidentifiedImageError:
        other = _identify(io.BytesIO(data) if data is not None else path)
        if other:
            raise InvalidImage(
                f"{other} image: not in crawl.accept_formats ({', '.join(formats)})", "unsupported_format"
            ) from None
        raise InvalidImage("not a decodable image (no image format recognised)") from None
    except Image.DecompressionBombError as e:
        _log(path, e)
        size = re.search(r"\((\d+) pixels\)", str(e))  # the file's own number; Pillow's words stay in the log
        raise InvalidImage(
            f"decompression bomb refused ({size[1] + ' pixels, ' if size else ''}over Pillow's MAX_IMAGE_PIXELS)"
        ) from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        _log(path, e)  # Pillow's wording changes between versions: the table keeps the error's type only
        raise InvalidImage(f"not a decodable image ({type(e).__name__})") from None
    if min(w, h) < min_side:
        raise InvalidImage(f"{w}x{h} smaller than crawl.min_side {min_side} px")
    return ImageInfo(w, h, fmt, ph, std)


@contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextmanager
def _dc_only(im: Image.Image, full_size: tuple[int, int], path: Path, data: bytes | None) -> Iterator[Image.Image]:
    """``im`` (opened, draft set; ``full_size`` its header's width and height, pixels), or, for a progressive JPEG drafted to 1/8 scale whose structure
    :func:`stages.crawl_images.jpegscan.dc_stream` accepts, the same image opened from its DC scans
    alone with the same draft: identical pixels at that scale, without decoding the AC scans."""
    w, h = full_size
    eighth = min(w, h) >= 16 and im.size == (-(-w // 8), -(-h // 8))  # libjpeg's 1/8 DCT scaling
    if im.format != "JPEG" or not im.info.get("progressive") or not eighth:
        yield im
        return
    stream = dc_stream(data if data is not None else path.read_bytes())
    if stream is None:
        yield im
        return
    with Image.open(io.BytesIO(stream), formats=("JPEG",)) as dc:
        dc.draft("L", (HASH_SOURCE_SIDE, HASH_SOURCE_SIDE))
        if dc.size != im.size or dc.mode != im.mode:  # pragma: no cover - same header, same draft
            yield im
            return
        yield dc


@functools.lru_cache(maxsize=16)
def _allowed(formats: tuple[str, ...]) -> tuple[str, ...]:
    """The Pillow format names of ``formats`` that this Pillow can open (JPEG's opener also reads
    MPO); computed once per ``formats`` (:func:`PIL.Image.init` loads every plugin)."""
    Image.init()
    return tuple(f.upper() for f in formats if f.upper() in Image.OPEN)


def _hash_scale(w: int, h: int) -> int:
    """The power of two (8, 4, 2 or 1) the hash's source is scaled down by (as Pillow's JPEG draft
    picks it for ``HASH_SOURCE_SIDE``)."""
    fit = min(w // HASH_SOURCE_SIDE, h // HASH_SOURCE_SIDE)
    return next((s for s in (8, 4, 2) if fit >= s), 1)


def _identify(source: Path | io.BytesIO) -> str | None:
    """The format Pillow reads ``source`` (a file or its bytes) as, from its header only (no
    decoding), or None."""
    try:
        with Image.open(source) as im:
            return im.format
    except Exception:  # any failure means "not an image Pillow knows"
        return None


def _log(path: Path, e: BaseException) -> None:
    """Pillow's own message, for the log only (stored reasons are fixed sentences)."""
    print(f"crawl_images: {path.name}: {type(e).__name__}: {e}", file=sys.stderr)


def _phash(im: Image.Image, scale: int) -> tuple[str, float]:
    """``imagehash.phash`` (16 hex digits) and the std-dev of the 32x32 grey thumbnail it hashes.

    ``im`` is loaded; it is made grey and reduced by ``scale`` (box filter,
    :meth:`PIL.Image.Image.reduce`) before the 32x32 thumbnail. An RGB image is reduced first
    (grey is linear in RGB, so the order only moves rounding) and its grey copy is then small.
    """
    import imagehash

    if im.mode == "RGB" and scale > 1:
        grey = im.reduce(scale).convert("L")
    else:
        grey = im.convert("L")
        grey = grey.reduce(scale) if scale > 1 else grey
    small = grey.resize((32, 32), Image.Resampling.LANCZOS)  # what phash computes first
    return str(imagehash.phash(small)), round(float(np.asarray(small, dtype=np.float64).std()), 3)


def safe_concept_name(concept: str) -> bool:
    """Whether a concept can name a file (no separators, NUL, '.'/'..', <= 200 bytes)."""
    return (
        bool(concept)
        and concept not in (".", "..")
        and "/" not in concept
        and "\\" not in concept
        and "\x00" not in concept
        and len(concept.encode()) <= 200
    )


def opted_out(x_robots_tag: str | None) -> str | None:
    """The first opt-out directive (:data:`OPT_OUT_DIRECTIVES`) in an ``X-Robots-Tag`` header value, or None.

    Directives are compared case-insensitively; they may be scoped to a user agent
    (``"otherbot: noindex"``): any scope counts.
    """
    if not x_robots_tag:
        return None
    for part in x_robots_tag.lower().replace(";", ",").split(","):
        token = part.rsplit(":", 1)[-1].strip()
        if token in OPT_OUT_DIRECTIVES:
            return token
    return None
