"""`gavil release` refuses a dirty work tree with the fix; where the changes are ledger files it says
to commit them, never to stash or discard them (the ledger holds published IDs)."""

from __future__ import annotations

import subprocess

import pytest

from gavil.pipeline.release import ReleaseError, check_clean


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.mark.parametrize(("path", "ledger"), [("data/ledger/published_ids.csv", True), ("notes.txt", False)])
def test_a_dirty_tree_is_refused_and_ledger_files_are_never_to_be_stashed(tmp_path, path, ledger):
    _git(tmp_path, "init", "-q")
    (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / path).write_text("ID\n1\n")
    with pytest.raises(ReleaseError) as e:
        check_clean(tmp_path)
    msg = str(e.value)
    assert "commit them" in msg and "\n" not in msg
    assert ("never stash" in msg) is ledger and "stash them" not in msg
