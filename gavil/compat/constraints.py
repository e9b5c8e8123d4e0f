"""``constraints.txt``: the exact versions of the project's dependency closure, and the check that
every pin resolves from the public package index alone.

- :func:`constraints_text` writes the file from the installed environment (``gavil constraints --write``).
- :func:`resolve_public` asks pip to resolve the README's test install with only the public index:
  pip's configuration files and ``PIP_*`` variables ignored (``PIP_CONFIG_FILE=/dev/null``,
  ``--isolated``), the operating system's certificate store for TLS (``--use-feature=truststore``).
  It needs the network (CI runs ``gavil constraints --public``; the tests stay offline).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CONSTRAINTS_HEADER = """\
# Exact versions of everything winogavil-pipeline needs (with its test and dask extras), as installed
# and tested. The README's set-up commands install with it: pip install -c constraints.txt -e ".[test]"
# Every pin is a public release (no local labels such as +cpu): it resolves from the public index alone.
# Regenerate after changing pyproject.toml's dependencies, in an environment installed that way (then
# `pip install` the change) and tested: gavil constraints --write
"""


def constraints_text(pyproject: str | Path = "pyproject.toml") -> str:
    """``constraints.txt`` for this environment: ``name==version`` for every distribution in the
    dependency closure of ``pyproject``'s dependencies and optional dependencies, plus what the
    installed project's own metadata adds (an editable install requires ``editables``), with
    markers evaluated here, from the installed metadata.

    Versions are written without a local label (PEP 440: ``2.13.0+cpu`` -> ``2.13.0``): a pin
    without one matches the public index's build and a local build alike, so the file resolves
    from the public package index alone (a ``+cpu`` pin exists on no public index).

    Either torch build gives the same file: the CUDA runtime that the public index's Linux torch
    (``2.13.0+cu130``) pulls in beside itself (:data:`CUDA_CLOSURE_PREFIXES`: ``nvidia-*``,
    ``triton``, ``cuda-*``) is pinned exactly by that torch's own metadata, so it gets no line here
    and is not followed; a CPU build has none of it. So the README's test command passes on a
    researcher's machine whichever build pip gave them.

    Raises:
        GavilError: a dependency is missing or does not satisfy its requirement.
    """
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    from gavil.errors import GavilError

    project = tomllib.loads(Path(pyproject).read_text())["project"]
    wanted = [*project["dependencies"], *(r for rs in project.get("optional-dependencies", {}).values() for r in rs)]
    try:
        own = [r for r in metadata.requires(project["name"]) or [] if "extra ==" not in r]
    except metadata.PackageNotFoundError:
        own = []
    todo = [Requirement(r) for r in [*wanted, *own]]
    pins: dict[str, str] = {}
    extras_seen: dict[str, set[str]] = {}
    while todo:
        req = todo.pop()
        name = str(canonicalize_name(req.name))
        if name == canonicalize_name(project["name"]):
            continue  # the project's own extras (test includes mpnet, docs) are roots already
        if name.startswith(CUDA_CLOSURE_PREFIXES):
            continue  # pinned by a CUDA torch's own metadata (see above); absent beside a CPU torch
        try:
            version = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            raise GavilError(
                f'{req.name} is not installed: pip install -c constraints.txt -e ".[test]" first'
            ) from None
        if not req.specifier.contains(version, prereleases=True):
            raise GavilError(f"installed {req.name} {version} does not satisfy {req}: pip install '{req}', test, retry")
        if name in pins and set(req.extras) <= extras_seen[name]:
            continue
        pins[name], extras_seen[name] = version, extras_seen.get(name, set()) | set(req.extras)
        for text in metadata.requires(req.name) or []:
            sub = Requirement(text)
            if sub.marker is None or any(sub.marker.evaluate({"extra": e}) for e in extras_seen[name] | {""}):
                todo.append(sub)
    return CONSTRAINTS_HEADER + "".join(f"{n}=={Version(v).public}\n" for n, v in sorted(pins.items()))


#: Packages the public index's Linux torch pulls in beside itself (the CUDA runtime), each pinned
#: exactly by that torch's own metadata, so they need no line here (a CPU install has none of them).
CUDA_CLOSURE_PREFIXES = ("nvidia-", "triton", "cuda-")


@dataclass
class PublicResolution:
    """What pip resolved for ``pip install -c constraints.txt -e ".[test]"`` from the public index."""

    ok: bool
    resolved: dict[str, str] = field(default_factory=dict)  # name -> version pip would install
    unpinned: list[str] = field(default_factory=list)  # resolved, no pin, outside the CUDA closure
    cuda_closure: list[str] = field(default_factory=list)  # resolved, no pin, pinned by torch's metadata
    error: str = ""

    def summary(self) -> str:
        """A few lines for the terminal: the verdict, then what is missing or failed."""
        if self.error:
            return f"constraints.txt does NOT resolve from the public index alone:\n{self.error}"
        lines = [
            f"constraints.txt resolves from the public index alone: {len(self.resolved)} packages"
            + (
                f" ({len(self.cuda_closure)} of them the CUDA runtime the index's torch pins itself)"
                if self.cuda_closure
                else ""
            )
        ]
        if self.unpinned:
            lines.append(f"not pinned in constraints.txt: {', '.join(self.unpinned)} (gavil constraints --write)")
        return "\n".join(lines)


def resolve_public(constraints: Path, project: Path, extra: str = "test", timeout_s: float = 1800) -> PublicResolution:
    """Resolve ``pip install -c <constraints> -e "<project>[<extra>]"`` as a researcher's machine would:
    the public index only (no find-links, extra indexes or constraint files from pip's configuration).

    Returns a :class:`PublicResolution`: ``ok`` when pip resolves and every resolved package is
    pinned in ``constraints`` or belongs to the CUDA runtime the index's torch pins exactly
    (:data:`CUDA_CLOSURE_PREFIXES`). Pins are compared by name (pip enforces the versions).
    """
    from packaging.utils import canonicalize_name

    pins = {
        str(canonicalize_name(line.split("==")[0])): line.split("==")[1].strip()
        for line in constraints.read_text().splitlines()
        if "==" in line and not line.startswith("#")
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull  # no configuration file at all (global, site or user)
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = [sys.executable, "-m", "pip", "install", "--isolated", "--use-feature=truststore", "--dry-run"]
        cmd += ["--ignore-installed", "--quiet", "--report", str(report), "-c", str(constraints)]
        cmd += ["-e", f"{project.resolve()}[{extra}]"]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return PublicResolution(ok=False, error=f"pip did not finish in {timeout_s:.0f} s")
        if r.returncode != 0 or not report.exists():
            tail = [x for x in (r.stderr or r.stdout).splitlines() if x.strip() and "WARNING" not in x][-8:]
            return PublicResolution(ok=False, error="\n".join(tail) or f"pip exited {r.returncode}")
        items = json.loads(report.read_text())["install"]
    resolved = {str(canonicalize_name(i["metadata"]["name"])): i["metadata"]["version"] for i in items}
    own = str(canonicalize_name("winogavil-pipeline"))
    loose = sorted(n for n in resolved if n not in pins and n != own)
    cuda = [n for n in loose if n.startswith(CUDA_CLOSURE_PREFIXES)]
    unpinned = [n for n in loose if n not in cuda]
    return PublicResolution(ok=not unpinned, resolved=resolved, unpinned=unpinned, cuda_closure=cuda)
