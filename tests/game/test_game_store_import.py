"""The game's store (``game.sqlite``) is an input like any other (issue 24).

Each test plays an attack on the file ``import_annotations`` reads: a truncated store (cut at
many byte offsets), random bytes, another program's SQLite file, a renamed column, one row of
malformed JSON, a newer schema version, 0 bytes, a missing ``solves`` table. The property: the
import either reads every stored row or ends with one :class:`GameStoreError` line naming the
store (and the table and seq of a bad row), and the store's bytes are never changed by reading.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gavil.gamestore.store import SCHEMA_VERSION, GameStoreError, connect, read_submissions, store_file
from gavil.params.game import GoldParams
from stages.import_annotations import import_all
from tests.helpers import ROOT

KEY = b"k" * 32
CANDS = ["rocket", "moon", "astronaut", "cat", "coffee"]


def make_store(path: Path, creations: int = 2, solves: bool = True) -> Path:
    """A valid store written through the game's own schema: one task, ``creations`` cues (1 or 2)
    and, when ``solves``, two solves of each creation."""
    con = connect(path)
    con.execute(
        "INSERT INTO players(player_id, token_hash, display_name, name_key, created_at) VALUES ('p0', 'h0', 'Spy', 'spy', 1.0)"
    )
    con.execute("INSERT INTO tasks VALUES ('t0', 'random-5-0000', 'p0', ?, 1.0)", (json.dumps(CANDS),))
    for i, (cue, assoc) in enumerate([("space", CANDS[:2]), ("night", CANDS[1:3])][:creations]):
        con.execute(
            "INSERT INTO creations(instance_id, task_id, spymaster_id, cue, cue_norm, content_key, candidates,"
            " associations, rival_status, rival_predictions, score_fool_the_ai, created_at)"
            " VALUES (?, 't0', 'p0', ?, ?, ?, ?, ?, 'no_weights', NULL, NULL, 2.0)",
            (f"i{i}", cue, cue, f"c{i}", json.dumps(CANDS), json.dumps(assoc)),
        )
        if solves:
            for s in ("s1", "s2"):
                con.execute(
                    "INSERT INTO solves(instance_id, solver_id, selection, jaccard, created_at) VALUES (?, ?, ?, 1, 3)",
                    (f"i{i}", s, json.dumps(assoc)),
                )
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.execute("PRAGMA journal_mode = DELETE")  # one self-contained file: byte cuts below hit the data
    con.close()
    return path


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def refused(path: Path, *expect: str) -> str:
    """Import ``path``: it must fail with one GameStoreError line naming the store (and ``expect``),
    and leave the file's bytes as they were."""
    before = digest(path)
    with pytest.raises(GameStoreError) as info:
        import_all(None, [], None, KEY, game_store=path)
    msg = str(info.value)
    assert len(msg.splitlines()) == 1 and str(path) in msg, msg
    for e in expect:
        assert e in msg, msg
    assert digest(path) == before, "reading the store changed it"
    return msg


def test_a_valid_store_is_read_in_full(tmp_path):
    res = import_all(None, [], None, KEY, game_store=make_store(tmp_path / "game.sqlite"))
    assert len(res.instances) == 2 and len(res.solves) == 4 and res.rejects.empty
    assert res.metrics["game_store"] == {"state": "read", "creations_without_solves": 0}


def test_a_store_cut_at_any_offset_is_refused_never_half_read(tmp_path):
    whole = make_store(tmp_path / "whole.sqlite").read_bytes()
    full = import_all(None, [], None, KEY, game_store=tmp_path / "whole.sqlite")
    offsets = sorted({1, 15, 16, 99, 100, 101, 512, *range(1024, len(whole), 1024), len(whole) - 1})
    offsets += random.Random(0).sample(range(1, len(whole)), 20)
    for cut in offsets:
        path = tmp_path / f"cut{cut}.sqlite"
        path.write_bytes(whole[:cut])
        try:
            res = import_all(None, [], None, KEY, game_store=path)
        except GameStoreError as e:
            assert len(str(e).splitlines()) == 1 and str(path) in str(e), (cut, str(e))
            continue
        # SQLite may read a cut file in full only when nothing of the data was cut off
        assert len(res.instances) == len(full.instances) and len(res.solves) == len(full.solves), cut


@pytest.mark.parametrize("seed", range(5))
def test_random_bytes_are_refused(tmp_path, seed):
    path = tmp_path / "game.sqlite"
    path.write_bytes(random.Random(seed).randbytes(4096 * (seed + 1)))
    refused(path, "not an SQLite database")


def test_random_bytes_after_a_valid_sqlite_header_are_refused(tmp_path):
    path = tmp_path / "game.sqlite"
    whole = make_store(path).read_bytes()
    path.write_bytes(whole[:100] + random.Random(1).randbytes(len(whole) - 100))
    refused(path)


def test_another_programs_sqlite_file_is_refused_and_left_unchanged(tmp_path):
    path = tmp_path / "game.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE bookmarks(url TEXT, title TEXT)")
    con.execute("INSERT INTO bookmarks VALUES ('http://127.0.0.1/x', 'x')")
    con.commit()
    con.close()
    refused(path, "no table 'creations'", "bookmarks")
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # not switched to WAL


def test_zero_bytes_is_an_error_not_an_empty_game(tmp_path):
    path = tmp_path / "game.sqlite"
    path.write_bytes(b"")
    refused(path, "0 bytes")
    assert path.stat().st_size == 0


@pytest.mark.parametrize("table", ["solves", "creations"])
def test_a_missing_table_is_refused_and_its_partner_not_silently_dropped(tmp_path, table):
    path = make_store(tmp_path / "game.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"DROP TABLE {table}")
    con.commit()
    con.close()
    refused(path, f"no table '{table}'")


@pytest.mark.parametrize(
    ("table", "column"), [("creations", "cue"), ("creations", "candidates"), ("solves", "selection")]
)
def test_a_renamed_column_is_named(tmp_path, table, column):
    path = make_store(tmp_path / "game.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"ALTER TABLE {table} RENAME COLUMN {column} TO {column}_v2")
    con.commit()
    con.close()
    refused(path, f"table '{table}' has no column '{column}'")


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [
        ("creations", "candidates", '["rocket", "moon"'),
        ("creations", "associations", "moon,rocket"),
        ("solves", "selection", ""),
        ("solves", "selection", b"\x00\x01"),
        ("creations", "candidates", "42 apples"),
    ],
)
def test_one_malformed_json_row_names_table_seq_and_column(tmp_path, table, column, value):
    path = make_store(tmp_path / "game.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"UPDATE {table} SET {column} = ? WHERE seq = 2", (value,))
    con.commit()
    con.close()
    refused(path, f"{table} row seq 2, column '{column}'")


@pytest.mark.parametrize(
    ("table", "column", "value", "row"),
    [
        ("gold_items", "candidates", '["rocket", "moon"', "row G1"),
        ("gold_items", "associations", b"\x00\x01", "row G1"),
        ("gold_answers", "selection", "0,1", "row seq 1"),
        ("gold_answers", "selection", "", "row seq 1"),
    ],
)
def test_one_malformed_json_gold_row_names_table_row_and_column(tmp_path, table, column, value, row):
    """The gold tables (game.gold) are read by the same rule: one bad cell, one error line."""
    path = with_gold(make_store(tmp_path / "game.sqlite"))
    con = sqlite3.connect(path)
    con.execute(f"UPDATE {table} SET {column} = ?", (value,))
    con.commit()
    con.close()
    refused(path, f"{table} {row}, column '{column}'")


def with_gold(path: Path, candidates: str = json.dumps(CANDS), associations: str = json.dumps(CANDS[:2])) -> Path:
    """``path`` with one gold item G1 (``candidates``, ``associations``: JSON text as stored) and
    player p0's answer to it, choosing rocket and moon."""
    con = sqlite3.connect(path)
    con.execute(
        "INSERT INTO gold_items(gold_id, instance_id, source_uid, cue, candidates, associations, images, added_at)"
        " VALUES ('G1', 'g-1', 'release:1', 'space', ?, ?, '[]', 1.0)",
        (candidates, associations),
    )
    con.execute(
        "INSERT INTO gold_answers(gold_id, solver_id, selection, jaccard, created_at, lease_id)"
        " VALUES ('G1', 'p0', ?, 1.0, 2.0, 'l1')",
        (json.dumps(CANDS[:2]),),
    )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    ("candidates", "associations"),
    [
        ('"rocket moon astronaut cat coffee"', json.dumps(CANDS[:2])),  # a string: "in" would match substrings
        (json.dumps(CANDS), '"rocket moon"'),
        ("[1, 2, 3, 4, 5]", "[1, 2]"),
        ('{"rocket": 1, "moon": 2}', json.dumps(CANDS[:2])),
        ("null", json.dumps(CANDS[:2])),
        (json.dumps(CANDS), "[]"),
        (json.dumps(CANDS), '["rocket", "rocket"]'),
        (json.dumps(CANDS), '["rocket", "sun"]'),  # an association that is no candidate
        (json.dumps(CANDS[:2]), json.dumps(CANDS[:2])),  # every candidate an association: nothing to find
    ],
)
def test_an_answer_to_a_malformed_gold_item_is_a_rejected_row_not_a_score(tmp_path, candidates, associations):
    """A gold item whose stored lists are valid JSON of the wrong shape scores nobody: its answers
    are rejected rows with the reason, and the solver has no gold answer."""
    path = with_gold(make_store(tmp_path / "game.sqlite"), candidates, associations)
    res = import_all(None, [], None, KEY, game_store=path, gold=GoldParams(enabled=True, items=1))
    rej = res.rejects[res.rejects["source_file"] == f"{path.as_posix()}#gold_answers"]
    assert list(rej["source_line"]) == [1] and "malformed gold item" in rej["reason"].iloc[0]
    assert set(res.gold_checks["gold_status"]) <= {"gold_pending"}, res.gold_checks


def test_an_answer_to_a_well_formed_gold_item_is_scored(tmp_path):
    path = with_gold(make_store(tmp_path / "game.sqlite"))
    res = import_all(None, [], None, KEY, game_store=path, gold=GoldParams(enabled=True, items=1))
    assert not (res.rejects["source_file"] == f"{path.as_posix()}#gold_answers").any()
    passed = res.gold_checks[res.gold_checks["gold_status"] == "passed"]
    assert list(passed["gold_mean_jaccard"]) == [1.0]  # p0; the store's other solvers answered no gold item


def test_json_of_the_wrong_shape_is_a_rejected_row_not_a_crash(tmp_path):
    path = make_store(tmp_path / "game.sqlite")
    con = sqlite3.connect(path)
    con.execute("UPDATE creations SET associations = '{\"a\": 1}' WHERE seq = 2")
    con.commit()
    con.close()
    res = import_all(None, [], None, KEY, game_store=path)
    rej = res.rejects[res.rejects["source_file"] == f"{path.as_posix()}#creations"]
    assert len(res.instances) == 1 and list(rej["source_line"]) == [2]
    assert len(res.solves) + (res.rejects["source_file"] == f"{path.as_posix()}#solves").sum() == 4  # each has a fate


def test_a_newer_schema_version_is_refused(tmp_path):
    path = make_store(tmp_path / "game.sqlite")
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    con.close()
    refused(path, f"schema version {SCHEMA_VERSION + 1} > {SCHEMA_VERSION}")


def test_creations_without_solves_are_a_counted_warning(tmp_path):
    res = import_all(None, [], None, KEY, game_store=make_store(tmp_path / "game.sqlite", solves=False))
    assert len(res.instances) == 2 and res.solves.empty
    assert res.metrics["game_store"] == {"state": "read", "creations_without_solves": 2}


def test_an_empty_game_store_and_an_absent_one_say_so(tmp_path):
    connect(tmp_path / "game.sqlite").close()  # what `gavil game` leaves before anyone plays
    res = import_all(None, [], None, KEY, game_store=tmp_path / "game.sqlite")
    assert res.instances.empty and res.metrics["game_store"]["state"] == "empty"
    res = import_all(None, [], None, KEY, game_store=tmp_path / "absent" / "game.sqlite")
    assert res.metrics["game_store"]["state"] == "absent"


def test_reading_a_wal_store_while_the_game_holds_it_open(tmp_path):
    path = make_store(tmp_path / "game.sqlite")
    writer = connect(path)  # the game's connection: WAL mode
    writer.execute("UPDATE solves SET selection = selection")  # a commit sitting in the WAL
    creations, solves = read_submissions(path)
    writer.close()
    assert len(creations) == 2 and len(solves) == 4


@pytest.mark.slow
def test_gavil_stage_prints_one_line_and_exits_2(tmp_path):
    """Through the CLI: exit 2, the store named, no traceback, the previous tables kept."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["annotations"].update(release_dir="", release_files=[], raw_dir="")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    path = store_file(tmp_path / params["game"]["store_dir"])
    path.parent.mkdir(parents=True)
    path.write_bytes(b"SQLite format 3\x00" + bytes(200))
    gavil = Path(sys.executable).parent / "gavil"
    env = {**os.environ, "GAVIL_ANNOTATOR_KEY": "x" * 64}
    out = subprocess.run(
        [str(gavil), "stage", "import_annotations"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env
    )
    assert out.returncode == 2, out.stdout + out.stderr
    lines = [line for line in out.stderr.strip().splitlines() if "gavil --debug" not in line]  # the CLI's hint
    assert "Traceback" not in out.stderr and len(lines) == 1 and "game.sqlite" in lines[0], out.stderr
    assert not (tmp_path / "data/tables").exists() or not list((tmp_path / "data/tables").rglob("instances*"))
