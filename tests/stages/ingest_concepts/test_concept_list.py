"""A plain concept list (one concept per line) as the input of a game-only benchmark (issue 48):
read by ``ingest.format: concept_list`` or ``auto`` for a ``.txt`` file, every concept stored in the
SWOW words' form and through the name policy, no edges, and a bad line named by file and line."""

from __future__ import annotations

import pytest

from gavil.pipeline import catalog
from stages.ingest_concepts import SwowFormatError, detect_format, ingest


def test_a_concept_list_gives_concepts_and_no_edges(tmp_path):
    p = tmp_path / "concepts.txt"
    p.write_text("\ufeffMoon\n# my own words\n\nice cream\nmoon\nstar  \nsky\u0336\n", encoding="utf-8")
    assert detect_format(p) == "concept_list"
    res = ingest(p)
    assert res.concepts["concept"].tolist() == ["ice cream", "moon", "star"]
    assert res.concepts["is_candidate"].all() and not res.concepts["is_cue"].any()
    assert res.edges.empty and res.metrics["format"] == "concept_list"
    assert res.metrics["merged_by_normalisation"]["rows"] == 1  # Moon and moon are one concept
    assert res.rejects is not None and len(res.rejects) == 1 and "U+0336" in res.rejects["reason"].iloc[0]
    catalog.write_table(res.concepts, "concepts", tmp_path)  # the schemas accept both tables
    catalog.write_table(res.edges, "edges", tmp_path)


def test_the_order_of_the_lines_never_matters(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("moon\nstar\ncat\n")
    b.write_text("cat\nmoon\nstar\n")
    assert ingest(a).concepts.equals(ingest(b).concepts)


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ("moon\nstar\tsun\n", 2, "one concept per line"),
        ("moon\nstar,sun\n", 2, "one concept per line"),
        ("moon\nst\x07ar\n", 2, "control character"),
        ("# only a comment\n\n", None, "no concept"),
    ],
)
def test_a_bad_list_names_file_and_line(tmp_path, text, line, why):
    p = tmp_path / "concepts.txt"
    p.write_text(text)
    with pytest.raises(SwowFormatError, match=why) as e:
        ingest(p, fmt="concept_list")
    assert e.value.line == line and str(p) in str(e.value)


def test_a_non_utf8_list_names_the_line(tmp_path):
    p = tmp_path / "concepts.txt"
    p.write_bytes(b"moon\nst\xe9r\n")
    with pytest.raises(SwowFormatError, match="not UTF-8") as e:
        ingest(p, fmt="concept_list")
    assert e.value.line == 2
