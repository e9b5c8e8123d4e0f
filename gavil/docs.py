"""Generated parts of the documentation site (``docs/``), so they cannot drift from the code.

- ``docs/pipeline.md``: the pipeline diagram (a Mermaid flowchart of every stage -> stage edge of
  :data:`gavil.pipeline.registry.STAGES`, labelled with the catalog names that flow along it) and
  the table of what each stage reads, writes and depends on.
- ``docs/tables.md``: every catalog entry (tables and artifacts) with its path, model and writer.
- ``docs/params.md``: the params reference, found by walking :class:`gavil.params.Params`'s
  pydantic fields (no section is named here): dotted key, type, default, whether it is a runtime
  knob, which stages depend on it, and a description (the field's own, else the comment next to the
  key in ``params.yaml``).

The committed pictures ``docs/pipeline.svg`` and ``docs/instance.svg`` (:mod:`gavil.figures`) are
written and checked the same way.

Each generated block sits between ``<!-- generated: NAME -->`` and ``<!-- end generated: NAME -->``
in its page; the text around it is written by hand. ``gavil docs --write`` rewrites the blocks,
``gavil docs --check`` (and ``tests/project/test_docs.py``) fails while a committed page differs.
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, RootModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

from gavil.params import Params, inner_model, parse_params
from gavil.pipeline import catalog
from gavil.pipeline.registry import STAGES, StageSpec, upstream

START = "<!-- generated: {name} (gavil docs --write; do not edit by hand) -->"
END = "<!-- end generated: {name} -->"


# ---------------------------------------------------------------------------------------------- pipeline
def edges() -> list[tuple[str, str, list[str]]]:
    """Every DAG edge ``(upstream stage, stage, catalog names it reads from that stage)``, in registry order."""
    by_name = {s.name: s for s in STAGES}
    out = []
    for s in STAGES:
        for u in upstream(s):
            out.append((u, s.name, [r for r in s.reads if r in by_name[u].writes]))
    return out


def pipeline_diagram() -> str:
    """The whole DAG (every stage, every edge) as the committed picture ``docs/pipeline.svg``
    (:func:`gavil.figures.pipeline_svg`, drawn here, so the page shows it offline) followed by the
    same graph as Mermaid source, shown as text (the site loads no script from a CDN)."""
    lines = [
        "![The stage graph: every stage and the catalog tables each reads from another](pipeline.svg)",
        "",
        "The same graph as Mermaid source (paste it into any Mermaid viewer):",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    lines += [f"    {s.name}" for s in STAGES]
    lines += [f"    {u} -->|{', '.join(names)}| {s}" for u, s, names in edges()]
    return "\n".join([*lines, "```"])


def _code(x: str) -> str:
    return f"`{x}`"


def _writes(s: StageSpec) -> str:
    return "<br>".join(f"`{n}` ({_code(catalog.entry(n).path)})" for n in s.writes)


def stage_table() -> str:
    """One row per stage: name, what it reads (and from which stage), what it writes, its params."""
    rows = ["| stage | reads (from stage) | writes (catalog name and path) | params |", "|---|---|---|---|"]
    writer = {w: s.name for s in STAGES for w in s.writes}
    for s in STAGES:
        reads = ", ".join(f"`{r}` ({writer[r]})" if r in writer else _code(r) for r in s.reads) or "–"
        inputs = ", ".join(_code(e) for e in s.external)
        reads = f"{reads}; outside inputs {inputs}" if inputs else reads
        rows.append(f"| `{s.name}` | {reads} | {_writes(s)} | {', '.join(map(_code, s.params))} |")
    return "\n".join(rows)


def catalog_table() -> str:
    """Every catalog entry: name, path, model (tables) or kind (artifacts), writer, readers, what it holds."""
    writer = {w: s.name for s in STAGES for w in s.writes}
    readers: dict[str, list[str]] = {}
    for s in STAGES:
        for r in s.reads:
            readers.setdefault(r, []).append(s.name)
    rows = ["| name | path | model or kind | written by | read by | holds |", "|---|---|---|---|---|---|"]
    entries: list[catalog.Entry] = [*catalog.TABLES, *catalog.ARTIFACTS]
    for e in entries:
        kind = e.model if isinstance(e, catalog.Table) else e.kind
        reads = ", ".join(readers.get(e.name, [])) or "–"
        rows.append(f"| `{e.name}` | `{e.path}` | `{kind}` | {writer.get(e.name, '–')} | {reads} | {_cell(e.doc)} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------------------- params
def yaml_comments(text: str) -> dict[str, str]:
    """``dotted.key -> comment`` from a YAML file: the comment lines right above a key and the comment
    after its value (a comment on a continuation line joins the key before it)."""
    out: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] = []
    last = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            pending = []
            continue
        if stripped.startswith("#"):
            pending.append(stripped.lstrip("#").strip())
            continue
        body, comment = _split_comment(stripped)
        m = re.match(r"([A-Za-z_][\w.-]*|\d+)\s*:(\s|$)", body)
        if stripped.startswith("- ") or not m:  # a list item or a continuation line
            if comment and last:
                out[last] = f"{out.get(last, '')} {comment}".strip()
            pending = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(1)))
        last = ".".join(k for _, k in stack)
        desc = " ".join([*pending, comment]).strip()
        if desc:
            out[last] = desc
        pending = []
    return out


def _split_comment(s: str) -> tuple[str, str]:
    """``(value part, comment)`` of one YAML line: a ``#`` after whitespace and outside quotes."""
    quote = ""
    for i, ch in enumerate(s):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or s[i - 1] in " \t"):
            return s[:i].rstrip(), s[i + 1 :].strip()
    return s, ""


def _meta(m: Any) -> str:
    """One piece of field metadata as text: bounds (``≥ 1``) or a named validator (``percent``)."""
    for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "min length")):
        if getattr(m, attr, None) is not None:
            return f"{sign} {getattr(m, attr)}"
    func = getattr(m, "func", None)
    return getattr(func, "__name__", "").strip("_").replace("_", " ")


def type_name(tp: object, metadata: list[object] | tuple[object, ...] = ()) -> str:
    """A short, readable name of an annotation (``int ≥ 1``, ``'auto' | 'cpu'``, ``list[ModelEntry]``)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is Annotated:
        return type_name(args[0], args[1:])
    if origin is Literal:
        base = " | ".join(repr(a) for a in args)
    elif origin in (Union, types.UnionType):
        base = " | ".join(type_name(a) for a in args)
    elif origin is not None:
        name = getattr(origin, "__name__", str(origin))
        base = f"{name}[{', '.join(type_name(a) for a in args)}]"
    elif tp is type(None):
        base = "null"
    else:
        base = getattr(tp, "__name__", str(tp)).replace("typing.", "")
    extra = [t for t in (_meta(m) for m in metadata) if t]
    return f"{base} ({', '.join(extra)})" if extra else base


def _default(f: FieldInfo) -> str:
    if f.default_factory is not None:
        value = f.default_factory()  # type: ignore[call-arg]
    elif f.default is PydanticUndefined:
        return "required"
    else:
        value = f.default
    text = yaml.safe_dump(
        to_jsonable_python(value), default_flow_style=True, width=10**6, allow_unicode=True, sort_keys=False
    )
    text = text.strip().removesuffix("...").strip()
    # a pipe inside a code span splits a GitHub table cell even when escaped; plain text then
    return _cell(text) if "|" in text or "`" in text else f"`{text}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def param_rows(model: type[BaseModel], prefix: str = "") -> Iterator[tuple[str, FieldInfo, type[BaseModel] | None]]:
    """``(dotted key, field, nested model or None)`` for every field under ``model``, depth first.
    A list of models is walked as ``key[].field``, a dict of models as ``key.<name>.field``."""
    for name, f in model.model_fields.items():
        if issubclass(model, RootModel):  # a mapping section (``models``): its entries' fields, by ``<name>``
            inner = inner_model(f.annotation)
            if inner is not None:
                yield from param_rows(inner, f"{prefix}<name>.")
            continue
        key = f"{prefix}{name}"
        inner = inner_model(f.annotation)
        yield key, f, inner
        if inner is not None:
            origin = get_origin(f.annotation)
            sub = f"{key}[]." if origin is list else f"{key}.<name>." if origin is dict else f"{key}."
            yield from param_rows(inner, sub)


def _doc(model: type[BaseModel]) -> str:
    return " ".join((model.__doc__ or "").split())


def params_reference(params_yaml: str) -> str:
    """The params reference: one section per top-level field of :class:`Params`, one row per key."""
    comments = yaml_comments(params_yaml)
    params = parse_params(yaml.safe_load(params_yaml) or {})
    deps: dict[str, list[str]] = {}
    for s in STAGES:
        for k in s.param_keys(params):
            deps.setdefault(k, []).append(s.name)
            if k.startswith("models."):  # an entry's key also counts for the generic ``models.<name>.key`` row
                deps.setdefault(f"models.<name>.{k.split('.', 2)[2]}", []).append(s.name)
    out: list[str] = []
    for section, f in Params.model_fields.items():
        model = inner_model(f.annotation)
        assert model is not None, section
        out += [f"## `{section}`", ""]
        about = " ".join(x.rstrip(".") + "." for x in (comments.get(section, ""), _doc(model)) if x)
        if issubclass(model, RootModel):
            about += f" Entries in params.yaml: {', '.join(f'`{n}`' for n in getattr(params, section).root)}."
        if about:
            out += [_cell(about), ""]
        users = sorted({st for k, sts in deps.items() if k.split(".")[0] == section for st in sts})
        out += [f"Stages that depend on it: {', '.join(f'`{u}`' for u in users) or 'none (not a stage param)'}.", ""]
        out += ["| key | type | default | runtime | stages | description |", "|---|---|---|---|---|---|"]
        for key, field, inner in param_rows(model, f"{section}."):
            runtime = "runtime" if (field.json_schema_extra or {}).get("runtime") else ""  # type: ignore[union-attr]
            parts = key.replace("[]", "").split(".")
            stages = sorted({st for i in range(2, len(parts) + 1) for st in deps.get(".".join(parts[:i]), [])})
            desc = field.description or comments.get(key, "") or (_doc(inner) if inner is not None else "")
            if not desc and "<name>" in key:  # a mapping entry's key: the first entry in params.yaml that comments it
                pattern = re.compile(re.escape(key).replace(re.escape("<name>"), r"[^.]+") + "$")
                desc = next((c for k, c in comments.items() if pattern.match(k)), "")
            out.append(
                f"| `{key}` | {_cell(type_name(field.annotation, field.metadata))} | {_default(field)}"
                f" | {runtime} | {', '.join(stages)} | {_cell(desc)} |"
            )
        out.append("")
    return "\n".join(out).rstrip()


# ---------------------------------------------------------------------------------------------- pages
def blocks(root: Path) -> dict[str, dict[str, Callable[[], str]]]:
    """Page (relative to ``root``) -> generated block name -> its generator."""
    params_yaml = (root / "params.yaml").read_text(encoding="utf-8")
    return {
        "docs/pipeline.md": {"pipeline-diagram": pipeline_diagram, "stage-table": stage_table},
        "docs/tables.md": {"catalog": catalog_table},
        "docs/params.md": {"params": lambda: params_reference(params_yaml)},
    }


def render(text: str, generated: dict[str, Callable[[], str]], page: str = "page") -> str:
    """``text`` with each generated block replaced by its generator's output.

    Raises:
        ValueError: a block's markers are missing from the page.
    """
    for name, make in generated.items():
        start, end = START.format(name=name), END.format(name=name)
        if start not in text or end not in text:
            raise ValueError(f"{page}: lacks the markers of generated block {name!r}:\n{start}\n{end}")
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = f"{head}{start}\n{make()}\n{end}{tail}"
    return text


def stale(root: Path = Path(".")) -> list[str]:
    """The pages and pictures whose committed text differs from what :func:`write` would write."""
    from gavil.figures import pictures

    pages = [
        page
        for page, gen in blocks(root).items()
        if render((root / page).read_text(encoding="utf-8"), gen, page) != (root / page).read_text(encoding="utf-8")
    ]
    files = [f for f, make in pictures(root).items() if not (root / f).exists() or (root / f).read_text() != make()]
    return pages + files


def write(root: Path = Path(".")) -> list[str]:
    """Rewrite every generated block; returns the pages that changed."""
    changed = []
    for page, gen in blocks(root).items():
        path = root / page
        old = path.read_text(encoding="utf-8")
        new = render(old, gen, page)
        if new != old:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    from gavil.figures import pictures

    for name, make in pictures(root).items():
        path, svg = root / name, make()
        if not path.exists() or path.read_text(encoding="utf-8") != svg:
            path.write_text(svg, encoding="utf-8")
            changed.append(name)
    return changed
