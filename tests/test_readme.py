"""Every query the README shows runs, as written, on a built mini project.

The README's `gavil query "..."` commands (its "Querying with DuckDB" section and any other
place) are taken from the README text itself and run verbatim (`shlex`), so a renamed column or
table fails here instead of in a reader's terminal.
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
from tests.helpers import FAST_AFLITE, ROOT, mini_project

README = (ROOT / "README.md").read_text()
QUERY = re.compile(r"""gavil query (?:"[^"]*"|'[^']*')(?: --format \w+)?""")
#: queries whose result may be empty on the mini project (none today)
MAY_BE_EMPTY: set[str] = set()


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


def readme_queries() -> list[str]:
    """Every `gavil query "SQL"` command line in the README (the placeholder `"SQL"` left out)."""
    return [q for q in dict.fromkeys(QUERY.findall(README)) if shlex.split(q)[2] != "SQL"]


def test_the_duckdb_section_shows_queries_and_the_extraction_finds_them():
    section = _section("Querying with DuckDB")
    in_blocks = QUERY.findall(section)
    assert len([q for q in in_blocks if shlex.split(q)[2] != "SQL"]) >= 4, in_blocks
    assert set(in_blocks) - {'gavil query "SQL"'} <= set(readme_queries())


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """A mini project (9 sample images, the release) after every stage, run as `gavil stage` does
    (no model to evaluate: `predictions` and `evaluation` hold the release's stored predictions)."""
    from tests.test_pipeline import MINI_IMAGES

    d = mini_project(tmp_path_factory.mktemp("readme"), MINI_IMAGES)
    params = yaml.safe_load((d / "params.yaml").read_text())
    params["score"]["allow_download"] = False
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
