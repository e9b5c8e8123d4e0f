"""Every pointer names a place that exists.

Code comments, docstrings, CLI help, the docs, ``params.yaml``, ``dvc.yaml``, ``mkdocs.yml`` and
``.ci/run`` point readers at places: a file (``gavil/pipeline/catalog.py``, ``docs/methods.md``), a
name in a file (``gavil/pipeline/parallel.py: partition``, ``tests/project/test_docs.py::test_x``,
``params.yaml: prefect.deployments``), a module or an attribute (``gavil.pipeline.entries``,
``schemas.ocr:Ocr``, a Sphinx role ``:func:`~gavil.pipeline.catalog.read_table``` or the relative
``:mod:`.entries```), a call in a file (```Table(...)` in `gavil/pipeline/entries.py```), a Markdown
link with its anchor, a section (``README "Set-up (Python 3.11)"``, ``docs/prefect.md "..."``) or a
bare page name (``methods.md``). Each must resolve, by text and ``ast`` only (no module is imported).

What "exists" means: a file that git tracks or would track (``git ls-files --cached --others
--exclude-standard``: ignored files such as a private ``shared/`` folder are nobody else's), or,
under ``data/``, an output: a path of the catalog (``gavil/pipeline/entries.py``), of ``dvc.yaml``
or of a ``"data/..."`` constant in the code (a command's default output), or a file or folder
inside one; under ``benchmarks/results/``, a file named after a benchmark script. A pointer with a
placeholder (``stages/<name>.py``, ``tests/test_game*.py``, ``stages/evaluate/{paper,supervised}.py``)
must match at least one file (each choice of a ``{...}``).

What is read: in Python, comments, docstrings and (outside tests, where strings are test data)
every string with a space in it (messages and help; a string without one is a value for the code);
Markdown, YAML and ``.ci/run`` whole; the CLI's help as ``--help`` prints it. Not checked: a path
named as another project's (``open_clip docs/...``), and a bare ``x.py`` (the upstream WinoGAViL
scripts the code cites by name are not files of this repository).
"""

from __future__ import annotations

import ast
import builtins
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT

#: The project's own top-level packages (dotted pointers into them are checked) and the folders a
#: path pointer may start with (``shared`` is a private folder: a pointer into it never resolves).
PACKAGES = ("gavil", "stages", "schemas", "flows", "benchmarks", "tests")
PATH_ROOTS = (*PACKAGES, "docs", "data", "shared", ".ci")
TOP_FILES = ("README.md", "params.yaml", "dvc.yaml", "dvc.lock", "mkdocs.yml", "pyproject.toml", "constraints.txt")
EXT = r"(?:py|md|ya?ml|toml|txt|json|csv|parquet|html|js|css|svg|png|jpg|lock|pth|sqlite|db)"
#: A path named as another project's (``open_clip docs/...``, ``the rapidocr wheel's MODEL_LICENSES.md``):
#: the project's name at most three words before it.
UPSTREAM = re.compile(r"(?:open_clip|rapidocr|upstream)\W{1,4}(?:[\w']+\W{1,4}){0,3}$", re.IGNORECASE)
PLACEHOLDER = re.compile(r"<[^>]*>|\{[^}]*\}|\.\.\.|…")

_SEG = r"(?:\{[\w.,-]*\}|[\w<>*…-])(?:\{[\w.,-]*\}|[\w.<>*…-])*"  # a path segment, placeholders included
PATH = re.compile(
    rf"(?<![\w/.~:@-])((?:{'|'.join(re.escape(r) for r in PATH_ROOTS)})/(?:{_SEG}/)*(?:{_SEG})?"
    rf"|(?:{'|'.join(re.escape(f) for f in TOP_FILES)}))"
    r"(?:(::?)(`?)([A-Za-z_]\w*(?:\.\w+)*)|: (`?)([A-Za-z_]\w*(?:\.\w+)*)(?=[(`)]|$))?"
)
BARE_PAGE = re.compile(r"(?<![\w/.~:@-])([A-Za-z_][\w-]*\.md)(?![\w/-])")
DOTTED = re.compile(rf"(?<![\w/.-])((?:{'|'.join(PACKAGES)})(?:\.\w+)+)(?::([A-Za-z_]\w*(?:\.\w+)*))?(?![\w/-])")
NOT_MODULE = re.compile(rf"\.{EXT}$")
ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|exc|obj|const):`~?(\.*[\w.]+)`")
CALL_IN = re.compile(r"`([A-Za-z_]\w*)(\(\.\.\.\))?` in `([\w/.]+\.py)`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")
SECTION = re.compile(
    r'\b(README(?:\.md)?|docs/[\w/-]+\.md)(?:(?:,| §|\'s)? "([^"\n]+)"|, ([A-Z][\w -]*)\)| § ([A-Z][\w -]*[\w]))'
)


@dataclass
class Found:
    """What one scan met: how many pointers of each kind, and every broken one."""

    seen: dict[str, int] = field(default_factory=dict)
    broken: list[str] = field(default_factory=list)

    def check(self, kind: str, where: str, pointer: str, why: str | None) -> None:
        self.seen[kind] = self.seen.get(kind, 0) + 1
        if why:
            self.broken.append(f"{where}: {pointer} ({why})")


# ---- what exists ---------------------------------------------------------------------------------


@cache
def known_files() -> frozenset[str]:
    """Tracked and trackable (not ignored) files, relative to the root."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    )
    files = {f for f in out.stdout.splitlines() if (ROOT / f).exists()}
    return frozenset(files) if out.returncode == 0 else frozenset(str(p.relative_to(ROOT)) for p in ROOT.rglob("*"))


@cache
def known_dirs() -> frozenset[str]:
    return frozenset(str(p) for f in known_files() for p in Path(f).parents if str(p) != ".")


@cache
def outputs() -> tuple[str, ...]:
    """What the project writes under data/: the catalog's paths (read from the AST of its entries),
    dvc.yaml's, and the ``"data/..."`` constants of the code (a command's default output folder)."""
    tree = ast.parse((ROOT / "gavil/pipeline/entries.py").read_text())
    paths = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    stages = (yaml_of("dvc.yaml") or {}).get("stages", {})
    for s in stages.values():
        for key in ("deps", "outs", "metrics", "plots"):
            paths |= {next(iter(o)) if isinstance(o, dict) else o for o in s.get(key, [])}
    for f in known_files():
        if f.endswith(".py") and f.split("/")[0] in PACKAGES and not f.startswith("tests/"):
            paths |= set(re.findall(r"""["'](data/[\w./-]+)["']""", (ROOT / f).read_text(encoding="utf-8")))
    return tuple(sorted(p.rstrip("/") for p in paths if p.startswith("data/")))


def _inside_outputs(path: str) -> bool:
    return any(path == o or path.startswith(o + "/") or o.startswith(path + "/") for o in outputs())


def path_exists(path: str) -> str | None:
    """None when ``path`` names a place that exists, else why not. ``{a,b}`` must exist for each
    choice; ``<x>`` and ``*`` stand for one name, ``...`` for any rest: at least one must match."""
    path = path.rstrip("/")
    if m := re.search(r"\{([^}]*)\}", path):
        whys = [path_exists(path[: m.start()] + alt + path[m.end() :]) for alt in m.group(1).split(",")]
        return next((w for w in whys if w), None)
    if wild := re.search(r"<[^>]*>|\.\.\.|…|\*", path):
        parts = re.split(r"(<[^>]*>|\.\.\.|…|\*)", path)
        regex = "".join(".*" if p in ("...", "…") else "[^/]*" if i % 2 else re.escape(p) for i, p in enumerate(parts))
        hit = any(re.fullmatch(regex, f) for f in (*known_files(), *known_dirs(), *outputs()))
        prefix = path[: wild.start()].rpartition("/")[0]
        return None if hit or (path.startswith("data/") and _inside_outputs(prefix)) else "no file matches"
    if path in known_files() or path in known_dirs() or (path.startswith("data/") and _inside_outputs(path)):
        return None
    if path.startswith("benchmarks/results/") and any(
        path.removeprefix("benchmarks/results/").startswith(Path(f).stem)
        for f in known_files()
        if f.startswith("benchmarks/")
    ):
        return None  # a benchmark's result, named after its script and written when it runs
    return "not in the repository" if (ROOT / path).exists() else "no such file"


@cache
def tree_of(rel: str) -> ast.Module | None:
    try:
        return ast.parse((ROOT / rel).read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None


@cache
def names_in(rel: str) -> dict[str, ast.AST | None]:
    """Every name a Python file binds (defs and classes at any depth, assignments at module and class
    level, ``self.x`` attributes, imports), mapped to its node (a class keeps its members reachable)."""
    tree, out = tree_of(rel), dict[str, ast.AST | None]()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.setdefault(node.name, node)
            for st in node.body if isinstance(node, ast.ClassDef) else []:
                targets = (
                    st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
                )
                out.update({t.id: None for t in targets if isinstance(t, ast.Name)})
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.setdefault(node.attr, None) if isinstance(node.value, ast.Name) and node.value.id == "self" else None
    for st in tree.body if tree else []:
        targets = st.targets if isinstance(st, ast.Assign) else [st.target] if isinstance(st, ast.AnnAssign) else []
        out.update({e.id: None for t in targets for e in ast.walk(t) if isinstance(e, ast.Name)})
    return out


@cache
def yaml_of(rel: str) -> Any:
    return yaml.load((ROOT / rel).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def yaml_has(node: object, keys: list[str]) -> bool:
    """Whether the key path ``keys`` starts at this mapping or at any mapping inside it."""
    here = node
    for key in keys:
        here = here.get(key, KeyError) if isinstance(here, dict) else KeyError
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    return here is not KeyError or any(yaml_has(c, keys) for c in children)


def name_in_file(rel: str, dotted: str) -> str | None:
    """None when ``dotted`` (``name`` or ``Class.member``) is bound in ``rel`` (a .py file or a YAML key path)."""
    if rel.endswith((".yaml", ".yml")):
        return None if yaml_has(yaml_of(rel), dotted.split(".")) else f"no key {dotted!r} in {rel}"
    if not rel.endswith(".py") or tree_of(rel) is None:
        return None
    head, *rest = dotted.split(".")
    node = names_in(rel).get(head, False)
    if node is False:
        return f"{head!r} is not defined in {rel}"
    if rest and isinstance(node, ast.ClassDef):
        members = {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        members |= {t.id for n in ast.walk(node) for t in ast.walk(n) if isinstance(t, ast.Name)}
        if rest[0] not in members:
            return f"{head!r} in {rel} has no member {rest[0]!r}"
    return None


def module_file(module: str) -> str | None:
    base = module.replace(".", "/")
    return next((f for f in (f"{base}.py", f"{base}/__init__.py") if f in known_files()), None)


def resolve_dotted(dotted: str, attr: str | None = None) -> str | None:
    """None when ``a.b.c`` (optionally ``:attr``) is a module of the project, or a name bound in one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        if rel := module_file(".".join(parts[:i])):
            rest = ".".join([*parts[i:], *([attr] if attr else [])])
            return name_in_file(rel, rest) if rest else None
    return "no such module"


def resolve_role(target: str, rel: str) -> str | None:
    """A Sphinx role's target, written in file ``rel``: relative (``.x``: in this module, else from its
    package as a relative import would) or a bare name (bound in this module, a builtin or a module)."""
    module = rel.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if target.startswith("."):
        level = len(target) - len(target.lstrip("."))
        package = module if rel.endswith("__init__.py") else module.rpartition(".")[0]
        package = ".".join(package.split(".")[: len(package.split(".")) - (level - 1)])
        candidates = [module + target, package + "." + target.lstrip(".")]
        return None if any(resolve_dotted(c) is None for c in candidates) else "no such module or name"
    head = target.split(".")[0]
    if not rel.endswith(".py") or head in names_in(rel) or head == module.rpartition(".")[2]:
        return None
    if hasattr(builtins, head) or find_spec(head) is not None:
        return None
    return f"{head!r} is not defined in {rel} nor a module"


# ---- headings and anchors ------------------------------------------------------------------------


@cache
def headings(rel: str) -> tuple[frozenset[str], frozenset[str]]:
    """A Markdown page's headings (and bold paragraph lead-ins) and their anchors (python-markdown's
    ``toc`` slugs and ``{#id}``)."""
    titles, anchors, fence = set(), set(), False
    for line in (ROOT / rel).read_text().splitlines():
        fence = fence != line.lstrip().startswith("```")
        if not fence and (lead := re.match(r"\*\*([^*]+)\*\*", line)):
            titles.add(lead.group(1))  # a paragraph's bold lead-in is a section a reader finds too
        if fence or not (m := re.match(r"#{1,6}\s+(.*?)\s*$", line)):
            continue
        title = m.group(1)
        if ids := re.search(r"\{[^}]*#([\w-]+)[^}]*\}\s*$", title):
            anchors.add(ids.group(1))
            title = title[: ids.start()].strip()
        titles.add(title)
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", title).replace("`", "")
        anchors.add(re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", text).strip().lower()))
    return frozenset(titles), frozenset(anchors)


def link_target(target: str, rel: str) -> str | None:
    """None when a Markdown link names a file that exists, and its anchor. The link is relative to the
    file ``rel``; in a ``.py`` file also to docs/ (the pages the code writes and the docstrings the API
    reference renders live there)."""
    if re.match(r"[a-z][a-z0-9+.-]*:", target):
        return None
    file, _, anchor = target.partition("#")
    path, why = rel, None
    for base in [Path(rel).parent, *([Path("docs")] if rel.endswith(".py") else [])] if file else []:
        try:
            path = ((ROOT / base / file).resolve()).relative_to(ROOT.resolve()).as_posix()
        except ValueError:
            why = why or "outside the repository"
            continue
        if not (why := path_exists(path)):
            break
    if why:
        return why
    if anchor and path.endswith(".md") and anchor not in headings(path)[1]:
        return f"no heading with anchor #{anchor} in {path}"
    return None


# ---- where pointers are written ------------------------------------------------------------------


def used_in(rel: str) -> tuple[frozenset[str], frozenset[str]]:
    """The names a Python file mentions at all, and the names it calls."""
    tree = tree_of(rel)
    nodes = list(ast.walk(tree)) if tree else []
    mentioned = {str(getattr(n, "id", None) or getattr(n, "attr", "")) for n in nodes}
    called = {str(getattr(n.func, "id", None) or getattr(n.func, "attr", "")) for n in nodes if isinstance(n, ast.Call)}
    return frozenset(mentioned | set(names_in(rel))), frozenset(called)


@cache
def basenames() -> frozenset[str]:
    return frozenset(Path(f).name for f in (*known_files(), *outputs()))


def bare_page(name: str, rel: str) -> str | None:
    """A page named without its folder (``methods.md``): beside the pointing file, at the root, in
    docs/, or anywhere in the repository. (A bare ``x.py`` is not checked: the upstream WinoGAViL
    scripts the code cites by name are no file of this repository.)"""
    here = Path(rel).parent
    if any((base / name).as_posix().removeprefix("./") in known_files() for base in (here, Path("."), Path("docs"))):
        return None
    return None if name in basenames() else "no such page in the repository"


def section(page: str, title: str) -> str | None:
    """None when ``page`` has a heading ``title`` (any case; ``"Set-up"`` finds ``Set-up (Python 3.11)``)."""
    if why := path_exists(page):
        return why
    titles = {t.lower() for t in headings(page)[0]} | {t.lower().split(" (")[0] for t in headings(page)[0]}
    return None if PLACEHOLDER.search(title) or title.lower() in titles else f"no heading {title!r} in {page}"


def scan_line(line: str, rel: str, where: str, found: Found) -> None:
    """Check every pointer on one line of text written in file ``rel`` (``where`` names the line)."""
    spans: list[tuple[int, int]] = []
    for m in PATH.finditer(line):
        if UPSTREAM.search(line[: m.start()]):
            continue
        path, name = m.group(1).rstrip(".,:;"), m.group(4) or m.group(6)
        spans.append(m.span(1))
        found.check("path", where, path, path_exists(path))
        if path.endswith(".md") and not path_exists(path) and (anchor := re.match(r"#([\w-]+)", line[m.end(1) :])):
            why = None if anchor.group(1) in headings(path)[1] else f"no heading with anchor #{anchor.group(1)}"
            found.check("anchor", where, f"{path}#{anchor.group(1)}", why)
        if name and not path_exists(path) and not PLACEHOLDER.search(path):
            found.check("path:name", where, f"{path}: {name}", name_in_file(path, name.rstrip(".")))
    for m in BARE_PAGE.finditer(line):
        if not any(a <= m.start() < b for a, b in spans) and not UPSTREAM.search(line[: m.start()]):
            found.check("bare page", where, m.group(1), bare_page(m.group(1), rel))
    for m in DOTTED.finditer(line):
        if not NOT_MODULE.search(m.group(1)):
            found.check("dotted", where, m.group(0), resolve_dotted(m.group(1), m.group(2)))
    for m in ROLE.finditer(line):
        if m.group(1).split(".")[0] not in PACKAGES:
            found.check("role", where, m.group(0), resolve_role(m.group(1), rel))
    for m in CALL_IN.finditer(line):
        if path_exists(m.group(3)) is None:
            mentioned, called = used_in(m.group(3))
            why = f"{m.group(1)} is not {'called' if m.group(2) else 'used'} there"
            found.check(
                "name in file", where, m.group(0), None if m.group(1) in (called if m.group(2) else mentioned) else why
            )
    for m in LINK.finditer(line):
        found.check("link", where, m.group(0), link_target(m.group(1), rel))
    for m in SECTION.finditer(line):
        page = "README.md" if m.group(1).startswith("README") else m.group(1)
        found.check("section", where, m.group(0), section(page, next(g for g in m.groups()[1:] if g)))


def texts_of_python(rel: str, source: str) -> Iterator[tuple[int, str]]:
    """A Python file's comments and docstrings (a string standing as a statement), and elsewhere than
    in tests every string with a space in it (a message or help text: a reader's text; a string without
    one is a value for the code, and in tests strings are test data), each with its first line. By
    ``ast`` (the C parser; ``tokenize`` is several times slower): a comment is a ``#`` outside every string."""
    tree = tree_of(rel) if (ROOT / rel).is_file() else ast.parse(source)
    nodes = list(ast.walk(tree)) if tree else []
    statements = {id(n.value) for n in nodes if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
    spans: dict[int, list[tuple[int, int]]] = {}
    for n in nodes:
        if isinstance(n, ast.JoinedStr) or (isinstance(n, ast.Constant) and isinstance(n.value, (str, bytes))):
            end_line, end_col = n.end_lineno or n.lineno, n.end_col_offset or 0
            for row in range(n.lineno, end_line + 1):
                cols = (n.col_offset if row == n.lineno else 0, end_col if row == end_line else 1 << 30)
                spans.setdefault(row, []).append(cols)
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            if id(n) in statements or (not rel.startswith("tests/") and re.search(r"\s", n.value)):
                yield n.lineno, n.value
    for number, line in enumerate(source.splitlines(), 1):
        raw, at = line.encode(), line.encode().find(b"#") if "#" in line else -1
        while at != -1 and any(a <= at < e for a, e in spans.get(number, ())):
            at = raw.find(b"#", at + 1)
        if at != -1:
            yield number, raw[at:].decode(errors="replace")


def sources() -> Iterator[tuple[str, Iterator[tuple[int, str]]]]:
    """Every file whose prose is checked, with its (first line, text) pieces."""
    for f in sorted(known_files()):
        top = f.split("/")[0]
        if f.endswith(".py") and top in PACKAGES and f != "tests/project/test_pointers.py":
            yield f, texts_of_python(f, (ROOT / f).read_text(encoding="utf-8"))
        elif f.endswith(".md") and (top in ("docs", "data") or f == "README.md"):
            yield f, iter([(1, (ROOT / f).read_text(encoding="utf-8"))])
        elif f in ("params.yaml", "dvc.yaml", "mkdocs.yml", "pyproject.toml", ".ci/run"):
            yield f, iter([(1, (ROOT / f).read_text(encoding="utf-8"))])


def scan(files: Iterator[tuple[str, Iterator[tuple[int, str]]]]) -> Found:
    found = Found()
    for rel, pieces in files:
        for first, text in pieces:
            for i, line in enumerate(text.splitlines()):
                scan_line(line, rel, f"{rel}:{first + i}", found)
    return found


def cli_help() -> Iterator[tuple[str, str]]:
    """``gavil --help`` and every subcommand's ``--help``, as printed (wide, no colour, no boxes)."""
    import typer.main
    from typer.testing import CliRunner

    from gavil.cli import app

    def walk(command: Any, path: list[str]) -> Iterator[list[str]]:
        yield path
        for name, sub in sorted(getattr(command, "commands", {}).items()):
            yield from walk(sub, [*path, name])

    for path in walk(typer.main.get_command(app), []):
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"})
        assert out.exit_code == 0, (path, out.output)
        yield " ".join(["gavil", *path, "--help"]), re.sub(r"[│╭╮╰╯─]+", " ", out.output)


# ---- the tests -----------------------------------------------------------------------------------


def test_every_pointer_in_code_docs_and_config_names_something_that_exists():
    """One sweep; every broken pointer is listed as ``file:line: pointer (why)``. The counts guard the
    sweep itself: a regex that stopped matching would otherwise pass by finding nothing."""
    found = scan(sources())
    for kind, least in {"path": 300, "path:name": 5, "dotted": 50, "role": 50, "link": 50, "section": 5}.items():
        assert found.seen.get(kind, 0) >= least, (
            f"only {found.seen.get(kind, 0)} {kind} pointers found: the scan lost them"
        )
    if found.broken:
        pytest.fail(f"{len(found.broken)} broken pointers:\n" + "\n".join(found.broken), pytrace=False)


def test_the_cli_help_names_only_places_that_exist():
    """Help text can be built at run time (defaults, constants), so it is read as printed."""
    found = Found()
    for command, text in cli_help():
        for line in text.splitlines():
            scan_line(line, "gavil/cli.py", command, found)
    assert found.seen.get("path", 0) >= 3, found.seen
    if found.broken:
        pytest.fail(f"{len(found.broken)} broken pointers in the CLI help:\n" + "\n".join(found.broken), pytrace=False)


PLANTED_PY = '''"""Valid: `gavil/pipeline/parallel.py: partition`, :mod:`.catalog`, `stages/<name>.py`, README "Set-up",
[a page](../../docs/methods.md#winoground-paired-scores), `data/ocr/ocr.parquet`, schemas.ocr:Ocr.
Broken: `docs/nowhere.md`, METHODS.md, docs/tour.md#nowhere, :mod:`.no_such_module`,
`gavil/pipeline/parallel.py: no_such_name`."""

VALUE = "data/no/such/output.parquet"  # a value (no space in it) is no prose; this comment: gavil.no_such_module


def f() -> str:
    """`Table(...)` in `gavil/pipeline/catalog.py`; [x](../../docs/methods.md#no-such-anchor); (README, Nowhere)"""
    return "see tests/project/test_pointers.py::no_such_test and :func:`~gavil.pipeline.catalog.no_such_func`"
'''


def test_a_planted_broken_pointer_is_caught_and_named_with_its_line(tmp_path):
    """Every kind of broken pointer, planted in a module and a page, is reported at its line; the
    valid ones beside them are not."""
    (tmp_path / "planted.py").write_text(PLANTED_PY)
    (tmp_path / "planted.md").write_text('See [the tour](tour.md#no-such-heading) and `docs/methods.md "Nope"`.\n')
    py, md = "gavil/pipeline/planted.py", "docs/planted.md"
    found = scan(
        iter(
            [
                (py, texts_of_python(py, (tmp_path / "planted.py").read_text())),
                (md, iter([(1, (tmp_path / "planted.md").read_text())])),
            ]
        )
    )
    broken = sorted(b.split(" (")[0] for b in found.broken)
    assert broken == sorted(
        [
            f"{py}:3: docs/nowhere.md",
            f"{py}:3: METHODS.md",
            f"{py}:3: docs/tour.md#nowhere",
            f"{py}:4: gavil/pipeline/parallel.py: no_such_name",
            f"{py}:3: :mod:`.no_such_module`",
            f"{py}:6: gavil.no_such_module",
            f"{py}:10: `Table(...)` in `gavil/pipeline/catalog.py`",
            f"{py}:10: [x](../../docs/methods.md#no-such-anchor)",
            f"{py}:10: README, Nowhere)",
            f"{py}:11: tests/project/test_pointers.py: no_such_test",
            f"{py}:11: gavil.pipeline.catalog.no_such_func",
            f"{md}:1: [the tour](tour.md#no-such-heading)",
            f'{md}:1: docs/methods.md "Nope"',
        ]
    ), found.broken
