"""A stage's code dependencies, derived: the in-tree files its module imports, transitively.

``dvc.yaml`` lists them as deps, so editing any source a stage runs re-runs that stage, and a
new import can never be forgotten (nothing is kept by hand). Imports are read from the source
with :mod:`ast` (no code is executed), including imports inside functions. Only modules of this
tree count (``gavil``, ``stages``, ``schemas``, ``flows``); a package import adds its ``__init__.py``.
Imports under ``if TYPE_CHECKING:`` never run, so they do not count. But the runner's own code
that shapes what a stage sees or writes is a dependency of every stage
(:data:`RUNNER_MODULES`): :mod:`gavil.params` parses the params a stage receives (its validators
and methods run inside the stage) even where the stage imports it for annotations only, and
:mod:`gavil.pipeline.metrics` shapes the metrics files the runner writes for it.

Params by section: the loader (:data:`PARAMS_LOADER`) imports every section's module to assemble
``Params``, but a stage sees only the values of the sections it reads, so the loader's imports of
section modules are not followed; instead each stage depends on the modules of the sections in
its :attr:`~gavil.pipeline.registry.StageSpec.sections` (``models`` included where it names a
model). Editing the ``game`` section's module re-runs only the stage that reads ``game.store_dir``.

The schema modules of the tables a stage reads and writes are added too: the catalog names
models as strings (``"schemas.ocr:Ocr"``) and imports them only when a table is read.

Data files that code reads and that change outputs (the int8 OCR detector's stored scales) are
declared by the module that reads them, ``__data_files__ = ("name.json",)`` at module level (string
literals, paths relative to the module's folder), and count as deps wherever that module does.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from gavil.pipeline import catalog

if TYPE_CHECKING:
    from gavil.pipeline.registry import StageSpec

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gavil", "stages", "schemas", "flows")
#: Modules the runner executes for every stage (params parsing): code deps of every stage.
RUNNER_MODULES = ("gavil.params", "gavil.pipeline.metrics")
#: The params loader: its imports of ``gavil.params.<section>`` modules are not followed (see above),
#: except :data:`PARAMS_SHARED`, the building blocks every section uses.
PARAMS_LOADER = "gavil.params"
PARAMS_SHARED = ("gavil.params.base",)


def module_file(module: str, root: Path = ROOT) -> Path | None:
    """The file of an in-tree module (``a.b`` -> ``a/b.py`` or ``a/b/__init__.py``), or None."""
    if module.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*module.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def _module_name(file: Path, root: Path) -> str:
    rel = file.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


@cache
def imports_of(file: Path, root: Path = ROOT) -> frozenset[str]:
    """In-tree modules ``file`` imports (absolute and relative, anywhere in the file)."""
    tree = ast.parse(file.read_text(), str(file))
    me = _module_name(file, root)
    package = me if file.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                mod = ".".join([*base, *([node.module] if node.module else [])])
            else:
                mod = node.module or ""
            found.add(mod)
            found |= {f"{mod}.{a.name}" for a in node.names}  # `from pkg import module`
    return frozenset(m for m in found if module_file(m, root) is not None)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """All nodes except those under ``if TYPE_CHECKING:`` (annotation-only imports)."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            todo += node.orelse
            continue
        todo += list(ast.iter_child_nodes(node))
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def closure(module: str, root: Path = ROOT) -> list[str]:
    """Every in-tree file ``module`` needs, as sorted paths relative to ``root``: its own file, the
    files it imports transitively, and the ``__init__.py`` of every package on the way."""
    start = module_file(module, root)
    if start is None:
        raise ModuleNotFoundError(f"{module} is not a module of this tree")
    seen: set[Path] = set()
    todo = [start]
    if start.name == "__init__.py" and module.startswith("stages."):  # a package stage: all of its modules
        todo += sorted(start.parent.rglob("*.py"))
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        name = _module_name(f, root)
        parts = name.split(".")
        for i in range(1, len(parts)):  # parent packages run their __init__ first
            init = module_file(".".join(parts[:i]), root)
            if init is not None:
                todo.append(init)
        todo += [p for m in imports_of(f, root) if not _section_of_loader(name, m) and (p := module_file(m, root))]
    data = {d for f in seen for d in data_files(f)}
    return sorted(str(p.relative_to(root)) for p in seen | data)


@cache
def data_files(file: Path) -> frozenset[Path]:
    """The files ``file``'s module-level ``__data_files__`` tuple names (relative to its folder).

    Raises:
        ValueError: ``__data_files__`` is not a tuple of string literals, or names a missing file.
    """
    tree = ast.parse(file.read_text(), str(file))
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not (isinstance(target, ast.Name) and target.id == "__data_files__"):
            continue
        names = [e.value for e in value.elts if isinstance(e, ast.Constant)] if isinstance(value, ast.Tuple) else []
        if (
            not isinstance(value, ast.Tuple)
            or len(names) != len(value.elts)
            or not all(isinstance(n, str) for n in names)
        ):
            raise ValueError(f"{file}: __data_files__ must be a tuple of string literals")
        out = frozenset(file.parent / str(n) for n in names)
        missing = sorted(str(f) for f in out if not f.is_file())
        if missing:
            raise ValueError(f"{file}: __data_files__ names missing files: {', '.join(missing)}")
        return out
    return frozenset()


def _section_of_loader(importer: str, module: str) -> bool:
    """Whether ``module`` is a section module imported by the params loader (not followed)."""
    return importer == PARAMS_LOADER and module.startswith(f"{PARAMS_LOADER}.") and module not in PARAMS_SHARED


def section_modules(spec: StageSpec) -> list[str]:
    """The modules of the params sections stage ``spec`` reads."""
    from gavil.params import SECTIONS

    return list(dict.fromkeys(SECTIONS[sec].__module__ for sec in spec.sections))


def code_deps(spec: StageSpec, root: Path = ROOT) -> list[str]:
    """The source files stage ``spec`` depends on: its module's import closure, the runner's
    modules, the modules of the params sections it reads, plus the schema modules (and their
    closures) of the tables it reads and writes."""
    files = set(closure(f"stages.{spec.name}", root))
    for module in (*RUNNER_MODULES, *section_modules(spec)):
        files |= set(closure(module, root))
    for name in (*spec.reads, *spec.writes):
        e = catalog.entry(name)
        if isinstance(e, catalog.Table):
            files |= set(closure(e.model.split(":")[0], root))
    own = [f for f in files if f.startswith(f"stages/{spec.name}")]
    return sorted(own) + sorted(files - set(own))
