"""Combining marks that are not part of their letter (issue 45): a mark that does not compose under NFC
with its base and does not belong to the base letter's own script (an overlay such as U+0336, an
enclosing circle U+20DD, a filler U+16FE4 that draws nothing) is refused in cues, candidates,
associations, SWOW words and display names: one rule (gavil.domain.names.stray_mark) for every source.
Every combining mark of the Unicode tables is swept, not a hand list."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from gavil.domain.names import NameError_, clean_display_name, clean_word
from stages.import_annotations import import_all
from stages.ingest_concepts import ingest
from tests.domain.test_names import _creation, _creations

KEY = b"k"
MARKS = [chr(cp) for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp))[0] == "M"]


def _stored_or_none(clean, text: str) -> str | None:
    try:
        return clean(text)
    except NameError_:
        return None


def test_the_sweep_covers_every_mark_class():
    cats = {unicodedata.category(m) for m in MARKS}
    assert cats == {"Mn", "Mc", "Me"} and len(MARKS) > 2000


@pytest.mark.parametrize(
    "clean",
    [
        lambda t: clean_word(t, "cue", phrase=False),
        lambda t: clean_word(t, "concept", phrase=True),
        lambda t: clean_display_name(t, 32),
    ],
    ids=["cue", "concept", "display_name"],
)
@pytest.mark.parametrize("base", ["sky", "cat"])
def test_every_combining_mark_after_a_latin_word_is_refused_or_composed(clean, base):
    """After a Latin letter, a mark is either composed into one precomposed letter (``y`` + U+0301 is
    ``ý``: a visibly other name with no mark left) or refused; no stored name keeps a mark beside its
    bare twin, at the end or inside the word."""
    kept = []
    for m in MARKS:
        for text in (base + m, base[0] + m + base[1:]):
            stored = _stored_or_none(clean, text)
            if stored is None:
                continue
            assert stored != base, f"{text!r} is stored as its bare twin {base!r}"
            if any(unicodedata.category(ch)[0] == "M" for ch in stored):
                kept.append(f"U+{ord(m):04X}")
    assert not kept, f"marks kept beside a Latin letter: {kept[:10]}"


@pytest.mark.parametrize("mark", ["\U00016fe4", "\u0336", "\u20dd", "\u0338", "\u20e3", "\u0489"])
def test_reported_overlay_and_blank_marks_are_refused_with_the_reason(mark):
    with pytest.raises(NameError_, match=f"U\\+{ord(mark):04X}.*does not join its letter"):
        clean_word("sky" + mark)


@pytest.mark.parametrize("word", ["नमस्ते", "עִבְרִית", "ไทย", "café", "naïve", "Việt", "Zoë", "йод"])
def test_words_spelled_with_their_own_scripts_marks_pass(word):
    assert clean_word(word) == unicodedata.normalize("NFC", word)


def test_the_import_keeps_sky_once_and_rejects_its_marked_twins(tmp_path):
    cues = ["sky", "sky\U00016fe4", "sky\u0336", "sky\u20dd"]
    raw = _creations(tmp_path, [_creation(f"i{k}", c) for k, c in enumerate(cues)])
    res = import_all(None, [], raw, KEY)
    assert res.instances["cue"].tolist() == ["sky"]
    assert len(res.rejects) == 3 and res.rejects["reason"].str.contains("does not join its letter").all()


def test_a_candidate_with_a_blank_mark_beside_its_twin_is_rejected(tmp_path):
    cands = ["rocket", "cat", "cat\U00016fe4", "coffee", "brick"]
    raw = _creations(tmp_path, [_creation("i1", "space", cands, ("rocket", "cat"))])
    res = import_all(None, [], raw, KEY)
    assert res.instances.empty and "U+16FE4" in res.rejects["reason"].iloc[0]


def test_swow_words_with_stray_marks_are_rejected_rows(tmp_path):
    p = tmp_path / "strength.SWOW-EN.R123.csv"
    rows = [("moon", "sun", 4), ("moon", "sun\u0336", 3), ("moon", "star\U00016fe4", 2)]
    p.write_text(
        "cue\tresponse\tR123\tN\tR123.Strength\n" + "".join(f"{c}\t{r}\t{k}\t10\t{k / 10}\n" for c, r, k in rows),
        encoding="utf-8",
    )
    res = ingest(p)
    assert res.edges[["cue", "response"]].values.tolist() == [["moon", "sun"]]
    assert res.rejects is not None and len(res.rejects) == 2
