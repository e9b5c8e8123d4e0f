"""Every query the README and the docs show runs, as written, on a built mini project.

The `gavil query "..."` commands of README.md (its five-minute tour) and of every page under
docs/ (e.g. docs/tables.md, "Tables and querying") are taken from the text itself and run
verbatim (`shlex`), so a renamed column or table fails here instead of in a reader's terminal.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT

README = (ROOT / "README.md").read_text()
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))}
QUERY = re.compile(r"""gavil query (?:"[^"]*"|'[^']*')(?: --format \w+)?""")
#: queries whose result may be empty on the shared build: the worked example batch's query needs the
#: batch copied in first (tests/stages/export/test_export_hf.py runs the README's `cp` line and this query verbatim
#: and checks its three rows); the sample has no flagged instance (tests/game/test_flags.py runs the flags
#: page's queries verbatim on flagged ones)
MAY_BE_EMPTY: set[str] = {
    "gavil query \"select cue, status, ID from selection where origin = 'raw' order by ID\"",
}


def game_section_queries() -> set[str]:
    """The queries of docs/dynamic.md's "Flags and review" and "Solver checks (gold items)": they
    need a played game (no row on the sample); tests/game/test_flags.py and tests/game/test_gold.py run them
    verbatim on one and require rows."""
    page = DOCS["docs/dynamic.md"]
    return set(_queries(page[page.index("## Flags and review") :]))


def _queries(text: str) -> list[str]:
    """Every `gavil query "SQL"` command line in ``text`` (the placeholder `"SQL"` left out)."""
    return [q for q in dict.fromkeys(QUERY.findall(text)) if shlex.split(q)[2] != "SQL"]


def readme_queries() -> list[str]:
    """Every query of README.md and of the docs pages, once each."""
    return list(dict.fromkeys(q for text in [README, *DOCS.values()] for q in _queries(text)))


def test_the_tour_and_the_query_page_show_queries_and_the_extraction_finds_them():
    assert len(_queries(README)) >= 1, "the README shows a `gavil query` example"
    assert len(_queries(DOCS["docs/tour.md"])) >= 2, "the tour shows `gavil query` examples"
    page = DOCS["docs/tables.md"]
    assert len(_queries(page)) >= 4, QUERY.findall(page)
    assert set(_queries(README)) | set(_queries(page)) <= set(readme_queries())
    # the extraction sees every `gavil query "` the texts show (a quoting it cannot read would hide one)
    for text in [README, *DOCS.values()]:
        assert len(QUERY.findall(text)) == text.count('gavil query "') + text.count("gavil query '")


@pytest.fixture
def built(sample_build) -> Path:
    """The built sample project every pipeline test shares (tests.helpers.build_sample: 9 sample
    images, the release, one `dvc repro` of every stage), read only."""
    return sample_build[0]


@pytest.mark.slow
@pytest.mark.parametrize("command", readme_queries())
def test_every_readme_query_runs_verbatim(built, command):
    args = shlex.split(command)
    if "--format" in args:  # asked for as JSON below, to read the rows
        del args[args.index("--format") : args.index("--format") + 2]
    gavil = str(Path(sys.executable).parent / "gavil")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run([gavil, *args[1:], "--format", "json"], cwd=built, capture_output=True, text=True, env=env)
    assert out.returncode == 0, f"{command}\n{out.stderr[-2000:]}"
    rows = json.loads(out.stdout)
    assert isinstance(rows, list)
    if command not in MAY_BE_EMPTY | game_section_queries():
        assert rows, f"no rows: {command}"
