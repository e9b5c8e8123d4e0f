"""Starting a new benchmark's permanent IDs (``gavil ledger new``).

The ID ledger (``id_ledger``, ``data/ledger/benchmark_ids.parquet``) and the annotator key's
fingerprint (``data/ledger/annotator_key.json``) are in git: ``select_instances`` appends to the
ledger and never forgets a published ID (docs/annotations.md "Permanent IDs"). A project that stops
building the sample's benchmark and starts its own begins both anew; the old ones stay in git's
history. The exported benchmark of the old ledger is removed with them (the next ``dvc repro``
exports the new one), so nothing published under the old IDs is left to contradict the new ledger.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from gavil.errors import GavilError
from gavil.io import write_json
from gavil.pipeline import catalog

#: What a new ledger removes besides the ledger itself: the export built from the old one.
EXPORTS = ("benchmark", "benchmark_csv", "split_game_5_6", "split_game_10_12", "split_swow", "benchmark_dataset")


def _uncommitted(root: Path, path: Path) -> bool:
    """Whether git (if ``root`` is a checkout) holds other bytes of ``path`` than the file's."""
    r = subprocess.run(
        ["git", "status", "--porcelain", "--", str(path.relative_to(root))], cwd=root, capture_output=True, text=True
    )
    return r.returncode == 0 and bool(r.stdout.strip())


def start_new_ledger(root: Path = Path("."), force: bool = False) -> list[str]:
    """Write an empty ID ledger and a null annotator-key fingerprint under ``root``, and remove the
    export of the old ledger. Returns what was done, one line each.

    Raises:
        GavilError: the ledger has changes git does not hold (they would be lost) and not ``force``.
    """
    ledger = root / catalog.entry("id_ledger").path
    if ledger.exists() and _uncommitted(root, ledger) and not force:
        raise GavilError(
            f"{ledger} has changes git does not hold: commit it first (its IDs are permanent), "
            "or pass --force to drop them"
        )
    old = len(catalog.read_table("id_ledger", root)) if ledger.exists() else 0
    catalog.write_table(catalog.empty_table("id_ledger"), "id_ledger", root)
    write_json(root / catalog.entry("annotator_key_fingerprint").path, {"fingerprint": None})
    removed = []
    for name in EXPORTS:
        p = root / catalog.entry(name).path
        if p.is_dir():
            import shutil

            shutil.rmtree(p)
            removed.append(str(p.relative_to(root)))
        elif p.exists():
            p.unlink()
            removed.append(str(p.relative_to(root)))
    lines = [
        f"{ledger.relative_to(root)}: a new, empty ID ledger (the old one held {old} IDs; git keeps it)",
        f"{catalog.entry('annotator_key_fingerprint').path}: no annotator key recorded yet",
    ]
    if removed:
        lines.append(f"removed the old benchmark's export: {', '.join(removed)} (`dvc repro` exports the new one)")
    return lines
