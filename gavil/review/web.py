"""The image review page (``gavil review``; docs/review.md): a Starlette app served by uvicorn on
127.0.0.1 that shows every image the OCR let through (the ``ocr`` table's ``accepted``,
``review_pending`` and ``review_rejected`` rows) as a grid of thumbnails with its concept, and
appends each reviewer's accept / reject / undo to the decisions file
(:mod:`gavil.review.decisions`).

Several reviewers share one queue: each names themself on the page, every request reads the
decisions file afresh, and every decision is appended under a lock, so two people (two tabs, or
two servers on one file) never overwrite each other; the last decision for an image is the one in
force. The pipeline applies the file when ``ocr_filter`` runs next (``dvc repro``).

When the optional safety score exists (``review.safety.enabled``, stage ``safety_score``), each
image carries its ``punsafe`` and the page offers to sort by it, highest first; scores from random
weights (untrained) are named as such and are not the default order. The score decides nothing.

Routes: ``/`` the page, ``/static/review.{js,css}``, ``/img/{sha256}`` an image, ``GET /api/queue``
every image with its state, ``POST /api/decide`` ``{"who", "decision", "reason", "sha256"}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from gavil.pipeline import catalog
from gavil.review import REVIEWABLE
from gavil.review.decisions import REASONS, Decision, DecisionsError, append_decision, latest, now_utc, read_decisions

STATIC = Path(__file__).parent / "static"
_PAGES = {
    "index.html": "text/html; charset=utf-8",
    "review.js": "text/javascript; charset=utf-8",
    "review.css": "text/css; charset=utf-8",
}


@dataclass(frozen=True)
class Safety:
    """An image's optional safety score (the ``safety`` table, stage ``safety_score``): ``punsafe``
    (fraction 0-1; None without weights), ``model`` (``RN50/openai``, ``RN50/untrained``) and
    ``status`` (ok, untrained, no_weights). It orders the page only."""

    punsafe: float | None
    model: str
    status: str


@dataclass(frozen=True)
class Item:
    """An image to review: its bytes' sha256, its concept, its file (absolute) and crawl source, and
    its safety score when the ``safety_score`` stage made one."""

    sha256: str
    concept: str
    path: Path
    source: str
    safety: Safety | None = None


def review_items(root: str | Path = ".") -> list[Item]:
    """The images of the project at ``root`` that the OCR let through, sorted by concept, from the
    ``ocr`` and ``images`` tables (run ``dvc repro ocr_filter`` first), each with its safety score
    from the ``safety`` table where there is one (``review.safety.enabled``; none while it is off).

    Raises:
        gavil.errors.MissingInput: the ``ocr`` table does not exist yet.
    """
    root = Path(root)
    ocr = catalog.read_table("ocr", root)
    images = catalog.read_table("images", root)
    source = dict(zip(images["concept"], images["source"]))
    scores: dict[str, Safety] = {}
    if catalog.exists("safety", root):
        t = catalog.read_table("safety", root)
        for sha, p, m, st in zip(t["sha256"], t["punsafe"], t["safety_model"], t["status"]):
            scores[str(sha)] = Safety(None if pd.isna(p) else float(p), str(m), str(st))
    ok = ocr[ocr["status"].isin(REVIEWABLE) & ocr["sha256"].notna()].sort_values("concept")
    return [
        Item(str(s), str(c), root / str(p), str(source.get(c, "?")), scores.get(str(s)))
        for s, c, p in zip(ok["sha256"], ok["concept"], ok["path"])
    ]


def safety_summary(items: list[Item]) -> dict[str, object]:
    """What the page says about the safety scores of ``items``: ``scored`` (some image has a score:
    the page offers to sort by it), ``untrained`` (the scores come from random weights: the page
    says so and keeps its concept order by default) and ``model`` (the models that scored, joined)."""
    scored = [i.safety for i in items if i.safety is not None and i.safety.punsafe is not None]
    return {
        "scored": bool(scored),
        "untrained": any(s.status == "untrained" for s in scored),
        "model": ", ".join(sorted({s.model for s in scored})),
    }


def queue(items: list[Item], decisions_path: Path) -> dict[str, object]:
    """The page's state: every item with the decision in force (``state`` pending / accepted /
    rejected, its reason, who and when) and its safety score (``punsafe``, None without one), the
    reasons' list, the counts (reviewed, left) and the scores' summary (``safety``,
    :func:`safety_summary`). The score is shown and sorted by, never used to decide.

    Raises:
        DecisionsError: the decisions file is broken (one line: file, row, column).
    """
    decided = latest(read_decisions(decisions_path))  # rows for other images: kept, not shown
    rows = []
    for i in items:
        d = decided.get(i.sha256)
        state = "pending" if d is None else ("accepted" if d.decision == "accept" else "rejected")
        rows.append(
            {
                "sha256": i.sha256,
                "concept": i.concept,
                "source": i.source,
                "state": state,
                "reason": d.reason if d else "",
                "who": d.who if d else "",
                "when": d.when if d else "",
                "punsafe": i.safety.punsafe if i.safety else None,
            }
        )
    left = sum(r["state"] == "pending" for r in rows)
    summary = safety_summary(items)
    return {"items": rows, "reasons": list(REASONS), "reviewed": len(rows) - left, "left": left, "safety": summary}


def decide(items: list[Item], decisions_path: Path, body: object) -> dict[str, object]:
    """Append the decision ``body`` (``who``, ``decision``, ``reason``, ``sha256``) for one of
    ``items`` and return the new :func:`queue`.

    Raises:
        LookupError: the sha256 is not one of ``items``.
        ValueError: the body is not an object of strings, an ``undo`` has no decision to withdraw,
            or a cell is broken (:func:`gavil.review.decisions.problem`).
    """
    if not isinstance(body, dict) or not all(isinstance(body.get(k, ""), str) for k in ("who", "decision", "reason")):
        raise ValueError("send a JSON object with who, decision, reason and sha256 as strings")
    by_sha = {i.sha256: i for i in items}
    item = by_sha.get(str(body.get("sha256", "")))
    if item is None:
        raise LookupError("no such image in this review")
    decision = body.get("decision", "")
    if decision == "undo" and item.sha256 not in latest(read_decisions(decisions_path)):
        raise ValueError(f"{item.concept}: no decision to undo")
    d = Decision(
        body.get("who", "").strip(), now_utc(), decision, body.get("reason", "").strip(), item.sha256, item.concept
    )
    try:
        append_decision(decisions_path, d)
    except DecisionsError as e:
        raise ValueError(str(e).split(": ", 1)[-1]) from e
    return queue(items, decisions_path)


#: Host header values the review page answers (any port): the loopback names.
LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def create_app(items: list[Item], decisions_path: str | Path) -> Starlette:
    """The review app for ``items``, appending to the decisions file at ``decisions_path``.

    ``POST /api/decide`` accepts ``application/json`` only (a page of another site cannot send it
    without a CORS preflight, which this app never answers); errors are ``{"error": "..."}`` with
    400 (bad body), 404 (unknown image) or 409 (nothing to undo, a broken decisions file)."""
    path = Path(decisions_path)
    files = {i.sha256: i.path for i in items}

    def page(name: str) -> Any:
        async def handler(_: Request) -> Response:
            return FileResponse(STATIC / name, media_type=_PAGES[name], headers={"Cache-Control": "no-store"})

        return handler

    async def image(request: Request) -> Response:
        f = files.get(request.path_params["sha"])
        if f is None or not f.exists():
            return JSONResponse({"error": "no such image"}, status_code=404)
        return FileResponse(f, headers={"Cache-Control": "max-age=3600"})

    async def get_queue(_: Request) -> Response:
        try:
            return JSONResponse(await run_in_threadpool(queue, items, path))
        except DecisionsError as e:
            return JSONResponse({"error": str(e)}, status_code=409)

    async def post_decide(request: Request) -> Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send application/json"}, status_code=415)
        try:
            return JSONResponse(await run_in_threadpool(decide, items, path, await request.json()))
        except LookupError as e:
            return JSONResponse({"error": str(e)}, status_code=404)
        except DecisionsError as e:
            return JSONResponse({"error": str(e)}, status_code=409)
        except ValueError as e:
            status = 409 if "no decision to undo" in str(e) else 400
            return JSONResponse({"error": str(e)}, status_code=status)

    routes = [Route("/", page("index.html"))]
    routes += [Route(f"/static/{n}", page(n)) for n in ("review.js", "review.css")]
    routes += [Route("/img/{sha}", image), Route("/api/queue", get_queue)]
    routes += [Route("/api/decide", post_decide, methods=["POST"])]
    # only this machine's names in the Host header: a web page the reviewer visits cannot rebind its own
    # host name to 127.0.0.1 and post decisions (DNS rebinding); an SSH tunnel keeps 127.0.0.1/localhost
    local = Middleware(TrustedHostMiddleware, allowed_hosts=list(LOCAL_HOSTS))
    return Starlette(routes=routes, middleware=[local])
