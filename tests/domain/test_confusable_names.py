"""Names by what a reader sees: every name is compared by its Unicode TR39 confusable skeleton
after NFKC and case folding (gavil.domain.confusables, from the published confusables data),
apostrophe, quote and hyphen variants fold to one spelling, small capitals are refused, and two
names with one skeleton are one name in every batch format, SWOW input, candidate sets and the
game (display names also as shown: a capital I for an l). The attacks are sweeps over the whole
confusables data, every default-ignorable code point of every plane and every variant character.
"""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
import regex

from gavil.domain.confusables import confusable_lines, fold_variants, is_small_capital, prototypes, skeleton
from gavil.domain.names import NameError_, clean_display_name, clean_word, display_name_keys
from gavil.domain.vocabulary import clean_cue, name_key, normalize_name
from stages.build_instances import accepted_pool
from stages.import_annotations import import_all
from stages.ingest_concepts.stage import reject_bad_names
from stages.select_instances import select
from tests.helpers import RELEASE

KEY = b"k"
FILL = ["rocket", "moon", "coffee"]
NFKC = lambda s: unicodedata.normalize("NFKC", s)  # noqa: E731


def lines() -> list[tuple[str, str]]:
    """Every line of the confusables data as (source, prototype) pairs, each once."""
    out = set()
    for a, partners in confusable_lines().items():
        for b in partners:
            out.add((min(a, b), max(a, b)))
    return sorted(out)


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def one_name(a: str, b: str) -> bool:
    """What the property says, from the data's side: a reader who folds case sees one name."""
    return skeleton(NFKC(NFKC(a).casefold())) == skeleton(NFKC(NFKC(b).casefold()))


# ------------------------------------------------------------------------------ the skeleton itself
def test_the_skeleton_gives_both_ends_of_every_line_of_the_data_one_skeleton():
    pairs = lines()
    assert len(pairs) > 6000  # the whole data, not a sample
    assert [(a, b) for a, b in pairs if skeleton(a) != skeleton(b)] == []
    table = prototypes()
    assert not [s for s, p in table.items() if any(ch in table for ch in p)]  # idempotent mapping
    assert all(skeleton(skeleton(a)) == skeleton(a) for a, _ in pairs)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("paypal", "p\u0430ypal"),  # TR39's own example: Cyrillic a
        ("modern", "modem"),  # rn reads as m
        ("dog's", "dog\u2019s"),
        ("do\u0261", "dog"),  # Latin script g
        ("\u0131ce", "ice"),  # dotless i
        ("scope", "\u0455\u0441\u043e\u0440\u0435"),  # all-Cyrillic look-alike
        ("co-pilot", "co\u2010pilot"),
    ],
)
def test_published_confusable_examples_have_one_skeleton(a, b):
    assert skeleton(a) == skeleton(b)
    assert name_key(a) == name_key(b)


# ------------------------------------------------------------------------------ sweeps through the policy
def test_every_confusable_pair_in_one_candidate_set_is_refused_by_the_batch_import(tmp_path):
    """Each line of the confusables data becomes one creation whose candidates hold both ends as
    names: every row is rejected (one name twice, or a name the policy refuses), none imported."""
    pairs = [(a, b) for a, b in lines() if one_name(a, b)]
    rows = [
        {
            "instance_id": f"i{n}",
            "spymaster_id": "SPY",
            "cue": "space",
            "candidates": [a + a, b + b, *FILL],  # doubled: a one-letter name is a name too, but reads better
            "associations": FILL[:2],
        }
        for n, (a, b) in enumerate(pairs)
    ]
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", rows)
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty, res.instances[["instance_uid", "candidates"]].head().to_dict("records")
    assert len(res.rejects) == len(pairs)


def test_the_lines_left_out_of_the_sweep_differ_only_by_case_or_nfkc():
    """The sweep above skips the lines whose ends a case-folding reader tells apart (a capital I
    is an i once folded, not an l); each of them holds a character that case folding or NFKC
    changes, and names are compared case-folded by design."""
    skipped = [(a, b) for a, b in lines() if not one_name(a, b)]
    changes = lambda s: any(NFKC(ch).casefold() != ch for ch in s)  # noqa: E731
    assert skipped and all(changes(a) or changes(b) for a, b in skipped)


def test_every_confusable_pair_of_display_names_is_one_name():
    """Both ends of every line as display names: one of the two is refused, or they share one of
    the two unique forms (TR39 skeleton case-folded, or as shown). Display names are shown in NFKC,
    so the lines whose ends NFKC changes (``º/₀`` becomes ``o/0``, no longer a ``%``) are left out."""
    apart, stable = [], [(a, b) for a, b in lines() if NFKC(a) == a and NFKC(b) == b]
    assert len(stable) > 2500
    for a, b in stable:
        try:
            ka = display_name_keys(clean_display_name("Ann" + a, 32))
            kb = display_name_keys(clean_display_name("Ann" + b, 32))
        except NameError_:
            continue
        if ka[0] != kb[0] and ka[1] != kb[1]:
            apart.append((a, b))
    assert apart == []


def test_a_capital_i_for_an_l_is_one_display_name():
    assert display_name_keys("Iris")[1] == display_name_keys("lris")[1]
    assert display_name_keys("Bob")[0] == display_name_keys("bob")[0]
    assert display_name_keys("B0B")[1] == display_name_keys("BOB")[1]


def default_ignorables() -> list[str]:
    return [chr(c) for c in range(0x110000) if regex.match(r"\p{Default_Ignorable_Code_Point}", chr(c))]


def test_every_default_ignorable_code_point_of_every_plane_is_refused_everywhere():
    found = default_ignorables()
    assert len(found) > 4000 and any(ord(c) > 0xFFFF for c in found)  # every plane, from the UCD
    for ch in found:
        for text in (f"do{ch}g", f"{ch}dog", f"dog{ch}", f"ice {ch}cream"):
            for check in (lambda t: clean_word(t), clean_cue, lambda t: clean_display_name(t, 32)):
                with pytest.raises(NameError_):
                    check(text)


def test_every_default_ignorable_in_a_batch_is_a_rejected_row(tmp_path):
    chars = default_ignorables()
    rows = [
        {
            "instance_id": f"i{n}",
            "spymaster_id": "S",
            "cue": "space",
            "candidates": [f"sta{ch}r", *FILL, "cat"],
            "associations": FILL[:2],
        }
        for n, ch in enumerate(chars)
    ]
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", rows)
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty and len(res.rejects) == len(chars)


def variant_characters() -> dict[str, str]:
    """Apostrophe, quote and hyphen look-alikes from the Unicode data (not from the code under
    test): every dash punctuation, every Dash or Quotation_Mark character, and every character
    whose name says apostrophe, single quotation mark, prime or hyphen -> the ASCII mark it reads as."""
    out = {}
    for c in range(0x110000):
        ch = chr(c)
        name = unicodedata.name(ch, "")
        if unicodedata.category(ch) in ("Ll", "Lu", "Lo"):
            continue  # a letter whose name says apostrophe (U+0149) is a letter, not a mark
        if unicodedata.category(ch) == "Pd" or regex.match(r"\p{Dash}", ch) or "HYPHEN" in name:
            out[ch] = "-"
        elif "APOSTROPHE" in name or "SINGLE QUOTATION MARK" in name or name.endswith(" PRIME") or name == "PRIME":
            out[ch] = "'"
        elif regex.match(r"\p{Quotation_Mark}", ch):
            out[ch] = "'"
    return out


def test_every_apostrophe_and_hyphen_variant_folds_to_one_spelling_or_is_refused():
    variants = variant_characters()
    assert len(variants) > 60
    apart = []
    for ch, ascii_mark in variants.items():
        word = f"dog{ch}s"
        try:
            stored = clean_word(word)
        except NameError_:
            continue  # refused with its reason: never a second name
        if name_key(stored) != name_key(f"dog{ascii_mark}s") or stored != f"dog{ascii_mark}s":
            apart.append((hex(ord(ch)), stored))
    # the ones a reader does not see as that mark (a long dash, a wave dash) fold to one hyphen too,
    # or are refused; what is left must be nothing
    assert apart == []


def test_typographic_apostrophes_make_no_twins_anywhere(tmp_path):
    assert fold_variants("dog\u2019s") == "dog's" and normalize_name("Dog\u2019s") == "dog's"
    assert clean_cue("dog\u2019s") == "dog's"
    write_jsonl(
        tmp_path / "raw/b1/creations.jsonl",
        [
            {
                "instance_id": "i1",
                "spymaster_id": "S",
                "cue": "brand",
                "candidates": ["mcdonald's", "mcdonald\u2019s", *FILL],
                "associations": FILL[:2],
            }
        ],
    )
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty and "are one name" in res.rejects["reason"].iloc[0]


def test_every_small_capital_is_refused():
    smalls = [chr(c) for c in range(0x110000) if is_small_capital(chr(c))]
    assert len(smalls) > 30
    for ch in smalls:
        latin = "LATIN" in unicodedata.name(ch)
        for check in (lambda t: clean_word(t), clean_cue, lambda t: clean_display_name(t, 32)):
            with pytest.raises(NameError_, match="small capital" if latin else ""):  # others: mixed scripts
                check(f"do{ch}g")


@pytest.mark.parametrize("twin", ["do\u0261", "\u0131ce", "d\u1d0fg"])
def test_latin_look_alikes_are_one_name_or_refused(twin):
    try:
        stored = clean_word(twin)
    except NameError_:
        return
    assert name_key(stored) in {name_key("dog"), name_key("ice")}


def test_twin_cues_over_one_candidate_set_are_one_instance(tmp_path):
    """dog's / dog’s, or a Latin script g, over the same candidates: the second is a duplicate."""
    rows = [
        {
            "instance_id": "i1",
            "spymaster_id": "A",
            "cue": "dog's",
            "candidates": ["dog", "cat", *FILL],
            "associations": ["dog", "cat"],
        },
        {
            "instance_id": "i2",
            "spymaster_id": "B",
            "cue": "dog\u2019s",
            "candidates": ["dog", "cat", *FILL],
            "associations": ["dog", "cat"],
        },
        {
            "instance_id": "i3",
            "spymaster_id": "C",
            "cue": "do\u0261's",
            "candidates": ["cat", "dog", *FILL],
            "associations": ["dog", "rocket"],
        },
    ]
    write_jsonl(tmp_path / "raw/b1/creations.jsonl", rows)
    res = import_all(None, [], tmp_path / "raw", KEY)
    sel = select(res.instances, res.solves, 0.8).set_index("instance_uid")
    assert sel.loc["raw:i1", "status"] == "insufficient_solvers"
    assert sel.loc["raw:i2", "status"] == "duplicate" and "raw:i1" in sel.loc["raw:i2", "reason"]
    assert sel.loc["raw:i3", "status"] == "duplicate" and "already given" in sel.loc["raw:i3", "reason"]


def test_swow_input_keeps_one_name_per_skeleton_and_says_why():
    edges = pd.DataFrame(
        {"cue": ["burn", "bum", "dog", "do\u0261", "fire"], "response": ["fire", "hobo", "cat", "cat", "burn"]}
    )
    kept, _, rej = reject_bad_names(edges, None)
    assert set(kept["cue"]) == {"burn", "dog", "fire"}
    why = dict(zip(rej["cue"], rej["reason"]))
    assert "reads as 'burn'" in why["bum"] and "reads as 'dog'" in why["do\u0261"]
    shuffled, _, rej2 = reject_bad_names(edges.iloc[::-1].reset_index(drop=True), None)
    assert set(shuffled["cue"]) == set(kept["cue"]) and rej2.equals(rej)  # the order never decides


def test_candidate_pools_hold_one_concept_per_skeleton():
    ocr = pd.DataFrame({"concept": ["burn", "bum", "dog", "do\u0261", "cat"], "status": ["accepted"] * 5})
    ok = pd.DataFrame({"concept": ocr["concept"], "status": "ok"})
    pool = accepted_pool(ocr, ok)
    assert len({name_key(c) for c in pool}) == len(pool) == 3


def test_the_whole_release_passes_unchanged():
    res = import_all(RELEASE, [{"file": f, "dataset": "game"} for f in ("game_5_6.csv", "game_10_12.csv")], None, KEY)
    assert res.rejects.empty and len(res.instances) == 3563
    sel = select(res.instances, res.solves, 0.8)
    assert (sel["status"] == "selected").sum() == 3563  # the release's own twins stay published
