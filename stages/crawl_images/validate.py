"""Validation of fetched files (pure): nothing is kept before it passes.

Policy (params ``crawl.*``):

- **Formats**: Pillow identifies the file (the extension and Content-Type are not trusted) and
  only ``accept_formats`` are decoded (default JPEG, PNG, WEBP, GIF; JPEG includes Pillow's MPO,
  the multi-picture JPEG of cameras; for GIF and animated WebP the first frame is what later
  stages see). A file Pillow knows in another format (PPM, ICO, TGA, PCX, SGI, BMP, TIFF...) is
  ``unsupported_format``; anything else is ``invalid_image``.
- **Size**: zero-byte, HTML, truncated files, fewer than ``min_side`` pixels on the short side, or
  more than ``max_pixels`` pixels (checked from the header, *before* decoding) are
  ``invalid_image``.
- **Reasons are stable**: they never contain a file path or anything else that changes from run
  to run (Pillow's messages are reduced to their kind).
- **Perceptual hash**: a kept image gets ``imagehash.phash`` (64 bits) and the standard deviation
  of the 32 x 32 grey thumbnail the hash is computed from (``grey_std``, grey levels 0-255).
  :func:`stages.crawl_images.register.register` compares hashes only of images with
  ``grey_std >= crawl.phash_min_std``: the hash of a flat, single-colour image is the same for
  every colour, so it cannot tell such images apart (sha256 duplicates still count).

Concept names are checked before they name a file; ``X-Robots-Tag: noai`` / ``noimageai`` make a
candidate ``opted_out``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

_NOAI = {"noai", "noimageai"}


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


def inspect_image(
    path: Path,
    min_side: int,
    max_pixels: int,
    formats: Sequence[str] = ("JPEG", "PNG", "WEBP", "GIF"),
    with_phash: bool = False,
) -> ImageInfo:
    """Identify ``path`` with Pillow, check its format and size, decode it fully, and (optionally)
    hash it perceptually from the same decode.

    Args:
        min_side: minimum of width and height, pixels.
        max_pixels: maximum width*height, pixels (checked from the header *before* decoding).
        formats: Pillow format names accepted (``crawl.accept_formats``).
        with_phash: also compute ``imagehash.phash`` and the thumbnail's ``grey_std``.

    Raises:
        InvalidImage: ``unsupported_format`` (a format Pillow knows, not in ``formats``) or
            ``invalid_image`` (empty, not an image, truncated, too small, too many pixels).
    """
    if path.stat().st_size == 0:
        raise InvalidImage("zero-byte file")
    Image.init()
    allowed = [f.upper() for f in formats if f.upper() in Image.OPEN]  # JPEG's opener also reads MPO
    try:
        with Image.open(path, formats=allowed) as im:
            w, h = im.size
            fmt = im.format or "unknown"
            if w * h > max_pixels:
                raise InvalidImage(f"{w}x{h} = {w * h} pixels > crawl.max_pixels {max_pixels}")
            im.load()  # full decode (the first frame): catches truncated files
            ph, std = _phash(im) if with_phash and min(w, h) >= min_side else (None, None)
    except InvalidImage:
        raise
    except UnidentifiedImageError:
        other = _identify(path)
        if other:
            raise InvalidImage(
                f"{other} image: not in crawl.accept_formats ({', '.join(formats)})", "unsupported_format"
            ) from None
        raise InvalidImage("not a decodable image (no image format recognised)") from None
    except Image.DecompressionBombError as e:
        raise InvalidImage(f"decompression bomb refused: {_stable(e, path)}") from None
    except (OSError, SyntaxError, ValueError, EOFError) as e:
        raise InvalidImage(f"not a decodable image ({type(e).__name__}: {_stable(e, path)})") from None
    if min(w, h) < min_side:
        raise InvalidImage(f"{w}x{h} smaller than crawl.min_side {min_side} px")
    return ImageInfo(w, h, fmt, ph, std)


def _identify(path: Path) -> str | None:
    """The format Pillow reads ``path`` as, from its header only (no decoding), or None."""
    try:
        with Image.open(path) as im:
            return im.format
    except Exception:  # noqa: BLE001 - any failure means "not an image Pillow knows"
        return None


def _stable(e: BaseException, path: Path) -> str:
    """Pillow's message without the file's path or name, object addresses, or quoted paths."""
    msg = str(e).replace(str(path), "").replace(path.name, "")
    msg = re.sub(r"<[^>]*>|0x[0-9a-fA-F]+|'[^']*[/\\][^']*'", "", msg)
    return re.sub(r"\s+", " ", msg).strip(" :'\"") or "no detail"


def _phash(im: Image.Image) -> tuple[str, float]:
    """``imagehash.phash`` (16 hex digits) and the std-dev of the 32x32 grey thumbnail it hashes."""
    import imagehash

    small = im.convert("L").resize((32, 32), Image.Resampling.LANCZOS)  # what phash computes first
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
    """The ``noai``/``noimageai`` directive in an ``X-Robots-Tag`` header value, or None.

    Directives may be scoped to a user agent (``"otherbot: noai"``); any scope counts.
    """
    if not x_robots_tag:
        return None
    for part in x_robots_tag.lower().replace(";", ",").split(","):
        token = part.rsplit(":", 1)[-1].strip()
        if token in _NOAI:
            return token
    return None
