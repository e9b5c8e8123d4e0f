"""The game's web app (Starlette, served by uvicorn): one static page, a JSON API, images by hash.

Blocking work (SQLite) runs on Starlette's thread pool, never on the event loop; the rival runs
in the game's own background thread, never in a request (its thread stops with the app).
Security: the page builds every text with ``textContent`` (never HTML from data) and is served
with a Content-Security-Policy that allows only this origin's script and images (no inline
script), so a hostile cue or display name is shown as text. The session token travels in an
``Authorization: Bearer`` header (no cookies, so no cross-site request can act for a player);
admin actions need ``X-Admin-Token``. Request bodies over 16 KB are refused. Images are served
only by a content hash the game itself chose (``/img/<sha256>``); the client never names a path.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool as run
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from stages._game.service import Game, GameError

STATIC = Path(__file__).parent / "static"
MAX_BODY = 16_384
_SHA = re.compile(r"^[0-9a-f]{64}$")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=SECURITY_HEADERS)


def _token(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if len(raw) > MAX_BODY:
        raise GameError(413, "request too large")
    try:
        data = json.loads(raw or b"{}")
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise GameError(400, "the request is not JSON") from None
    if not isinstance(data, dict):
        raise GameError(400, "the request is not a JSON object")
    return data


def create_app(game: Game, image_paths: dict[str, Path]) -> Starlette:
    """The app for ``game``; ``image_paths``: sha256 -> file of every image the game shows."""

    def page(name: str, media: str) -> Any:
        async def handler(request: Request) -> Response:
            return FileResponse(STATIC / name, media_type=media, headers=SECURITY_HEADERS)

        return handler

    async def status(request: Request) -> Response:
        return _json(
            {
                "rival_status": game.rival.status,
                "rival_message": game.rival.message,
                "paused": game.paused(),  # in memory: status never waits for the thread pool
                "identity": game.p.identity,
                "min_solvers": game.min_solvers,
                "bonus_unit": game.p.bonus_unit,
            }
        )

    async def join(request: Request) -> Response:
        body = await _body(request)
        return _json(await run(game.join, body.get("code"), body.get("name")))

    async def create_get(request: Request) -> Response:
        return _json({"task": await run(game.creation_task, _token(request))})

    async def create_post(request: Request) -> Response:
        b = await _body(request)
        return _json(await run(game.create, _token(request), b.get("task_id"), b.get("cue"), b.get("selection")))

    async def solve_get(request: Request) -> Response:
        return _json({"task": await run(game.solve_task, _token(request))})

    async def solve_post(request: Request) -> Response:
        b = await _body(request)
        return _json(await run(game.solve, _token(request), b.get("lease_id"), b.get("selection")))

    async def creation(request: Request) -> Response:
        return _json(await run(game.creation, _token(request), request.path_params["instance_id"]))

    async def me(request: Request) -> Response:
        return _json(await run(game.dashboard, _token(request)))

    async def leaderboard(request: Request) -> Response:
        await run(game.player, _token(request))
        return _json({"rows": await run(game.leaderboard)})

    async def image(request: Request) -> Response:
        sha = request.path_params["sha"]
        if not _SHA.match(sha) or sha not in image_paths:
            return _json({"error": "no such image"}, 404)
        return FileResponse(image_paths[sha], headers={**SECURITY_HEADERS, "Cache-Control": "max-age=86400"})

    async def admin_pause(request: Request) -> Response:
        game.check_admin(request.headers.get("x-admin-token"))
        b = await _body(request)
        await run(game.set_paused, bool(b.get("paused", True)))
        return _json({"paused": await run(game.paused)})

    async def admin_submissions(request: Request) -> Response:
        game.check_admin(request.headers.get("x-admin-token"))
        return _json(await run(game.submissions))

    async def admin_invitations(request: Request) -> Response:
        game.check_admin(request.headers.get("x-admin-token"))
        b = await _body(request)
        codes = await run(game.create_invitations, b.get("count"))
        return _json({"codes": codes, **await run(game.invitations)})

    async def admin_export(request: Request) -> Response:
        game.check_admin(request.headers.get("x-admin-token"))
        return _json(await run(game.export))

    async def on_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, GameError)
        return _json({"error": exc.message}, exc.status)

    routes = [
        Route("/", page("index.html", "text/html; charset=utf-8")),
        Route("/static/game.js", page("game.js", "text/javascript; charset=utf-8")),
        Route("/static/game.css", page("game.css", "text/css; charset=utf-8")),
        Route("/api/status", status),
        Route("/api/join", join, methods=["POST"]),
        Route("/api/create", create_get, methods=["GET"]),
        Route("/api/create", create_post, methods=["POST"]),
        Route("/api/create/{instance_id}", creation, methods=["GET"]),
        Route("/api/solve", solve_get, methods=["GET"]),
        Route("/api/solve", solve_post, methods=["POST"]),
        Route("/api/me", me),
        Route("/api/leaderboard", leaderboard),
        Route("/img/{sha}", image),
        Route("/api/admin/pause", admin_pause, methods=["POST"]),
        Route("/api/admin/submissions", admin_submissions),
        Route("/api/admin/export", admin_export),
        Route("/api/admin/invitations", admin_invitations, methods=["POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run(game.close)

    return Starlette(routes=routes, exception_handlers={GameError: on_error}, lifespan=lifespan)
