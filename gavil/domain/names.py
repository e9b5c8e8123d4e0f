"""The one name policy: what a cue, a candidate or association (an image concept), a SWOW word
and a player's display name may be, and the one form each is stored in.

Every rule is a *property* of the characters, not a list of bad examples:

- **Invisible characters are refused** (:func:`invisible_char`): Unicode's
  ``Default_Ignorable_Code_Point`` (DerivedCoreProperties.txt: zero-width spaces and joiners,
  soft hyphen, U+034F, Hangul fillers U+115F/U+1160/U+3164/U+FFA0, variation selectors, tag
  characters, bidi controls, ...; read through the ``regex`` package's Unicode tables, because
  Python's :mod:`unicodedata` lacks the property), every general category ``C*`` (controls,
  format, surrogates, private use, unassigned), every separator ``Z*`` other than the ASCII space
  (NBSP, ideographic space, line/paragraph separators), and the graphic characters that draw
  nothing (:data:`BLANK_GRAPHICS`: Unicode gives them no property, see there).
- **Mixed scripts are refused** (:func:`script_problem`, Unicode TR39 §5.2 "Highly Restrictive"):
  the letters of one name come from one script (Common and Inherited characters such as marks,
  digits and punctuation belong to any), except the CJK combinations TR39 allows (Latin + Han +
  Hiragana + Katakana; Latin + Han + Bopomofo; Latin + Han + Hangul). So ``dоg`` with a Cyrillic
  ``о`` is refused. **Whole-script confusables** are refused too: a name in another script whose
  every letter has a Latin look-alike (Cyrillic ``сор`` reads as ``cop``). Script of a character
  and look-alikes: the ``confusable-homoglyphs`` package (Unicode Scripts.txt and
  confusables.txt).
- **Compatibility forms are folded** (NFKC): a full-width ``ｄｏｇ`` is stored as ``dog``, a
  ligature ``ﬁ`` as ``fi``, so no name has a visually equal twin that counts as a new name.
- **Length** is capped in code points: :data:`MAX_WORD` for words, the game's limit for display
  names.
- **Words** (cues and concepts) are letters and marks only, with an internal hyphen or apostrophe
  (``co-pilot``, ``mcdonald's``) and, where phrases are allowed (concepts, released cues, SWOW
  words), single spaces between words (``ice cream``). Digits, punctuation and symbols are
  refused: no released name has one, and ``=1+2`` or ``@SUM(1+1)`` is not a word. A raw or game
  cue is one such word (paper §2: a single word), longer than one character.

The WinoGAViL release passes every rule unchanged (tested over every released cue, candidate and
association): its names are ASCII letters, spaces, ``-`` and ``'``, at most 17 characters.

Errors: :class:`NameError_` (a :class:`ValueError`) whose message says what is wrong and how to
fix it; it never repeats a 5,000-character input in full.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

import regex
from confusable_homoglyphs import categories, confusables

from gavil.domain.confusables import fold_variants, is_small_capital, skeleton

#: Most code points in a cue, concept or SWOW word (the longest released name has 17).
MAX_WORD = 64

#: Graphic characters (category So/Lo, not Default_Ignorable) that render as nothing: the braille
#: blank U+2800 and the musical null notehead U+1D159. Unicode has no "invisible" property, so these
#: two are named; every other blank character is caught by a property (Default_Ignorable, C*, Z*).
BLANK_GRAPHICS = frozenset({"\u2800", "\U0001d159"})

#: The apostrophe and the hyphen allowed inside a word; their variants (``’``, ``ʼ``, ``‐``, ``–``, ...)
#: are folded to these first (:func:`gavil.domain.confusables.fold_variants`).
JOINERS = frozenset({"-", "'"})

#: TR39 §5.2 "Highly Restrictive": script sets a single name may mix.
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
_NEUTRAL_SCRIPTS = frozenset({"COMMON", "INHERITED"})
_DEFAULT_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}")


class NameError_(ValueError):  # NameError is a builtin
    """A name breaks the policy; the message is the reason (written to rejects, shown to players)."""


def shown(text: str, limit: int = 40) -> str:
    """``repr`` of ``text``, cut to about ``limit`` characters (a reason never echoes 10,000)."""
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 3] + "...'"


@lru_cache(maxsize=65536)
def is_invisible(ch: str) -> bool:
    """True for a character that draws nothing or steers rendering (see the module doc): it is
    Default_Ignorable_Code_Point, in category C* or Z* (except U+0020), or in
    :data:`BLANK_GRAPHICS`."""
    if ch == " ":
        return False
    cat = unicodedata.category(ch)
    return cat[0] in "CZ" or ch in BLANK_GRAPHICS or _DEFAULT_IGNORABLE.match(ch) is not None


def invisible_char(text: str) -> str | None:
    """The first invisible character of ``text`` (:func:`is_invisible`), or None."""
    return next((ch for ch in text if is_invisible(ch)), None)


def _scripts(text: str) -> set[str]:
    return {categories.alias(ch) for ch in text if unicodedata.category(ch)[0] == "L"} - _NEUTRAL_SCRIPTS


@lru_cache(maxsize=65536)  # pure; names repeat across a table's rows
def script_problem(text: str) -> str | None:
    """Why ``text`` mixes scripts or is a whole-script Latin look-alike (TR39), or None."""
    scripts = _scripts(text)
    if len(scripts) > 1 and not any(scripts <= mix for mix in _ALLOWED_MIXES):
        return f"mixes scripts ({', '.join(sorted(scripts))}): write it in one script"
    if scripts and scripts != {"LATIN"}:
        letters = {ch for ch in text if unicodedata.category(ch)[0] == "L"}
        found = confusables.is_confusable("".join(sorted(letters)), greedy=True, preferred_aliases=["latin"]) or []
        if len({f["character"] for f in found}) == len(letters):
            return f"every letter looks like a Latin letter ({', '.join(sorted(scripts))} script): write it in Latin"
    return None


def _fold(text: str) -> str:
    """The stored form: apostrophe, quote and hyphen variants in their ASCII spelling (before and
    after NFKC, which turns some of them into a space and a combining mark), NFKC, surrounding
    whitespace trimmed."""
    return fold_variants(unicodedata.normalize("NFKC", fold_variants(text))).strip()


@lru_cache(maxsize=65536)
def _look_problem(t: str) -> str | None:
    """Why ``t`` (folded) would read as another name: a small capital, a combining mark with no
    letter, digit or mark before it (a spacing accent NFKC split into a space and a mark), or a
    combining mark that is not part of its letter (:func:`stray_mark`)."""
    for i, ch in enumerate(t):
        if is_small_capital(ch):
            name = unicodedata.name(ch)
            return f"has U+{ord(ch):04X} ({name}), a small capital that reads as a capital letter: type the letter"
        if unicodedata.category(ch)[0] == "M" and (i == 0 or unicodedata.category(t[i - 1])[0] not in "LMN"):
            return f"has a combining mark U+{ord(ch):04X} with no letter before it"
    return stray_mark(t)


def stray_mark(t: str) -> str | None:
    """Why the NFC/NFKC-normalised ``t`` holds a combining mark that is not part of its letter, or None.

    After normalisation, a mark that composes with its base (``e`` + U+0301 -> ``é``) is gone: one
    code point remains. A mark still standing after a letter is kept only where it belongs to the
    letter's own script (Unicode Scripts.txt: Devanagari vowel signs after Devanagari letters,
    Hebrew points after Hebrew letters), as that script is spelled. Every other left-over mark, of
    script Inherited or Common (overlays such as U+0336, enclosing marks such as U+20DD, accents
    with no precomposed letter) or of another script (U+16FE4 after ``sky``, which draws nothing),
    would make a twin of the bare name that reads the same or hides under an overlay, so it is
    refused. One rule for every source: cues, candidates, associations, SWOW words and display names
    all pass :func:`_base`."""
    base_script = None
    for ch in t:
        if unicodedata.category(ch)[0] != "M":
            base_script = categories.alias(ch) if unicodedata.category(ch)[0] == "L" else None
            continue
        mark_script = categories.alias(ch)
        if mark_script in _NEUTRAL_SCRIPTS or mark_script != base_script:
            name = unicodedata.name(ch, "unnamed")
            return (
                f"has a combining mark U+{ord(ch):04X} ({name}) that does not join its letter into one character "
                "(it would read as the bare word or draw over it): type the letter alone or its accented form"
            )
    return None


def _base(text: object, what: str, max_len: int) -> str:
    if not isinstance(text, str):
        raise NameError_(f"{what} {text!r} is not a string")
    t = _fold(text)
    hidden = invisible_char(t)
    if hidden is not None:
        name = unicodedata.name(hidden, "unnamed")
        raise NameError_(
            f"{what} {shown(t)} contains an invisible or formatting character U+{ord(hidden):04X} ({name}); "
            "type the visible characters alone"
        )
    if not t:
        raise NameError_(f"{what} is empty")
    if len(t) > max_len:
        raise NameError_(f"{what} {shown(t)} has {len(t)} characters; at most {max_len}")
    why = script_problem(t) or _look_problem(t)
    if why:
        raise NameError_(f"{what} {shown(t)} {why}")
    return t


def _is_letter(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "LM"


def word_problem(t: str, phrase: bool) -> str | None:
    """Why the (folded) ``t`` is not a word (or, with ``phrase``, words separated by single
    spaces), or None. A word: letters and marks, a hyphen or apostrophe only between two of them,
    starting with a letter."""
    parts = t.split(" ") if phrase else [t]
    if not phrase and " " in t:
        return "must be a single token (one word, no spaces)"
    for w in parts:
        if not w:
            return "has a double space"
        if unicodedata.category(w[0])[0] != "L":
            return f"must start with a letter ({shown(w)} does not)" if w != t else "must start with a letter"
        for i, ch in enumerate(w):
            if _is_letter(ch):
                continue
            if ch in JOINERS and 0 < i < len(w) - 1 and _is_letter(w[i - 1]) and _is_letter(w[i + 1]):
                continue
            return f"has {ch!r} (U+{ord(ch):04X}); a word is letters, with a hyphen or apostrophe only inside it"
    return None


def clean_word(text: object, what: str = "name", phrase: bool = True, max_len: int = MAX_WORD) -> str:
    """A cue or concept word in its stored form (NFKC, trimmed), or :class:`NameError_` saying why not.

    ``phrase``: several words separated by single spaces are allowed (concept names such as
    ``ice cream``, released cues, SWOW words); otherwise one word. Raises NameError_ for a
    non-string, an invisible character, more than ``max_len`` code points, mixed scripts or a
    whole-script Latin look-alike, or a character other than letters, marks and internal
    hyphens/apostrophes (and single spaces with ``phrase``)."""
    t = _base(text, what, max_len)
    why = word_problem(t, phrase)
    if why:
        raise NameError_(f"{what} {shown(t)} {why}")
    return t


def word_reason(text: object, phrase: bool = True) -> str | None:
    """The reason ``text`` fails :func:`clean_word`, or None (for vectorised rejects)."""
    try:
        clean_word(text, "word", phrase)
    except NameError_ as e:
        return str(e)
    return None


def clean_display_name(text: object, max_len: int) -> str:
    """A player's display name in its stored form: NFKC (a full-width name equals its ASCII twin),
    apostrophe, quote and hyphen variants folded, trimmed, inner runs of spaces made one,
    1..``max_len`` code points, no invisible character, one script (TR39), no small capital.
    Digits and punctuation are allowed. Raises :class:`NameError_`."""
    if isinstance(text, str):
        text = regex.sub(" {2,}", " ", _fold(text))
    return _base(text, "display name", max_len)


def display_name_keys(name: str) -> tuple[str, str]:
    """The two forms a display name (:func:`clean_display_name`'s output) is unique in: its TR39
    skeleton case-folded (``Bob`` = ``bob``, ``Dog’s`` = ``dog's``) and as shown (a capital ``I``
    for an ``l``: ``Iris`` = ``lris``, ``B0B`` = ``BOB``). A new name equal to a player's name in
    either form is that player's name."""
    return skeleton(unicodedata.normalize("NFKC", name.casefold())), skeleton(name)
