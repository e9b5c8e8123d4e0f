"""The test suite's own rules (docs/architecture.md, Tooling): a test that builds a project or starts a
server is marked ``slow``, so that ``pytest -m "not slow"`` stays a quick loop, and every test has a timeout.

The rule is checked on what the tests' code does, not on a list: :func:`heavy_code` reads every
fixture and test in ``tests/`` (and the module's own helpers they call) for what builds a project
(``dvc repro``, a stage run, ``gavil stage``, the built sample) or starts a server (uvicorn,
``gavil game``/``server``/``serve``, Prefect's test server, a Dask cluster, Chromium, the servers of
tests/stages/crawl_images/hostile_web.py); a collection in a subprocess (:func:`pytest_collection_finish`, loaded with
``-p``) then says which fixtures each test really uses and how it is marked.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT

TESTS = ROOT / "tests"
#: The environment variable that makes :func:`pytest_collection_finish` write its report (a JSON path).
PROBE = "GAVIL_TEST_SUITE_PROBE"
#: Names whose use builds a project or starts a server, and what they do.
HEAVY_NAMES = {
    "build_sample": "builds the sample project (dvc repro)",
    "build_export": "runs the stages up to export",
    "copy_project": "copies a built project",
    "run_stage": "runs a stage",
    "run_stages": "runs stages",
    "serve_app": "serves an app with uvicorn",
    "uvicorn": "serves an app with uvicorn",
    "sync_playwright": "starts Chromium",
    "prefect_test_harness": "starts a Prefect server",
    "LocalCluster": "starts a Dask cluster",
    "HostileWeb": "starts tests/stages/crawl_images/hostile_web.py's server",
    "SilentServer": "starts tests/stages/crawl_images/hostile_web.py's silent server",
    "readme_prefect_block": "runs the README's Prefect block: a Prefect server, `gavil serve`",
}
#: ``gavil`` subcommands that build (``stage``) or start a server, in a command list.
HEAVY_COMMANDS = {"stage", "game", "server", "serve"}


def _command_heavy(node: ast.List | ast.Tuple) -> str | None:
    """What a command literal (``["dvc", "repro"]``, ``[gavil, "game", "--port", ...]``) builds or
    starts, or None."""
    words = [e.value if isinstance(e, ast.Constant) and isinstance(e.value, str) else ast.unparse(e) for e in node.elts]
    if "repro" in words:
        return "runs dvc repro"
    if words[:2] in (["dask", "scheduler"], ["dask", "worker"]):
        return "starts a Dask cluster"
    if words[:1] == ["stage"]:  # the arguments of a gavil runner: CliRunner().invoke(app, [...]) or a helper
        return "runs gavil stage"
    for i, w in enumerate(words[:-1]):
        nxt, after = words[i + 1], words[i + 2] if i + 2 < len(words) else "-"
        if not (w == "gavil.cli" or re.search(r"\bgavil'?\)?$", w)) or nxt not in HEAVY_COMMANDS:
            continue
        if after == "--stop" or (nxt == "game" and not after.startswith("-")):  # a stop; `game hits` serves nothing
            continue
        return f"runs gavil {nxt}"
    return None


def _direct_reasons(fn: ast.AST, heavy_fixtures: set[str]) -> set[str]:
    """What ``fn``'s own code builds or starts (its nested functions included)."""
    found = set()
    for node in ast.walk(fn):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name in HEAVY_NAMES:
            found.add(f"{name}: {HEAVY_NAMES[name]}")
        if isinstance(node, ast.List | ast.Tuple) and (why := _command_heavy(node)):
            found.add(why)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "getfixturevalue":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and arg.value in heavy_fixtures:
                found.add(f"getfixturevalue({arg.value!r})")
    return found


def _is_fixture(fn: ast.FunctionDef) -> bool:
    return any("fixture" in ast.unparse(d) for d in fn.decorator_list)


def heavy_code(folder: Path = TESTS) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """``(fixtures, tests)``: every fixture and every test function in ``folder`` whose code, or a
    module-level function of its module that it calls (transitively), builds a project or starts a
    server, as ``"<module>.<name>"`` -> what it does. Fixtures it depends on are not followed here:
    pytest's own closure does that (:func:`pytest_collection_finish`)."""
    heavy_fixture_names: set[str] = set()
    fixtures: dict[str, set[str]] = {}
    tests: dict[str, set[str]] = {}
    modules = [p for p in sorted(folder.rglob("test_*.py")) if p.name != Path(__file__).name]  # not these rules
    modules.append(folder / "conftest.py")
    for _ in range(2):  # a getfixturevalue of a heavy fixture needs the fixtures known: two passes
        for path in modules:
            tree = ast.parse(path.read_text(), str(path))
            funcs: dict[str, ast.FunctionDef] = {}
            for node in tree.body:
                inner = node.body if isinstance(node, ast.ClassDef) else [node]
                funcs |= {f.name: f for f in inner if isinstance(f, ast.FunctionDef)}
            reasons = {name: _direct_reasons(f, heavy_fixture_names) for name, f in funcs.items()}
            calls = {
                name: {n.func.id for n in ast.walk(f) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                for name, f in funcs.items()
            }
            changed = True
            while changed:  # through the module's own helpers
                changed = False
                for name in funcs:
                    for callee in calls[name] & funcs.keys():
                        new = {f"{callee}() -> {r}" for r in reasons[callee]} - reasons[name]
                        if new and not any(r.startswith(f"{callee}() ->") for r in reasons[name]):
                            reasons[name] |= new
                            changed = True
            for name, f in funcs.items():
                if not reasons[name]:
                    continue
                key = f"{path.stem}.{name}"
                if _is_fixture(f):
                    fixtures[key] = reasons[name]
                    heavy_fixture_names.add(name)
                elif name.startswith("test_"):
                    tests[key] = reasons[name]
    return fixtures, tests


def pytest_collection_finish(session: pytest.Session) -> None:
    """With :data:`PROBE` set (this module loaded as a plugin: ``-p tests.project.test_test_suite``), write what
    each collected test uses and how it is marked: nodeid, ``<module>.<function>``, the fixtures it
    uses directly or through others as ``<module>.<fixture>``, slow, its timeout mark, and the ini
    timeout."""
    out = os.environ.get(PROBE)
    if not out:
        return
    rows: list[dict[str, Any]] = []
    for item in session.items:
        info = getattr(item, "_fixtureinfo", None)
        fixtures = [
            f"{defs[-1].func.__module__.rpartition('.')[2]}.{name}"
            for name, defs in (info.name2fixturedefs.items() if info else [])
        ]
        timeout = item.get_closest_marker("timeout")
        module = getattr(item, "module", None)
        rows.append(
            {
                "nodeid": item.nodeid,
                "test": f"{module.__name__.rpartition('.')[2] if module else ''}.{getattr(item, 'originalname', item.name)}",
                "fixtures": fixtures,
                "slow": item.get_closest_marker("slow") is not None,
                "timeout": timeout.args[0] if timeout and timeout.args else None,
            }
        )
    Path(out).write_text(json.dumps({"items": rows, "ini_timeout": session.config.getini("timeout")}))


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every test of ``tests/`` as a collection in a subprocess reports it (:func:`pytest_collection_finish`)."""
    out = tmp_path_factory.mktemp("probe") / "items.json"
    cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", __name__, "tests"]
    done = subprocess.run(
        cmd, cwd=ROOT, env={**os.environ, PROBE: str(out)}, capture_output=True, text=True, timeout=600
    )
    assert out.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(out.read_text())
    assert len(report["items"]) > 500, done.stdout[-3000:]
    return report


def test_the_scan_finds_the_known_heavy_fixtures_and_tests():
    """The scan is not vacuous: it finds the built sample, the browser, uvicorn, `gavil game`, and a
    test that builds inline."""
    fixtures, tests = heavy_code()
    for key in ("conftest.sample_build", "conftest.export_build", "conftest.browser", "test_game_limits.server"):
        assert key in fixtures, sorted(fixtures)
    assert "test_empty_project.test_every_stage_runs_on_empty_inputs" in tests, sorted(tests)
    assert "test_game.test_kill_9_loses_no_acknowledged_submission" in tests, sorted(tests)
    assert "conftest.in_tmp" not in fixtures and "conftest.http_server" not in fixtures  # cheap ones stay cheap


def test_every_test_that_builds_a_project_or_starts_a_server_is_slow(collected):
    """A test using a heavy fixture (through any other fixture), or whose own code builds or serves,
    carries the ``slow`` mark, so ``pytest -m "not slow"`` deselects it."""
    fixtures, tests = heavy_code()
    offenders = []
    for item in collected["items"]:
        why = [f"{f} ({'; '.join(sorted(fixtures[f]))})" for f in item["fixtures"] if f in fixtures]
        why += sorted(tests.get(item["test"], ()))
        if why and not item["slow"]:
            offenders.append(f"{item['nodeid']}: {', '.join(why)}")
    assert not offenders, (
        "mark these @pytest.mark.slow (or list the fixture in tests/conftest.py HEAVY_FIXTURES):\n"
        + "\n".join(offenders)
    )


def test_every_test_has_a_timeout_and_slow_ones_a_longer_one(collected):
    """pytest-timeout's ini ``timeout`` covers every test; a slow test carries a timeout mark above it."""
    ini = float(collected["ini_timeout"] or 0)
    assert ini > 0
    short = [i["nodeid"] for i in collected["items"] if i["slow"] and not (i["timeout"] and i["timeout"] > ini)]
    assert not short, short
