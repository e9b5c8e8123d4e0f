"""Shared fixtures. Tests run offline: no model downloads, HTTP only on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GAVIL_ANNOTATOR_KEY", "test-key-not-secret")

# Tests import open_clip/torchvision directly: make that safe on the CPU torch build first.
from gavil.compat.torchvision_bridge import ensure_torchvision
from tests.helpers import build_sample, copy_project

ensure_torchvision()


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside an empty temporary directory (stage paths are relative)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def ocr_reader():
    """One EasyOCR reader (offline English weights) for the whole session; batches of up to 8
    same-shaped images, so the tests run the stacked ``detect`` path (the default, 1, never stacks)."""
    from stages.ocr_filter import make_reader

    return make_reader(batch_size=8)


@pytest.fixture(scope="session")
def sample_build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """The sample project after one ``dvc repro`` (:func:`tests.helpers.build_sample`), built once per
    session and shared: (folder, the run's process). Read it only; to change it, use ``sample_copy``."""
    return build_sample(tmp_path_factory.mktemp("sample-build") / "proj")


@pytest.fixture(scope="session")
def export_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample release with the README's images, built up to ``export`` (:func:`tests.helpers.build_export`),
    once per session and shared: read it only."""
    from tests.helpers import build_export

    return build_export(tmp_path_factory.mktemp("export-build") / "proj")


@pytest.fixture
def sample_copy(sample_build: tuple[Path, subprocess.CompletedProcess], tmp_path: Path) -> Path:
    """A private copy of the built sample project (git, DVC cache and outputs included), this test's alone."""
    return copy_project(sample_build[0], tmp_path / "proj")


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        fn = self.routes.get(path)
        if fn is None:
            self.send_response(404)
            self.end_headers()
            return
        fn(self)

    def log_message(self, *args) -> None:  # silence
        pass


@pytest.fixture
def http_server() -> Iterator[tuple[str, dict]]:
    """A threaded HTTP server on 127.0.0.1; tests register ``routes[path] = handler(req)``."""
    routes: dict[str, Callable] = {}
    handler = type("H", (_Handler,), {"routes": routes})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", routes
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium (Playwright) for the game's browser tests; without one the test fails,
    saying what to install (:func:`tests.helpers.require_chromium`)."""
    from playwright import sync_api

    from tests.helpers import require_chromium

    chromium = require_chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def games() -> Iterator[list[Any]]:
    """Games a test builds (:class:`gavil.game.service.Game`), closed when it ends."""
    made: list[Any] = []
    yield made
    for g in made:
        g.close()
