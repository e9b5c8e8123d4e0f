"""Helpers the tests import (paths of the sample data, a project copy, an HTTP reply).

Fixtures live in ``conftest.py``; plain functions and constants live here, so tests import them
from a module of their own and never from ``conftest``.
"""

from __future__ import annotations

import shutil
from http.server import BaseHTTPRequestHandler
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
RELEASE = SAMPLE / "winogavil"
IMAGES = SAMPLE / "images"


def send(req: BaseHTTPRequestHandler, body: bytes, ctype: str = "image/jpeg", status: int = 200) -> None:
    req.send_response(status)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


def mini_project(dest: Path, images: list[str]) -> Path:
    """A runnable copy of the project (code, dvc.yaml, params, release files) with a few images."""
    for name in ("stages", "schemas", "flows"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(RELEASE, dest / "data/sample/winogavil")
    (dest / "data/sample/raw").mkdir(parents=True)
    (dest / "data/sample/raw/README.md").write_text("batches go here\n")
    (dest / "data/sample/images").mkdir(parents=True)
    for name in images:
        src = next(IMAGES.glob(f"{name}.*"))
        shutil.copy(src, dest / "data/sample/images" / src.name)
    return dest
