"""SWOW ingestion in its three real formats (hand-written rows; no SWOW data is shipped)."""

from pathlib import Path

import pytest

from schemas.ingest import Concepts, Edges
from stages._io import validate
from stages.ingest_concepts import SwowFormatError, detect_format, ingest
from tests.conftest import RELEASE

R100_HEADER = '"","id","participantID","age","gender","nativeLanguage","country","education","created_at","cue","R1","R2","R3"\n'
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
    bad = write(tmp_path, "strength.SWOW-EN.R1.csv", "cue\tresponse\tR1\tN\tR1.Strength\nmoon\tsun\t40\t100\t0.4\nmoon\tnight\tmany\t100\t0.35\n")
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

    badjson = write(tmp_path, "swow.csv", (RELEASE / "swow.csv").read_text().splitlines()[0] + "\n1,load,[truck,2,98,20,\"[]\",1,1,0\n")
    with pytest.raises(SwowFormatError) as e:
        ingest(badjson)
    assert e.value.line == 2 and e.value.column == "associations"


def test_missing_input_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="ingest.path"):
        ingest(tmp_path / "nope.csv")
