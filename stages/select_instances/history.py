"""The ledger remembers its history: no older copy of the ledger files may renumber published IDs.

:func:`stages.select_instances.guard.check_ledger` holds the ID ledger to the published IDs beside it,
but both files can be rolled back together (a lost merge, ``git checkout <old commit> -- data/ledger``,
a checkout of the wrong commit): each then agrees with the other, and the next build would give the
lost IDs to other content. So selection also reads every version of the published IDs that git holds
in the work tree's own history (the commits reachable from ``HEAD``) and in every release tag
(``v*``, written by ``gavil release``), and refuses a ledger that lacks an ID one of them published.
Other branches do not count: an experiment on a branch that was never released binds nothing.

Which versions count: those of the same benchmark, i.e. sharing at least one ``(dataset, ID,
fingerprint)`` line with the current file. ``gavil ledger new`` starts a new benchmark whose IDs carry
other fingerprints, so the old benchmark's history never blocks it; a version with no ID is no
constraint. A project outside git (or without git on the machine) has no history to hold it to.
"""

from __future__ import annotations

import csv
import io
import subprocess
from dataclasses import dataclass
from pathlib import Path

from stages.select_instances.guard import PUBLISHED_HEADER, LedgerError

Published = tuple[str, int, str]


@dataclass(frozen=True)
class Version:
    """One version of the published IDs in git: the commit (and a tag naming it, if any) and its rows."""

    commit: str
    name: str
    rows: frozenset[Published]


def _git(root: Path, *args: str) -> str | None:
    """``git args`` in ``root``: its output, or None where git fails or is missing."""
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout if r.returncode == 0 else None


def _parse(text: str) -> frozenset[Published]:
    """The rows of one historic version; a version that is not a published-IDs file gives none."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0] != PUBLISHED_HEADER:
        return frozenset()
    return frozenset((r[0], int(r[1]), r[2]) for r in rows[1:] if len(r) == 3 and r[1].isdigit())


def _tags(root: Path) -> dict[str, str]:
    """commit -> the first tag (sorted) naming it."""
    out: dict[str, str] = {}
    for line in sorted(
        (
            _git(root, "for-each-ref", "--format=%(*objectname) %(objectname) %(refname:short)", "refs/tags") or ""
        ).splitlines()
    ):
        peeled, obj, name = (line.split(" ") + ["", "", ""])[:3]
        out.setdefault(peeled or obj, name)
    return out


def published_history(root: Path, published_path: Path) -> list[Version]:
    """Every version of ``published_path`` (inside ``root``, the project's git work tree) in the commits
    reachable from ``HEAD`` or a release tag ``v*``, newest first; [] outside git."""
    rel = published_path.resolve().relative_to(root.resolve()).as_posix()
    commits = (_git(root, "rev-list", "HEAD", "--tags=v*", "--", rel) or "").split()
    if not commits:
        return []
    try:  # one git process for every version; sizes in the batch headers are in bytes
        r = subprocess.run(
            ["git", "cat-file", "--batch"],
            cwd=root,
            input="".join(f"{c}:./{rel}\n" for c in commits).encode(),  # ./: relative to root
            capture_output=True,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    tags = _tags(root)
    versions, rest = [], r.stdout
    for c in commits:
        header, _, rest = rest.partition(b"\n")
        if not header or header.endswith(b"missing"):
            continue
        size = int(header.split()[-1])
        body, rest = rest[:size], rest[size + 1 :]
        versions.append(Version(c, tags.get(c, c[:12]), _parse(body.decode("utf-8", "replace"))))
    return versions


def check_history(current: list[Published] | None, history: list[Version], published_path: Path) -> None:
    """Stop unless the current published IDs hold every ID any version of the same benchmark in
    ``history`` published (module doc).

    Args:
        current: the published IDs now (:func:`stages.select_instances.guard.read_published`; None: none).
        history: :func:`published_history`.

    Raises:
        LedgerError: one line naming the file, the lost IDs (the first five) and the commit or tag
            that published them, and how to restore the file.
    """
    now = frozenset(current or [])
    lost: dict[Published, str] = {}
    for v in history:
        if v.rows & now:
            lost |= {row: v.name for row in v.rows - now if row not in lost}
    if not lost:
        return
    named = sorted(lost)[:5]
    ids = ", ".join(f"{d} ID {i}" for d, i, _ in named) + (f" and {len(lost) - 5} more" if len(lost) > 5 else "")
    where = lost[named[0]]
    raise LedgerError(
        f"{published_path.as_posix()} lacks {len(lost)} ID(s) that {where} published ({ids}): the ledger files are "
        f"an older copy; restore both from that version (`git checkout {where} -- {published_path.parent.as_posix()}`) "
        "and run again; nothing was written"
    )
