"""What every benchmark script shares: the machine line and the results file."""

from __future__ import annotations

import json
import os
import platform
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
