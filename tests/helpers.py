"""Helpers the tests import (paths of the sample data, a project copy, the built sample, the browser, an HTTP reply).

Fixtures live in ``conftest.py``; plain functions and constants live here, so tests import them
from a module of their own and never from ``conftest``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from gavil.pipeline.codedeps import PACKAGES

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
RELEASE = SAMPLE / "winogavil"
IMAGES = SAMPLE / "images"
BIN = Path(sys.executable).parent

#: What the browser tests say when no Chromium is found (they fail, never skip).
CHROMIUM_MISSING = (
    "Chromium not found: the browser tests need it. Install Debian/Ubuntu's `apt-get install chromium` "
    "(/usr/bin/chromium), or, where the network allows, Playwright's own: `python -m playwright install chromium`."
)


def find_chromium() -> str | None:
    """The Chromium the browser tests drive: Debian's ``chromium`` (or ``chromium-browser``) on PATH,
    else the one ``python -m playwright install chromium`` downloaded; None when neither exists."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    from playwright.sync_api import sync_playwright  # the `test` extra installs it (no browser with it)

    try:
        with sync_playwright() as p:
            own = p.chromium.executable_path
    except Exception:  # a driver that cannot start finds no browser either
        return None
    return own if own and Path(own).exists() else None


def require_chromium() -> str:
    """:func:`find_chromium`, or the test fails (never skips) with :data:`CHROMIUM_MISSING`."""
    import pytest

    found = find_chromium()
    if found is None:
        pytest.fail(CHROMIUM_MISSING, pytrace=False)
    return found


def send(req: BaseHTTPRequestHandler, body: bytes, ctype: str = "image/jpeg", status: int = 200) -> None:
    req.send_response(status)
    req.send_header("Content-Type", ctype)
    req.send_header("Content-Length", str(len(body)))
    req.end_headers()
    req.wfile.write(body)


#: AfLite params for pipeline tests that only need the stage to run (its semantics: tests/stages/aflite/test_aflite.py):
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
    shutil.copy(ROOT / "data/sample/consent.md", dest / "data/sample/consent.md")  # game.consent_path
    (dest / "data/game").mkdir(parents=True)
    (dest / "data/game/README.md").write_text("the game's store goes here\n")
    (dest / "data/sample/images").mkdir(parents=True)
    for name in images:
        src = next(IMAGES.glob(f"{name}.*"))
        shutil.copy(src, dest / "data/sample/images" / src.name)
    # the sample's review decisions for these images (a row for an image the project lacks is refused)
    header, *rows = (ROOT / "data/review/decisions.csv").read_text().splitlines(keepends=True)
    (dest / "data/review").mkdir(parents=True)
    (dest / "data/review/decisions.csv").write_text(
        header + "".join(r for r in rows if r.rsplit(",", 1)[1].strip() in images)
    )
    return dest


#: The sample images the README's examples need: the two release candidate sets the emoji complete
#: (sandwich ... meat, satellite ... troll) and the photos of the worked annotation batch.
README_IMAGES = ["sandwich", "crutch", "spaghetti", "woman", "meat", "satellite", "beach", "lotion", "clothes"]
README_IMAGES += ["troll", "rocket", "cat", "moon", "coffee", "brick", "horse", "grass", "stone", "clock", "eye"]
#: The stages of :func:`build_export`: up to ``export``, without the models.
EXPORT_STAGES = ["ingest_concepts", "filter_profanity", "crawl_images", "ocr_filter", "import_annotations"]
EXPORT_STAGES += ["select_instances", "export"]


def run_stages(project: Path, names: list[str]) -> dict:
    """``names`` in order, in ``project`` (what ``dvc repro`` runs for them); the last one's metrics."""
    from gavil.pipeline.runner import run_stage

    before = Path.cwd()
    os.chdir(project)
    try:
        return [run_stage(name, "params.yaml") for name in names][-1]
    finally:
        os.chdir(before)


def build_export(dest: Path) -> Path:
    """The sample project with the release and :data:`README_IMAGES` after every stage up to ``export``:
    what the README's first command leaves for the export's readers (8 instances in the Hugging Face
    dataset). Built once per session (``conftest.export_build``); read it only."""
    project = mini_project(dest, README_IMAGES)
    shutil.copytree(ROOT / "data/sample/raw_example", project / "data/sample/raw_example")
    shutil.copytree(ROOT / "data/ledger", project / "data/ledger")
    run_stages(project, EXPORT_STAGES)
    return project


#: The sample images of the built sample project (the tests' `dvc repro` on the release).
MINI_IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick", "horse", "grass", "page"]


def run(cmd: list[str], cwd: Path, timeout: float = 900, **env: str) -> subprocess.CompletedProcess:
    """``cmd`` in ``cwd`` with this venv's scripts (dvc, gavil) first on PATH; output captured as text."""
    full = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "DVC_NO_ANALYTICS": "1", **env}
    return subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout)


def build_sample(dest: Path) -> tuple[Path, subprocess.CompletedProcess]:
    """The sample project the pipeline tests share: a git + DVC repository with the project's code,
    the release and :data:`MINI_IMAGES`, after one ``dvc repro`` of every stage (hermetic: no
    downloads; the pool of 9 images gives 2 candidate sets of 5, 1 of 6 and 1 of 12). Returns the
    folder and the ``dvc repro`` process (its output carries the run's messages).

    Built once per test session (``conftest.sample_build``); a test that changes anything works on
    a :func:`copy_project` of it."""
    import yaml

    d = mini_project(dest, MINI_IMAGES)
    params = yaml.safe_load((d / "params.yaml").read_text())
    no_downloads(params)  # hermetic: never touch the network
    params["instances"]["game_sets"] = {5: 2, 6: 1, 10: 0, 12: 1}
    params["aflite"] |= FAST_AFLITE  # the paper's 64 classifiers x 12 phases take minutes on 4,561 instances
    params["paper"]["supervised"]["seeds"] = [0, 1]  # Table 5's 5 seeds x 2 groups, paid by every build here
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for cmd in (
        ["git", "init", "-q"],
        ["git", "config", "user.email", "t@t"],
        ["git", "config", "user.name", "t"],
        [sys.executable, "-m", "dvc", "init", "-q"],
    ):
        done = run(cmd, d)
        assert done.returncode == 0, done.stderr[-2000:]
    first = run([sys.executable, "-m", "dvc", "repro"], d, timeout=1800)  # generous: a loaded machine
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    return d, first


def copy_project(src: Path, dest: Path) -> Path:
    """A private copy of a built project (work tree, ``.git``, ``.dvc`` with its cache; times and
    modes kept), so that a test may change params, re-run stages or commit without touching ``src``."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


GAME_IMAGES = ["rocket", "moon", "astronaut", "cat", "coffee", "brick", "horse", "grass", "page", "clock", "coin"]


def game_project(dest: Path, images: list[str] = GAME_IMAGES, open_round: bool = True) -> Path:
    """A project root with what ``gavil game`` reads, written directly (no pipeline run): the
    sample ``images`` in the content-addressed store, an ``ocr`` table accepting each, and
    ``candidate_sets`` of 5 (first five), 6 (last six) and 10 (first ten) candidates, the sample's
    consent text (``game.consent_path``); with ``open_round``, a game store whose round 1 is open
    against the default ``rival`` entry."""
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
    (dest / "data/sample").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "data/sample/consent.md", dest / "data/sample/consent.md")
    if open_round:
        from gavil.game.rounds import open_round as open_
        from gavil.gamestore.store import store_file
        from gavil.params import Params

        open_(store_file(dest / "data/game"), Params(), "rival", now=1.0)
    return dest


def hide_mpnet_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the ``mpnet`` extra's five part packages look uninstalled (whatever this venv holds), as on
    an install without the extra."""
    from importlib import metadata

    from gavil.models import mpnet

    real = metadata.distribution

    def without_parts(name: str) -> metadata.Distribution:
        if name in mpnet.PARTS:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(mpnet.metadata, "distribution", without_parts)


#: ``annotations.crowd.columns`` for the MTurk-style batch files the tests write (the release's HIT layout)
MTURK_COLUMNS = {
    "candidates": "Input.candidates",
    "cue_1": "Answer.cue1",
    "associations_1": "Answer.associations1",
    "cue_2": "Answer.cue2",
    "associations_2": "Answer.associations2",
    "instance_id": "Input.instance_id",
    "selection": "Answer.selection",
}


@contextlib.contextmanager
def serve_app(app: object) -> Iterator[str]:
    """An ASGI ``app`` served by uvicorn on a free 127.0.0.1 port in a thread; yields its base URL
    and stops the server on exit."""
    import socket
    import threading
    import time

    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        t.join(10)


def old_store(path: Path, version: int) -> sqlite3.Connection:
    """An empty game store as schema ``version`` left it (its migration steps, as the old code ran
    them; version 1 with ``user_version`` 0, as the first release wrote it), open in autocommit
    mode for the test to fill with that version's rows."""
    from gavil.gamestore.migrations import MIGRATIONS

    con = sqlite3.connect(path, isolation_level=None)
    for v in range(version):
        step = MIGRATIONS[v]
        if callable(step):
            step(con)
        else:
            con.executescript(step)
    con.execute(f"PRAGMA user_version = {0 if version == 1 else version}")
    return con
