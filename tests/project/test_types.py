"""Types that mean something: no new ``Any`` in a public signature.

Every public function and method (name without a leading underscore, or a public class's
``__init__``/``__call__``; in a public class, in a module of gavil/, stages/, schemas/ or flows/) is read with :mod:`ast`; one whose parameter or
return annotation names ``Any`` (``Any``, ``typing.Any``, also inside a string annotation) must
be listed in ``tests/project/any_allowlist.txt`` (``module:qualname``, one per line, ``#`` comments).
The list holds the ones that existed when the ratchet was set; it only shrinks: a new one fails,
and so does an entry that no longer uses ``Any`` (or no longer exists), so typing one also
removes it from the list.

``python tests/project/test_types.py`` prints the current entries (to reconcile the list after a merge:
the diff against the committed list must only remove lines).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # tests/project/ -> the project root
PACKAGES = ("gavil", "stages", "schemas", "flows")
ALLOWLIST = Path(__file__).resolve().parent / "any_allowlist.txt"
PUBLIC_DUNDERS = frozenset({"__init__", "__call__"})  # a public class's constructor and call are public too

HOW = (
    "type it: a concrete type (str, pd.DataFrame, a params model), a TypedDict or dataclass for a "
    "record, a Protocol for what is only called or read, a TypeVar for what is passed through, or "
    "`object` for a value only stored or compared"
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _names_any(node: ast.AST | None) -> bool:
    """Whether an annotation names ``Any`` (a string annotation is parsed; ``Literal[...]`` values are not)."""
    if node is None:
        return False
    if isinstance(node, ast.Name | ast.Attribute) and (node.id if isinstance(node, ast.Name) else node.attr) == "Any":
        return True
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _names_any(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name | ast.Attribute):
        name = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
        if name == "Literal":
            return False
    return any(_names_any(child) for child in ast.iter_child_nodes(node))


def _any_parts(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    a = fn.args
    params = [
        *a.posonlyargs,
        *a.args,
        *a.kwonlyargs,
        *([a.vararg] if a.vararg else []),
        *([a.kwarg] if a.kwarg else []),
    ]
    parts = [p.arg for p in params if _names_any(p.annotation)]
    return parts + (["return"] if _names_any(fn.returns) else [])


def _public_functions(
    body: list[ast.stmt], prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and (
            not node.name.startswith("_") or (prefix and node.name in PUBLIC_DUNDERS)
        ):
            yield prefix + node.name, node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from _public_functions(node.body, f"{prefix}{node.name}.")


def any_signatures() -> dict[str, list[str]]:
    """``module:qualname`` -> the parameters (and ``return``) whose annotation names Any."""
    found: dict[str, list[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            module = _module_name(path)
            if any(part.startswith("_") for part in module.split(".")):
                continue  # a private module
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for qualname, fn in _public_functions(tree.body):
                parts = _any_parts(fn)
                if parts:
                    found[f"{module}:{qualname}"] = parts
    return found


def allowed() -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in ALLOWLIST.read_text(encoding="utf-8").splitlines())
    return {line for line in lines if line}


def test_scanner_sees_any_in_every_place() -> None:
    src = """
from typing import Any
import typing
def a(x: Any) -> int: ...
def b(x: int) -> dict[str, Any]: ...
def c(*args: "list[Any]", **kw: int) -> None: ...
def d(x: typing.Any = None) -> None: ...
def e(x: Literal["Any"]) -> object: ...
def _private(x: Any) -> Any: ...
class K:
    def __init__(self, **kw: Any) -> None: ...
    def __repr__(self) -> Any: ...
    def m(self, y: int) -> Any: ...
    def _p(self, y: Any) -> None: ...
    class Inner:
        def n(self, *, z: Any) -> None: ...
class _Hidden:
    def m(self, y: Any) -> None: ...
"""
    fns = dict(_public_functions(ast.parse(src).body))
    assert {name: _any_parts(fn) for name, fn in fns.items()} == {
        "a": ["x"],
        "b": ["return"],
        "c": ["args"],
        "d": ["x"],
        "e": [],
        "K.__init__": ["kw"],
        "K.m": ["return"],
        "K.Inner.n": ["z"],
    }


def test_no_new_any_in_public_signatures() -> None:
    found = any_signatures()
    new = sorted(set(found) - allowed())
    assert not new, (
        "new Any in a public signature (tests/project/any_allowlist.txt only shrinks); "
        + HOW
        + ":\n"
        + "\n".join(f"  {name}: {', '.join(found[name])}" for name in new)
    )


def test_allowlist_only_shrinks() -> None:
    stale = sorted(allowed() - set(any_signatures()))
    assert not stale, (
        "no longer uses Any in its signature (or is gone): remove it from tests/project/any_allowlist.txt:\n"
        + ("\n".join(f"  {name}" for name in stale))
    )


if __name__ == "__main__":
    for name, parts in sorted(any_signatures().items()):
        sys.stdout.write(f"{name}  # {', '.join(parts)}\n")
