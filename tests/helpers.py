"""Helpers the tests import (paths of the sample data, a project copy, an HTTP reply).

Fixtures live in ``conftest.py``; plain functions and constants live here, so tests import them
from a module of their own and never from ``conftest``.
"""

from __future__ import annotations

import shutil
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from gavil.pipeline.codedeps import PACKAGES

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


#: AfLite params for pipeline tests that only need the stage to run (its semantics: tests/test_aflite.py):
#: 4 classifiers, and a cutoff k above what one phase flags, so AfLite stops after one phase
#: (4 classifiers alone ran 46 phases, 40 s, on the 4,561 release instances).
FAST_AFLITE = {"n_classifiers": 4, "cutoff": 0.5}


def no_downloads(params: dict, **rival: object) -> dict:
    """``params`` (params.yaml as a dict) with ``allow_download: false`` in every open_clip entry of
    ``models`` (hermetic: never touch the network) and ``rival`` merged into ``models.rival``."""
    for entry in params["models"].values():
        if entry["kind"] == "open_clip":
            entry["allow_download"] = False
    params["models"]["rival"] |= rival
    return params


def mini_project(dest: Path, images: list[str]) -> Path:
    """A runnable copy of the project (code, dvc.yaml, params, release files) with a few images."""
    for name in PACKAGES:  # the code dvc.yaml names: gavil, stages, schemas, flows
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml"):
        shutil.copy(ROOT / name, dest / name)
    shutil.copytree(RELEASE, dest / "data/sample/winogavil")
    (dest / "data/sample/raw").mkdir(parents=True)
    (dest / "data/sample/raw/README.md").write_text("batches go here\n")
    (dest / "data/game").mkdir(parents=True)
    (dest / "data/game/README.md").write_text("the game's store goes here\n")
    (dest / "data/sample/images").mkdir(parents=True)
    for name in images:
        src = next(IMAGES.glob(f"{name}.*"))
        shutil.copy(src, dest / "data/sample/images" / src.name)
    return dest


GAME_IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick", "horse", "grass", "page", "clock", "coin"]


def game_project(dest: Path, images: list[str] = GAME_IMAGES) -> Path:
    """A project root with what ``gavil game`` reads, written directly (no pipeline run): the
    sample ``images`` in the content-addressed store, an ``ocr`` table accepting each, and
    ``candidate_sets`` of 5 (first five), 6 (last six) and 10 (first ten) candidates."""
    import hashlib

    import pandas as pd

    from gavil.pipeline import catalog

    rows = []
    for name in images:
        src = next(IMAGES.glob(f"{name}.*"))
        sha = hashlib.sha256(src.read_bytes()).hexdigest()
        rel = Path("data/images") / sha[:2] / f"{sha}{src.suffix}"
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest / rel)
        rows.append({"concept": name, "sha256": sha, "path": rel.as_posix(), "source_url": None, "rank": 1})
    ocr = pd.DataFrame(rows).assign(candidates_read=1, status="accepted", reason=None, ocr_text=None)
    ocr = ocr.assign(ocr_confidence=None, match_token=None, match_score=None)
    for col in ("rank", "candidates_read"):
        ocr[col] = ocr[col].astype("Int64")
    for col in ("ocr_confidence", "match_score"):
        ocr[col] = ocr[col].astype(float)
    catalog.write_table(ocr, "ocr", dest)
    sets = [("random-5-0000", images[:5]), ("random-6-0000", images[-6:]), ("random-10-0000", images[:10])]
    cs = pd.DataFrame(
        {
            "set_id": [s for s, _ in sets],
            "num_candidates": [len(c) for _, c in sets],
            "candidates": [c for _, c in sets],
        }
    ).assign(images_source="random")
    catalog.write_table(cs, "candidate_sets", dest)
    (dest / "data/game").mkdir(parents=True, exist_ok=True)
    return dest
