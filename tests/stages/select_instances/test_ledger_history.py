"""The ledger remembers its history (issue 45): both ledger files rolled back together to an older
version in git (a lost merge, ``git checkout <old> -- data/ledger``, a checkout of the wrong commit)
agree with each other, so only git's history can tell that IDs were lost. Selection, run as DVC runs
it, refuses such a ledger in one line naming the file and the lost IDs, and writes nothing; a new
benchmark started with ``gavil ledger new`` is not held to the old one's history."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gavil.pipeline import catalog
from gavil.pipeline.ledger import start_new_ledger
from stages.import_annotations import import_all
from stages.select_instances.guard import read_published
from stages.select_instances.history import Version, check_history
from tests.helpers import RELEASE, ROOT

KEY = b"k"
PUBLISHED = Path("data/ledger/published_ids.csv")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def _inputs(root: Path, release: Path, game_rows: int, swow_rows: int) -> None:
    """The import's tables from the first rows of the release files (no game, no flag, no gold check)."""
    release.mkdir(exist_ok=True)
    files = []
    for name, n, dataset in (("game_5_6.csv", game_rows, "game"), ("swow.csv", swow_rows, "swow_baseline")):
        if n:
            lines = (RELEASE / name).read_text().splitlines(keepends=True)
            (release / name).write_text("".join(lines[: n + 1]))
            files.append({"file": name, "dataset": dataset})
    res = import_all(release, files, None, KEY)
    for name in ("instances", "solves", "flags", "gold_checks"):
        catalog.write_table(getattr(res, name), name, root)


def _stage(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gavil.cli", "stage", "select_instances"],
        cwd=root,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HOME": str(root)},
    )


def _digests(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "data").rglob("*"))
        if p.is_file() and "timings" not in p.parts
    }


@pytest.fixture(scope="module")
def history(tmp_path_factory) -> Path:
    """A project in git: release v1.0.0 published 30 game IDs; the next commit (v1.1.0) 40."""
    root = tmp_path_factory.mktemp("history")
    shutil.copy(ROOT / "params.yaml", root / "params.yaml")
    (root / ".gitignore").write_text("/data/*\n!/data/ledger/\n")
    _git(root, "init", "-q")
    _git(root, "config", "user.email", "t@example.org")
    _git(root, "config", "user.name", "t")
    for n, tag in ((30, "v1.0.0"), (40, "v1.1.0")):
        _inputs(root, root / "release", n, 0)
        r = _stage(root)
        assert r.returncode == 0, r.stderr
        _git(root, "add", "-A")
        _git(root, "commit", "-qm", f"{n} published")
        _git(root, "tag", "-a", tag, "-m", tag)
    assert len(read_published(root / PUBLISHED) or []) == 40
    return root


def _refused(root: Path) -> str:
    before = _digests(root)
    r = _stage(root)
    lines = [x for x in r.stderr.splitlines() if x.strip() and not x.startswith("(traceback: gavil --debug")]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert _digests(root) == before  # nothing written
    return lines[0]


def test_both_files_rolled_back_together_are_refused_naming_the_lost_ids(history, tmp_path):
    copy = Path(shutil.copytree(history, tmp_path / "rolled"))
    _git(copy, "checkout", "v1.0.0", "--", "data/ledger")  # both files, from the older release
    line = _refused(copy)
    assert "published_ids.csv lacks 10 ID(s)" in line and "game ID 30" in line and "v1.1.0" in line
    assert "git checkout v1.1.0 -- data/ledger" in line


def test_a_checkout_of_an_older_release_commit_is_held_to_later_release_tags(history, tmp_path):
    copy = Path(shutil.copytree(history, tmp_path / "detached"))
    _git(copy, "checkout", "-q", "v1.0.0")  # the wrong commit: HEAD's own history has only 30 IDs
    line = _refused(copy)
    assert "lacks 10 ID(s) that v1.1.0 published" in line


def test_an_intact_ledger_passes_and_a_new_benchmark_is_not_held_to_the_old_one(history, tmp_path):
    copy = Path(shutil.copytree(history, tmp_path / "new"))
    assert _stage(copy).returncode == 0  # the ledger HEAD holds: nothing lost
    start_new_ledger(copy, force=True)
    _inputs(copy, copy / "other", 0, 12)  # another benchmark: other content, its own IDs from 0
    r = _stage(copy)
    assert r.returncode == 0, r.stderr
    assert {d for d, _, _ in read_published(copy / PUBLISHED) or []} == {"swow_baseline"}


@pytest.mark.parametrize("k", range(0, 40, 7))
def test_any_lost_row_of_a_related_version_is_named(k):
    rows = [("game", i, f"{i:064x}") for i in range(40)]
    history = [Version("c" * 40, "v1.1.0", frozenset(rows))]
    current = rows[:k] + rows[k + 1 :]
    with pytest.raises(Exception, match=f"lacks 1 ID\\(s\\) that v1.1.0 published \\(game ID {k}\\)"):
        check_history(current, history, PUBLISHED)
    check_history(rows, history, PUBLISHED)  # nothing lost
    check_history([("game", 0, "f" * 64)], history, PUBLISHED)  # unrelated (a new benchmark)
