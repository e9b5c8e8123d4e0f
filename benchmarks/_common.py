"""What every benchmark script shares: the machine line and the results file."""

from __future__ import annotations

import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def machine(extra: str = "") -> str:
    """e.g. ``x86_64, 2 cores, Python 3.11.7`` (plus ``extra``)."""
    line = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return f"{line}, {extra}" if extra else line


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` (2-space indent, trailing newline)."""
    dest = ROOT / "benchmarks" / "results" / f"{name}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, indent=2) + "\n")
    return dest


def copy_project(dest: Path, with_params: bool = True) -> Path:
    """Copy the code (stages, schemas, flows), the embedded sample and dvc.yaml (and params.yaml)
    into ``dest``, a scratch project the benchmark may write ``data/`` into."""
    for name in ("stages", "schemas", "flows", "data/sample"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml") if with_params else ("dvc.yaml",):
        shutil.copy(ROOT / name, dest / name)
    return dest


def tool_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: this venv's bin first on PATH (``gavil``, ``dvc``),
    DVC analytics off, plus ``extra``."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
        **extra,
    }
