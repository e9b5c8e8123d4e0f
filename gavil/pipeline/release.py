"""``gavil release``: tag the commit that holds a dataset version (docs/dynamic.md "Versioned export").

A release is a commit whose ``dvc.lock`` and ``data/metrics`` describe the exported benchmark: the
git work tree is clean and ``dvc status`` finds every stage up to date, so the outputs on disk are the
ones ``dvc.lock`` hashes. :func:`release` reads the dataset version ``export`` wrote
(``data/metrics/export.json``, ``1.<round>.<patch>``, :func:`gavil.domain.versions.dataset_version`)
and puts an annotated git tag ``v<version>`` on ``HEAD``; ``git checkout v<version> && dvc checkout``
(or ``dvc pull`` in another clone, after ``dvc push``) then restores that release's files exactly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from gavil.errors import GavilError
from gavil.pipeline import catalog

#: What ``export`` writes as the dataset version.
VERSION = re.compile(r"1\.\d+\.\d+")


class ReleaseError(GavilError):
    """A release cannot be tagged as asked; the message is one line with the fix."""


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def _dvc(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dvc", *args], cwd=root, capture_output=True, text=True)


def _tail(p: subprocess.CompletedProcess[str]) -> str:
    """The last line of a failed command's output (what it said went wrong)."""
    lines = (p.stderr or p.stdout).strip().splitlines()
    return lines[-1].strip() if lines else f"exit status {p.returncode}"


def check_clean(root: Path) -> None:
    """Raise unless ``root`` is a git work tree with nothing to commit (untracked files included)
    and ``dvc status`` reports every stage and output up to date.

    Raises:
        ReleaseError: not a git work tree, changes or untracked files, or a pipeline to re-run.
    """
    st = _git(root, "status", "--porcelain", "--untracked-files=all")
    if st.returncode != 0:
        raise ReleaseError(f"{root} is not a git work tree ({_tail(st)}): release from the project's checkout")
    if st.stdout.strip():
        changed = [line[3:] for line in st.stdout.splitlines()][:3]
        ledger = any(c.startswith("data/ledger/") for c in (line[3:] for line in st.stdout.splitlines()))
        keep = " (data/ledger/ holds published IDs: commit it, never stash or discard it)" if ledger else ""
        raise ReleaseError(
            f"the git work tree has changes ({', '.join(changed)}...): commit them after `dvc repro`{keep}"
        )
    dvc = _dvc(root, "status", "--json")
    if dvc.returncode != 0:
        raise ReleaseError(f"`dvc status` failed ({_tail(dvc)}): fix that, then run `gavil release` again")
    stale = sorted(json.loads(dvc.stdout or "{}"))
    if stale:
        raise ReleaseError(
            f"the pipeline is not up to date (dvc status: {', '.join(stale[:4])}): run `dvc repro`, commit dvc.lock "
            "and data/metrics, then `gavil release`"
        )


def dataset_version(root: Path) -> str:
    """The dataset version ``export`` wrote into ``data/metrics/export.json``.

    Raises:
        ReleaseError: no such file (run ``dvc repro``) or no valid ``version`` in it.
    """
    path = root / catalog.metrics_path("export")
    try:
        version = json.loads(path.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        raise ReleaseError(f"{path} is missing or not JSON: run `dvc repro` (the export writes it) first") from None
    if not isinstance(version, str) or not VERSION.fullmatch(version):
        raise ReleaseError(f"{path} has no dataset version 1.<round>.<patch> ({version!r}): run `dvc repro export`")
    return version


def release(root: Path = Path("."), push: bool = False) -> list[str]:
    """Tag ``HEAD`` of the project at ``root`` as release ``v<version>`` (annotated); with ``push``,
    ``dvc push`` its outputs to the default remote. Returns what was done, one line each.

    Running it again on the same commit changes nothing (the tag already marks ``HEAD``).

    Raises:
        ReleaseError: the work tree or the pipeline is not clean (:func:`check_clean`), no version
            (:func:`dataset_version`), the tag marks another commit, or git/dvc failed.
    """
    check_clean(root)
    version = dataset_version(root)
    tag = f"v{version}"
    head = _git(root, "rev-parse", "HEAD")
    if head.returncode != 0:
        raise ReleaseError(f"no commit to tag ({_tail(head)}): commit the project first")
    at = _git(root, "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}")
    lines = []
    if at.returncode == 0 and at.stdout.strip() != head.stdout.strip():
        raise ReleaseError(
            f"tag {tag} already marks commit {at.stdout.strip()[:12]}, not HEAD: a different build of version "
            f"{version}; raise export.patch in params.yaml, `dvc repro`, commit, then `gavil release`"
        )
    if at.returncode == 0:
        lines.append(f"{tag} already marks HEAD ({head.stdout.strip()[:12]}): nothing to tag")
    else:
        made = _git(root, "tag", "-a", tag, "-m", f"dataset version {version}")
        if made.returncode != 0:
            raise ReleaseError(f"`git tag {tag}` failed ({_tail(made)})")
        lines.append(f"tagged {tag} on {head.stdout.strip()[:12]} (dataset version {version})")
    if push:
        pushed = _dvc(root, "push")
        if pushed.returncode != 0:
            raise ReleaseError(f"`dvc push` failed ({_tail(pushed)}): set a remote (`dvc remote add -d NAME URL`)")
        lines.append(
            f"dvc push: the release's outputs are on the DVC remote; now `git push --tags` (or `git push origin {tag}`)"
        )
    else:
        lines.append(f"share it: `dvc push` and `git push origin {tag}` (or `gavil release --push`)")
    lines.append(f"restore it anywhere: `git checkout {tag} && dvc pull` (here: `dvc checkout`)")
    return lines
