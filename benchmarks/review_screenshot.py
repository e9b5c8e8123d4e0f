"""The picture of the review page on docs/review.md (docs/review.png): the sample's images in the
review page, taken by Playwright with Chromium (Debian's, or Playwright's own download) against the
real app. Six sample images are crawled and OCRed in a temporary project whose decisions file is
empty, so all wait for a review; one is accepted and one rejected with the keyboard first.

Usage: python benchmarks/review_screenshot.py [--out docs/review.png]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gavil.review.decisions import COLUMNS  # noqa: E402
from gavil.review.web import create_app, review_items  # noqa: E402
from tests.helpers import CHROMIUM_MISSING, find_chromium, mini_project, run_stages, serve_app  # noqa: E402

IMAGES = ["astronaut", "cat", "coffee", "moon", "rocket", "brick"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "docs/review.png"))
    args = ap.parse_args()
    chromium = find_chromium()
    if chromium is None:
        sys.exit(CHROMIUM_MISSING)
    with tempfile.TemporaryDirectory() as tmp:
        project = mini_project(Path(tmp) / "proj", IMAGES)
        decisions = project / "data/review/decisions.csv"
        decisions.write_text(",".join(COLUMNS) + "\n")
        run_stages(project, ["ingest_concepts", "filter_profanity", "crawl_images", "ocr_filter"])
        app = create_app(review_items(project), decisions)
        with serve_app(app) as url, sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1100, "height": 760})
            page.goto(f"{url}/")
            page.fill("#who", "ada")
            page.press("#who", "Enter")
            page.keyboard.press("a")
            expect(page.locator("#grid .tile")).to_have_count(len(IMAGES) - 1)
            page.keyboard.press("r")
            page.keyboard.press("4")
            expect(page.locator("#grid .tile")).to_have_count(len(IMAGES) - 2)
            page.select_option("#filter", "all")
            page.keyboard.press("k")
            page.keyboard.press("k")
            page.keyboard.press("r")  # the reasons' list, open on the focused image
            page.wait_for_function("[...document.images].every(i => i.complete && i.naturalWidth > 0)")
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=args.out, full_page=True)
            browser.close()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
