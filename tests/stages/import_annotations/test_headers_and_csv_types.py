"""A batch whose header holds a column twice is refused naming it (every batch format: raw CSV,
crowd CSV, released CSV; a JSONL record with a key twice), never read with one of the two values;
and every CSV the project writes, ``gavil query --format csv`` included, neutralises formula cells
in every column type (DuckDB ENUM / categorical, lists, structs, bytes, plain text)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gavil.io import csv_text
from gavil.pipeline import catalog
from stages.import_annotations import import_all
from tests.helpers import MTURK_COLUMNS, ROOT

KEY = b"k"
C5 = json.dumps(["rocket", "cat", "moon", "coffee", "brick"])
CROWD = {
    "creations_file": "crowd_creations.csv",
    "solves_file": "crowd_solves.csv",
    "accepted_status": ["Approved"],
    "columns": MTURK_COLUMNS,
}


def reasons(res) -> list[str]:
    return list(res.rejects["reason"])


@pytest.mark.parametrize("twice", ["cue", "candidates", "associations", "instance_id", "spymaster_id"])
def test_a_raw_header_with_a_column_twice_is_refused_naming_it(tmp_path, twice):
    cols = ["instance_id", "spymaster_id", "cue", "candidates", "associations"]
    values = {
        "instance_id": "i1",
        "spymaster_id": "S",
        "cue": "space",
        "candidates": C5,
        "associations": '["rocket", "moon"]',
    }
    header = cols + [twice]
    row = [values[c] for c in cols] + ["=evil" if twice != "candidates" else '["a", "b", "c", "d", "e"]']
    path = tmp_path / "raw/b1/creations.csv"
    path.parent.mkdir(parents=True)
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows([header, row])
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert res.instances.empty
    assert reasons(res) == [f"header has column {twice!r} twice: every column name must be unique"]


def test_a_crowd_and_a_released_header_with_a_column_twice_are_refused(tmp_path):
    fixed = "HITId,AssignmentId,WorkerId,AssignmentStatus,SubmitTime,WorkTimeInSeconds"
    crowd = tmp_path / "raw/b1/crowd_creations.csv"
    crowd.parent.mkdir(parents=True)
    crowd.write_text(
        f"{fixed},Input.candidates,Answer.cue1,Answer.associations1,Answer.cue2,Answer.associations2,Answer.cue1\n"
        f'H,A,W,Approved,t,1,"{C5.replace(chr(34), chr(34) * 2)}",space,"[""rocket"", ""moon""]",night,"[""moon"", ""cat""]",evil\n'
    )
    res = import_all(None, [], tmp_path / "raw", KEY, CROWD)
    assert res.instances.empty and reasons(res) == [
        "header has column 'Answer.cue1' twice: every column name must be unique"
    ]
    release = tmp_path / "rel"
    release.mkdir()
    head = "candidates,cue,associations,score_fool_the_ai,num_associations,annotation_index,num_candidates,"
    (release / "game_5_6.csv").write_text(head + "solvers_jaccard_mean,solvers_jaccard_std,images_source,ID,cue\n")
    res = import_all(release, [{"file": "game_5_6.csv", "dataset": "game"}], None, KEY)
    assert reasons(res) == ["header has column 'cue' twice: every column name must be unique"]


def test_a_jsonl_record_with_a_key_twice_is_a_rejected_row(tmp_path):
    path = tmp_path / "raw/b1/creations.jsonl"
    path.parent.mkdir(parents=True)
    rec = {"instance_id": "i1", "spymaster_id": "S", "cue": "space", "candidates": json.loads(C5)}
    good = json.dumps(rec | {"associations": ["rocket", "moon"]})
    twice = good.replace('"i1"', '"i2"').replace('"cue": "space"', '"cue": "space", "cue": "night"')
    path.write_text(good + "\n" + twice + "\n")
    res = import_all(None, [], tmp_path / "raw", KEY)
    assert list(res.instances["instance_uid"]) == ["raw:i1"]
    assert reasons(res) == ["not a JSON object (key 'cue' appears twice in the record)"]


FORMULAS = ["=1+1", "+SUM(A1)", "-2+3", "@cmd", "|calc", "%0A", "\t=x", "＝HYPERLINK(1)"]


def test_every_column_type_is_neutralised():
    df = pd.DataFrame(
        {
            "text": FORMULAS,
            "category": pd.Categorical(FORMULAS),
            "string": pd.array(FORMULAS, dtype="string"),
            "list": [[f] for f in FORMULAS],
            "bytes": [f.encode() for f in FORMULAS],
            "number": [-0.5] * len(FORMULAS),
        }
    )
    out = pd.read_csv(io.StringIO(csv_text(df)), dtype=str, keep_default_na=False)
    for col in ("text", "category", "string"):
        assert all(v.startswith("'") for v in out[col]), (col, list(out[col]))
    assert all(not v.startswith(("=", "+", "-", "@", "|", "%")) for col in ("list", "bytes") for v in out[col])
    assert set(out["number"]) == {"-0.5"}  # a plain number stays a number


def test_gavil_query_csv_neutralises_enum_cells(tmp_path):
    catalog.write_table(
        pd.DataFrame(
            {
                "instance_uid": ["raw:i1"],
                "solver": ["a_1"],
                "selection": [["x"]],
                "source_file": ["f"],
                "source_line": [1],
            }
        ),
        "solves",
        tmp_path,
    )
    sql = "SELECT CAST('=1+1' AS ENUM('=1+1', 'ok')) AS e, CAST('@x' AS ENUM('@x')) AS f, ['=y'] AS l, 'ok' AS t"
    r = subprocess.run(
        [sys.executable, "-m", "gavil.cli", "query", sql, "--format", "csv"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["e,f,l,t", "'=1+1,'@x,['=y'],ok"]
