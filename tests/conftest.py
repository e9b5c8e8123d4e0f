"""Shared fixtures. Tests run offline: no model downloads, HTTP only on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
RELEASE = SAMPLE / "winogavil"
IMAGES = SAMPLE / "images"

os.environ.setdefault("DVC_NO_ANALYTICS", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GAVIL_ANNOTATOR_KEY", "test-key-not-secret")

# Tests import open_clip/torchvision directly: make that safe on the CPU torch build first.
from stages._torchvision_compat import ensure_torchvision  # noqa: E402

ensure_torchvision()


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test inside an empty temporary directory (stage paths are relative)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def ocr_reader():
    """One EasyOCR reader (offline English weights) for the whole session."""
    from stages.ocr_filter import make_reader

    return make_reader(gpu=False)


class _Handler(BaseHTTPRequestHandler):
    routes: dict[str, Callable[[BaseHTTPRequestHandler], None]] = {}

    def do_GET(self) -> None:  # noqa: N802
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
