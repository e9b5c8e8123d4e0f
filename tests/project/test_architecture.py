"""How the files relate: stages are peers that share tables only by catalog name, dvc.yaml's code
deps come from the real imports, params are typed, and a user's mistake reads as a sentence."""

from __future__ import annotations

import ast
import graphlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.errors import ParamsError
from gavil.params import Params, load_params, parse_params
from gavil.pipeline import catalog
from gavil.pipeline.codedeps import closure, code_deps
from gavil.pipeline.dvc import dvc_stage
from gavil.pipeline.registry import STAGES
from gavil.pipeline.runner import run_stage
from tests.helpers import ROOT

STAGE_NAMES = {s.name for s in STAGES}


def _stage_files(name: str) -> list[Path]:
    pkg = ROOT / "stages" / name
    return sorted(pkg.rglob("*.py")) if pkg.is_dir() else [ROOT / "stages" / f"{name}.py"]


def _imported_modules(file: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(file.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


@pytest.mark.parametrize("name", sorted(STAGE_NAMES))
def test_stages_never_import_each_other(name):
    for f in _stage_files(name):
        others = {m for m in _imported_modules(f) if m.startswith("stages.")}
        bad = {m for m in others if m.split(".")[1] in STAGE_NAMES - {name}}
        assert not bad, f"{f.relative_to(ROOT)} imports other stages: {sorted(bad)}"


def test_the_library_schemas_and_flows_import_no_stage():
    """``gavil`` (the library), ``schemas`` (the contracts) and ``flows`` never import ``stages``: the
    registry loads a stage by name, so the arrows only point from the stages to the library."""
    for folder in ("gavil", "schemas", "flows"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            bad = {m for m in _imported_modules(f) if m == "stages" or m.startswith("stages.")}
            assert not bad, f"{f.relative_to(ROOT)} imports {sorted(bad)}: move the shared code into gavil/"


def test_the_stages_folder_holds_the_stages_and_nothing_else():
    """``stages/`` is one module or package per registered stage; everything shared lives in ``gavil/``."""
    entries = {p.name for p in (ROOT / "stages").iterdir() if p.name != "__pycache__"}
    expected = {"__init__.py"} | {n if (ROOT / "stages" / n).is_dir() else f"{n}.py" for n in STAGE_NAMES}
    assert entries == expected, f"not a stage: {sorted(entries - expected)}; missing: {sorted(expected - entries)}"


def _unit(module: str) -> str:
    """The package an import arrow counts for: ``gavil.<sub>``, ``stages.<stage>``, ``schemas``, ``flows``."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] in ("gavil", "stages") and len(parts) > 1 else parts[0]


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for top in ("gavil", "stages", "schemas", "flows"):
        for f in (ROOT / top).rglob("*.py"):
            rel = f.relative_to(ROOT).with_suffix("")
            me = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            for m in _imported_modules(f):
                if m.split(".")[0] in ("gavil", "stages", "schemas", "flows") and _unit(m) != _unit(me):
                    graph.setdefault(_unit(me), set()).add(_unit(m))
    return graph


def test_no_import_cycle_between_packages():
    """The import arrows between packages (each ``gavil`` sub-package or module, each stage,
    ``schemas``, ``flows``) form a DAG: a cycle is named with the arrows that close it."""
    graph = _package_graph()
    try:
        order = list(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        pytest.fail(f"import cycle between packages: {' -> '.join(e.args[1])}")
    assert {"gavil.pipeline", "gavil.params", "gavil.domain", "schemas"} <= set(order)


def test_the_cycle_check_sees_a_cycle(monkeypatch):
    """The check above can fail: a cycle planted in the graph is reported."""
    graph = _package_graph()
    graph.setdefault("gavil.domain", set()).add("gavil.game")
    with pytest.raises(graphlib.CycleError):
        list(graphlib.TopologicalSorter(graph).static_order())


def test_no_private_name_is_imported_from_another_module():
    """An underscore means private to one module: no ``from x import _name`` across modules."""
    for top in ("gavil", "stages", "schemas", "flows"):
        for f in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("gavil", "stages"):
                    bad = [a.name for a in node.names if a.name.startswith("_") and not a.asname]
                    assert not bad, f"{f.relative_to(ROOT)} imports private {bad} from {node.module}"


def test_generating_dvc_yaml_imports_no_stage_module():
    code = (
        "import sys; from gavil.pipeline.dvc import dvc_yaml; dvc_yaml(); "
        f"bad = [m for m in sys.modules if m.split('.')[0] == 'stages' and len(m.split('.')) > 1 "
        f"and m.split('.')[1] in {sorted(STAGE_NAMES)!r}]; print(bad); sys.exit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


_IMPORT = re.compile(r"^(\s*)(?:from|import)\s+((?:stages|schemas|flows)(?:\.\w+)*)(?:\s+import\s+\(?([\w, ]+))?", re.M)


def _runtime_imports(text: str) -> list[str]:
    """Modules named by import lines, leaving out those in an ``if TYPE_CHECKING:`` block."""
    lines = text.splitlines()
    out = []
    for m in _IMPORT.finditer(text):
        line_no = text[: m.start()].count("\n")
        indent = len(m.group(1))
        block = next((ln for ln in reversed(lines[:line_no]) if ln.strip() and len(ln) - len(ln.lstrip()) < indent), "")
        if indent and "TYPE_CHECKING" in block:
            continue
        out += [m.group(2)] + [f"{m.group(2)}.{n.strip()}" for n in (m.group(3) or "").split(",") if n.strip()]
    return out


@pytest.mark.parametrize("name", sorted(STAGE_NAMES))
def test_dvc_yaml_lists_every_in_tree_import_of_a_stage(name):
    """Independent of codedeps' AST walk: every stages./schemas. module named in an import line of
    the stage's files (or of a file they import) must be a dep in the committed dvc.yaml."""
    deps = set(yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][name]["deps"])
    todo, seen = list(_stage_files(name)), set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        assert str(f.relative_to(ROOT)) in deps, f"{f.relative_to(ROOT)} missing from dvc.yaml deps of {name}"
        for mod in _runtime_imports(f.read_text()):
            base = ROOT.joinpath(*mod.split("."))
            todo += [c for c in (base.with_suffix(".py"), base / "__init__.py") if c.is_file()]


def test_code_deps_follow_a_new_import(tmp_path):
    """Derived, not hand-kept: a module that gains an import gains the dep."""
    for pkg in ("stages", "schemas"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "stages" / "helper.py").write_text("X = 1\n")
    (tmp_path / "stages" / "late.py").write_text("Y = 2\n")
    (tmp_path / "stages" / "typing_only.py").write_text("Z = 3\n")
    (tmp_path / "stages" / "mystage.py").write_text(
        "from typing import TYPE_CHECKING\nfrom stages.helper import X\n"
        "if TYPE_CHECKING:\n    from stages.typing_only import Z\n"
        "def f():\n    from stages import late\n    return late\n"
    )
    got = closure("stages.mystage", tmp_path)
    assert got == ["stages/__init__.py", "stages/helper.py", "stages/late.py", "stages/mystage.py"]


def test_a_declared_data_file_is_a_dep_wherever_its_module_is(tmp_path):
    """``__data_files__`` (the int8 OCR scales' way in): editing the file re-runs the stages that
    import its module; a name that is no file, or no literal, is refused, not skipped."""
    for pkg in ("stages", "gavil"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "gavil" / "scales.json").write_text("{}")
    (tmp_path / "gavil" / "model.py").write_text('__data_files__ = ("scales.json",)\n')
    (tmp_path / "stages" / "mystage.py").write_text("def f():\n    from gavil import model\n")
    (tmp_path / "stages" / "other.py").write_text("X = 1\n")
    assert "gavil/scales.json" in closure("stages.mystage", tmp_path)
    assert "gavil/scales.json" not in closure("stages.other", tmp_path)
    (tmp_path / "gavil" / "model2.py").write_text('__data_files__ = ("gone.json",)\n')
    (tmp_path / "stages" / "bad.py").write_text("from gavil import model2\n")
    with pytest.raises(ValueError, match="missing files"):
        closure("stages.bad", tmp_path)
    (tmp_path / "gavil" / "model3.py").write_text("NAME = 'x.json'\n__data_files__ = (NAME,)\n")
    (tmp_path / "stages" / "bad3.py").write_text("from gavil import model3\n")
    with pytest.raises(ValueError, match="string literals"):
        closure("stages.bad3", tmp_path)
    shipped = next(s for s in STAGES if s.name == "ocr_filter")
    assert "gavil/models/craft_int8_qparams.json" in code_deps(shipped)


def test_every_catalog_table_has_a_model_and_one_writer():
    writers: dict[str, list[str]] = {}
    for s in STAGES:
        for w in s.writes:
            catalog.entry(w)
            writers.setdefault(w, []).append(s.name)
        for r in s.reads:
            catalog.entry(r)
    assert all(len(v) == 1 for v in writers.values()), writers
    for t in catalog.TABLES:
        assert t.schema().__name__ == t.model.split(":")[1]
        assert t.name in writers, f"{t.name} is written by no stage"
        assert (ROOT / t.schema_file).is_file()


# ------------------------------------------------------------------------------------ function budget
#: The most lines a function or method may take, from its ``def`` (decorators excluded) to its last
#: line, docstring included. A file may be as long as its cohesive content; a function may not.
FUNCTION_BUDGET = 80

#: ``"path:qualified.name": "reason"`` for a function allowed past the budget: at most three, each
#: with a reason a reviewer can check. An entry that no longer exceeds the budget (or no longer
#: exists) fails the test, so the list only ever shrinks.
FUNCTION_BUDGET_ALLOWED: dict[str, str] = {}


def _function_lengths(file: Path, rel: str) -> dict[str, tuple[int, int]]:
    """``{"rel:qualified.name": (def line, length)}`` for every function and method in ``file``, sync
    or async, nested ones included (``outer.<locals>.inner``, as Python's ``__qualname__``); the
    length is ``end_lineno - lineno + 1`` of the ``def`` node, so decorators do not count and the
    docstring does."""
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                found[f"{rel}:{name}"] = (child.lineno, child.end_lineno - child.lineno + 1)
                visit(child, f"{name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(file.read_text(), filename=str(file)), "")
    return found


def _budget_problems(
    lengths: dict[str, tuple[int, int]], allowed: dict[str, str], budget: int = FUNCTION_BUDGET
) -> list[str]:
    """One sentence per function over ``budget`` that ``allowed`` does not name, and per stale entry
    of ``allowed`` (its function is gone, or now fits)."""
    problems = [
        f"{key.split(':')[0]}:{line}: {key.split(':')[1]} is {n} lines (budget {budget}, def to last line, "
        "docstring included): split it along its seams into named, typed, documented helpers; "
        "never cut a docstring"
        for key, (line, n) in sorted(lengths.items())
        if n > budget and key not in allowed
    ]
    for key in sorted(allowed):
        if key not in lengths:
            problems.append(f"allow-list entry {key!r} names no function: remove it")
        elif lengths[key][1] <= budget:
            problems.append(f"allow-list entry {key!r} is {lengths[key][1]} lines, within budget: remove it")
    return problems


def _source_function_lengths() -> dict[str, tuple[int, int]]:
    lengths: dict[str, tuple[int, int]] = {}
    for folder in ("gavil", "stages", "schemas", "flows"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            lengths |= _function_lengths(f, f.relative_to(ROOT).as_posix())
    return lengths


def test_every_function_fits_the_budget():
    """Every function and method in gavil/, stages/, schemas/ and flows/ is at most
    ``FUNCTION_BUDGET`` lines, except the few allowed with a reason; a stale allowance fails too."""
    assert len(FUNCTION_BUDGET_ALLOWED) <= 3, "at most three functions may be allowed past the budget"
    assert all(reason.strip() for reason in FUNCTION_BUDGET_ALLOWED.values()), "every allowance needs its reason"
    problems = _budget_problems(_source_function_lengths(), FUNCTION_BUDGET_ALLOWED)
    assert not problems, "\n".join(problems)


def test_the_function_budget_sees_a_long_function(tmp_path):
    """The check can fail: planted long functions (a decorated one, an async method, a function nested
    in it) are measured by the same helper and named with file, line, qualified name and length."""

    def lines(indent: int, n: int) -> list[str]:
        return [f"{' ' * indent}x{i} = {i}" for i in range(n)]

    src = ["import functools", "", "", "@functools.cache", "def long():", *lines(4, FUNCTION_BUDGET)]
    src += ["", "", "class C:", "    async def method(self):", '        """Doc."""', "", "        def inner():"]
    src += lines(12, FUNCTION_BUDGET)
    (tmp_path / "planted.py").write_text("\n".join(src) + "\n")
    lengths = _function_lengths(tmp_path / "planted.py", "planted.py")
    method_line = 5 + FUNCTION_BUDGET + 4
    assert lengths == {
        "planted.py:long": (5, FUNCTION_BUDGET + 1),  # the decorator does not count
        "planted.py:C.method": (method_line, FUNCTION_BUDGET + 4),  # the docstring does
        "planted.py:C.method.<locals>.inner": (method_line + 3, FUNCTION_BUDGET + 1),
    }
    problems = _budget_problems(lengths, {})
    assert [p.split(" (budget")[0] for p in problems] == [
        f"planted.py:{method_line}: C.method is {FUNCTION_BUDGET + 4} lines",
        f"planted.py:{method_line + 3}: C.method.<locals>.inner is {FUNCTION_BUDGET + 1} lines",
        f"planted.py:5: long is {FUNCTION_BUDGET + 1} lines",
    ]
    assert all("split it along its seams" in p and "never cut a docstring" in p for p in problems)
    assert _budget_problems(lengths, dict.fromkeys(lengths, "planted")) == []


def test_a_stale_allowance_fails(tmp_path):
    """An allow-list entry whose function now fits, or no longer exists, is a problem to remove."""
    lengths = {"a.py:short": (1, 10), "a.py:long": (20, FUNCTION_BUDGET + 5)}
    problems = _budget_problems(lengths, {"a.py:long": "r", "a.py:short": "r", "a.py:gone": "r"})
    assert problems == [
        "allow-list entry 'a.py:gone' names no function: remove it",
        "allow-list entry 'a.py:short' is 10 lines, within budget: remove it",
    ]


def test_no_fmt_skip_crutches():
    crutch = "fmt" + ": skip"
    for folder in ("gavil", "stages", "flows", "schemas", "tests", "benchmarks"):
        for f in (ROOT / folder).rglob("*.py"):
            assert crutch not in f.read_text(), f


# --------------------------------------------------------------------------------------------- access
def test_reading_an_undeclared_table_is_an_error(in_tmp):
    pd.DataFrame({"concept": ["cat"], "status": ["ok"], "reason": [None]}).pipe(catalog.write_table, "concept_filter")
    with catalog.stage_access("build_instances", ("ocr",), ("candidate_sets",)):
        with pytest.raises(catalog.UndeclaredAccess, match="concept_filter"):
            catalog.read_table("concept_filter")
        with pytest.raises(catalog.UndeclaredAccess, match="writes 'swow_instances'"):
            catalog.write_table(pd.DataFrame(), "swow_instances")
    assert len(catalog.read_table("concept_filter")) == 1  # outside a stage run: no check


@pytest.mark.slow
def test_a_stage_run_out_of_order_names_the_stage_to_run_first(in_tmp):
    with pytest.raises(catalog.MissingInput, match=r"dvc repro select_instances"):
        run_stage("export", ROOT / "params.yaml")
    assert not (in_tmp / "data/export").exists()


def test_dvc_yaml_outputs_never_overlap_and_model_caches_stay_local():
    for s in STAGES:
        entry = dvc_stage(s, Params())
        outs = [o if isinstance(o, str) else next(iter(o)) for o in entry["outs"]]
        for a in outs:
            assert not any(a != b and Path(a).is_relative_to(b) for b in outs), (s.name, a)
    ocr = dvc_stage(next(s for s in STAGES if s.name == "ocr_filter"), Params())
    # model-output caches hold this CPU's float32 numerics: never hashed in dvc.lock
    every_out = {o if isinstance(o, str) else next(iter(o)) for s in STAGES for o in dvc_stage(s, Params())["outs"]}
    assert not [p for p in every_out if p.startswith("data/cache/")], every_out
    assert "data/ocr/ocr.parquet" in ocr["outs"]
    select = dvc_stage(next(s for s in STAGES if s.name == "select_instances"), Params())
    assert {"data/ledger/benchmark_ids.parquet": {"persist": True, "cache": False}} in select["outs"]  # in git
    assert "gavil/progress.py" in code_deps(next(s for s in STAGES if s.name == "ocr_filter"))


# --------------------------------------------------------------------------------------------- params
def test_params_yaml_equals_the_typed_defaults():
    assert load_params(ROOT / "params.yaml") == Params()


@pytest.mark.parametrize(
    ("section", "key", "value", "expect"),
    [
        ("select", "min_solver_jacard", 0.8, "did you mean select.min_solver_jaccard"),
        ("ocr", "match_treshold", 80, "did you mean ocr.match_threshold"),
        ("ocr", "match_threshold", 0.8, "looks like a fraction: write 80"),
        ("select", "min_solver_jaccard", 80, "looks like a percent: write 0.8"),
        ("ocr", "min_confidence", 30, "looks like a percent: write 0.3"),
        ("select", "min_solvers", 0, "greater than or equal to 1"),
        ("select", "min_solvers", 2.5, "valid integer"),
        ("crawl", "source", "google", "use bing"),
        ("instances", "game_sets", {7: 1}, "among (5, 6, 10, 12)"),
        ("ingest", "lowercase", "yes", "valid boolean"),
    ],
)
def test_bad_params_are_refused_naming_the_key(section, key, value, expect):
    with pytest.raises(ParamsError) as e:
        parse_params({section: {key: value}})
    assert expect in str(e.value) and f"{section}.{key}" in str(e.value)
    assert len(str(e.value).splitlines()) <= 3


def test_nested_unknown_keys_and_sections_are_refused():
    with pytest.raises(ParamsError, match=r"crawl\.per_host\.delay_s"):
        parse_params({"crawl": {"per_host": {"delay": 1}}})
    with pytest.raises(ParamsError, match="did you mean select"):
        parse_params({"selct": {}})
    with pytest.raises(ParamsError, match=r"models\.m.*set 'pretrained'"):
        parse_params({"models": {"m": {"kind": "open_clip", "model": "RN50"}}})


def test_runtime_knobs_are_not_stage_params():
    p = load_params(ROOT / "params.yaml")
    params = {k for s in STAGES for k in s.param_keys(p)}
    knobs = ["crawl.threads", "crawl.partition_size", "crawl.per_host", "ocr.batch_size", "ocr.partition_size"]
    knobs += ["models.rival.batch_size", "models.rival.threads", "models.rival.loader_workers", "score.partition_size"]
    for knob in knobs:
        assert knob not in params
    assert {"ocr.match_threshold", "select.min_solver_jaccard", "score.model", "models.rival.precision"} <= params
    assert not any(k.startswith(("prefect", "game.host", "models.rival.batch")) for k in params)


# --------------------------------------------------------------------------------------------- CLI
def _gavil(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    gavil = Path(sys.executable).parent / "gavil"
    return subprocess.run(
        [str(gavil), *args], cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )


@pytest.mark.slow
def test_cli_mistakes_print_a_few_lines_with_the_fix_and_no_traceback(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["select"]["min_solver_jacard"] = params["select"].pop("min_solver_jaccard")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    cases = {
        ("stage", "select_instances"): "did you mean select.min_solver_jaccard",
        ("stage", "selct_instances"): "unknown stage 'selct_instances'",
    }
    for args, expect in cases.items():
        out = _gavil(list(args), tmp_path)
        assert out.returncode == 2 and expect in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) <= 4, out.stderr
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    out = _gavil(["stage", "export"], tmp_path)
    assert out.returncode == 2 and "run `dvc repro select_instances`" in out.stderr and "Traceback" not in out.stderr
    debug = _gavil(["--debug", "stage", "export"], tmp_path)
    assert debug.returncode != 0 and "Traceback" in debug.stderr
    assert "Traceback" in _gavil(["stage", "export"], tmp_path, GAVIL_DEBUG="1").stderr


# ------------------------------------------------------------------------------- each stage's params
def _committed_deps() -> dict[str, list[str]]:
    return {n: s["deps"] for n, s in yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"].items()}


def test_the_game_is_a_code_dep_of_at_most_the_stage_that_imports_it():
    """Editing the game's params model or the game's store re-runs at most import_annotations (it
    reads game.store_dir and imports the store); editing the web app re-runs no stage."""
    for name, deps in _committed_deps().items():
        game = [d for d in deps if d == "gavil/params/game.py" or d.startswith("gavil/gamestore/")]
        assert not game or name == "import_annotations", (name, game)


def test_no_stage_depends_on_the_game_app():
    """No stage's code deps hold a file of the web app (``gavil/game/``), nor the models its rival
    loads: how the game serves never makes the import stale (docs/game.md "Three rooms")."""
    for name, deps in _committed_deps().items():
        app = [d for d in deps if d.startswith("gavil/game/")]
        assert not app, (name, app)
    deps = _committed_deps()["import_annotations"]
    assert "gavil/gamestore/store.py" in deps and "gavil/domain/gold.py" in deps
    assert not [d for d in deps if d.startswith("gavil/models/")], deps


def test_the_store_imports_nothing_of_the_app_or_of_http():
    """The store package (``gavil/gamestore/``) knows SQL, not HTTP: no import of ``gavil.game``,
    starlette, fastapi or uvicorn in any of its modules (imports inside functions included)."""
    banned = ("gavil.game", "starlette", "fastapi", "uvicorn")
    files = sorted((ROOT / "gavil/gamestore").glob("*.py"))
    assert files
    for f in files:
        bad = [m for m in _imported_modules(f) if m in banned or m.startswith(tuple(b + "." for b in banned))]
        assert not bad, (f.name, bad)


def test_the_rules_the_game_and_the_import_share_are_http_free():
    """The shared rules in ``gavil/domain/`` import neither the game, nor its store, nor a web library."""
    for name in ("rules", "gold", "leases", "flags"):
        found = _imported_modules(ROOT / f"gavil/domain/{name}.py")
        bad = [m for m in found if m.startswith(("gavil.game", "starlette", "fastapi", "uvicorn"))]
        assert not bad, (name, bad)


def test_importing_the_game_package_loads_nothing():
    """``import gavil.game`` in a fresh interpreter loads no other module of the project: the
    package is a docstring; start-up code is ``gavil.game.launch``."""
    code = (
        "import sys, gavil.game; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('gavil', 'schemas', 'stages', 'flows')))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['gavil', 'gavil.game']", done.stdout


def test_nothing_outside_the_app_imports_it():
    """Only the app itself, the CLI, flows, benchmarks and tests import ``gavil.game``: no stage, no
    schema, no other library module (the store and the rules included)."""
    allowed = {"gavil/cli.py"}
    for f in sorted(
        [*(ROOT / "gavil").rglob("*.py"), *(ROOT / "stages").rglob("*.py"), *(ROOT / "schemas").rglob("*.py")]
    ):
        rel = f.relative_to(ROOT).as_posix()
        if rel.startswith("gavil/game/") or rel in allowed:
            continue
        bad = [m for m in _imported_modules(f) if m == "gavil.game" or m.startswith("gavil.game.")]
        assert not bad, (rel, bad)


def test_a_stages_params_modules_are_those_of_the_sections_it_reads():
    """The loader and the shared building blocks are deps of every stage; a section's module only of
    the stages whose StageSpec.params read the section (``models`` where a section names a model)."""
    from gavil.params import SECTIONS

    for s in STAGES:
        modules = {d for d in _committed_deps()[s.name] if d.startswith("gavil/params/")}
        own = {SECTIONS[sec].__module__.replace(".", "/") + ".py" for sec in s.sections}
        assert modules == {"gavil/params/__init__.py", "gavil/params/base.py"} | own, s.name
    by_name = {s.name: s for s in STAGES}
    assert by_name["ocr_filter"].sections == ["ocr", "review"] and by_name["aflite"].sections == ["aflite", "models"]


def test_a_models_entry_is_a_param_of_exactly_the_stages_whose_sections_name_it():
    """A key added to an entry becomes a dvc.yaml param of the stages that name the entry, and of no other."""
    p = load_params(ROOT / "params.yaml")
    # text-mpnet: no default stage names it
    users = {"rival": {"score_candidates", "adversarial_filter", "safety_score"}, "text-mpnet": set()}
    users["text-minilm-l6"] = {"adversarial_filter", "aflite", "evaluate"}
    for name, stages in users.items():
        key = f"models.{name}.cache_dir"
        before = {s.name for s in STAGES if key in s.param_keys(p)}
        edited = p.replace(models={name: {"cache_dir": "/elsewhere"}})  # written now: a param
        assert {s.name for s in STAGES if key in s.param_keys(edited)} == stages, name
        assert before == (stages if name == "rival" else set()), name  # text entries leave it out


def test_gavil_stage_refuses_when_dvc_yaml_names_other_models(tmp_path, monkeypatch):
    """A changed reference (aflite.model) leaves the committed dvc.yaml listing the old entry's keys:
    the runner refuses with the fix instead of running params DVC does not track."""
    from gavil.pipeline.dvc import check_stage_params, write_dvc_yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    shipped = load_params(ROOT / "params.yaml")
    check_stage_params("aflite", shipped)  # as committed: fine
    other = shipped.replace(aflite={"model": "text-mpnet"})
    with pytest.raises(ParamsError, match=r"does not list models\.text-mpnet\.kind .*run `gavil dvc-yaml --write`"):
        check_stage_params("aflite", other)
    check_stage_params("score_candidates", other)  # its params did not change
    with pytest.raises(ParamsError, match=r"still lists models\.clip-vit-b-32\.kind for stage evaluate"):
        check_stage_params("evaluate", shipped.replace(evaluate={"models": ["clip-rn50"]}))
    write_dvc_yaml(tmp_path / "dvc.yaml", other)
    check_stage_params("aflite", other)
    with pytest.raises(ParamsError, match=r"does not list models\.text-minilm-l6\.kind"):
        check_stage_params("aflite", shipped)


def test_an_outside_input_inside_a_code_folder_is_still_told_from_code(tmp_path, monkeypatch):
    """The runner's check splits dvc.yaml's deps into code and outside inputs by folder first; an input
    file that lives under a code package (stages/, gavil/) is still an input: listed, it passes; a
    dvc.yaml that lists another one refuses, naming it."""
    from gavil.pipeline.dvc import check_stage_params, write_dvc_yaml

    monkeypatch.chdir(tmp_path)
    shipped = load_params(ROOT / "params.yaml")
    for inside in ("stages/my_swow.csv", "gavil/data/swow.tsv"):
        moved = shipped.replace(ingest={"path": inside})
        write_dvc_yaml(tmp_path / "dvc.yaml", moved)
        check_stage_params("ingest_concepts", moved)
        with pytest.raises(ParamsError, match=rf"lists '{inside}' as an input of stage ingest_concepts where"):
            check_stage_params("ingest_concepts", shipped)
        write_dvc_yaml(tmp_path / "dvc.yaml", shipped)
        with pytest.raises(ParamsError, match=rf"where params.yaml names '{inside}'"):
            check_stage_params("ingest_concepts", moved)


@pytest.mark.parametrize("key", ["score.weights_path", "score.precision", "evaluate.precision"])
def test_a_key_moved_into_the_models_section_says_where_it_went(key):
    section, name = key.split(".")
    with pytest.raises(ParamsError, match=rf"{key} moved into the models: section: set models\[{section}\.model"):
        parse_params({section: {name: "x"}})


# --------------------------------------------------------------------------------------------- rooms
def test_every_import_arrow_between_rooms_is_declared_and_every_declared_arrow_is_used():
    """gavil/rooms.py declares the rooms and the arrows between them (drawn as docs/rooms.svg); the
    code's real imports must make exactly those arrows: a new arrow is declared (and drawn) or removed."""
    from gavil.rooms import ARROWS, ROOMS, import_arrows

    real = import_arrows(ROOT)
    undeclared = {a: ex for a, ex in real.items() if a not in ARROWS}
    assert not undeclared, f"import arrows not declared in gavil/rooms.py ARROWS: {undeclared}"
    stale = sorted(ARROWS - set(real))
    assert not stale, f"declared arrows no import makes any more (remove them from ARROWS): {stale}"
    assert {r for a in ARROWS for r in a} <= set(ROOMS)
    order = list(ROOMS)
    assert all(order.index(a) < order.index(b) for a, b in ARROWS), "ROOMS lists an importer after what it imports"


def test_the_rooms_check_sees_an_undeclared_arrow(tmp_path):
    """The check above can fail: a store module that imports the web app is an undeclared arrow."""
    from gavil.rooms import ARROWS, import_arrows

    (tmp_path / "gavil" / "gamestore").mkdir(parents=True)
    (tmp_path / "gavil" / "gamestore" / "bad.py").write_text("from gavil.game.web import create_app\n")
    real = import_arrows(tmp_path)
    assert ("gavil.gamestore", "gavil.game") in real and ("gavil.gamestore", "gavil.game") not in ARROWS
