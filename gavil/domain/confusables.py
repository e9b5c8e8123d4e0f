"""Unicode TR39 confusable skeletons, from the published confusables data.

TR39 §4 ("Confusable Detection") defines the **skeleton** of a string X: X in NFD, every
``Default_Ignorable_Code_Point`` removed, each character replaced by its *prototype* from
``confusables.txt``, and the result in NFD again. Two strings are confusable exactly when their
skeletons are equal (``paypal`` with a Cyrillic ``а``, ``modern`` and ``modem``, ``dog's`` and
``dog’s``, a Latin script ``ɡ`` and ``g``).

The data is the ``confusable-homoglyphs`` package's copy of Unicode's ``confusables.txt``
(``confusables.json``). That file keeps every line ``source ; prototype`` in both directions
(``a -> [b, ...]`` and ``b -> [a, ...]``) and wraps right-to-left characters in U+200E for display.
The direction of each line is recovered by TR39's own invariants (:func:`prototypes`):

1. a source is one code point, so a key of two or more code points (after removing U+200E) is a
   prototype (``rn`` for ``m``);
2. a source appears on one line only, so a key with two or more partners is a prototype (``l``
   with ``I``, ``1``, ``|``, ...) and its single-partner neighbours are its sources;
3. prototypes are in skeleton form (the mapping is idempotent), so a character that occurs inside
   a multi-character prototype is a prototype too;
4. what remains are lines whose two ends are single code points with no other partner (1,440
   pairs, mostly combining marks across scripts): either end gives the same equivalence, so the
   higher code point is mapped to the lower one (deterministic; tested to keep the mapping
   idempotent).

The derived mapping is tested against the data as a whole (every line's two ends get one
skeleton; the mapping is idempotent) and against TR39's published examples.

Folding (:func:`fold_variants`): apostrophe, quote and hyphen *variants* are characters that are
not letters of a script (categories P*, S*, Lm) whose skeleton is the ASCII apostrophe ``'``, the
ASCII quotation mark's ``''`` or the hyphen-minus ``-``: ``’ ‘ ʼ ´ ` ′`` fold to ``'``, ``“ ” ″``
to ``"``, ``‐ ‑ ‒ – −`` to ``-``. The policy stores names with them folded, so ``dog’s`` is stored
as ``dog's``. Dashes that TR39 relates to something else (an em dash reads as ``ー``, U+1400 as
``=``) are left as they are: a word refuses them, a display name keeps them.
"""

from __future__ import annotations

import importlib.resources
import json
import unicodedata
from functools import lru_cache

import regex

_DEFAULT_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")
_LRM = "\u200e"


@lru_cache(maxsize=1)
def confusable_lines() -> dict[str, frozenset[str]]:
    """Every string of ``confusables.txt`` -> the strings it shares a line with (both directions,
    U+200E display marks removed), as ``confusable-homoglyphs`` ships it."""
    raw = json.loads(importlib.resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8"))
    graph: dict[str, set[str]] = {}
    for key, partners in raw.items():
        graph.setdefault(key.replace(_LRM, ""), set()).update(p["c"].replace(_LRM, "") for p in partners)
    return {k: frozenset(v) for k, v in graph.items()}


@lru_cache(maxsize=1)
def prototypes() -> dict[str, str]:
    """source character -> its prototype string (TR39 ``confusables.txt``), directions recovered
    as the module docstring says. Idempotent: no prototype contains a source."""
    graph = confusable_lines()
    inside = {ch for key in graph if len(key) > 1 for ch in key}
    out: dict[str, str] = {}
    for key, partners in graph.items():
        if len(key) != 1 or len(partners) != 1:
            continue
        (proto,) = partners
        if len(proto) > 1 or len(graph.get(proto, ())) > 1:
            out[key] = proto
        elif key in inside:
            continue  # key is the prototype: its partner maps to it
        elif proto in inside or key > proto:
            out[key] = proto
    return out


def _map(text: str) -> str:
    table = prototypes()
    return "".join(table.get(ch, ch) for ch in text if not _DEFAULT_IGNORABLE.match(ch))


@lru_cache(maxsize=65536)
def skeleton(text: str) -> str:
    """The TR39 skeleton of ``text``: default-ignorable code points removed, each character
    replaced by its prototype (:func:`prototypes`), in NFD. Equal skeletons: confusable.

    TR39 maps the NFD form once. The package's data also relates some precomposed characters
    directly (``ȧ`` and ``å``, U+AB74 and ``ơ``, Hebrew presentation forms), so the mapping is
    applied to the text as given, to its NFD and NFC forms, until nothing changes (a fixed point,
    reached in at most a few rounds): then both ends of every line of the data have one skeleton
    (tested), and ``skeleton(skeleton(x)) == skeleton(x)``."""
    nfd = unicodedata.normalize
    cur = nfd("NFD", _map(nfd("NFD", _map(text))))
    for _ in range(8):
        nxt = nfd("NFD", _map(nfd("NFD", _map(nfd("NFC", cur)))))
        if nxt == cur:
            break
        cur = nxt
    return cur


@lru_cache(maxsize=4096)
def variant_of(ch: str) -> str | None:
    """The ASCII spelling an apostrophe, quote or hyphen variant folds to (``'``, ``"`` or ``-``),
    or None for any other character (see the module docstring)."""
    cat = unicodedata.category(ch)
    if cat[0] not in "PS" and cat != "Lm":
        return None
    return {"'": "'", "''": '"', "-": "-"}.get(skeleton(ch))


def fold_variants(text: str) -> str:
    """``text`` with every apostrophe, quote and hyphen variant in its ASCII spelling
    (:func:`variant_of`): ``dog’s`` -> ``dog's``, ``co‐pilot`` -> ``co-pilot``."""
    if text.isascii():
        return text
    return "".join(variant_of(ch) or ch for ch in text)


def is_small_capital(ch: str) -> bool:
    """True for a small capital letter (its Unicode name says ``SMALL CAPITAL``: ``ᴅ``, ``ʀ``,
    ``ꜱ``): it reads as a capital, and TR39 gives most of them a prototype of their own, so
    ``ᴅog`` and ``dog`` would not be confusable by skeleton. TR39's identifier profile restricts
    them (Identifier_Type Technical); the name policy refuses them."""
    return unicodedata.category(ch)[0] == "L" and "SMALL CAPITAL" in unicodedata.name(ch, "")
