"""``gavil params set KEY=VALUE ...``: change ``params.yaml`` from the shell, checked, comments kept.

Each ``KEY`` is a dotted key of ``params.yaml`` (``ingest.path``, ``crawl.local_dir``,
``models.my-clip.model``); each ``VALUE`` is read as YAML (``0.9``, ``null``, ``""``, ``[a, b]``,
``{kind: text, model: all-MiniLM-L6-v2}``). The whole file is validated with the new values before
anything is written (the one-line error of :func:`gavil.params.parse_params` otherwise), written
atomically with its comments and layout; ``gavil params set`` then regenerates ``dvc.yaml`` when the
change alters what a stage depends on (:func:`gavil.pipeline.dvc.refresh_dvc_yaml`: an input path, a
model entry a stage names), so the next ``dvc repro`` runs exactly the stages the change affects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gavil.errors import ParamsError


def parse_assignments(pairs: Sequence[str]) -> list[tuple[list[str], object]]:
    """``["a.b=1", "c.d=x"]`` -> ``[(["a", "b"], 1), (["c", "d"], "x")]`` (values read as YAML).

    Raises:
        ParamsError: a pair without ``=``, an empty key part, or a value that is not YAML.
    """
    out = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ParamsError(f"{pair!r}: expected KEY=VALUE with a dotted key, e.g. ingest.path=my/swow.csv")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as e:
            raise ParamsError(f"{pair!r}: the value is not YAML ({getattr(e, 'problem', e)}): quote it") from None
        out.append((parts, value))
    return out


def _scalar(value: Any) -> str:
    """``value`` as one line of YAML in flow style (``null``, ``''``, ``0.9``, ``[a, b]``, ``{k: v}``)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=100_000, allow_unicode=True).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _edit_line(lines: list[str], line: int, col: int, end: int, value: Any) -> None:
    """Replace ``lines[line][col:end]`` (the old value) with ``value``, keeping what follows (its comment)
    in its column where the new value leaves room."""
    old = lines[line]
    new_value = _scalar(value)
    rest = old[end:].rstrip("\n")  # the comment, with the spaces before it
    pad = max(0, end - col - len(new_value)) if rest else 0
    lines[line] = old[:col] + new_value + " " * pad + rest + "\n"


def _flow_end(line: str, col: int) -> int | None:
    """Index just past the ``[...]``/``{...}`` that starts at ``col`` of ``line``, or None if it does not
    close on that line (quotes respected)."""
    depth, quote = 0, ""
    for i in range(col, len(line)):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _set_one(text: str, parts: list[str], value: Any) -> tuple[str, Any]:
    """``text`` with ``parts`` (a dotted key) set to ``value``; returns it and the old value.

    In place: a block-style key's value (a scalar, a ``[...]``/``{...}`` on one or several lines, or a block
    list or mapping under it) becomes its new value in flow style on the key's line, keeping the line's
    comment; a new key of a block-style mapping is a new line before the mapping's first key.

    Raises:
        ParamsError: the key's parent is missing or written inline (``{...}``).
    """
    from ruamel.yaml import YAML

    doc = YAML().load(text)
    node: Any = doc
    dotted = ".".join(parts)
    for i, part in enumerate(parts[:-1]):
        found = _key(node, part) if hasattr(node, "keys") else None
        if found is None:
            where = ".".join(parts[: i + 1])
            raise ParamsError(
                f"{where} is not in params.yaml: set the whole entry, e.g. {where}='{{kind: text, model: all-MiniLM-L6-v2}}'"
            )
        node = node[found]
    key: Any = parts[-1]
    if hasattr(node, "keys"):
        key = _key(node, key) if _key(node, key) is not None else key
    if not hasattr(node, "keys") or node.fa.flow_style():
        raise ParamsError(
            f"{dotted}: its parent is written inline ({{...}}); set the parent whole, or edit params.yaml"
        )
    lines = text.splitlines(keepends=True)
    if key not in node:
        first = next(iter(node), None)
        if first is None:
            raise ParamsError(f"{dotted}: its parent mapping is empty; edit params.yaml by hand")
        line, col = node.lc.key(first)
        lines.insert(line, " " * col + f"{_scalar(key)}: {_scalar(value)}\n")
        return "".join(lines), "(unset)"
    old = node[key]
    line, col = node.lc.value(key)
    src = lines[line]
    if hasattr(old, "fa") and not old.fa.flow_style():  # a block list or mapping under the key: one flow line
        key_line, key_col = node.lc.key(key)
        last = key_line
        for j in range(key_line + 1, len(lines)):
            stripped = lines[j].strip()
            indent = len(lines[j]) - len(lines[j].lstrip(" "))
            if stripped and not stripped.startswith("#") and indent <= key_col and not stripped.startswith("- "):
                break
            if stripped and not stripped.startswith("#") and stripped.startswith("- ") and indent < key_col:
                break
            if stripped:
                last = j
        head = lines[key_line].rstrip("\n")
        comment = _comment_start(head, head.index(":", key_col) + 1)
        tail = head[comment:] if comment is not None else ""
        lines[key_line : last + 1] = [head[: head.index(":", key_col) + 1] + " " + _scalar(value) + tail + "\n"]
        return "".join(lines), old
    if hasattr(old, "fa"):  # a flow collection, possibly over several lines: rewritten on its first line
        end = _flow_end(src, col)
        if end is None:  # it closes on a later line: join the lines it spans
            joined = "".join(lines[line:])
            close = _flow_end(joined.replace("\n", " "), col)
            if close is None:
                raise ParamsError(f"{dotted}: its value could not be found; edit params.yaml by hand")
            span = joined[:close].count("\n")
            rest = joined[close:].split("\n", 1)[0]
            lines[line : line + span + 1] = [joined[:col] + _scalar(value) + rest + "\n"]
            return "".join(lines), old
    else:
        end = len(src.rstrip("\n"))
        hash_at = _comment_start(src, col)
        if hash_at is not None:
            end = hash_at
    _edit_line(lines, line, col, end, value)
    return "".join(lines), old


def _key(node: Any, part: str) -> Any:
    """The key of mapping ``node`` that dotted-key ``part`` names (``"5"`` names the integer key 5), or None."""
    if part in node:
        return part
    if part.lstrip("-").isdigit() and int(part) in node:
        return int(part)
    return None


def _comment_start(line: str, col: int) -> int | None:
    """Where the comment after the scalar starting at ``col`` begins (its `` #``, spaces before it
    included), or None (quotes respected: a ``#`` inside a quoted value is no comment)."""
    quote = ""
    for i in range(col, len(line)):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"" and i == col:
            quote = ch
        elif ch == "#" and i > col and line[i - 1] in " \t":
            j = i
            while j > col and line[j - 1] in " \t":
                j -= 1
            return j
    return None


def set_params(path: str | os.PathLike[str], pairs: Sequence[str]) -> list[str]:
    """Set each ``KEY=VALUE`` of ``pairs`` in the params file at ``path`` (see the module docstring).

    Only the value is rewritten, in place: the rest of its line, its comment and every other line stay
    as they are (:func:`_set_one`).

    Returns:
        What was done, one line each (``ingest.path: 'a' -> 'b'``).

    Raises:
        ParamsError: a malformed pair, a key whose parent is not a mapping, or params that do not
            validate with the new values (nothing is written then).
    """
    from gavil.io import atomic_path
    from gavil.params import load_params, parse_params

    p = Path(path)
    load_params(p)  # the file as it is must be valid (the error names what to fix first)
    done = []
    text = p.read_text(encoding="utf-8")
    for parts, value in parse_assignments(pairs):
        text, old = _set_one(text, parts, value)
        done.append(f"{'.'.join(parts)}: {old!r} -> {value!r}")
    parse_params(yaml.safe_load(text) or {}, str(p))  # refuses before anything is written
    with atomic_path(p, ".yaml") as tmp:
        tmp.write_text(text, encoding="utf-8")
    load_params(p)
    return done
