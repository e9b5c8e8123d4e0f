"""The project's rooms and the import arrows allowed between them, declared once and held against the code.

A room is a folder or a group of modules with one role (:data:`ROOMS`). :data:`ARROWS` declares which
room may import which: ``tests/project/test_architecture.py`` computes the real arrows from every import in
``gavil/``, ``stages/``, ``schemas/`` and ``flows/`` (:func:`import_arrows`, read with :mod:`ast`,
imports inside functions included) and fails on an arrow that is not declared, and on a declared
arrow that no import uses any more, so this table, and the picture drawn from it
(:func:`gavil.figures.rooms_svg`, ``docs/rooms.svg`` on ``docs/architecture.md``), always tell the code as it is.

The collection game is three rooms: the store (``gavil.gamestore``: SQL, no HTTP), the rules
(``gavil.domain``: pure functions the game and the import both apply) and the web app
(``gavil.game``), which only the command line imports.
"""

from __future__ import annotations

import ast
from pathlib import Path

#: room -> what it holds (top to bottom: every arrow points down, from the importer to the imported).
ROOMS: dict[str, str] = {
    "gavil tools": "gavil/cli.py, query.py, report.py, docs.py, figures.py, rooms.py: the commands",
    "flows": "flows/: the Prefect flow, deployments, workers",
    "gavil.game": "gavil/game/: the collection game's web app",
    "stages": "stages/: the thirteen stages, peers",
    "gavil.review": "gavil/review/: the image review page and its decisions",
    "gavil.gamestore": "gavil/gamestore/: the game's store (SQL)",
    "gavil.models": "gavil/models/: model loading, embeddings, OCR engines",
    "gavil.pipeline": "gavil/pipeline/: registry, runner, catalog",
    "gavil.compat": "gavil/compat/: install glue",
    "gavil.params": "gavil/params/: typed params",
    "gavil io": "gavil/io.py, progress.py: tables on disk, progress",
    "schemas": "schemas/: the table contracts",
    "gavil.domain": "gavil/domain/: the paper's rules, names, game rules",
    "gavil errors": "gavil/errors.py: the errors users see",
}

#: (importer, imported): the arrows the rooms may have. Not listed: not allowed.
ARROWS: frozenset[tuple[str, str]] = frozenset(
    {
        ("gavil tools", "flows"),
        ("gavil tools", "gavil.game"),
        ("gavil tools", "gavil.review"),
        ("gavil tools", "gavil.gamestore"),
        ("gavil tools", "gavil.pipeline"),
        ("gavil tools", "gavil.compat"),
        ("gavil tools", "gavil.models"),  # `gavil sample-embeddings`: the shipped embedding cache
        ("gavil tools", "gavil.params"),
        ("gavil tools", "gavil io"),
        ("gavil tools", "schemas"),
        ("gavil tools", "gavil errors"),
        ("flows", "gavil.pipeline"),
        ("flows", "gavil.params"),
        ("flows", "gavil errors"),
        ("gavil.game", "gavil.gamestore"),
        ("gavil.game", "gavil.models"),
        ("gavil.game", "gavil.pipeline"),
        ("gavil.game", "gavil.params"),
        ("gavil.game", "gavil io"),
        ("gavil.game", "schemas"),
        ("gavil.game", "gavil.domain"),
        ("gavil.game", "gavil errors"),
        ("gavil.review", "gavil.pipeline"),
        ("gavil.review", "gavil io"),
        ("gavil.review", "gavil errors"),
        ("stages", "gavil.review"),
        ("stages", "gavil.gamestore"),
        ("stages", "gavil.models"),
        ("stages", "gavil.pipeline"),
        ("stages", "gavil.params"),
        ("stages", "gavil io"),
        ("stages", "schemas"),
        ("stages", "gavil.domain"),
        ("stages", "gavil errors"),
        ("gavil.gamestore", "gavil.domain"),
        ("gavil.gamestore", "gavil errors"),
        ("gavil.models", "gavil.compat"),
        ("gavil.models", "gavil.params"),
        ("gavil.models", "gavil io"),
        ("gavil.models", "schemas"),
        ("gavil.models", "gavil.domain"),
        ("gavil.models", "gavil errors"),
        ("gavil.pipeline", "gavil.params"),
        ("gavil.pipeline", "gavil io"),
        ("gavil.pipeline", "gavil errors"),
        ("gavil.pipeline", "gavil.compat"),  # runner: pandera without its dask typing
        ("gavil.compat", "gavil errors"),
        ("gavil.params", "gavil io"),
        ("gavil.params", "gavil.domain"),
        ("gavil.params", "gavil errors"),
        ("gavil io", "schemas"),
        ("gavil io", "gavil.domain"),
        ("schemas", "gavil.domain"),
        ("gavil.domain", "gavil errors"),
    }
)

#: room -> (column, row) in ``docs/rooms.svg``: set by hand so that no arrow of the drawing
#: (:data:`ARROWS` without those a longer path implies) passes through another room's box.
POSITIONS: dict[str, tuple[float, int]] = {
    "gavil tools": (0.5, 0),
    "stages": (2.75, 0),
    "flows": (0.0, 1),
    "gavil.game": (1.25, 1),
    "gavil.review": (3.2, 1),
    "gavil.pipeline": (0.0, 2),
    "gavil.gamestore": (1.3, 2),
    "gavil.models": (2.3, 2),
    "gavil.params": (0.8, 3),
    "gavil.compat": (2.3, 3),
    "gavil io": (0.8, 4),
    "schemas": (0.8, 5),
    "gavil.domain": (1.6, 6),
    "gavil errors": (2.2, 7),
}

_TOP = ("gavil", "stages", "schemas", "flows")
_SUBPACKAGES = ("pipeline", "params", "domain", "models", "gamestore", "game", "compat", "review")
_TOOLS = ("cli", "query", "report", "docs", "figures", "rooms")
_IO = ("io", "progress")


def room_of(module: str) -> str:
    """The room of an in-tree module name (``gavil.gamestore.store`` -> ``gavil.gamestore``)."""
    parts = module.split(".")
    if parts[0] != "gavil":
        return parts[0]
    sub = parts[1] if len(parts) > 1 else ""
    if sub in _SUBPACKAGES:
        return f"gavil.{sub}"
    if sub in _TOOLS:
        return "gavil tools"
    return "gavil io" if sub in _IO else "gavil errors"


def _imports(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m.split(".")[0] in _TOP}


def import_arrows(root: Path) -> dict[tuple[str, str], str]:
    """Every arrow between two rooms that an import of the code under ``root`` makes, with one
    example (``file: module``) each; absolute imports, anywhere in a file (relative imports stay in
    their package, so in their room)."""
    out: dict[tuple[str, str], str] = {}
    for top in _TOP:
        for f in sorted((root / top).rglob("*.py")):
            rel = f.relative_to(root).with_suffix("")
            me = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
            for m in sorted(_imports(ast.parse(f.read_text(encoding="utf-8")))):
                arrow = (room_of(me), room_of(m))
                if arrow[0] != arrow[1]:
                    out.setdefault(arrow, f"{f.relative_to(root).as_posix()}: {m}")
    return out
