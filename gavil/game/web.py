"""The game's web app (Starlette, served by uvicorn): one static page, a JSON API, images by hash.

Blocking work (SQLite) runs on Starlette's thread pool, never on the event loop; the rival runs
in the game's own background thread, never in a request (its thread stops with the app).
Security: the page builds every text with ``textContent`` (never HTML from data) and is served
with a Content-Security-Policy that allows only this origin's script and images (no inline
script), so a hostile cue or display name is shown as text. The session token travels in an
``Authorization: Bearer`` header (no cookies, so no cross-site request can act for a player);
admin actions need ``X-Admin-Token``. Images are served only by a content hash the game itself
chose (``/img/<sha256>``); the client never names a path.

Limits come before work (:class:`Throttle`): joins are throttled per client address and per join
code sent, submissions (creations, answers, flags) per client address and per account (never per session token, so joining
again resets nothing), reads and work requests per account; a request with no or an unknown
session token is charged to its own per-address budget, never to an authenticated player's; admin
attempts per address and across the server, before the token is compared (in constant time), and
each refused one waits ``game.admin_failure_delay_s``, one at a time, and is logged. A refusal is
HTTP 429 with ``Retry-After`` (seconds). The client address is the TCP peer: forwarded headers
count only from a proxy named in ``game.trusted_proxies`` (:func:`client_address`). Reads (every
``GET``) never write to the store; a task is reserved by ``POST /api/create/task`` and a solve
task leased by ``POST /api/solve/task``. Request bodies are
read through a cap (:func:`read_capped`): over :data:`MAX_BODY` bytes is HTTP 413, decided from
``Content-Length`` before reading or after at most ``MAX_BODY`` + one chunk of a chunked body,
never buffered whole. Each endpoint's JSON body is one strict pydantic model (:class:`JoinBody`,
...): no coercion (``"false"`` is not a boolean, ``"1"`` not a number), no extra fields, bounded
lengths; a violation is HTTP 400 naming the field and what it must be.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import ipaddress
import logging
import math
import os
import re
import time
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

from limits import RateLimitItem, parse_many
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool as run
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gavil.errors import Conflict, Expired, Forbidden, Invalid, NotFound, Refusal
from gavil.game import consent, flags
from gavil.game.rounds import round_state
from gavil.game.service import Game, GameError
from gavil.gamestore.limits import SharedWindows, limits_file
from gavil.params.game import GameParams

STATIC = Path(__file__).parent / "static"
MAX_BODY = 16_384  # bytes of a request body
_SHA = re.compile(r"^[0-9a-f]{64}$")
_LENGTH = re.compile(r"^[0-9]{1,19}$")
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


#: The HTTP status of each domain error (:mod:`gavil.errors`) the store and the rules raise: the one
#: place where a refusal of theirs becomes a status (the app's own refusals are :class:`GameError`).
STATUS: dict[type[Refusal], int] = {Invalid: 400, Forbidden: 403, NotFound: 404, Conflict: 409, Expired: 410}


def refusal_status(exc: Refusal) -> int:
    """The HTTP status of a domain error: :data:`STATUS` of its class or the nearest base class
    listed there; 400 for any other refusal."""
    return next((STATUS[c] for c in type(exc).__mro__ if c in STATUS), 400)


class Refused(GameError):
    """A refusal with extra response headers (``Retry-After`` of a 429, ``Connection: close`` of a 413)."""

    def __init__(self, status: int, message: str, headers: dict[str, str]) -> None:
        super().__init__(status, message)
        self.headers = headers


class Disconnected(GameError):
    """The client closed the connection before its request body was read: nothing was done, nobody
    reads the answer; counted (:class:`Counters`), never logged as an error."""

    def __init__(self) -> None:
        super().__init__(400, "the client disconnected before sending its whole request")


class Counters:
    """What one server process counts of its own traffic (``GET /api/admin/stats``): requests in
    flight and refused as busy (:class:`Admission`), clients that disconnected mid-request."""

    def __init__(self, max_in_flight: int) -> None:
        self.max_in_flight = max_in_flight
        self.in_flight = 0
        self.refused_busy = 0
        self.client_disconnects = 0


class Admission:
    """Admission control (ASGI middleware): at most ``counters.max_in_flight`` API requests
    (``/api/...`` but ``/api/status``) are served at once; one more is answered at once with HTTP 503
    and ``Retry-After`` (``retry_after_s``), so an overloaded server refuses instead of queueing for
    seconds. The page, its files, the images and the status are never refused."""

    def __init__(self, app: ASGIApp, counters: Counters, retry_after_s: int) -> None:
        self.app, self.counters, self.retry_after_s = app, counters, retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path.startswith("/api/") or path == "/api/status":
            await self.app(scope, receive, send)
            return
        c = self.counters
        if c.in_flight >= c.max_in_flight:
            c.refused_busy += 1
            wait = str(self.retry_after_s)
            busy = _json({"error": f"the game is busy; try again in {wait} s"}, 503, {"Retry-After": wait})
            await busy(scope, receive, send)
            return
        c.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            c.in_flight -= 1


# ------------------------------------------------------------------------------ request bodies
class _Body(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


Id = Annotated[str, Field(max_length=64, description="the id the server gave (a string)")]
Positions = Annotated[
    list[int], Field(max_length=64, description="a list of image positions (JSON whole numbers, not strings)")
]


class JoinBody(_Body):
    """``POST /api/join``."""

    code: Annotated[str, Field(max_length=256, description="the join code from the operator (a string)")]
    name: Annotated[str, Field(max_length=256, description="a display name (a string)")]


class CreateBody(_Body):
    """``POST /api/create``."""

    task_id: Id
    cue: Annotated[str, Field(max_length=256, description="a one-word cue (a string)")]
    selection: Positions


class SolveBody(_Body):
    """``POST /api/solve``: the lease the server issued with ``POST /api/solve/task`` (only served work counts)."""

    lease_id: Id
    selection: Positions


class FlagBody(_Body):
    """``POST /api/flag``: a player's flag on an association they were served (:mod:`gavil.game.flags`)."""

    instance_id: Id
    category: Annotated[str, Field(max_length=32, description="offensive, wrong, unsolvable or other")]
    reason: Annotated[str, Field(max_length=2000, description="a short reason (a string)")] = ""


class ReviewBody(_Body):
    """``POST /api/admin/flags/review``: keep or retire a flagged association."""

    instance_id: Id
    decision: Annotated[str, Field(max_length=16, description="keep or retire")]
    note: Annotated[str, Field(max_length=2000, description="a short note (a string)")] = ""
    reviewer: Annotated[str, Field(max_length=256, description="the reviewer's name (a string)")] = ""


class InvitationsBody(_Body):
    """``POST /api/admin/invitations``: how many single-use invitation codes to issue."""

    count: Annotated[int, Field(ge=1, le=1000, description="a JSON whole number from 1 to 1000")]


class PauseBody(_Body):
    """``POST /api/admin/pause``: ``paused`` is a JSON boolean, never a string or number."""

    paused: Annotated[bool, Field(description="true or false (a JSON boolean, not a string)")]


class AcceptBody(_Body):
    """``POST /api/consent``: the version of the consent text accepted (:mod:`gavil.game.consent`)."""

    version: Annotated[str, Field(max_length=64, description="the consent text's version (a string)")]


class WithdrawBody(_Body):
    """``POST /api/consent/withdraw``: ``confirm`` must be the JSON boolean true."""

    confirm: Annotated[bool, Field(description="true (a JSON boolean): you withdraw your consent")]


B = TypeVar("B", bound=_Body)


async def read_capped(request: Request, cap: int = MAX_BODY) -> bytes:
    """The request body, at most ``cap`` bytes, never buffered beyond ``cap`` + one chunk.

    Raises:
        Refused: 413 when ``Content-Length`` says more than ``cap`` (nothing is read) or the
            stream (chunked included) passes ``cap``; the response closes the connection.
        GameError: 400 for a ``Content-Length`` that is not a decimal number.
    """
    too_large = Refused(413, f"request too large: at most {cap} bytes", {"Connection": "close"})
    length = request.headers.get("content-length")
    if length is not None:
        if not _LENGTH.match(length):
            raise GameError(400, "Content-Length is not a number of bytes")
        if int(length) > cap:
            raise too_large
    buf = bytearray()
    try:
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > cap:
                raise too_large
    except ClientDisconnect:
        raise Disconnected() from None
    return bytes(buf)


def _explain(e: ValidationError, model: type[_Body]) -> str:
    parts = []
    for err in e.errors(include_url=False, include_input=False)[:3]:
        loc = [str(x) for x in err["loc"]]
        field = model.model_fields.get(loc[0]) if loc else None
        what = f" (expected {field.description})" if field is not None and field.description else ""
        if err["type"] == "json_invalid":
            return "the request is not JSON"
        if err["type"] in ("model_type", "model_attributes_type"):
            return "the request is not a JSON object"
        parts.append(f"{'.'.join(loc) or 'body'}: {err['msg']}{what}")
    return "bad request fields: " + "; ".join(parts)


async def parse(request: Request, model: type[B]) -> B:
    """The request's JSON body as ``model`` (strict: no type coercion, no extra fields).

    Raises:
        Refused: 413, see :func:`read_capped`.
        GameError: 400 naming the offending fields (at most 3) and what each must be.
    """
    raw = await read_capped(request)
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as e:
        raise GameError(400, _explain(e, model)) from None


# ------------------------------------------------------------------------------ throttles
class Throttle:
    """Moving-window rate limits for one app (rules in the ``limits`` notation, counted here: a
    window per rule, key and limit holds the times of the requests it let in), kept in this
    process's memory, or, with ``shared`` (``game.workers`` > 1), in the file every server process
    shares (:class:`gavil.gamestore.limits.SharedWindows`), so a limit holds across processes.

    Rules (``game`` params, ``limits`` notation such as ``30/minute; 100/hour``):
    ``join_address`` and ``join_code`` (every ``POST /api/join``, keyed by client address and
    by the sha256 of the code sent), ``submit_address`` and ``submit_account`` (every create,
    solve or flag of an authenticated player, keyed by client address and by player id;
    ``submissions_per_minute`` per account), ``read_account`` (every other request of an
    account), ``unauthenticated`` (requests with no or an unknown session token, per client
    address), ``admin_address`` and ``admin_global`` (admin-token attempts).

    Cost in memory: amortised O(1) per request (expired times leave a window from its old end;
    windows left empty are dropped every :data:`SWEEP_EVERY` requests), where the ``limits``
    library's memory storage rescanned every window on a new thread every 10 ms. Shared: one short
    SQLite transaction per rule checked.
    """

    SWEEP_EVERY = 10_000

    def __init__(self, p: GameParams, shared: SharedWindows | None = None) -> None:
        self.windows: dict[tuple[str, str, int], deque[float]] = {}
        self.hits = 0
        self.shared = shared
        self.rules: dict[str, tuple[list[RateLimitItem], str]] = {
            "join_address": (parse_many(p.join_limit_per_address), "join attempts from this address"),
            "join_code": (parse_many(p.join_limit_per_code), "join attempts with this code"),
            "submit_address": (parse_many(p.submission_limit_per_address), "submissions from this address"),
            "submit_account": (parse_many(f"{p.submissions_per_minute}/minute"), "submissions from this account"),
            "read_account": (parse_many(p.read_limit_per_account), "requests from this account"),
            "unauthenticated": (
                parse_many(p.unauthenticated_limit_per_address),
                "requests without a valid session from this address",
            ),
            "admin_address": (parse_many(p.admin_limit_per_address), "admin attempts from this address"),
            "admin_global": (parse_many(p.admin_limit_global), "admin attempts (all addresses)"),
        }

    def hit(self, rule: str, key: str) -> None:
        """Count one request under ``rule`` for ``key``.

        Raises:
            Refused: 429 with ``Retry-After`` (whole seconds until the window lets one more in)
                when any of the rule's limits is already reached (the refused request is not counted
                under that limit nor the ones after it).
        """
        limits, what = self.rules[rule]
        if self.shared is not None:
            refused = self.shared.hit(rule, key, [(lim.amount, lim.get_expiry()) for lim in limits])
        else:
            refused = self._hit_memory(rule, key, limits)
        if refused is not None:
            i, wait = refused
            raise Refused(
                429,
                f"too many {what} (limit {limits[i]}); slow down and try again in {wait} s",
                {"Retry-After": str(wait)},
            )

    def _hit_memory(self, rule: str, key: str, limits: list[RateLimitItem]) -> tuple[int, int] | None:
        """:meth:`hit` in this process's windows: None (let in) or (limit index, seconds to wait)."""
        now = time.monotonic()
        self._sweep(now)
        for i, lim in enumerate(limits):
            window = self.windows.setdefault((rule, key, i), deque())
            span = lim.get_expiry()
            while window and window[0] <= now - span:
                window.popleft()
            if len(window) >= lim.amount:
                return i, max(1, math.ceil(window[0] + span - now))
            window.append(now)
        return None

    def horizon_s(self) -> float:
        """The longest window of any rule (seconds)."""
        return float(max(lim.get_expiry() for limits, _ in self.rules.values() for lim in limits))

    def _sweep(self, now: float) -> None:
        """Every :data:`SWEEP_EVERY` hits: drop the windows whose every time has expired."""
        self.hits += 1
        if self.hits % self.SWEEP_EVERY:
            return
        longest = {rule: max(lim.get_expiry() for lim in limits) for rule, (limits, _) in self.rules.items()}
        for k in [k for k, w in self.windows.items() if not w or w[-1] <= now - longest[k[0]]]:
            del self.windows[k]


Networks = list[ipaddress.IPv4Network | ipaddress.IPv6Network]


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def client_address(request: Request, trusted: Networks = []) -> str:  # noqa: B006 (never mutated)
    """The client's IP address: the TCP peer (``gavil game`` runs uvicorn with its proxy headers
    off). Only when the peer is a proxy in ``trusted`` (``game.trusted_proxies``) is
    ``X-Forwarded-For`` read, from the right: the first address that is not a trusted proxy is the
    client (a client-written left part is never believed); a malformed entry stops the walk there.
    ``Forwarded`` and ``X-Real-IP`` are never read."""
    peer = request.client.host if request.client else "unknown"
    hop = _address(peer)
    if not trusted or hop is None or not any(hop in net for net in trusted):
        return peer
    forwarded = ",".join(request.headers.getlist("x-forwarded-for"))
    for part in reversed(forwarded.split(",") if forwarded else []):
        addr = _address(part)
        if addr is None:
            break
        hop = addr
        if not any(addr in net for net in trusted):
            break
    return str(hop)


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers={**SECURITY_HEADERS, **(headers or {})})


def _token(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    return auth[7:] if auth.lower().startswith("bearer ") else ""


class Context:
    """What every route of one app shares: the game, its throttles (:class:`Throttle`: in this
    app's memory with one server process, so a restart starts them afresh; in
    ``<store>.limits.sqlite`` with ``game.workers`` > 1, shared by the processes), the trusted proxies
    (``game.trusted_proxies``), the images by hash, and the lock refused admin attempts wait on."""

    def __init__(self, game: Game, image_paths: dict[str, Path]) -> None:
        self.game = game
        self.image_paths = image_paths
        self.throttle = Throttle(game.p)
        if game.p.workers > 1:  # several server processes: the windows in the file they share
            self.throttle.shared = SharedWindows(limits_file(game.store), self.throttle.horizon_s())
        self.trusted: Networks = [ipaddress.ip_network(n, strict=False) for n in game.p.trusted_proxies]
        self.admin_lock = asyncio.Lock()  # refused admin attempts wait one at a time: slowed server-wide
        self.log = logging.getLogger("gavil.game")
        self.counters = Counters(game.p.max_in_flight)
        # session token -> player id of tokens seen (a token never changes its player): no store read,
        # no thread hop, for an account's later requests; bounded, emptied when full
        self.players: dict[str, str] = {}

    async def player_of(self, token: str) -> str | None:
        """The player id of ``token`` (:meth:`gavil.game.service.Game.lookup`, remembered), or None."""
        pid = self.players.get(token)
        if pid is None:
            pid = await run(self.game.lookup, token)
            if pid is not None:
                if len(self.players) >= 100_000:
                    self.players.clear()
                self.players[token] = pid
        return pid

    def address(self, request: Request) -> str:
        """The client's address (:func:`client_address` with this app's trusted proxies)."""
        return client_address(request, self.trusted)

    async def account(self, request: Request, rule: str) -> str:
        """The request's session token once its account's budget (``rule``: submit or read) allows
        it; no or an unknown token is charged to the address's unauthenticated budget, then 401.

        Raises:
            GameError: 401 (no or an unknown session token).
            Refused: 429 (a budget is spent, :meth:`Throttle.hit`).
        """
        token = _token(request)
        pid = await self.player_of(token) if token else None
        if pid is None:
            self.throttle.hit("unauthenticated", self.address(request))
            raise GameError(401, "join the game first" if not token else "unknown session: join the game again")
        if rule == "submit":
            self.throttle.hit("submit_address", self.address(request))
            self.throttle.hit("submit_account", pid)
        else:
            self.throttle.hit("read_account", pid)
        return token

    async def submitter(self, request: Request) -> str:
        """The session token of a submission (create, solve, flag): :meth:`account` under ``submit``."""
        return await self.account(request, "submit")

    async def reader(self, request: Request) -> str:
        """The session token of any other player request: :meth:`account` under ``read``."""
        return await self.account(request, "read")

    async def admin(self, request: Request) -> None:
        """Admin attempts are limited per address and server-wide before the token is compared (in
        constant time); a refused one is logged and answered after ``admin_failure_delay_s``.

        Raises:
            Refused: 429 (too many attempts).
            GameError: 403 (not the admin token).
        """
        addr = self.address(request)
        self.throttle.hit("admin_address", addr)
        self.throttle.hit("admin_global", "all")
        if self.game.admin_ok(request.headers.get("x-admin-token")):
            return
        self.log.warning("game: refused admin token from %s on %s %s", addr, request.method, request.url.path)
        async with self.admin_lock:
            await asyncio.sleep(self.game.p.admin_failure_delay_s)
        raise GameError(403, "admin token required")


def static_routes(ctx: Context) -> list[Route]:
    """The page, its script and style, and the images by content hash (``/img/<sha256>``: only a
    hash the game chose; anything else is 404)."""

    def page(name: str, media: str) -> Any:
        async def handler(request: Request) -> Response:
            return FileResponse(STATIC / name, media_type=media, headers=SECURITY_HEADERS)

        return handler

    async def image(request: Request) -> Response:
        sha = request.path_params["sha"]
        if not _SHA.match(sha) or sha not in ctx.image_paths:
            return _json({"error": "no such image"}, 404)
        return FileResponse(ctx.image_paths[sha], headers={**SECURITY_HEADERS, "Cache-Control": "max-age=86400"})

    return [
        Route("/", page("index.html", "text/html; charset=utf-8")),
        Route("/static/game.js", page("game.js", "text/javascript; charset=utf-8")),
        Route("/static/game.css", page("game.css", "text/css; charset=utf-8")),
        Route("/img/{sha}", image),
    ]


def player_routes(ctx: Context) -> list[Route]:
    """Every player's routes: the status, joining, the dashboard, the leaderboard and flags."""
    game, throttle = ctx.game, ctx.throttle

    async def status(request: Request) -> Response:
        # the rounds as the store has them now (a `gavil round close` elsewhere shows at once): round_state
        # paused: the store's setting, read at most once a second (another server process may set it)
        rounds = await run(lambda: {**round_state(game.db, game.round), "paused": game.paused()})
        return _json(
            {
                "rival_status": game.rival.status,
                "rival_message": game.rival.message,
                **rounds,  # round (the one collected; None: none), open_round, rounds (every round id), paused
                "identity": game.p.identity,
                "min_solvers": game.min_solvers,
                "bonus_unit": game.p.bonus_unit,
            }
        )

    async def join(request: Request) -> Response:
        throttle.hit("join_address", ctx.address(request))
        b = await parse(request, JoinBody)
        throttle.hit("join_code", hashlib.sha256(b.code.encode()).hexdigest())
        return _json(await run(game.join, b.code, b.name))

    async def me(request: Request) -> Response:
        return _json(await run(game.dashboard, await ctx.reader(request)))

    async def leaderboard(request: Request) -> Response:
        await ctx.reader(request)
        given = request.query_params.get("round")  # ?round=N: one collection round's leaderboard
        if given is not None and not (given.isascii() and given.isdigit() and len(given) <= 9):
            raise GameError(400, "round must be a whole number (0, 1, 2, ...)")
        round_id = None if given is None else int(given)
        return _json({"rows": await run(game.leaderboard, 20, round_id), "round": round_id})

    async def flag_post(request: Request) -> Response:
        token = await ctx.submitter(request)
        b = await parse(request, FlagBody)
        return _json(await run(flags.flag, game, token, b.instance_id, b.category, b.reason))

    return [
        Route("/api/status", status),
        Route("/api/join", join, methods=["POST"]),
        Route("/api/me", me),
        Route("/api/leaderboard", leaderboard),
        Route("/api/flag", flag_post, methods=["POST"]),
    ]


def play_routes(ctx: Context) -> list[Route]:
    """The spymaster's routes (creation tasks, creations, one's own association) and the solver's
    (solve tasks, answers)."""
    game = ctx.game

    async def create_get(request: Request) -> Response:
        return _json({"task": await run(game.creation_task, await ctx.reader(request), False)})

    async def create_task(request: Request) -> Response:
        token = await ctx.reader(request)
        await read_capped(request)  # a body, if any, is bounded and ignored
        return _json({"task": await run(game.creation_task, token)})

    async def create_post(request: Request) -> Response:
        token = await ctx.submitter(request)
        c = await parse(request, CreateBody)
        return _json(await run(game.create, token, c.task_id, c.cue, list(c.selection)))

    async def creation(request: Request) -> Response:
        return _json(await run(game.creation, await ctx.reader(request), request.path_params["instance_id"]))

    async def solve_get(request: Request) -> Response:
        return _json({"task": await run(game.solve_task, await ctx.reader(request), False)})

    async def solve_task(request: Request) -> Response:
        token = await ctx.reader(request)
        await read_capped(request)
        return _json({"task": await run(game.solve_task, token)})

    async def solve_post(request: Request) -> Response:
        token = await ctx.submitter(request)
        b = await parse(request, SolveBody)
        return _json(await run(game.solve, token, b.lease_id, list(b.selection)))

    return [
        Route("/api/create", create_get, methods=["GET"]),
        Route("/api/create", create_post, methods=["POST"]),
        Route("/api/create/task", create_task, methods=["POST"]),
        Route("/api/create/{instance_id}", creation, methods=["GET"]),
        Route("/api/solve", solve_get, methods=["GET"]),
        Route("/api/solve", solve_post, methods=["POST"]),
        Route("/api/solve/task", solve_task, methods=["POST"]),
    ]


def admin_routes(ctx: Context) -> list[Route]:
    """The admin's routes (``X-Admin-Token``, :meth:`Context.admin`): pause, submissions, export,
    invitations, and the flags' review queue and decisions."""
    game = ctx.game

    async def admin_pause(request: Request) -> Response:
        await ctx.admin(request)
        b = await parse(request, PauseBody)
        await run(game.set_paused, b.paused)
        return _json({"paused": await run(game.paused)})

    async def admin_submissions(request: Request) -> Response:
        await ctx.admin(request)
        return _json(await run(game.submissions))

    async def admin_invitations(request: Request) -> Response:
        await ctx.admin(request)
        b = await parse(request, InvitationsBody)
        codes = await run(game.create_invitations, b.count)
        return _json({"codes": codes, **await run(game.invitations)})

    async def admin_export(request: Request) -> Response:
        await ctx.admin(request)
        return _json(await run(game.export))

    async def admin_stats(request: Request) -> Response:
        await ctx.admin(request)
        c = ctx.counters
        return _json(
            {
                "in_flight": c.in_flight,
                "max_in_flight": c.max_in_flight,
                "refused_busy": c.refused_busy,
                "client_disconnects": c.client_disconnects,
                "pid": os.getpid(),  # the counters are this server process's (game.workers)
                "gc_frozen": gc.get_freeze_count(),  # the start-up heap out of the collector's reach (settle_heap)
            }
        )

    async def admin_flags(request: Request) -> Response:
        await ctx.admin(request)
        return _json(await run(flags.queue, game))

    async def admin_review(request: Request) -> Response:
        await ctx.admin(request)
        b = await parse(request, ReviewBody)
        return _json(await run(flags.review, game, b.instance_id, b.decision, b.note, b.reviewer))

    return [
        Route("/api/admin/pause", admin_pause, methods=["POST"]),
        Route("/api/admin/submissions", admin_submissions),
        Route("/api/admin/export", admin_export),
        Route("/api/admin/invitations", admin_invitations, methods=["POST"]),
        Route("/api/admin/flags", admin_flags, methods=["GET"]),
        Route("/api/admin/stats", admin_stats, methods=["GET"]),
        Route("/api/admin/flags/review", admin_review, methods=["POST"]),
    ]


def consent_routes(ctx: Context) -> list[Route]:
    """The consent text and a player's acceptance and withdrawal (:mod:`gavil.game.consent`):
    ``GET``/``POST /api/consent`` and ``POST /api/consent/withdraw``; reads under the account's read
    budget, acceptances and withdrawals under its submission budget."""
    game = ctx.game

    async def consent_get(request: Request) -> Response:
        return _json(await run(consent.state, game, await ctx.reader(request)))

    async def consent_post(request: Request) -> Response:
        token = await ctx.submitter(request)
        b = await parse(request, AcceptBody)
        return _json(await run(consent.accept, game, token, b.version))

    async def withdraw(request: Request) -> Response:
        token = await ctx.submitter(request)
        b = await parse(request, WithdrawBody)
        if not b.confirm:
            raise GameError(400, "confirm must be true to withdraw")
        return _json(await run(consent.withdraw, game, token))

    return [
        Route("/api/consent", consent_get, methods=["GET"]),
        Route("/api/consent", consent_post, methods=["POST"]),
        Route("/api/consent/withdraw", withdraw, methods=["POST"]),
    ]


async def on_error(request: Request, exc: Exception) -> Response:
    """A refusal as JSON ``{"error": message}``: a domain error (:class:`gavil.errors.Refusal`) with
    its :data:`STATUS`, a :class:`GameError` with its own (and a :class:`Refused`'s headers); a
    :class:`Disconnected` client is counted (``app.state.counters``), its answer goes nowhere."""
    if isinstance(exc, Refusal):
        return _json({"error": exc.message}, refusal_status(exc))
    assert isinstance(exc, GameError)
    if isinstance(exc, Disconnected):
        request.app.state.counters.client_disconnects += 1
    return _json({"error": exc.message}, exc.status, exc.headers if isinstance(exc, Refused) else None)


def create_app(game: Game, image_paths: dict[str, Path]) -> Starlette:
    """The app for ``game``; ``image_paths``: sha256 -> file of every image the game shows.

    Its throttles (:class:`Throttle`) live in this app's memory, or with ``game.workers`` > 1 in the
    file the server processes share (:mod:`gavil.gamestore.limits`).
    """
    ctx = Context(game, image_paths)
    routes = static_routes(ctx) + player_routes(ctx) + play_routes(ctx) + admin_routes(ctx) + consent_routes(ctx)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await run(game.close)
        if ctx.throttle.shared is not None:
            ctx.throttle.shared.close()

    app = Starlette(
        routes=routes,
        exception_handlers={GameError: on_error, Refusal: on_error},
        lifespan=lifespan,
        middleware=[Middleware(Admission, counters=ctx.counters, retry_after_s=game.p.busy_retry_after_s)],
    )
    app.state.counters = ctx.counters
    return app
