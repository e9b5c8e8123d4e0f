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

#: The fixtures that build a project or start a server, as ``<module>.<fixture>`` (the module that
#: defines it, as several modules define a ``project`` or a ``server``): every test that uses one,
#: directly or through another fixture, is marked ``slow`` (:func:`pytest_collection_modifyitems`),
#: so that ``pytest -m "not slow"`` stays a quick loop. tests/project/test_test_suite.py finds these by
#: reading the fixtures' code and fails when one is missing here.
HEAVY_FIXTURES: dict[str, str] = {
    "conftest.sample_build": "the sample project after one `dvc repro` of every stage",
    "conftest.sample_copy": "a copy of that built sample project",
    "conftest.export_build": "the sample release run through every stage up to `export`",
    "conftest.browser": "a headless Chromium (Playwright)",
    "test_crawl.http_server": "the fault-injecting web server of tests/stages/crawl_images/hostile_web.py",
    "test_crawl_hostile.web": "the fault-injecting web server of tests/stages/crawl_images/hostile_web.py",
    "test_export_hf.built": "runs the `export` stage on a hand-made project",
    "test_game_access.server": "`gavil game` (uvicorn) in a subprocess",
    "test_game_browser.server": "the game's app served by uvicorn",
    "test_game_limits.server": "`gavil game` (uvicorn) in a subprocess",
    "test_ledger_guard.project": "runs `gavil stage select_instances` in a subprocess",
    "test_operations.served_project": "a mini project after `dvc repro`, and a Prefect server (`gavil server`)",
    "test_prefect.served": "the README's Prefect block: a Prefect server, `gavil serve` and flow runs",
    "test_ledger_history.history": "runs `gavil stage select_instances` in a subprocess",
    # models (the slow marker's "loads EasyOCR or CLIP"): seconds to load, tens of seconds to run
    "conftest.ocr_reader": "loads EasyOCR's reader",
    "test_ocr_int8.craft": "loads EasyOCR's CRAFT detector",
    "test_ocr_ppocr.pp_read": "loads the PP-OCR reader",
    "test_aflite.release_features": "loads the text model and embeds 400 release instances",
    "test_order.minilm": "loads the MiniLM text model",
}
#: A slow test's timeout (s) unless it sets its own: building the sample may take many minutes on a
#: loaded machine (build_sample's own `dvc repro` timeout, 1800 s, fires first with the run's output);
#: this only ends a hang. Every other test has pyproject.toml's ``timeout``.
SLOW_TIMEOUT_S = 3600


def heavy_fixtures(item: pytest.Item) -> list[str]:
    """The :data:`HEAVY_FIXTURES` that ``item`` uses, directly or through other fixtures (the
    fixture each name resolves to for this test, so a module's own ``project`` is told apart)."""
    defs = getattr(item, "_fixtureinfo", None)
    used = []
    for name, fixturedefs in defs.name2fixturedefs.items() if defs else []:
        func = fixturedefs[-1].func
        key = f"{func.__module__.rpartition('.')[2]}.{name}"
        if key in HEAVY_FIXTURES:
            used.append(key)
    return used


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the marks must be there when it looks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test that uses a :data:`HEAVY_FIXTURES` fixture, and give every slow test
    without a ``timeout`` mark of its own :data:`SLOW_TIMEOUT_S`."""
    # the first Prefect test harness of a session runs first, as it did before the tests moved into rooms:
    # later in the session, after other harnesses, its drain waited forever on this machine
    items.sort(key=lambda i: i.name != "test_prefect_flow_with_concurrent_partitions_loses_nothing")
    for item in items:
        if item.get_closest_marker("slow") is None and heavy_fixtures(item):
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is not None and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside an empty temporary directory (stage paths are relative)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def ocr_reader():
    """One EasyOCR reader (offline English weights) for the whole session; batches of up to 8
    same-shaped images, so the tests run the stacked ``detect`` path (the default, 1, never stacks)."""
    from gavil.models.easyocr_reader import make_reader

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
