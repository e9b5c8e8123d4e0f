"""SWOW ingestion in its three real formats (hand-written rows; no SWOW data is shipped)."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.io import validate
from schemas.ingest import Concepts, Edges
from stages.ingest_concepts import SwowFormatError, detect_format, ingest
from tests.helpers import RELEASE, ROOT

R100_HEADER = (
    '"","id","participantID","age","gender","nativeLanguage","country","education","created_at","cue","R1","R2","R3"\n'
)
R100_ROWS = [
    '"1",1,10,25,"Fe","United States","United States",4,"2011-08-11 21:24:37","moon","sun","night","stars"\n',
    '"2",2,11,31,"Ma","Canada","Canada",NA,"2011-08-11 21:25:01","moon","Sun","NA",NA\n',
    '"3",3,12,40,"Fe","Australia","Australia",3,"2011-08-12 09:00:00","moon","night","Unknown word","No more responses"\n',
    '"4",4,13,22,"X","United Kingdom","United Kingdom",5,"2011-08-12 10:00:00","rocket","space","moon",NA\n',
]


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_r100_counts_na_tokens_and_strengths(tmp_path):
    path = write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + "".join(R100_ROWS))
    assert detect_format(path) == "swow_r100"
    res = ingest(path)
    validate(res.edges, Edges), validate(res.concepts, Concepts)
    e = res.edges.set_index(["cue", "response"])
    # "sun" and "Sun" merge after lower-casing; both are R1 answers
    assert e.loc[("moon", "sun"), "r1_count"] == 2 and e.loc[("moon", "sun"), "r123_count"] == 2
    assert e.loc[("moon", "night"), "r1_count"] == 1 and e.loc[("moon", "night"), "r123_count"] == 2
    # quoted "NA" is the word NA; unquoted NA, "Unknown word", "No more responses" are not responses
    assert ("moon", "na") in e.index
    assert not any(r in ("unknown word", "no more responses") for _, r in e.index)
    # moon has 6 valid responses over R1..R3: sun x2, night x2, stars, na
    assert e.loc[("moon", "sun"), "r123_strength"] == pytest.approx(2 / 6)
    assert e.loc[("moon", "sun"), "r1_strength"] == pytest.approx(2 / 3)
    assert res.edges[res.edges.cue == "moon"].sort_values("rank")["response"].tolist()[:2] == ["sun", "night"]
    assert sorted(res.concepts["concept"]) == ["moon", "rocket"]
    assert res.concepts.set_index("concept").loc["moon", "n_cues"] == 1  # rocket -> moon


@pytest.mark.parametrize("kind", ["R1", "R123"])
def test_strength_files(tmp_path, kind):
    rows = f"cue\tresponse\t{kind}\tN\t{kind}.Strength\nmoon\tsun\t40\t100\t0.4\nmoon\tnight\t35\t100\t0.35\nrocket\tspace\t50\t90\t0.555556\n"
    path = write(tmp_path, f"strength.SWOW-EN.{kind}.csv", rows)
    assert detect_format(path) == f"swow_strength_{kind.lower()}"
    res = ingest(path)
    validate(res.edges, Edges)
    e = res.edges.set_index(["cue", "response"])
    low = kind.lower()
    other = "r123" if low == "r1" else "r1"
    assert e.loc[("moon", "sun"), f"{low}_count"] == 40
    assert e.loc[("rocket", "space"), f"{low}_strength"] == pytest.approx(0.555556)
    assert e[f"{other}_count"].isna().all()
    assert e.loc[("moon", "sun"), "rank"] == 1 and e.loc[("moon", "night"), "rank"] == 2


def test_release_swow_csv_real():
    res = ingest(RELEASE / "swow.csv")
    assert res.metrics["format"] == "winogavil_swow"
    validate(res.edges, Edges), validate(res.concepts, Concepts)
    spacecraft = res.edges[res.edges.cue == "spacecraft"].sort_values("rank")["response"].tolist()
    assert spacecraft == ["rocket", "moon", "shuttle", "astronaut"]
    assert res.edges["r123_count"].isna().all()  # the release has no per-response counts
    c = res.concepts.set_index("concept")
    assert c.loc["load", "is_cue"] and c.loc["nail polish", "is_candidate"]


def test_malformed_rows_name_file_line_and_column(tmp_path):
    bad = write(
        tmp_path,
        "strength.SWOW-EN.R1.csv",
        "cue\tresponse\tR1\tN\tR1.Strength\nmoon\tsun\t40\t100\t0.4\nmoon\tnight\tmany\t100\t0.35\n",
    )
    with pytest.raises(SwowFormatError) as e:
        ingest(bad)
    assert e.value.line == 3 and e.value.column == "R1" and "strength.SWOW-EN.R1.csv" in str(e.value)

    short = write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + R100_ROWS[0] + '"2",2,11,31,"Ma","Canada"\n')
    with pytest.raises(SwowFormatError) as e:
        ingest(short)
    assert e.value.line == 3 and "expected 13 fields" in str(e.value)

    header = write(tmp_path, "whatever.csv", "word,assoc\nmoon,sun\n")
    with pytest.raises(SwowFormatError) as e:
        ingest(header)
    assert e.value.line == 1

    badjson = write(
        tmp_path,
        "swow.csv",
        (RELEASE / "swow.csv").read_text().splitlines()[0] + '\n1,load,[truck,2,98,20,"[]",1,1,0\n',
    )
    with pytest.raises(SwowFormatError) as e:
        ingest(badjson)
    assert e.value.line == 2 and e.value.column == "associations"


def test_missing_input_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="ingest.path"):
        ingest(tmp_path / "nope.csv")


# --------------------------------------------------------------------------- strict reading (issue 14)
STRENGTH_HEAD = "cue\tresponse\tR1\tN\tR1.Strength\n"


def strength_file(tmp_path: Path, rows: list[str], kind: str = "R1") -> Path:
    head = STRENGTH_HEAD.replace("R1", kind)
    return write(tmp_path, f"strength.SWOW-EN.{kind}.csv", head + "".join(r + "\n" for r in rows))


def error_of(path: Path, **kw) -> SwowFormatError:
    with pytest.raises(SwowFormatError) as e:
        ingest(path, **kw)
    assert str(path) in str(e.value) and "Traceback" not in str(e.value)
    assert len(str(e.value).splitlines()) <= 2
    return e.value


def test_strength_exact_duplicate_row_names_both_lines(tmp_path):
    path = strength_file(tmp_path, ["moon\tsun\t40\t100\t0.4", "moon\tnight\t35\t100\t0.35", "moon\tsun\t40\t100\t0.4"])
    err = error_of(path)
    assert err.line == 4 and err.column == "response"
    assert "duplicate row ('moon', 'sun')" in str(err) and "also on line 2" in str(err)


def test_strength_rows_colliding_only_after_normalisation_are_merged_and_counted(tmp_path):
    nfd = "cafe\u0301"
    rows = ["moon\tApple\t10\t100\t0.1", "moon\tapple\t5\t100\t0.05", "moon\tsun\t40\t100\t0.4"]
    rows += [f"{nfd}\tmilk\t3\t10\t0.3", "caf\u00e9\tmilk\t2\t10\t0.2", "Moon \tpie\t1\t20\t0.05"]
    path = strength_file(tmp_path, rows)
    res = ingest(path)
    e = res.edges.set_index(["cue", "response"])
    assert e.loc[("moon", "apple"), "r1_count"] == 15
    # raw cues "moon" (N=100) and "Moon " (N=20) are one cue: strengths use the merged N = 120
    assert e.loc[("moon", "pie"), "r1_strength"] == pytest.approx(1 / 120)
    assert e.loc[("moon", "apple"), "r1_strength"] == pytest.approx(15 / 120)
    # "café" precomposed and decomposed: one cue (N = 10 + 10)
    assert e.loc[("caf\u00e9", "milk"), "r1_count"] == 5 and e.loc[("caf\u00e9", "milk"), "r1_strength"] == 0.25
    # input spellings merged: cues "Moon " and "café" (NFD); responses "Apple"; rows: 2 summed into others
    assert res.metrics["merged_by_normalisation"] == {"cues": 2, "responses": 1, "rows": 2}
    kept = ingest(path, lowercase=False).edges.set_index(["cue", "response"])
    assert ("moon", "Apple") in kept.index and ("moon", "apple") in kept.index and ("Moon", "pie") in kept.index
    assert kept.loc[("caf\u00e9", "milk"), "r1_count"] == 5  # NFC either way


@pytest.mark.parametrize(
    ("row", "column", "words"),
    [
        ("moon\tnight\t-3\t100\t-0.03", "R1", "negative count -3"),
        ("\tnight\t3\t100\t0.03", "cue", "empty cue"),
        ("moon\t \t3\t100\t0.03", "response", "empty response"),
        ("moon\tnight\t3\t0\t0.03", "N", "N must be a positive"),
        ("moon\tnight\t130\t100\t1.3", "R1", "count 130 > N = 100"),
        ("moon\tnight\t35\t100\t0.45", "R1.Strength", "strength 0.45 != R1 / N = 35/100"),
        ("moon\tnight\t35\t100\tnan", "R1.Strength", "outside [0, 1]"),
        ("moon\tnight\t3.5\t100\t0.035", "R1", "not an integer: '3.5'"),
        ("moon\tnight\t3\t100", None, "expected 5 fields, found 4"),
        ("moon\tnight\t3\t100\tthree", "R1.Strength", "not a number"),
    ],
)
def test_strength_row_errors_name_line_and_column(tmp_path, row, column, words):
    # a blank line before the bad row: pyarrow skips it, the reported line still counts it
    path = strength_file(tmp_path, ["moon\tsun\t40\t100\t0.4", "", row])
    err = error_of(path)
    assert (err.line, err.column) == (4, column) and words in str(err), str(err)


def test_strength_per_cue_rules_name_the_cue_and_its_lines(tmp_path):
    over = strength_file(
        tmp_path, ["rocket\tspace\t5\t10\t0.5", "moon\tsun\t60\t100\t0.6", "moon\tnight\t50\t100\t0.5"]
    )
    err = error_of(over)
    assert (err.line, err.column) == (3, "R1") and "cue 'moon'" in str(err)
    assert "sum to 110 > N = 100" in str(err) and "strengths sum to 1.1 > 1" in str(err)
    two_n = strength_file(tmp_path, ["moon\tsun\t40\t100\t0.4", "moon\tnight\t9\t90\t0.1"])
    err = error_of(two_n)
    assert (err.line, err.column) == (3, "N") and "cue 'moon' has N = 100 on line 2" in str(err)


def test_strength_accepts_rounded_strengths_within_tolerance(tmp_path):
    res = ingest(strength_file(tmp_path, ["moon\tsun\t1\t3\t0.333", "moon\tnight\t2\t3\t0.667"], kind="R123"))
    assert res.edges["r123_strength"].tolist() == [0.667, 0.333]  # the file's values, ranked by count


def test_r100_repeated_header_is_an_error_with_its_line(tmp_path):
    path = write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + R100_ROWS[0] + R100_HEADER + R100_ROWS[3])
    err = error_of(path)
    assert err.line == 3 and "header line is repeated" in str(err)
    bad_cue = R100_ROWS[1].replace('"moon"', "NA")
    err = error_of(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + R100_ROWS[0] + bad_cue))
    assert (err.line, err.column) == (3, "cue") and "NA" in str(err)


@pytest.mark.parametrize("fmt", ["r100", "strength", "release"])
@pytest.mark.parametrize("where", ["header", "early", "deep"])
def test_non_utf8_byte_anywhere_names_its_line(tmp_path, fmt, where):
    if fmt == "r100":
        head, row, column = R100_HEADER, R100_ROWS[3], "R1"
        bad = R100_ROWS[3].replace('"space"', '"sp\xffce"')
    elif fmt == "strength":
        head, row, column = STRENGTH_HEAD, "moon\tsun\t40\t100\t0.4\n", "response"
        bad = "moon\tm\xffn\t40\t100\t0.4\n"
    else:
        head = (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n"
        row, column = '1,load,"[""truck""]",1,98,20,"[""truck"", ""nail""]",1,1,0\n', "cue"
        bad = row.replace("load", "lo\xffd")
        if where == "deep":  # rows must differ to stay valid
            row = row.replace("1,load", "{i},load")
    n_before = {"header": 0, "early": 3, "deep": 20_000}[where]
    if where == "header":
        head = head.replace("cue", "c\xffe", 1)
    rows = [row.replace("{i}", str(i)) if fmt == "release" else row for i in range(n_before)]
    if fmt == "strength":  # one row per cue, so per-cue sums stay valid
        rows = [f"cue{i}\tsun\t40\t100\t0.4\n" for i in range(n_before)]
    data = (head + "".join(rows) + bad + row.replace("{i}", "0")).encode("utf-8").replace(b"\xc3\xbf", b"\xff")
    path = tmp_path / {"r100": "SWOW-EN.R100.csv", "strength": "strength.SWOW-EN.R1.csv", "release": "swow.csv"}[fmt]
    path.write_bytes(data)
    err = error_of(path, fmt={"r100": "swow_r100", "strength": "swow_strength_r1", "release": "winogavil_swow"}[fmt])
    assert "not UTF-8: byte 0xff" in str(err)
    if where == "header":
        assert err.line == 1
        assert error_of(path).line == 1  # format detection reads the header too
    else:
        assert (err.line, err.column) == (n_before + 2, column), str(err)


@pytest.mark.parametrize(
    ("name", "head"),
    [
        ("SWOW-EN.R100.csv", R100_HEADER),
        ("strength.SWOW-EN.R123.csv", STRENGTH_HEAD.replace("R1", "R123")),
        ("swow.csv", (RELEASE / "swow.csv").read_text().splitlines()[0] + "\r\n"),
    ],
)
def test_header_only_file_is_an_error(tmp_path, name, head):
    err = error_of(write(tmp_path, name, head))
    assert err.line == 2 and "header only" in str(err)


def test_cue_without_valid_responses_is_dropped_and_counted(tmp_path):
    empty = '"9",9,19,30,"Fe","Canada","Canada",2,"2011-08-13 10:00:00","void",NA,"Unknown word","No more responses"\n'
    res = ingest(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + "".join(R100_ROWS) + empty))
    assert "void" not in set(res.concepts["concept"])
    assert res.metrics["dropped_cues"] == {"no_valid_responses": 1}
    head = (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n"
    rows = '1,load,"[""truck""]",1,98,20,"[""truck""]",1,1,0\n2,void,"[]",0,1,0,"[""truck""]",1,1,0\n'
    res = ingest(write(tmp_path, "swow.csv", head + rows))
    assert res.metrics["dropped_cues"] == {"no_valid_responses": 1} and res.metrics["cues"] == 1


def test_a_file_whose_cues_all_lack_valid_responses_is_an_error(tmp_path):
    void = '"9",9,19,30,"Fe","Canada","Canada",2,"2011-08-13 10:00:00","void",NA,"Unknown word",""\n'
    err = error_of(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + void + void.replace("void", "gap")))
    assert err.line is None and "no cue has a valid response (2 cues, all dropped)" in str(err)


@pytest.mark.parametrize("length", [5_000, 200_000, 17_000_000])
def test_very_long_field_says_what_is_wrong(tmp_path, length):
    # 5k: inside a pyarrow block (vectorised check); 200k: above the csv module's default field
    # limit; 17M: above pyarrow's block size (parse error, then the csv pass)
    path = strength_file(tmp_path, ["moon\tsun\t40\t100\t0.4", "moon\t" + "x" * length + "\t3\t100\t0.03"])
    err = error_of(path)
    assert (err.line, err.column) == (3, "response")
    assert f"field longer than 1000 characters ({length} characters)" in str(err) and "syntax" not in str(err)
    head = (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n"
    release = write(tmp_path, "swow.csv", head + f'1,{"y" * length},"[""truck""]",1,98,20,"[]",1,1,0\n')
    err = error_of(release)
    assert (err.line, err.column) == (2, "cue") and "field longer than 1000 characters" in str(err)


def test_control_characters_and_edge_headers(tmp_path):
    err = error_of(strength_file(tmp_path, ["mo\0on\tsun\t40\t100\t0.4"]))
    assert (err.line, err.column) == (2, "cue") and "control character U+0000" in str(err)
    err = error_of(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + R100_ROWS[0].replace("sun", "s\x07un")))
    assert (err.line, err.column) == (2, "R1") and "control character U+0007" in str(err)
    err = error_of(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER.rstrip("\n")))  # no final line feed
    assert err.line == 2 and "header only" in str(err)
    err = error_of(write(tmp_path, "strength.SWOW-EN.R1.csv", ""), fmt="swow_strength_r1")
    assert err.line == 1 and "file is empty" in str(err)


def test_other_broken_rows_of_the_same_kinds(tmp_path):
    unclosed = R100_ROWS[3].replace('"space"', '"space')
    err = error_of(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + R100_ROWS[0] + unclosed + R100_ROWS[1]))
    assert err.line == 3, str(err)
    head = (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n"
    err = error_of(write(tmp_path, "swow.csv", head + '1,load,"[""truck""]",1,98\n'))
    assert err.line == 2 and "expected 10 fields, found 5" in str(err)
    err = error_of(write(tmp_path, "swow.csv", head + '1,load,"[""truck"", 3]",1,98,20,"[]",1,1,0\n'))
    assert (err.line, err.column) == (2, "associations")


@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n"])
def test_r100_line_break_inside_a_field_is_an_error(tmp_path, brk):
    broken = R100_ROWS[1].replace('"Sun"', f'"S{brk}un"')
    path = tmp_path / "SWOW-EN.R100.csv"
    path.write_bytes((R100_HEADER + R100_ROWS[0] + broken + R100_ROWS[3]).encode())
    err = error_of(path)
    assert (err.line, err.column) == (3, "R1") and "line break inside a field" in str(err)


def test_r100_with_crlf_line_ends_reads_like_lf(tmp_path):
    lf = ingest(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + "".join(R100_ROWS)))
    path = tmp_path / "crlf" / "SWOW-EN.R100.csv"
    path.parent.mkdir()
    path.write_bytes((R100_HEADER + "".join(R100_ROWS)).replace("\n", "\r\n").encode())
    pd.testing.assert_frame_equal(ingest(path).edges, lf.edges)


def test_names_are_normalised_nfc_trimmed_and_casefolded(tmp_path):
    rows = [
        R100_ROWS[0].replace('"moon"', '"caf\u00e9"'),
        R100_ROWS[1].replace('"moon"', '" Cafe\u0301"').replace('"Sun"', '"STRASSE"'),
        R100_ROWS[3].replace('"space"', '"Stra\u00dfe"'),
    ]
    path = write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + "".join(rows))
    res = ingest(path)
    assert sorted(res.concepts["concept"]) == ["caf\u00e9", "rocket"]
    assert ("rocket", "strasse") in set(zip(res.edges.cue, res.edges.response))
    assert ("caf\u00e9", "strasse") in set(zip(res.edges.cue, res.edges.response))
    assert res.metrics["name_form"] == "nfc_trim_casefold" and res.metrics["merged_by_normalisation"]["cues"] == 1
    kept = ingest(path, lowercase=False)
    assert sorted(kept.concepts["concept"]) == ["Caf\u00e9", "caf\u00e9", "rocket"]  # NFC and trimmed, case kept
    head = (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n"
    rel = '1,Cafe\u0301,"[""MILK""]",1,98,20,"[""milk"", ""Caf\u00e9 ""]",1,1,0\n'
    res = ingest(write(tmp_path, "swow.csv", head + rel))
    assert sorted(res.concepts["concept"]) == ["caf\u00e9", "milk"]


@pytest.mark.slow
def test_gavil_stage_prints_file_line_column_and_exits_2(tmp_path):
    gavil = Path(sys.executable).parent / "gavil"
    strength_file(tmp_path, ["moon\tsun\t40\t100\t0.4", "moon\tsun\t40\t100\t0.4"])
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["ingest"]["path"] = "strength.SWOW-EN.R1.csv"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    out = subprocess.run(
        [str(gavil), "stage", "ingest_concepts"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "strength.SWOW-EN.R1.csv, line 3, column 'response'" in out.stderr and "also on line 2" in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 3, out.stderr


# --------------------------------------------------------------------------- issue 24: other layouts
STRENGTH_ROWS = [
    ("moon", "sun", 40, 100, 0.4),
    ("moon", "night, dark", 35, 100, 0.35),  # a comma and a quote inside a word: the writer quotes them
    ("moon", 'say "hi"', 5, 100, 0.05),
    ("rocket", "space", 50, 90, 0.555556),
]


def _strength_text(sep: str, quoting: int, newline: str, rows=STRENGTH_ROWS, kind: str = "R1") -> str:
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, delimiter=sep, quoting=quoting, lineterminator=newline)
    w.writerow(["cue", "response", kind, "N", f"{kind}.Strength"])
    w.writerows(rows)
    return buf.getvalue()


@pytest.mark.parametrize("sep", ["\t", ",", ";"])
@pytest.mark.parametrize("quoting", ["minimal", "all"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", [False, True])
def test_strength_file_in_any_spreadsheet_layout_reads_the_same_edges(tmp_path, sep, quoting, newline, bom):
    """Property: whatever separator, quoting, line end or BOM a CSV writer used, the edges are the same."""
    import csv

    from gavil.domain.names import word_reason

    q = {"minimal": csv.QUOTE_MINIMAL, "all": csv.QUOTE_ALL}[quoting]
    rows = STRENGTH_ROWS if sep != "\t" or quoting == "all" else [r for r in STRENGTH_ROWS if '"' not in r[1]]
    text = _strength_text(sep, q, newline, rows)
    path = tmp_path / "strength.SWOW-EN.R1.csv"
    path.write_bytes(("\ufeff" if bom else "").encode() + text.encode())
    assert detect_format(path) == "swow_strength_r1"
    res = ingest(path)
    validate(res.edges, Edges)
    got = {(c, r): n for c, r, n in zip(res.edges["cue"], res.edges["response"], res.edges["r1_count"])}
    # a separator or quote inside a response is parsed as one field, then refused by the name policy
    # (gavil/domain/names.py: words are letters, marks, internal hyphens/apostrophes): a reject row, not a split word
    words = [r for r in rows if word_reason(r[1]) is None]
    assert got == {(c, r.lower()): n for c, r, n, _, _ in words}
    assert res.rejects is not None
    assert sorted(res.rejects["response"]) == sorted(r[1].lower() for r in rows if word_reason(r[1]) is not None)


def test_tab_strength_file_unquoted_keeps_quotes_as_part_of_a_word(tmp_path):
    """The published layout (tab, no quoting): a word starting with a quote is data, not quoting."""
    path = write(
        tmp_path,
        "strength.SWOW-EN.R1.csv",
        'cue\tresponse\tR1\tN\tR1.Strength\nmoon\t"sun\t4\t10\t0.4\nmoon\tstar\t6\t10\t0.6\n',
    )
    res = ingest(path)
    # read as the word '"sun' (not as quoting that swallows the next field), then refused by the name policy
    assert list(res.edges["response"]) == ["star"]
    assert res.rejects is not None and list(res.rejects["response"]) == ['"sun']


@pytest.mark.parametrize(
    ("sep", "bad", "column"),
    [
        (",", "moon,sun,4,10,0.4,extra", None),
        (";", "moon;sun;four;10;0.4", "R1"),
        (",", 'moon,"sun,4,10,0.4', None),
        (",", "moon,sun,4,10,0.9", "R1.Strength"),
    ],
)
def test_comma_and_semicolon_strength_errors_name_file_and_line(tmp_path, sep, bad, column):
    head = sep.join(["cue", "response", "R1", "N", "R1.Strength"])
    path = write(tmp_path, "s.csv", f"{head}\nrocket{sep}space{sep}5{sep}10{sep}0.5\n{bad}\n")
    with pytest.raises(SwowFormatError) as info:
        ingest(path)
    assert info.value.path == str(path) and info.value.line == 3, str(info.value)
    if column:
        assert info.value.column == column, str(info.value)


@pytest.mark.parametrize(
    "marker", ["Unknown word", "unknown word", " UNKNOWN WORD ", "no more responses", "No  more responses\t"]
)
def test_non_response_markers_any_case_and_spacing_are_not_responses(tmp_path, marker):
    rows = R100_ROWS[:1] + [R100_ROWS[0].replace('"1",1,10', '"5",5,15').replace('"sun"', f'"{marker}"')]
    res = ingest(write(tmp_path, "SWOW-EN.R100.csv", R100_HEADER + "".join(rows)))
    assert not any("word" in r or "responses" in r for r in res.edges["response"])
    e = res.edges.set_index(["cue", "response"])
    assert e.loc[("moon", "sun"), "r1_count"] == 1 and e.loc[("moon", "night"), "r123_count"] == 2
    text = f"cue\tresponse\tR1\tN\tR1.Strength\nmoon\tsun\t4\t10\t0.4\nmoon\t{marker.strip(chr(9))}\t2\t10\t0.2\n"
    res = ingest(write(tmp_path, "strength.SWOW-EN.R1.csv", text))
    assert list(res.edges["response"]) == ["sun"] and res.metrics["non_response_rows"] == 1


def test_which_words_become_concepts(tmp_path):
    """Cues always (the paper's SWOW corpus); with ingest.concepts: cues_and_responses also every response
    given at least min_response_count times, so a small file whose responses are no cues of their own
    still gives its associations an image (and its SWOW-baseline instances their candidates)."""
    from stages.ingest_concepts.stage import ingest

    f = tmp_path / "strength.SWOW-EN.R123.csv"
    f.write_text(
        "cue\tresponse\tR123\tN\tR123.Strength\n"
        "moon\tsun\t40\t100\t0.4\nmoon\tstar\t12\t100\t0.12\nmoon\tcheese\t2\t100\t0.02\n"
        "sun\thot\t30\t90\t0.333\nsun\tmoon\t20\t90\t0.222\n"
    )
    cues = ingest(f).concepts
    assert sorted(cues["concept"]) == ["moon", "sun"] and cues["is_cue"].all()
    every = ingest(f, concepts_from="cues_and_responses").concepts.set_index("concept")
    assert sorted(every.index) == ["cheese", "hot", "moon", "star", "sun"]
    assert not every.loc["star", "is_cue"] and every.loc["star", "n_cues"] == 1
    strong = ingest(f, concepts_from="cues_and_responses", min_response_count=10).concepts
    assert sorted(strong["concept"]) == ["hot", "moon", "star", "sun"]  # cheese: 2 < 10
