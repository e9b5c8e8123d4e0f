"""The game in three rooms (docs/game.md "Three rooms"): the store (``gavil/gamestore/``), the
rules (``gavil/domain/``) and the web app (``gavil/game/``). Played on a built project: editing how
the game serves leaves ``import_annotations`` current, editing what the store reads makes it stale."""

from __future__ import annotations

import sys

import pytest

from tests.helpers import run


def _status(d, *stage: str) -> str:
    done = run([sys.executable, "-m", "dvc", "status", *stage], d)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


@pytest.mark.slow
def test_editing_the_app_leaves_the_import_current_and_editing_the_store_does_not(sample_copy):
    d = sample_copy
    assert "up to date" in _status(d), "the built sample is not clean before the edit"
    for app in ("gavil/game/web.py", "gavil/game/service.py", "gavil/game/launch.py", "gavil/game/rival.py"):
        with open(d / app, "a", encoding="utf-8") as f:
            f.write("# an edit to how the game serves\n")
    assert "up to date" in _status(d, "import_annotations")
    assert "up to date" in _status(d), "an edit to the web app made a stage stale"
    with open(d / "gavil/gamestore/store.py", "a", encoding="utf-8") as f:
        f.write("# an edit to the store the import reads\n")
    stale = _status(d, "import_annotations")
    assert "import_annotations" in stale and "gavil/gamestore/store.py" in stale, stale
