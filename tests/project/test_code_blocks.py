"""Every code block of the README and the docs runs as written.

Each fenced block of ``README.md`` and ``docs/*.md`` is taken from the text and run: YAML meant for
``params.yaml`` is merged into it and validated; shell blocks run word for word in a copy of the built
sample project (servers in the background, until they answer); console transcripts are run and their
output compared. Blocks that another test runs verbatim (the set-up commands, every ``gavil query``,
the README's scoring loop, the own-benchmark recipe) are claimed here by checking that test's
hold on them, so a new block that nothing runs fails :func:`test_every_block_is_run_by_a_test`.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from gavil.docs import _split_comment
from gavil.params import parse_params
from tests.helpers import BIN, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```", re.S | re.M)


def blocks() -> list[tuple[str, int, str, str]]:
    """(page, index on the page, language, text with the fence's indentation removed) of every block."""
    out = []
    for page in PAGES:
        for i, m in enumerate(FENCE.finditer(page.read_text())):
            indent = len(m.group(1))
            text = "\n".join(line[indent:] for line in m.group(3).splitlines()) + "\n"
            out.append((page.relative_to(ROOT).as_posix(), i, m.group(2), text))
    return out


def _uncomment(line: str) -> str:
    """``line`` without its trailing ``# comment`` (a ``#`` after a blank, outside quotes), as bash reads it:
    the rule gavil.docs reads params.yaml comments with."""
    return _split_comment(line)[0].rstrip()


def _commands(text: str) -> list[str]:
    """The block's commands: lines that are not blank or comments, continuation lines joined, trailing
    comments left out."""
    joined = re.sub(r"\\\n\s*", " ", text)
    return [c for line in joined.splitlines() if (c := _uncomment(line.strip()))]


# ------------------------------------------------------------------ blocks other tests run verbatim
def _run_elsewhere(page: str, lang: str, text: str) -> str | None:
    """The test that runs this block word for word, if another test does (checked, not assumed)."""
    cmds = _commands(text)
    if page == "docs/your-own-benchmark.md" and lang == "bash":
        assert "bash_blocks(PAGE.read_text())" in (ROOT / "tests/project/test_recipe.py").read_text()
        return "tests/project/test_recipe.py"
    if lang == "bash" and cmds and all(c.startswith('gavil query "') for c in cmds):
        from tests.project.test_readme import readme_queries

        assert set(cmds) <= set(readme_queries())
        return "tests/project/test_readme.py"
    if lang == "bash" and len(cmds) == 1 and cmds[0].startswith("python3 -m venv .venv"):
        ci = (ROOT / ".ci/run").read_text()
        from benchmarks.first_run import readme_first_command

        install = cmds[0].removesuffix(" && pytest")
        assert cmds[0] == readme_first_command() or (
            install in ci and cmds[0].endswith("&& pytest") and "\npytest" in ci
        )
        return ".ci/run (benchmarks/first_run.py and the test command)"
    if lang == "bash" and cmds and all(f"\n{c}" in "\n" + (ROOT / ".ci/run").read_text() for c in cmds):
        return ".ci/run"
    if page == "docs/prefect.md" and lang == "bash" and "dask scheduler" in text:
        assert "docs_block()" in (ROOT / "tests/pipeline/test_cluster.py").read_text()
        return "tests/pipeline/test_cluster.py"
    if page == "docs/tour.md" and lang == "bash" and "raw_example/batch-0001" in text:
        assert (
            '_readme_block("bash", "raw_example/batch-0001", TOUR)'
            in (ROOT / "tests/stages/export/test_export_hf.py").read_text()
        )
        return "tests/stages/export/test_export_hf.py"
    if page == "README.md" and lang == "python":
        assert (
            '_readme_block("python", \'load_dataset("data/export/dataset"'
            in (ROOT / "tests/stages/export/test_export_hf.py").read_text()
        )
        return "tests/stages/export/test_export_hf.py"
    return None


# ------------------------------------------------------------------------------------- runners here
SERVERS = ("gavil game", "gavil server", "gavil serve")


def _kind(page: str, lang: str, text: str) -> str:
    if lang == "mermaid":
        return "diagram"  # the generated Mermaid source of the pipeline (tests/project/test_docs.py checks its edges)
    if _run_elsewhere(page, lang, text):
        return "elsewhere"
    if lang == "yaml":
        return "params"
    if lang == "" and text.lstrip().startswith("$ "):
        return "console"
    if lang in ("bash", "python"):
        return "sample"
    return "unknown"


def test_every_block_is_run_by_a_test():
    kinds = {f"{p}#{i} ({lang})": _kind(p, lang, t) for p, i, lang, t in blocks()}
    assert not [k for k, v in kinds.items() if v == "unknown"], kinds
    assert sum(v == "sample" for v in kinds.values()) >= 4 and sum(v == "params" for v in kinds.values()) >= 3


def _merge(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for k, v in extra.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.mark.parametrize(
    ("page", "index", "text"), [(p, i, t) for p, i, lang, t in blocks() if _kind(p, lang, t) == "params"]
)
def test_every_params_yaml_block_is_valid_params(page, index, text):
    """Pasted into ``params.yaml`` (merged key by key), the block gives params that validate, with
    what the block sets."""
    base = yaml.safe_load((ROOT / "params.yaml").read_text())
    snippet = yaml.safe_load(text)
    params = parse_params(_merge(base, snippet), f"{page} block {index}").model_dump()

    def holds(have: object, want: object) -> bool:
        if isinstance(want, dict):
            return isinstance(have, dict) and all(k in have and holds(have[k], v) for k, v in want.items())
        if isinstance(want, list) and want and isinstance(want[0], dict):
            return isinstance(have, list) and len(have) == len(want) and all(map(holds, have, want))
        return have == want

    assert holds(params, snippet), (page, index)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "DVC_NO_ANALYTICS": "1",
        "HF_HUB_OFFLINE": "1",
        "PREFECT_HOME": str(home / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    }


def _wait_for(url: str, seconds: float = 120) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return True
        except OSError:
            time.sleep(1)
    return False


def _run_with_servers(text: str, cwd: Path, env: dict[str, str]) -> list[str]:
    """Run the block as a reader does in two terminals: a line starting a server (``gavil game``, or
    one ending in ``&``) runs in the background until its port answers; the other lines run in
    order in one shell, with the block's ``export`` lines. Returns the failures (empty: all ran)."""
    exports = [c for c in _commands(text) if c.startswith("export ")]
    failures, background = [], []
    try:
        for cmd in _commands(text):
            if cmd.startswith("export "):
                continue
            script = "\n".join([*exports, cmd.removesuffix("&").strip()])
            if cmd.startswith("gavil game") and not cmd.endswith("--help"):
                background.append(subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, start_new_session=True))
                port = re.search(r"--port (\d+)", cmd)
                if not _wait_for(f"http://127.0.0.1:{port.group(1) if port else 8765}/api/status"):
                    failures.append(f"{cmd}: never answered")
            elif cmd.endswith("&"):
                background.append(subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, start_new_session=True))
            else:
                r = subprocess.run(
                    ["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=900
                )
                if r.returncode != 0:
                    failures.append(f"{cmd}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    finally:
        for p in background:  # each server with what it started (its own process group)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
        if any(c.startswith("gavil server") for c in _commands(text)):
            subprocess.run(["bash", "-c", "\n".join([*exports, "gavil server --stop"])], cwd=cwd, env=env, timeout=120)
    return failures


@pytest.mark.slow
@pytest.mark.parametrize(
    ("page", "index", "lang", "text"),
    [(p, i, lang, t) for p, i, lang, t in blocks() if _kind(p, lang, t) == "sample"],
    ids=lambda v: v if isinstance(v, (str, int)) and not str(v).count("\n") else None,
)
def test_every_shell_and_python_block_runs_in_the_sample_project(page, index, lang, text, request, tmp_path):
    """Word for word, in a private copy of the built sample project (git, DVC cache and outputs): what a
    reader who ran the first set-up command has (a block that reads the export's dataset gets the
    sample built with the README's images, whose dataset has instances). A YAML block just above it on
    the same page (the edit it follows) is applied first."""
    import shutil

    env = _env(tmp_path)
    if "data/export/dataset" in text:
        sample_copy = shutil.copytree(request.getfixturevalue("export_build"), tmp_path / "proj")
    else:
        sample_copy = request.getfixturevalue("sample_copy")
    before = [t for p, i, lang_, t in blocks() if p == page and i == index - 1 and lang_ == "yaml"]
    if before:
        params = sample_copy / "params.yaml"
        params.write_text(yaml.safe_dump(_merge(yaml.safe_load(params.read_text()), yaml.safe_load(before[0]))))
    if lang == "python":
        r = subprocess.run(
            ["python", "-c", text], cwd=sample_copy, env=env, capture_output=True, text=True, timeout=600
        )
        assert r.returncode == 0, r.stderr[-3000:]
        return
    failures = _run_with_servers(text, sample_copy, env)
    assert not failures, failures


@pytest.mark.parametrize(
    ("page", "index", "text"), [(p, i, t) for p, i, lang, t in blocks() if _kind(p, lang, t) == "console"]
)
def test_every_console_transcript_prints_what_it_shows(page, index, text, tmp_path):
    """A transcript (``$ command`` then its output) run in a new project that has run nothing: its
    output is the one shown."""
    for name in ("params.yaml", "dvc.yaml"):
        (tmp_path / name).write_text((ROOT / name).read_text())
    lines = text.splitlines()
    cmd, shown = lines[0].removeprefix("$ "), [x for x in lines[1:] if x.strip()]
    r = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True)
    printed = [x for x in (r.stdout + r.stderr).splitlines() if x.strip()]
    assert printed == shown, (page, printed)
