"""The README's screenshot of the game (docs/game.png): a spymaster's round on the sample images,
taken by Playwright with Chromium (Debian's, or Playwright's own download) against the real app.
The rival runs with random weights (labelled untrained on the page: no real weights exist offline here).

Usage: python benchmarks/game_screenshot.py [--out docs/game.png]
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

import uvicorn
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gavil.game.launch import build_game  # noqa: E402
from gavil.game.web import create_app  # noqa: E402
from gavil.params import Params  # noqa: E402
from tests.helpers import CHROMIUM_MISSING, find_chromium, game_project  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs/game.png"))
    args = ap.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.exit(CHROMIUM_MISSING)
    os.environ.setdefault("GAVIL_GAME_JOIN_CODE", "demo")
    os.environ.setdefault("GAVIL_GAME_ADMIN_TOKEN", "demo-admin")
    os.environ.setdefault("GAVIL_ANNOTATOR_KEY", "demo-key")
    with tempfile.TemporaryDirectory() as tmp:
        root = game_project(Path(tmp))
        params = Params().replace(models={"rival": {"allow_download": False}}, game={"rival_random_weights": True})
        game, images = build_game(params, root)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = uvicorn.Server(uvicorn.Config(create_app(game, images), host="127.0.0.1", port=port, log_level="warning"))
        threading.Thread(target=srv.run, daemon=True).start()
        while not srv.started:
            time.sleep(0.05)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1000, "height": 760})
            page.goto(f"http://127.0.0.1:{port}/")
            page.fill("#code", os.environ["GAVIL_GAME_JOIN_CODE"])
            page.fill("#name", "Ada")
            page.click("#join-btn")
            page.click("#consent-accept")  # the consent text comes before any work
            page.click("#mode-create")
            expect(page.locator("#create-grid .tile")).to_have_count(5)
            for i in (0, 2):
                page.click(f"#create-grid .tile[data-pos='{i}']")
            page.fill("#cue", "launch")
            page.click("#submit-create")
            expect(page.locator("#create-result")).to_contain_text("Fool-the-AI")
            page.wait_for_function("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
        srv.should_exit = True
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
