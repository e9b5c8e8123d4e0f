"""A ledger that cannot forget: selection holds the ID ledger to what it last published
(``data/ledger/published_ids.csv``) and to its own history (a dataset's IDs are 0..max, every
published row matches its fingerprint). A published row removed (each one in turn), an older copy,
a changed content, a truncated, empty or foreign file: one line naming the ID or the file and how
to restore it, exit 2, nothing written."""

from __future__ import annotations

import hashlib
import itertools
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gavil.io import write_csv
from gavil.pipeline import catalog
from stages.import_annotations import import_all
from stages.select_instances import select, update_ledger
from stages.select_instances.guard import LedgerError, check_ledger, published_ids, read_ledger, read_published
from stages.select_instances.ledger import fingerprints
from tests.helpers import RELEASE, ROOT

KEY = b"k"
LEDGER = Path("data/ledger/benchmark_ids.parquet")
PUBLISHED = Path("data/ledger/published_ids.csv")


@pytest.fixture(scope="module")
def small_release(tmp_path_factory) -> Path:
    """The first 40 game rows and 20 SWOW rows of the release: two datasets, 60 published IDs."""
    d = tmp_path_factory.mktemp("release")
    for name, n in (("game_5_6.csv", 40), ("swow.csv", 20)):
        lines = (RELEASE / name).read_text().splitlines(keepends=True)
        (d / name).write_text("".join(lines[: n + 1]))
    return d


def built(release: Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    files = [{"file": "game_5_6.csv", "dataset": "game"}, {"file": "swow.csv", "dataset": "swow_baseline"}]
    res = import_all(release, files, None, KEY)
    return res.instances, res.solves, update_ledger(select(res.instances, res.solves, 0.8), None)


def check(ledger: pd.DataFrame | None, published: list[tuple[str, int, str]] | None) -> None:
    check_ledger(ledger, published, fingerprints, LEDGER, PUBLISHED)


def as_list(df: pd.DataFrame) -> list[tuple[str, int, str]]:
    return [(d, int(i), f) for d, i, f in zip(df["dataset"], df["ID"], df["fingerprint"])]


def test_each_published_row_removed_in_turn_is_named(small_release):
    _, _, ledger = built(small_release)
    published = as_list(published_ids(ledger))
    assert len(published) == 60
    check(ledger, published)  # intact: no error
    for i in range(len(ledger)):
        row = ledger.iloc[i]
        less = ledger.drop(index=ledger.index[i])
        for anchor in (published, None):  # with the published IDs, and from the ledger's own history alone
            if anchor is None and int(row["ID"]) == ledger.loc[ledger["dataset"] == row["dataset"], "ID"].max():
                continue  # the newest ID of a dataset: only the published IDs can tell it is gone
            with pytest.raises(LedgerError) as e:
                check(less, anchor)
            msg = str(e.value)
            assert f"published {row['dataset']} ID {int(row['ID'])}" in msg and "\n" not in msg
            assert "git checkout" in msg and "select.retired" in msg


def test_an_older_copy_and_a_lost_merge_are_caught(small_release, tmp_path):
    _, _, ledger = built(small_release)
    older = ledger[~((ledger["dataset"] == "game") & (ledger["ID"] >= 35))]  # before the last 5 were published
    with pytest.raises(LedgerError, match="has lost published game ID 35 "):
        check(older, as_list(published_ids(ledger)))
    with pytest.raises(LedgerError, match="is missing published game ID 0 "):
        check(None, as_list(published_ids(ledger)))


def test_a_changed_content_is_caught_with_or_without_its_fingerprint(small_release):
    _, _, ledger = built(small_release)
    published = as_list(published_ids(ledger))
    edited = ledger.copy()
    edited.loc[edited.index[3], "cue"] = "changed"
    with pytest.raises(LedgerError, match="ID 3 no longer matches its fingerprint"):
        check(edited, published)
    edited.loc[edited.index[3], "fingerprint"] = sorted(fingerprints(edited.iloc[3].to_dict()))[0]
    with pytest.raises(LedgerError, match="ID 3 has other content than"):
        check(edited, published)


def test_damaged_published_ids_are_a_clear_error(tmp_path):
    p = tmp_path / "published_ids.csv"
    for text in (
        "",
        "dataset,ID\n",
        "dataset,ID,fingerprint\ngame,x,abc\n",
        "dataset,ID,fingerprint\n" + "game,0," + "a" * 64 + "\n" * 2 + "game,0," + "a" * 64 + "\n",
    ):
        p.write_text(text)
        with pytest.raises(LedgerError) as e:
            read_published(p)
        assert "\n" not in str(e.value)


# ------------------------------------------------------------------------------ the stage, as DVC runs it
def stage(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gavil.cli", "stage", "select_instances"],
        cwd=project,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": str(Path(sys.executable).parent)},
    )


def digests(project: Path) -> dict[str, str]:
    return {
        p.relative_to(project).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((project / "data").rglob("*"))
        if p.is_file() and "timings" not in p.parts
    }


@pytest.fixture(scope="module")
def project(small_release, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    inst, solves, _ = built(small_release)
    catalog.write_table(inst, "instances", root)
    catalog.write_table(solves, "solves", root)
    empty = import_all(None, [], None, KEY)  # no game: no flag, no gold check
    catalog.write_table(empty.flags, "flags", root)
    catalog.write_table(empty.gold_checks, "gold_checks", root)
    r = stage(root)
    assert r.returncode == 0, r.stderr
    assert len(read_published(root / PUBLISHED) or []) == 60
    return root


def damaged(project: Path, tmp_path: Path, how: str) -> Path:
    """A copy of ``project`` whose ledger is damaged ``how``."""
    copy = tmp_path / how
    shutil.copytree(project, copy)
    path = copy / LEDGER
    data = path.read_bytes()
    if how == "empty":
        path.write_bytes(b"")
    elif how.startswith("cut"):
        path.write_bytes(data[: int(how[3:]) * len(data) // 100])
    elif how == "foreign":
        shutil.copy(copy / "data/annotations/solves.parquet", path)
    elif how == "garbage":
        path.write_bytes(b"PAR1" + bytes(range(256)) * 10)
    elif how.startswith("drop"):
        led = read_ledger(path)
        assert led is not None
        catalog.write_table(led.drop(index=led.index[int(how[4:])]).reset_index(drop=True), "id_ledger", copy)
    elif how == "zero_rows":
        led = read_ledger(path)
        assert led is not None
        catalog.write_table(led.iloc[0:0], "id_ledger", copy)
    return copy


@pytest.mark.parametrize(
    "how", ["empty", "cut10", "cut50", "cut99", "foreign", "garbage", "zero_rows", "drop0", "drop39", "drop59"]
)
def test_the_stage_stops_with_one_line_and_writes_nothing(project, tmp_path, how):
    copy = damaged(project, tmp_path, how)
    before = digests(copy)
    r = stage(copy)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    lines = [
        line for line in r.stderr.splitlines() if line.strip() and not line.startswith("(traceback: gavil --debug")
    ]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "benchmark_ids.parquet" in lines[0] and "git checkout" in lines[0]
    if how.startswith("drop") or how == "zero_rows":
        assert "published" in lines[0] and " ID " in lines[0]
    assert digests(copy) == before  # nothing written


def test_retiring_is_the_way_out_and_an_intact_ledger_rebuilds_the_same_bytes(project, tmp_path):
    copy = tmp_path / "again"
    shutil.copytree(project, copy)
    before = digests(copy)
    assert stage(copy).returncode == 0
    after = digests(copy)
    assert {k: v for k, v in after.items() if "metrics" not in k} == {
        k: v for k, v in before.items() if "metrics" not in k
    }
    params = (copy / "params.yaml").read_text()
    (copy / "params.yaml").write_text(
        params.replace("  retired: []", '  retired:\n    - {dataset: game, ID: 7, reason: "taken out"}')
    )
    assert stage(copy).returncode == 0
    led = read_ledger(copy / LEDGER)
    assert led is not None and 7 in set(led.loc[led["dataset"] == "game", "ID"].astype(int))
    assert len(read_published(copy / PUBLISHED) or []) == 60  # still published, as retired
    write_csv(pd.DataFrame({"x": [1]}), copy / "unused.csv")  # the writer is the project's own
    assert list(itertools.islice(read_published(copy / PUBLISHED) or [], 1))[0][:2] == ("game", 0)
