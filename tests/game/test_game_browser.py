"""The game in a real browser: Playwright drives Chromium (Debian's ``chromium``, or Playwright's own
download; tests.helpers.find_chromium) against the real server (uvicorn on 127.0.0.1): a spymaster and three
solvers, a self-solve (by id, or with another player's task) refused, a hostile cue and display name shown as text, images on screen,
a solver's flag from the solve page stored; the spymaster page's round and the leaderboard's round menu
follow the store's rounds (closed and opened while the server runs); a new player accepts the consent text
before any work, a changed text asks again, and a withdrawal is final."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright import sync_api  # a test dependency ([test] extra): these tests run, never skip

from gavil.game.launch import build_game
from gavil.game.rival import Rival
from gavil.game.rounds import close_round, open_round
from gavil.game.web import create_app
from gavil.gamestore.store import store_file
from gavil.params import Params
from tests.helpers import game_project, serve_app

HOSTILE_CUE = "<img/src=x/onerror=window.pwned=1>"
HOSTILE_NAME = "<b>Bold</b>"


@pytest.fixture
def server(tmp_path, monkeypatch) -> Iterator[str]:
    monkeypatch.setenv("GAVIL_GAME_JOIN_CODE", "letmein")
    monkeypatch.setenv("GAVIL_GAME_ADMIN_TOKEN", "admin-secret")
    root = game_project(tmp_path)
    game, images = build_game(
        Params().replace(game={"identity": "shared_code"}),
        root,
        Rival("no_weights", "No rival model: the RN50 weights are not available."),
    )
    with serve_app(create_app(game, images)) as base:
        yield base


def join(browser, base: str, name: str):
    page = browser.new_context(viewport={"width": 1000, "height": 900}).new_page()
    page.on("dialog", lambda d: pytest.fail(f"a dialog opened: {d.message}"))
    page.goto(base)
    page.fill("#code", "letmein")
    page.fill("#name", name)
    page.click("#join-btn")
    sync_api.expect(page.locator("#whoami")).to_have_text(f"Playing as {name}")
    sync_api.expect(page.locator("#consent")).to_be_visible()  # the consent text before any work
    page.click("#consent-accept")
    sync_api.expect(page.locator("#choose")).to_be_visible()  # no creation task until asked for
    return page


HOSTILE_CONSENT = "<img src=x onerror=window.pwned=1> <b>Contact</b>: ethics@example.org"


def test_a_new_player_accepts_the_consent_text_before_any_work_and_a_changed_text_asks_again(server, browser, tmp_path):
    expect = sync_api.expect
    page = browser.new_context(viewport={"width": 1000, "height": 900}).new_page()
    page.on("dialog", lambda d: pytest.fail(f"a dialog opened: {d.message}"))
    page.goto(server)
    page.fill("#code", "letmein")
    page.fill("#name", "Newcomer")
    page.click("#join-btn")
    expect(page.locator("#consent")).to_be_visible()
    expect(page.locator("#consent-why")).to_have_text("Please read this before your first task.")
    expect(page.locator("#consent-text")).to_contain_text("How to withdraw")
    page.click("#mode-create")  # work before accepting: the consent text again, no task
    expect(page.locator("#consent")).to_be_visible()
    expect(page.locator("#create")).to_be_hidden()
    direct = page.evaluate(
        """async () => (await fetch('/api/solve/task', {method: 'POST', headers: {Authorization: 'Bearer ' +
            sessionStorage.getItem('gavil-token')}})).status"""
    )
    assert direct == 403  # the server refuses, whatever the page does
    page.click("#consent-accept")
    expect(page.locator("#choose")).to_be_visible()
    page.click("#mode-create")
    expect(page.locator("#create-grid .tile")).to_have_count(5)
    # the operator changes the text while the page is open: asked again before more work
    text = tmp_path / "data/sample/consent.md"  # the server fixture's project is tmp_path
    text.write_text(text.read_text() + "\n" + HOSTILE_CONSENT + "\n")
    page.click("#mode-solve")
    expect(page.locator("#consent")).to_be_visible()
    expect(page.locator("#consent-why")).to_contain_text("The consent text changed since you accepted it")
    expect(page.locator("#consent-text")).to_contain_text(HOSTILE_CONSENT)  # shown as text, never as HTML
    assert page.locator("#consent-text *").count() == 0 and page.evaluate("window.pwned") is None
    page.click("#consent-accept")
    page.click("#mode-create")
    expect(page.locator("#create-grid .tile")).to_have_count(5)
    # withdrawing: confirmed on the page (no dialog), final for the account
    page.click("#mode-consent")
    page.click("#consent-withdraw")
    page.click("#consent-withdraw-yes")
    expect(page.locator("#consent-state")).to_contain_text("You withdrew your consent")
    expect(page.locator("#consent-accept")).to_be_hidden()
    page.click("#mode-create")
    expect(page.locator("#consent")).to_be_visible()
    expect(page.locator("#create")).to_be_hidden()


def pick(page, grid: str, positions: list[int]) -> None:
    for i in positions:
        page.click(f"{grid} .tile[data-pos='{i}']")


ANSWERS = {"Space": [0, 1], "Rocket": [1, 2]}


def test_a_full_round_in_the_browser(server, browser, tmp_path):
    expect = sync_api.expect
    spy = join(browser, server, HOSTILE_NAME)
    spy.click("#mode-create")
    expect(spy.locator("#create-grid .tile")).to_have_count(5)
    expect(spy.locator("#rival-status")).to_contain_text("No rival model")
    pick(spy, "#create-grid", ANSWERS["Space"])
    spy.fill("#cue", "Space")
    spy.click("#submit-create")
    expect(spy.locator("#create-result")).to_contain_text("no fool-the-AI score was recorded")
    spy.wait_for_function(
        "[...document.images].length === 5 && [...document.images].every(i => i.complete && i.naturalWidth > 0)"
    )
    shot = spy.screenshot(path=str(tmp_path / "spymaster.png"), full_page=True)
    assert shot[:4] == b"\x89PNG" and len(shot) > 50_000  # the photographs are on screen, not blank tiles
    spy.click("#next-create")
    expect(spy.locator("#create-help")).to_contain_text("Cue 2 of 2")
    pick(spy, "#create-grid", ANSWERS["Rocket"])
    spy.fill("#cue", HOSTILE_CUE)
    spy.click("#submit-create")
    # the name policy refuses markup as a cue; the refusal quotes it, shown as text (no element, no script)
    expect(spy.get_by_role("alert")).to_contain_text(HOSTILE_CUE)
    assert spy.locator("[role=alert] img").count() == 0 and spy.evaluate("window.pwned") is None
    spy.fill("#cue", "Rocket")
    spy.click("#submit-create")
    expect(spy.locator("#create-result")).to_contain_text("Rocket")

    # the page never serves one's own association (test_a_self_solve_is_refused forges one)
    spy.click("#mode-solve")
    expect(spy.locator("#solve-cue")).to_have_text("(nothing to solve right now)")
    solvers = [join(browser, server, f"Solver {i}") for i in range(3)]
    for s in solvers:
        for _ in range(2):
            s.click("#mode-solve")
            cue = s.locator("#solve-cue")
            expect(cue).not_to_have_text("")
            text = cue.text_content()
            assert text in ANSWERS
            assert s.locator("#solve-cue img").count() == 0 and s.evaluate("window.pwned") is None
            expect(s.locator("#solve-grid .tile")).to_have_count(5)
            pick(s, "#solve-grid", ANSWERS[text])
            s.click("#submit-solve")
            expect(s.locator("#solve-result")).to_have_text("Your Jaccard score: 100%")
    spy.click("#mode-scores")
    expect(spy.locator("#dashboard")).to_contain_text("100")
    expect(spy.locator("#leaderboard")).to_contain_text(HOSTILE_NAME)  # the name as text
    assert spy.locator("#leaderboard b").count() == 0 and spy.evaluate("window.pwned") is None


def test_the_spymaster_page_and_the_round_menu_follow_the_store_s_rounds(server, browser, tmp_path):
    expect = sync_api.expect
    store = store_file(tmp_path / "data/game")  # the server fixture's project is tmp_path
    spy = join(browser, server, "Spy")
    spy.click("#mode-create")
    expect(spy.locator("#create-round")).to_have_text("Your associations go into round 1.")
    expect(spy.locator("#create-grid .tile")).to_have_count(5)
    spy.click("#mode-scores")
    expect(spy.locator("#lb-round option")).to_have_text(["all rounds", "round 1 (now)"])
    close_round(store)  # `gavil round close` while the server runs and the page is open
    spy.click("#mode-create")
    expect(spy.locator("#create-round")).to_contain_text("No round is being collected right now")
    expect(spy.locator("#create-grid .tile")).to_have_count(0)
    assert spy.locator("#submit-create").is_disabled()
    spy.click("#mode-scores")  # between rounds the menu still lists every round that exists
    expect(spy.locator("#lb-round option")).to_have_text(["all rounds", "round 1"])
    spy.select_option("#lb-round", "1")
    expect(spy.locator("#leaderboard th").first).to_have_text("player")
    open_round(store, Params(), "clip-vit-b-32")
    fresh = join(browser, server, "Fresh")  # a new page: the menu from its first status
    fresh.click("#mode-scores")
    expect(fresh.locator("#lb-round option")).to_have_text(["all rounds", "round 1", "round 2"])
    fresh.click("#mode-create")  # round 2 waits for a restart against its rival: nothing is collected here
    expect(fresh.locator("#create-round")).to_contain_text("No round is being collected right now")
    spy.click("#mode-scores")
    expect(spy.locator("#lb-round")).to_have_value("1")  # the choice survives the menu's refresh
    expect(spy.locator("#lb-round option")).to_have_text(["all rounds", "round 1", "round 2"])


def create_space(browser, server: str):
    """A spymaster ("Spy") gives the cue "Space" for the first two images; their page."""
    spy = join(browser, server, "Spy")
    spy.click("#mode-create")
    sync_api.expect(spy.locator("#create-grid .tile")).to_have_count(5)
    pick(spy, "#create-grid", [0, 1])
    spy.fill("#cue", "Space")
    spy.click("#submit-create")
    sync_api.expect(spy.locator("#create-result")).to_contain_text("Saved")
    return spy


def test_a_self_solve_is_refused(server, browser):
    expect = sync_api.expect
    spy = create_space(browser, server)
    # the association's id, as another player would be served it, then answered by its spymaster
    other = join(spy.context.browser, server, "Other")
    other.click("#mode-solve")
    expect(other.locator("#solve-cue")).to_have_text("Space")
    served = other.evaluate("[state.solveTask.instance_id, state.solveTask.lease_id]")
    post = """async (body) => {
            const r = await fetch('/api/solve', {method: 'POST', headers: {'Content-Type': 'application/json',
                Authorization: 'Bearer ' + sessionStorage.getItem('gavil-token')}, body: JSON.stringify(body)});
            return [r.status, (await r.json()).error];
        }"""
    by_id = spy.evaluate(post, {"instance_id": served[0], "selection": [0, 1]})
    assert by_id[0] == 400 and "lease_id" in by_id[1]  # an id never served to the spymaster
    stolen = spy.evaluate(post, {"lease_id": served[1], "selection": [0, 1]})
    assert stolen[0] == 403 and "another player" in stolen[1]


def test_a_solver_flags_the_association_on_the_solve_page_and_the_flag_lands_in_the_store(server, browser, tmp_path):
    import sqlite3

    expect = sync_api.expect
    create_space(browser, server)
    solver = join(browser, server, "Solver")
    solver.click("#mode-solve")
    expect(solver.locator("#solve-cue")).to_have_text("Space")
    expect(solver.locator("#flag-btn")).to_be_visible()
    solver.select_option("#flag-category", "unsolvable")
    solver.fill("#flag-reason", "no image  fits")
    solver.click("#flag-btn")
    expect(solver.locator("#flag-status")).to_have_text("flagged, thanks")
    expect(solver.locator("#flag-btn")).to_be_disabled()
    con = sqlite3.connect(tmp_path / "data/game/game.sqlite")
    rows = con.execute(
        "SELECT c.cue, f.category, f.reason FROM flags f JOIN creations c USING (instance_id)"
    ).fetchall()
    con.close()
    assert rows == [("Space", "unsolvable", "no image fits")]
    solver.click("#next-solve")  # held: served to nobody new, the flagger included
    expect(solver.locator("#solve-cue")).to_have_text("(nothing to solve right now)")
    expect(solver.locator("#flag-box")).to_be_hidden()


def test_without_chromium_the_browser_tests_fail_saying_what_to_install(monkeypatch, tmp_path):
    """No `chromium` on PATH and no Playwright download: a failure naming both ways to get one (never a
    skip); Playwright's own download is used when it is there."""
    from types import SimpleNamespace

    from tests import helpers

    class FakePlaywright:  # what `sync_playwright()` gives: the path its own Chromium would have
        def __init__(self, path):
            self.path = path

        def __enter__(self):
            return SimpleNamespace(chromium=SimpleNamespace(executable_path=str(self.path)))

        def __exit__(self, *exc):
            return None

    own = tmp_path / "ms-playwright/chromium/chrome"
    monkeypatch.setattr(helpers.shutil, "which", lambda name: None)
    monkeypatch.setattr(sync_api, "sync_playwright", lambda: FakePlaywright(own))
    with pytest.raises(pytest.fail.Exception) as e:
        helpers.require_chromium()
    assert "apt-get install chromium" in str(e.value) and "python -m playwright install chromium" in str(e.value)
    own.parent.mkdir(parents=True)
    own.write_bytes(b"")
    assert helpers.require_chromium() == str(own)
