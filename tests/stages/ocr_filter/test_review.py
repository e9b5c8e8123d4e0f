"""The image review (docs/review.md): a maintainer reviews images with the keyboard in a real
browser, the decisions file gets the rows, and the pipeline keeps a rejected or unreviewed image
out of every candidate set and the export; a broken decisions file is one line."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from gavil.review.decisions import (
    COLUMNS,
    Decision,
    DecisionsError,
    append_decision,
    latest,
    read_decisions,
)
from stages.ocr_filter import apply_review
from tests.helpers import BIN, EXPORT_STAGES, README_IMAGES, ROOT, mini_project, run_stages, serve_app

SHA_A, SHA_B, SHA_C = "a" * 64, "b" * 64, "c" * 64
HEADER = ",".join(COLUMNS) + "\n"


def _row(who: str, when: str, decision: str, reason: str, sha: str, concept: str) -> str:
    return f"{who},{when},{decision},{reason},{sha},{concept}\n"


def test_a_later_decision_supersedes_and_undo_withdraws_with_every_row_kept(tmp_path):
    f = tmp_path / "decisions.csv"
    append_decision(f, Decision("ann", "2024-01-01T00:00:00Z", "accept", "", SHA_A, "cat"))
    append_decision(f, Decision("bob", "2024-01-02T00:00:00Z", "reject", "low quality", SHA_A, "cat"))
    append_decision(f, Decision("ann", "2024-01-03T00:00:00Z", "accept", "", SHA_B, "moon"))
    append_decision(f, Decision("ann", "2024-01-04T00:00:00Z", "undo", "", SHA_B, "moon"))
    rows = read_decisions(f)
    assert [d.row for d in rows] == [2, 3, 4, 5] and f.read_text().startswith(HEADER)
    now = latest(rows)
    assert now[SHA_A].decision == "reject" and now[SHA_A].who == "bob"  # later wins, both kept
    assert SHA_B not in now  # undone: pending again
    # an earlier `when` written later does not supersede (order is by time, file order breaks ties)
    append_decision(f, Decision("cy", "2023-12-31T00:00:00Z", "accept", "", SHA_A, "cat"))
    assert latest(read_decisions(f))[SHA_A].who == "bob" and len(read_decisions(f)) == 5


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (HEADER.replace(",reason", ""), "row 1, column reason: the column is missing"),
        (HEADER + _row("ann", "2024-01-01T00:00:00Z", "acept", "", SHA_A, "cat"), "row 2, column decision"),
        (HEADER + _row("ann", "2024-01-01 00:00", "accept", "", SHA_A, "cat"), "row 2, column when"),
        (HEADER + _row("ann", "2024-01-01T00:00:00Z", "reject", "ugly", SHA_A, "cat"), "row 2, column reason"),
        (
            HEADER + _row("ann", "2024-01-01T00:00:00Z", "accept", "", SHA_A, "cat") * 2,
            "row 3, column who: repeats row 2 (same who, when and sha256)",
        ),
        (
            HEADER + _row("ann", "2024-01-01T00:00:00Z", "accept", "", SHA_C, "cat"),
            "row 2, column sha256: cccccccccccc",
        ),
    ],
)
def test_a_broken_decisions_file_is_one_line_naming_file_row_and_column(tmp_path, text, where):
    f = tmp_path / "decisions.csv"
    f.write_text(text)
    with pytest.raises(DecisionsError) as e:
        read_decisions(f, known={SHA_A, SHA_B})
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{f} {where}"), msg
    assert f.read_text() == text  # nothing lost, nothing rewritten


def test_rejected_and_unreviewed_images_keep_a_row_with_their_fate():
    ocr = pd.DataFrame(
        {
            "concept": ["cat", "moon", "sun", "sea"],
            "sha256": [SHA_A, SHA_B, SHA_C, None],
            "status": ["accepted", "accepted", "accepted", "no_image"],
            "reason": [None, "#1: OCR read 'mon' ~ 'moon'", None, "crawl status missing: none"],
        }
    )
    decided = latest(
        [
            Decision("ann", "2024-01-01T00:00:00Z", "accept", "", SHA_A, "cat"),
            Decision("ann", "2024-01-01T00:00:01Z", "reject", "inappropriate", SHA_B, "moon"),
        ]
    )
    out = apply_review(ocr, decided, required=True)
    assert list(out["status"]) == ["accepted", "review_rejected", "review_pending", "no_image"]
    assert out.at[1, "reason"] == "review: inappropriate (ann, 2024-01-01T00:00:01Z); #1: OCR read 'mon' ~ 'moon'"
    assert "gavil review" in out.at[2, "reason"] and out.at[3, "reason"] == ocr.at[3, "reason"]
    relaxed = apply_review(ocr, decided, required=False)  # a rejection still applies; no review needed
    assert list(relaxed["status"]) == ["accepted", "review_rejected", "accepted", "no_image"]


def test_the_sample_ships_an_accept_for_every_one_of_its_images():
    """Every sample image the sample's crawl takes (its file names a concept of the sample's SWOW
    file) has an accept, and no decision names another file (it would be no image of the project)."""
    import hashlib

    from gavil.params import load_params
    from stages.ingest_concepts import ingest

    params = load_params(ROOT / "params.yaml")
    rows = read_decisions(ROOT / params.review.decisions_path)
    concepts = set(ingest(ROOT / params.ingest.path).concepts["concept"])
    images = [f for f in (ROOT / "data/sample/images").iterdir() if f.suffix != ".md" and f.stem in concepts]
    shas = {hashlib.sha256(f.read_bytes()).hexdigest() for f in images}
    now = latest(rows)
    assert set(now) == shas and {d.decision for d in now.values()} == {"accept"}
    assert {d.who for d in rows} == {"sample-maintainers"}


#: The images the browser test leaves for review (the others ship accepted), sorted by concept.
PENDING = ["beach", "meat", "sandwich"]


def _project(dest: Path) -> Path:
    """The README's export project (:func:`tests.helpers.build_export`) without the sample's
    decisions for :data:`PENDING`, crawled and OCRed."""
    project = mini_project(dest, README_IMAGES)
    shutil.copytree(ROOT / "data/sample/raw_example", project / "data/sample/raw_example")
    shutil.copytree(ROOT / "data/ledger", project / "data/ledger")
    f = project / "data/review/decisions.csv"
    f.write_text("".join(r for r in f.read_text().splitlines(True) if r.rstrip().rsplit(",", 1)[1] not in PENDING))
    run_stages(project, ["ingest_concepts", "filter_profanity", "crawl_images", "ocr_filter"])
    return project


@pytest.mark.slow
def test_a_maintainer_reviews_with_the_keyboard_and_the_pipeline_keeps_rejected_images_out(tmp_path, browser):
    from playwright.sync_api import expect

    from gavil.pipeline import catalog
    from gavil.review.web import create_app, review_items

    project = _project(tmp_path / "proj")
    assert set(catalog.read_table("ocr", project).query("status == 'review_pending'")["concept"]) == set(PENDING)
    decisions = project / "data/review/decisions.csv"
    before = decisions.read_text()
    with serve_app(create_app(review_items(project), decisions)) as url:
        page = browser.new_page()
        page.goto(url + "/")
        expect(page.locator("#grid .tile")).to_have_count(3)  # the pending filter: only these wait
        expect(page.locator("#progress")).to_have_text(f"reviewed {len(README_IMAGES) - 3} / left 3")
        page.fill("#who", "ada")
        page.press("#who", "Enter")
        page.keyboard.press("a")  # beach: accept
        expect(page.locator("#grid .tile")).to_have_count(2)
        page.keyboard.press("r")  # meat: reject ...
        expect(page.locator("#reasons")).to_be_visible()
        page.keyboard.press("1")  # ... as inappropriate
        expect(page.locator("#grid .tile")).to_have_count(1)
        page.keyboard.press("a")  # sandwich: accept, then undo it
        expect(page.locator("#grid .tile")).to_have_count(0)
        page.keyboard.press("u")
        expect(page.locator("#grid .tile[data-concept='sandwich']")).to_have_count(1)
        expect(page.locator("#progress")).to_have_text(f"reviewed {len(README_IMAGES) - 1} / left 1")
        page.select_option("#filter", "rejected")
        expect(page.locator("#grid .tile[data-concept='meat']")).to_contain_text("rejected: inappropriate · ada")
        expect(page.locator("#grid .tile")).to_have_count(1)
    text = decisions.read_text()
    assert text.startswith(before)  # appended, never rewritten
    new = [line.split(",") for line in text[len(before) :].splitlines()]
    assert [(r[0], r[2], r[3], r[5]) for r in new] == [
        ("ada", "accept", "", "beach"),
        ("ada", "reject", "inappropriate", "meat"),
        ("ada", "accept", "", "sandwich"),
        ("ada", "undo", "", "sandwich"),
    ]
    _the_pipeline_keeps_them_out(project)


def _the_pipeline_keeps_them_out(project: Path) -> None:
    """After the review: ``meat`` rejected and ``sandwich`` pending have no image in the ``ocr``
    table's reading, any candidate set, or the export's dataset; ``beach`` has."""
    from gavil.pipeline import catalog
    from schemas.ocr import accepted_images

    run_stages(project, ["ocr_filter", "build_instances", *EXPORT_STAGES[4:]])
    ocr = catalog.read_table("ocr", project).set_index("concept")
    assert ocr.at["meat", "status"] == "review_rejected" and ocr.at["meat", "reason"].startswith(
        "review: inappropriate (ada, "
    )
    assert ocr.at["sandwich", "status"] == "review_pending" and ocr.at["beach", "status"] == "accepted"
    images = accepted_images(ocr.reset_index())
    assert "beach" in images and not {"meat", "sandwich"} & set(images)
    sets = catalog.read_table("candidate_sets", project)
    assert len(sets) and not any({"meat", "sandwich"} & set(c) for c in sets["candidates"])
    ds = pd.read_parquet(project / "data/export/dataset/test.parquet", columns=["candidates"])
    assert not any({"meat", "sandwich"} & set(c) for c in ds["candidates"])


@pytest.mark.slow
def test_gavil_stage_refuses_a_broken_decisions_file_in_one_line(tmp_path):
    project = mini_project(tmp_path / "p", ["cat", "moon"])
    run_stages(project, ["ingest_concepts", "filter_profanity", "crawl_images"])
    f = project / "data/review/decisions.csv"
    lines = f.read_text().splitlines(True)
    cases = {
        "row 3, column who: repeats row 2": lines[0] + lines[1] + lines[1],
        "row 1, column concept: the column is missing": lines[0].replace(",concept", "") + lines[1],
    }
    for where, text in cases.items():
        f.write_text(text)
        done = subprocess.run(
            [str(BIN / "gavil"), "stage", "ocr_filter"], cwd=project, capture_output=True, text=True, timeout=300
        )
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert errors == [f"error: data/review/decisions.csv {where}" + errors[0].split(where, 1)[-1]], done.stderr
        assert f.read_text() == text and not (project / "data/ocr/ocr.parquet").exists()
    # a row for an image this build does not have is kept and unused: one line naming file, row, column
    f.write_text(lines[0] + lines[1].replace(lines[1].split(",")[4], "d" * 64) + "".join(lines[2:]))
    done = subprocess.run(
        [str(BIN / "gavil"), "stage", "ocr_filter"], cwd=project, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "data/review/decisions.csv row 2, column sha256: dddddddddddd... names no image of this build" in done.stderr


def test_the_review_command_is_declared():
    out = subprocess.run([sys.executable, "-m", "gavil.cli", "review", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "decisions" in out.stdout and "--port" in out.stdout, out.stderr


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.5", "10.0.0.1", "example.org", "::", "2001:db8::1"])
def test_the_review_page_is_never_served_beyond_this_machine(host, tmp_path):
    """The page names its reviewers but checks no one: a host other than a loopback address is refused
    when params load and on the command line, in one line."""
    from gavil.errors import ParamsError
    from gavil.params import parse_params

    with pytest.raises(ParamsError, match="not a loopback address"):
        parse_params({"review": {"host": host}})
    (tmp_path / "params.yaml").write_text((ROOT / "params.yaml").read_text())
    done = subprocess.run(
        [str(BIN / "gavil"), "review", "--host", host], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "not a loopback address" in done.stderr and "Traceback" not in done.stderr
    for ok in ("127.0.0.1", "127.0.0.2", "localhost", "::1"):
        assert parse_params({"review": {"host": ok}}).review.host == ok


@pytest.mark.parametrize("name", ["evil.example", "127.0.0.1.nip.io", "rebind.attacker.test"])
def test_a_rebound_host_name_cannot_read_or_post_decisions(name, tmp_path):
    """DNS rebinding: a page the reviewer visits points its own name at 127.0.0.1; requests carrying
    that Host are refused, so nothing is read or appended; the loopback names are served."""
    from starlette.testclient import TestClient

    from gavil.review.web import create_app

    decisions = tmp_path / "decisions.csv"
    app = create_app([], decisions)
    body = {"who": "x", "decision": "accept", "reason": "", "sha256": SHA_A}
    bad = TestClient(app, base_url=f"http://{name}:8766")
    assert bad.get("/api/queue").status_code == 400
    assert bad.post("/api/decide", json=body).status_code == 400 and not decisions.exists()
    assert TestClient(app, base_url="http://127.0.0.1:8766").get("/api/queue").status_code == 200
    assert TestClient(app, base_url="http://localhost:8766").get("/api/queue").status_code == 200
