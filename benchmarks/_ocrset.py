"""The OCR benchmark set (issue 27): web-shaped photos, half of them showing their concept word small.

:func:`ocr_image` makes one image: a web-shaped photo (:func:`benchmarks._web.web_photo`, long side
500-1,600 px, JPEG as search results are) and, for a *word* image, the concept word drawn on it with
its cap height (the height of a capital H in that font) a given percent of the image's height (1, 1.5,
2, 3, 5 or 8 %), rotated uniformly in [-15, 15] degrees, in one of several TrueType fonts found on
the machine (DejaVu, Liberation; Pillow's built-in font where none is), lower, upper or title case,
light-on-dark or dark-on-light, drawn straight onto the photo (busy background), at a random place
that keeps it inside the image. Text-free images are web photos as they come. Every image is saved
as JPEG (quality 85) so the word carries the compression a web image has.

:func:`write_ocr_set` writes ``n`` images (text-free and word images alternating, so any prefix
of the set holds both; the words cycle through the cap heights) and returns one :class:`Item` per image: path, concept, whether the word is
shown, cap height (percent and pixels), angle, font, polarity, image size. Deterministic in ``seed``
(same fonts on the machine, same bytes).
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

CAP_HEIGHTS_PERCENT = (1.0, 1.5, 2.0, 3.0, 5.0, 8.0)
MAX_ANGLE_DEG = 15.0
WORDS = (
    "library",
    "coffee",
    "rocket",
    "garden",
    "castle",
    "pencil",
    "guitar",
    "bridge",
    "window",
    "candle",
    "forest",
    "camera",
    "anchor",
    "dragon",
    "school",
    "summer",
    "planet",
    "mirror",
    "violin",
    "island",
)
_FONT_DIRS = ("/usr/share/fonts/truetype/dejavu", "/usr/share/fonts/truetype/liberation")
_FONT_NAMES = (
    "DejaVuSans.ttf",
    "DejaVuSans-Bold.ttf",
    "DejaVuSerif.ttf",
    "DejaVuSansCondensed-Oblique.ttf",
    "LiberationSans-Regular.ttf",
    "LiberationSerif-Bold.ttf",
    "LiberationMono-Regular.ttf",
    "LiberationSansNarrow-Regular.ttf",
)


@dataclass(frozen=True)
class Item:
    """One image of the set and its truth."""

    path: str
    concept: str
    shows_word: bool
    cap_height_percent: float | None  # of the image height
    cap_height_px: float | None
    angle_deg: float | None
    font: str | None
    light_on_dark: bool | None
    width: int
    height: int
    box: tuple[int, int, int, int] | None = None  # the rotated word's bounding box (x0, y0, x1, y1), pixels

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _present(names: tuple[str, ...]) -> list[str]:
    """Paths of the fonts ``names`` found in :data:`_FONT_DIRS`, in that order; ``["pillow-default"]`` if none."""
    found = [str(Path(d) / n) for n in names for d in _FONT_DIRS if (Path(d) / n).exists()]
    return found or ["pillow-default"]


def fonts() -> list[str]:
    """The TrueType fonts used (those of :data:`_FONT_NAMES` present here); ``["pillow-default"]`` if none."""
    return _present(_FONT_NAMES)


def _font(name: str, size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size) if name == "pillow-default" else ImageFont.truetype(name, size)


def _font_for_cap(name: str, cap_px: float) -> Any:
    """The font ``name`` at the size whose capital H is ``cap_px`` pixels tall (at least 1 px)."""
    size = max(2, round(cap_px * 1.4))
    for _ in range(40):
        box = _font(name, size).getbbox("H")
        h = box[3] - box[1]
        if abs(h - cap_px) <= 0.5 or size <= 2:
            break
        size = max(2, size + (1 if h < cap_px else -1))
    return _font(name, size)


def draw_word(
    photo: Any,
    word: str,
    cap_percent: float,
    rng: random.Random,
    font_name: str,
    under: Callable[[Any, tuple[int, int, int, int]], None] | None = None,
    angle: float | None = None,
) -> dict[str, Any]:
    """Draw ``word`` onto the PIL RGB ``photo`` in place (see the module docstring); returns its details.
    ``under(photo, box)``, if given, draws first what lies under the text's box (a sign's plate): the
    text's shade is then chosen against it. ``angle`` (degrees, counter-clockwise) replaces the
    uniform draw in [-:data:`MAX_ANGLE_DEG`, :data:`MAX_ANGLE_DEG`]."""
    from PIL import Image, ImageStat

    w, h = photo.size
    cap_px = h * cap_percent / 100
    font = _font_for_cap(font_name, cap_px)
    text = rng.choice((word, word.upper(), word.title()))
    angle = rng.uniform(-MAX_ANGLE_DEG, MAX_ANGLE_DEG) if angle is None else angle
    box = font.getbbox(text)
    pad = max(2, int(cap_px))
    layer = Image.new("L", (box[2] - box[0] + 2 * pad, box[3] - box[1] + 2 * pad), 0)
    from PIL import ImageDraw

    ImageDraw.Draw(layer).text((pad - box[0], pad - box[1]), text, fill=255, font=font)
    layer = layer.rotate(angle, resample=Image.Resampling.BICUBIC, expand=True)
    lw, lh = layer.size
    x, y = rng.randint(0, max(0, w - lw)), rng.randint(0, max(0, h - lh))
    if under is not None:
        under(photo, (x, y, x + lw, y + lh))
    # polarity against the local background: light text where the patch is dark, and vice versa
    light = ImageStat.Stat(photo.crop((x, y, x + lw, y + lh)).convert("L")).mean[0] < 128
    shade = rng.randint(225, 255) if light else rng.randint(0, 35)
    colour = (
        (shade, shade, shade)
        if rng.random() < 0.5
        else tuple(min(255, max(0, shade + rng.randint(-30, 30))) for _ in range(3))
    )
    photo.paste(Image.new("RGB", layer.size, colour), (x, y), layer)
    return {
        "cap_height_px": round(cap_px, 1),
        "angle_deg": round(angle, 1),
        "font": Path(font_name).name,
        "light_on_dark": light,
        "box": (x, y, x + lw, y + lh),
        "text": text,
    }


def ocr_image(seed: int, word: str | None, cap_percent: float | None, photos: Any = None) -> tuple[bytes, dict]:
    """(JPEG bytes, details) of one set image; ``word`` None makes a text-free web photo."""
    from PIL import Image

    from benchmarks._web import web_photo

    rng = random.Random(seed)
    base = web_photo(seed, photos)
    if word is None:
        with Image.open(io.BytesIO(base)) as im:
            return base, {"width": im.width, "height": im.height}
    with Image.open(io.BytesIO(base)) as src:
        im = src.convert("RGB")
    names = fonts()
    info = draw_word(im, word, float(cap_percent or 0), rng, names[rng.randrange(len(names))])
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue(), {**info, "width": im.width, "height": im.height}


def write_ocr_set(folder: Path, n: int, seed: int = 0) -> list[Item]:
    """Write ``n`` images into ``folder``: text-free photos (even positions) and words (odd positions)
    cycling through :data:`CAP_HEIGHTS_PERCENT` and :data:`WORDS`; returns their :class:`Item` records."""
    from benchmarks._common import sample_photos

    folder.mkdir(parents=True, exist_ok=True)
    photos = sample_photos()
    items = []
    rng = random.Random(seed)
    for i in range(n):
        s = seed * 1_000_003 + 7_919 * i + 1
        if i % 2 == 0:
            concept, data, info = WORDS[rng.randrange(len(WORDS))], *ocr_image(s, None, None, photos)
            items.append(
                Item(
                    str(folder / f"free-{i:04d}.jpg"),
                    concept,
                    False,
                    None,
                    None,
                    None,
                    None,
                    None,
                    info["width"],
                    info["height"],
                )
            )
        else:
            k = i // 2
            concept = WORDS[k % len(WORDS)]
            cap = CAP_HEIGHTS_PERCENT[k % len(CAP_HEIGHTS_PERCENT)]
            data, info = ocr_image(s, concept, cap, photos)
            items.append(
                Item(
                    str(folder / f"word-{i:04d}-{cap:g}pc.jpg"),
                    concept,
                    True,
                    cap,
                    info["cap_height_px"],
                    info["angle_deg"],
                    info["font"],
                    info["light_on_dark"],
                    info["width"],
                    info["height"],
                    info["box"],
                )
            )
        Path(items[-1].path).write_bytes(data)
    return items


# --- The truth set: each photo three ways (its word, no text, unrelated text) -------------------------

#: Concepts of the truth set: :data:`WORDS` and words that OCR tends to read as two tokens or misread.
TRUTH_WORDS = (*WORDS, "lobster", "juniper", "blanket", "ticket")
#: Sign and label texts drawn on the unrelated-text photos (each kept only where it is far from the concept).
SIGN_TEXTS = (
    "EXIT",
    "OPEN",
    "SALE",
    "NO PARKING",
    "HOTEL",
    "PHARMACY",
    "BUS STOP",
    "FRESH BREAD",
    "TAXI",
    "POLICE",
    "MUSEUM",
    "STOP",
    "BAKERY",
    "CINEMA",
    "PUSH",
    "DANGER",
    "TOILETS",
    "ENTRANCE",
    "WELCOME",
    "SOLD OUT",
    "NEWS",
    "MARKET",
    "PIZZA",
    "BANK",
    "FLOWERS",
    "BOOKS",
    "DELI",
    "GARAGE",
    "LAUNDRY",
    "Open 24 hours",
    "Fresh fish daily",
    "Made in Italy",
)
#: Fonts of the truth set: sans, serif, mono, condensed, narrow; regular, bold, italic and oblique.
TRUTH_FONT_NAMES = (
    *_FONT_NAMES,
    "DejaVuSerif-Italic.ttf",
    "LiberationSerif-Italic.ttf",
    "LiberationSans-BoldItalic.ttf",
    "DejaVuSansMono-Bold.ttf",
)
#: Sample photos that show text of their own (a scanned page, a sign): no base for text-free photos.
_TEXT_PHOTOS = ("page.png", "text.png")
#: Unrelated text is far from the concept: every token, and all tokens joined, below this rapidfuzz ratio.
UNRELATED_MAX_RATIO = 60.0


@dataclass(frozen=True)
class TruthItem:
    """One truth-set image: ``kind`` ``word`` (shows ``concept``: ``shows_word`` True), ``free`` (the
    same photo without text) or ``unrelated`` (the same photo with ``text``, a sign far from the concept)."""

    path: str
    concept: str
    kind: str
    shows_word: bool
    cap_height_percent: float | None  # of the image height: the word's, or the sign's for unrelated
    cap_height_px: float | None
    angle_deg: float | None
    font: str | None
    occluded: bool
    on_plate: bool
    text: str | None  # what is drawn: the word as cased, or the sign's text
    width: int
    height: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: The hard truth set (``write_truth_set(..., hard=True)``): smaller words (down to 0.75 % cap height),
#: thin, light, condensed and narrow fonts, steep and vertical text, and concepts of two words.
HARD_CAP_HEIGHTS_PERCENT = (0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
HARD_WORDS = (
    "ice cream",
    "violin",
    "fire truck",
    "anchor",
    "traffic light",
    "camera",
    "polar bear",
    "pepper",
    "hot dog",
    "rabbit",
    "palm tree",
    "candle",
    "tennis ball",
    "helmet",
    "post office",
    "saddle",
    "teddy bear",
    "walnut",
    "french fries",
    "zipper",
    "ferris wheel",
    "lantern",
    "coffee cup",
    "cactus",
)
HARD_FONT_NAMES = (
    "DejaVuSans-ExtraLight.ttf",
    "DejaVuSansCondensed.ttf",
    "DejaVuSansCondensed-Oblique.ttf",
    "DejaVuSerifCondensed-Italic.ttf",
    "LiberationSansNarrow-Regular.ttf",
    "LiberationSansNarrow-Italic.ttf",
    "LiberationMono-Italic.ttf",
    "LiberationSerif-Regular.ttf",
)


def hard_angle(rng: random.Random) -> float:
    """The hard set's text angle, degrees: a third tilted within +-15, a third steep (15-30 either
    way), a third vertical (+-90, read top to bottom or bottom to top)."""
    way = rng.randrange(3)
    sign = rng.choice((-1.0, 1.0))
    if way == 0:
        return rng.uniform(-MAX_ANGLE_DEG, MAX_ANGLE_DEG)
    return sign * (rng.uniform(15.0, 30.0) if way == 1 else 90.0)


def truth_fonts(hard: bool = False) -> list[str]:
    """The truth set's TrueType fonts present here (:data:`TRUTH_FONT_NAMES`, or :data:`HARD_FONT_NAMES`
    for the hard set); ``["pillow-default"]`` if none."""
    return _present(HARD_FONT_NAMES if hard else TRUTH_FONT_NAMES)


def _plate(photo: Any, box: tuple[int, int, int, int], rng: random.Random) -> None:
    """A sign or label under ``box``: a filled rectangle a little larger than the text, light or dark."""
    from PIL import ImageDraw

    x0, y0, x1, y1 = box
    pad = max(3, (y1 - y0) // 6)
    shade = rng.choice(((245, 245, 235), (30, 60, 140), (180, 20, 20), (20, 110, 50), (25, 25, 25)))
    ImageDraw.Draw(photo).rectangle((x0 - pad, y0 - pad, x1 + pad, y1 + pad), fill=shade)


def _occlude(photo: Any, box: tuple[int, int, int, int], rng: random.Random) -> None:
    """Cover part of the drawn text in ``box``: a vertical band (a pole, a branch) 10-20 % of its width."""
    from PIL import ImageDraw

    x0, y0, x1, y1 = box
    bw = max(2, int((x1 - x0) * rng.uniform(0.10, 0.20)))
    bx = rng.randint(x0 + (x1 - x0) // 5, max(x0 + (x1 - x0) // 5, x1 - (x1 - x0) // 5 - bw))
    colour = tuple(rng.randint(20, 120) for _ in range(3))
    ImageDraw.Draw(photo).rectangle((bx, y0 - 2, bx + bw, y1 + 2), fill=colour)


def _draw(
    photo: Any,
    text: str,
    cap: float,
    rng: random.Random,
    font: str,
    plate: bool,
    occlude: bool,
    angle: float | None = None,
) -> dict:
    """Draw ``text`` at ``cap`` % cap height on ``photo`` (PIL RGB, in place), on a plate or straight onto
    the (busy) photo, at ``angle`` degrees (None: :func:`draw_word`'s draw), then occlude part of it;
    returns :func:`draw_word`'s details."""
    under = (lambda im, box: _plate(im, box, rng)) if plate else None
    info = draw_word(photo, text, cap, rng, font, under, angle)
    if occlude:
        _occlude(photo, info["box"], rng)
    return info


def truth_image(
    seed: int, concept: str, kind: str, cap_percent: float, photos: Any, hard: bool = False
) -> tuple[bytes, dict]:
    """(JPEG bytes, details) of one truth-set image of ``kind`` (``word``, ``free``, ``unrelated``):
    the web photo of ``seed``, the same for the three kinds, with the concept, nothing, or a sign;
    ``hard``: the hard set's fonts and angles (:data:`HARD_FONT_NAMES`, :func:`hard_angle`)."""
    from PIL import Image
    from rapidfuzz import fuzz

    from benchmarks._web import web_photo

    base = web_photo(seed, photos)
    rng = random.Random(seed * 3 + 1)
    names = truth_fonts(hard)
    font = names[rng.randrange(len(names))]
    plate, occlude = rng.random() < 0.3, rng.random() < 0.25
    angle = hard_angle(random.Random(seed * 5 + 3)) if hard else None
    with Image.open(io.BytesIO(base)) as src:
        im = src.convert("RGB")
    details: dict[str, Any] = {"width": im.width, "height": im.height, "plate": False, "occluded": False}
    if kind == "free":
        return base, details
    if kind == "word":
        text = concept
    else:
        target = "".join(concept.split())
        far = [
            s
            for s in SIGN_TEXTS
            if all(
                fuzz.ratio(t, target) < UNRELATED_MAX_RATIO for t in (*s.lower().split(), "".join(s.lower().split()))
            )
        ]
        text = far[rng.randrange(len(far))]
        cap_percent = rng.choice((3.0, 5.0, 8.0))
        occlude = False
    info = _draw(im, text, cap_percent, rng, font, plate, occlude, angle)
    info["cap_percent"] = cap_percent
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=85)
    return buf.getvalue(), {**details, **info, "plate": plate, "occluded": occlude}


def write_truth_set(folder: Path, per_cap: int, seed: int = 0, hard: bool = False) -> list[TruthItem]:
    """Write the truth set into ``folder``: ``per_cap`` photos per cap height of
    :data:`CAP_HEIGHTS_PERCENT`, each three ways (``NNN-word-Cpc.jpg`` shows its concept at C % cap
    height, ``NNN-free.jpg`` is the same photo without text, ``NNN-unrelated.jpg`` the same photo
    with a sign of :data:`SIGN_TEXTS` far from the concept); returns one :class:`TruthItem` per image,
    in that order. Photo ``i``'s concept is :data:`TRUTH_WORDS` ``[i mod 24]`` (the words cycle); the
    photos leave out the sample's own text photos (:data:`_TEXT_PHOTOS`). Deterministic in ``seed``.
    ``hard``: the hard set, the same way with :data:`HARD_CAP_HEIGHTS_PERCENT`, :data:`HARD_WORDS`,
    :data:`HARD_FONT_NAMES` and :func:`hard_angle`."""
    from benchmarks._common import sample_photos

    caps, words = (HARD_CAP_HEIGHTS_PERCENT, HARD_WORDS) if hard else (CAP_HEIGHTS_PERCENT, TRUTH_WORDS)

    folder.mkdir(parents=True, exist_ok=True)
    photos = [p for p in sample_photos() if p.name not in _TEXT_PHOTOS]
    items: list[TruthItem] = []
    for i in range(per_cap * len(caps)):
        cap = caps[i % len(caps)]
        concept = words[(i + seed * 5) % len(words)]
        s = seed * 1_000_003 + 7_919 * i + 11
        for kind in ("word", "free", "unrelated"):
            data, info = truth_image(s, concept, kind, cap, photos, hard)
            name = f"{i:03d}-{kind}" + (f"-{cap:g}pc" if kind == "word" else "") + ".jpg"
            (folder / name).write_bytes(data)
            drawn = kind != "free"
            items.append(
                TruthItem(
                    path=str(folder / name),
                    concept=concept,
                    kind=kind,
                    shows_word=kind == "word",
                    cap_height_percent=info.get("cap_percent") if drawn else None,
                    cap_height_px=info.get("cap_height_px") if drawn else None,
                    angle_deg=info.get("angle_deg") if drawn else None,
                    font=info.get("font") if drawn else None,
                    occluded=bool(info["occluded"]),
                    on_plate=bool(info["plate"]),
                    text=info.get("text"),
                    width=info["width"],
                    height=info["height"],
                )
            )
    return items
