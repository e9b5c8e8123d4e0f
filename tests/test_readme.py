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
import yaml

from gavil.pipeline.registry import STAGES
from tests.helpers import FAST_AFLITE, ROOT, mini_project, no_downloads

README = (ROOT / "README.md").read_text()
DOCS = {p.relative_to(ROOT).as_posix(): p.read_text() for p in sorted((ROOT / "docs").rglob("*.md"))}
QUERY = re.compile(r"""gavil query (?:"[^"]*"|'[^']*')(?: --format \w+)?""")
#: queries whose result may be empty on the mini project (none today)
MAY_BE_EMPTY: set[str] = set()


def _queries(text: str) -> list[str]:
    """Every `gavil query "SQL"` command line in ``text`` (the placeholder `"SQL"` left out)."""
    return [q for q in dict.fromkeys(QUERY.findall(text)) if shlex.split(q)[2] != "SQL"]


def readme_queries() -> list[str]:
    """Every query of README.md and of the docs pages, once each."""
    return list(dict.fromkeys(q for text in [README, *DOCS.values()] for q in _queries(text)))


def test_the_tour_and_the_query_page_show_queries_and_the_extraction_finds_them():
    assert len(_queries(README)) >= 2, "the README's tour shows `gavil query` examples"
    page = DOCS["docs/tables.md"]
    assert len(_queries(page)) >= 4, QUERY.findall(page)
    assert set(_queries(README)) | set(_queries(page)) <= set(readme_queries())
    # the extraction sees every `gavil query "` the texts show (a quoting it cannot read would hide one)
    for text in [README, *DOCS.values()]:
        assert len(QUERY.findall(text)) == text.count('gavil query "') + text.count("gavil query '")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A mini project (9 sample images, the release) after every stage, run as `gavil stage` does
    (no model to evaluate: `predictions` and `evaluation` hold the release's stored predictions)."""
    from tests.test_pipeline import MINI_IMAGES

    d = mini_project(tmp_path_factory.mktemp("readme"), MINI_IMAGES)
    params = yaml.safe_load((d / "params.yaml").read_text())
    no_downloads(params)
    params["instances"]["game_sets"] = {5: 2, 6: 1, 10: 0, 12: 1}
    params["aflite"] |= FAST_AFLITE  # the paper's 64 classifiers x 12 phases take minutes on 4,561 instances
    params["evaluate"]["models"] = []  # evaluation tables hold the release's stored predictions only: fast
    params["paper"]["text_models"] = params["paper"]["text_models"][:1]  # MiniLM only (MPNet: tests/test_paper.py)
    params["paper"]["supervised"] = {**params["paper"]["supervised"], "enabled": False, "models": []}
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    code = f"from gavil.pipeline.runner import run_stage\nfor s in {[s.name for s in STAGES]!r}: run_stage(s)"
    out = subprocess.run([sys.executable, "-c", code], cwd=d, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return d


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
    if command not in MAY_BE_EMPTY:
        assert rows, f"no rows: {command}"
