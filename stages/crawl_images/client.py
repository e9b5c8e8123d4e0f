"""The crawler's HTTP client: urllib3, pinned to checked addresses, bounded in time and size.

- **Pinned connections.** Connections are opened only to the addresses the :class:`~stages.crawl_images.urlguard.Resolver`
  checked for the URL's host (resolved once per run); the Host header, TLS SNI and certificate check still use the host
  name. Proxies from the environment and ``.netrc`` credentials are not used.
- **Redirects** are followed here, at most ``crawl.max_redirects``; every hop is parsed and checked by the guard (and
  by the caller's ``on_hop``, e.g. robots.txt), and every response's headers are shown to ``on_response`` (e.g.
  ``X-Robots-Tag``) before anything else happens.
- **Retries** (urllib3 ``Retry``): connection errors, timeouts, 429 and 5xx, with exponential back-off
  (``crawl.backoff_s``) or the server's ``Retry-After`` (capped at ``crawl.max_retry_after_s``); a ``Retry-After``
  that is not a number of seconds or an HTTP date (``soon``, ``-5``) falls back to the back-off.
- **Time**: ``crawl.timeout_s`` bounds each connect and each read; ``crawl.deadline_s`` bounds a whole fetch (all
  hops, retries, waits, the TLS handshake, headers and body): :data:`WATCHDOG` shuts the sockets of a fetch that
  outlives it, so a body sent at one byte a second cannot hold a thread. A robots.txt fetched on the way has a
  deadline of its own (its verdict is kept).
- **Size**: bodies are read in chunks and decoded (gzip, deflate) at most ``max_bytes`` at a time, so neither a large
  body nor a compression bomb is ever held in memory whole.
"""

from __future__ import annotations

import errno
import hashlib
import heapq
import itertools
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3 import exceptions as u3e
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.util import Retry, Timeout, Url
from urllib3.util import connection as u3conn

from stages.crawl_images.urlguard import Refused, Resolver, Unresolvable, candidate_url, parse_checked

#: HTTP statuses retried (with back-off) and journaled as transient.
RETRY_STATUS = (429, 500, 502, 503, 504)
_REDIRECTS = (301, 302, 303, 307, 308)


class DeadlineExceeded(Exception):
    """A fetch outlived ``crawl.deadline_s``."""


class FetchFailed(Exception):
    """A fetch ended without a usable response: the candidate ``status``, a stable ``reason``
    (no paths, times, addresses of objects) and whether it is ``transient`` (tried again next run)."""

    def __init__(self, status: str, reason: str, transient: bool = False) -> None:
        super().__init__(reason)
        self.status, self.reason, self.transient = status, reason, transient


# ------------------------------------------------------------------------------------------ deadline
class _Window:
    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.done = self.expired = False
        self.lock = threading.Lock()
        self.socks: list[Any] = []
        self.owned: list[Any] = []  # duplicates made for the watch, closed when the window ends

    def over(self) -> bool:
        return self.expired or time.monotonic() >= self.deadline

    def expire(self) -> None:
        with self.lock:
            self.expired = True
            socks, self.socks = self.socks, []
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)  # wakes a blocked recv (plain and TLS sockets)
            except OSError:
                pass


class Watchdog:
    """Ends fetches that outlive their deadline: one daemon thread shuts their sockets down."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, _Window]] = []
        self._seq = itertools.count()
        self._local = threading.local()
        self._thread: threading.Thread | None = None

    @contextmanager
    def window(self, seconds: float, clip: bool = True) -> Iterator[_Window]:
        """A deadline ``seconds`` from now for the sockets this thread uses inside the block
        (:meth:`attach`); ``clip``: never later than an enclosing window's."""
        stack: list[_Window] = self._local.__dict__.setdefault("stack", [])
        deadline = time.monotonic() + seconds
        if stack and clip:
            deadline = min(deadline, stack[-1].deadline)
        w = _Window(deadline)
        with self._cv:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="crawl-deadline", daemon=True)
                self._thread.start()
            earliest = self._heap[0][0] if self._heap else float("inf")
            heapq.heappush(self._heap, (deadline, next(self._seq), w))
            if deadline < earliest:
                self._cv.notify()
        stack.append(w)
        try:
            yield w
        finally:
            stack.pop()
            with w.lock:
                w.done, w.socks, owned, w.owned = True, [], w.owned, []
            for s in owned:
                s.close()

    def attach(self, sock: Any, duplicate: bool = False) -> None:
        """Put ``sock`` under this thread's innermost window (no-op outside one). ``duplicate``:
        watch a duplicate of its descriptor (the same connection), which outlives ``sock`` being
        taken over by TLS during the handshake."""
        stack = self._local.__dict__.get("stack")
        if not stack or sock is None:
            return
        w = stack[-1]
        if duplicate:
            sock = sock.dup()
        with w.lock:
            if duplicate:
                w.owned.append(sock)
            if not w.expired:
                w.socks.append(sock)
                return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _run(self) -> None:
        with self._cv:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cv.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cv.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].expire()


WATCHDOG = Watchdog()


class _Retry(Retry):
    """urllib3's Retry, bounded by a fetch's deadline; an unparseable Retry-After means back-off."""

    deadline: float | None = None

    def new(self, **kw: Any) -> _Retry:
        r = super().new(**kw)
        r.deadline = self.deadline
        return r

    def get_retry_after(self, response: Any) -> float | None:
        try:
            return super().get_retry_after(response)
        except u3e.InvalidHeader:  # "soon", "-5": not seconds, not an HTTP date
            return None

    def increment(self, *args: Any, **kwargs: Any) -> _Retry:
        if self.deadline is not None and time.monotonic() >= self.deadline:
            raise DeadlineExceeded()
        return super().increment(*args, **kwargs)

    def sleep(self, response: Any = None) -> None:
        after = self.get_retry_after(response) if self.respect_retry_after_header and response else None
        wait = after or self.get_backoff_time()
        if self.deadline is not None and time.monotonic() + wait >= self.deadline:
            raise DeadlineExceeded()
        if wait > 0:
            time.sleep(wait)


# ------------------------------------------------------------------------------------------ connections
class _PinnedMixin:
    """Connects only to the addresses the resolver checked for this connection's host."""

    resolver: Resolver
    _dns_host: str
    port: int
    timeout: Any
    source_address: Any
    socket_options: Any
    sock: Any

    def _new_conn(self) -> socket.socket:
        try:
            addrs = self.resolver.addresses(self._dns_host)
        except (Refused, Unresolvable) as e:
            raise u3e.NewConnectionError(self, f"refused: {e}") from None  # type: ignore[arg-type]
        last: OSError | None = None
        for addr in addrs:
            try:
                sock = u3conn.create_connection(
                    (addr, self.port),
                    self.timeout,
                    source_address=self.source_address,
                    socket_options=self.socket_options,
                )
            except TimeoutError as e:
                raise u3e.ConnectTimeoutError(self, "connect timed out") from e
            except OSError as e:
                last = e
                continue
            WATCHDOG.attach(sock, duplicate=True)  # TLS takes `sock` over: its handshake stays watched
            return sock
        raise u3e.NewConnectionError(self, f"Failed to establish a new connection: {last}") from last  # type: ignore[arg-type]

    def getresponse(self) -> Any:
        WATCHDOG.attach(self.sock)
        return super().getresponse()  # type: ignore[misc]


def _pool_manager(resolver: Resolver, maxsize: int) -> PoolManager:
    http_conn = type("PinnedHTTPConnection", (_PinnedMixin, HTTPConnection), {"resolver": resolver})
    https_conn = type("PinnedHTTPSConnection", (_PinnedMixin, HTTPSConnection), {"resolver": resolver})
    kw: dict[str, Any] = {}
    try:
        import certifi

        kw["ca_certs"] = certifi.where()  # the CA bundle requests uses
    except ImportError:  # pragma: no cover - certifi comes with requests
        pass
    pm = PoolManager(num_pools=256, maxsize=maxsize, block=False, **kw)
    pm.pool_classes_by_scheme = {
        "http": type("PinnedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("PinnedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }
    return pm


# ------------------------------------------------------------------------------------------ fetching
@dataclass
class Hop:
    """One response of a fetch (a redirect or the final one)."""

    url: str
    status: int
    headers: Any


@dataclass
class Response:
    """The final response of a fetch: its URL, status, every hop's response, the body (in ``body``, or when
    ``spilled`` in the caller's ``sink``) and its ``sha256``; ``truncated``: a ``truncate`` fetch stopped at ``max_bytes``."""

    url: str
    status: int
    hops: list[Hop] = field(default_factory=list)
    body: bytes = b""
    size: int = 0
    sha256: str | None = None
    truncated: bool = False
    spilled: bool = False  # the body went to the fetch's ``sink`` file (it outgrew ``keep``)


class Client:
    """Guarded GETs for one crawl run (thread-safe).

    ``slot(origin)`` is the caller's per-origin politeness gate (a context manager); it is held for each request, body
    included, and never while ``on_hop`` runs. Units: ``timeout_s`` (each connect and read), ``deadline_s`` (a whole
    fetch), ``backoff_s`` and ``max_retry_after_s`` are seconds; ``pool_size`` is keep-alive connections per origin."""

    def __init__(
        self,
        resolver: Resolver,
        slot: Callable[[str], Any],
        *,
        user_agent: str,
        timeout_s: float,
        deadline_s: float,
        retries: int,
        backoff_s: float,
        max_retry_after_s: int,
        max_redirects: int,
        pool_size: int,
    ) -> None:
        self.resolver, self.slot = resolver, slot
        self.timeout_s, self.deadline_s, self.max_redirects = timeout_s, deadline_s, max_redirects
        self.retries = retries
        self._retry = _Retry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            redirect=False,
            backoff_factor=backoff_s,
            status_forcelist=RETRY_STATUS,
            allowed_methods=frozenset({"GET"}),
            respect_retry_after_header=True,
            retry_after_max=max_retry_after_s,
            raise_on_status=False,
        )
        self.headers = {"User-Agent": user_agent, "Accept-Encoding": "gzip, deflate"}
        self.pm = _pool_manager(resolver, pool_size)

    def fetch(
        self,
        url: str,
        *,
        max_bytes: int,
        too_large: str,
        sink: Path | None = None,
        keep: int = 0,
        truncate: bool = False,
        on_hop: Callable[[Url], None] | None = None,
        on_response: Callable[[Hop], None] | None = None,
        max_redirects: int | None = None,
        own_deadline: bool = False,
    ) -> Response:
        """GET ``url``, following redirects, within ``crawl.deadline_s`` (and within the deadline of
        a fetch this one runs inside, unless ``own_deadline``: robots.txt, whose verdict is kept).

        Args:
            max_bytes: body limit in bytes (decoded); above it the fetch fails with
                ``too_large`` as the reason, or stops there when ``truncate``.
            sink: where a body over ``keep`` bytes streams to (``Response.spilled``); without
                ``sink`` every body is returned in ``Response.body``.
            keep: with ``sink``, a body of at most this many bytes is only returned in ``body``,
                not written (the caller writes it once, if it keeps it).
            on_hop: called with every parsed, guard-checked URL before it is requested; may raise
                :class:`FetchFailed` (robots.txt).
            on_response: called with every response's status and headers before a redirect is
                followed or a body read; may raise :class:`FetchFailed` (``X-Robots-Tag``).

        Returns the final response; its body is read only for 2xx statuses.

        Raises:
            FetchFailed: refused URL or hop (``refused_url``, permanent), too many redirects,
                too large, or a network error, timeout or the deadline (``download_failed``,
                transient).
        """
        limit = self.max_redirects if max_redirects is None else max_redirects
        hops: list[Hop] = []
        with WATCHDOG.window(self.deadline_s, clip=not own_deadline) as w:
            current = url
            for _ in range(limit + 1):
                try:
                    u = parse_checked(current)
                    self.resolver.addresses(u.host or "")
                except Refused as e:
                    raise FetchFailed("refused_url", _hop_reason(hops, current, e.reason)) from None
                except Unresolvable as e:
                    raise FetchFailed("download_failed", str(e), transient=True) from None
                if on_hop is not None:
                    on_hop(u)
                with self.slot(f"{u.scheme}://{u.host}:{u.port or (443 if u.scheme == 'https' else 80)}"):
                    resp = self._open(u, w)
                    reusable = False
                    try:
                        hop = Hop(current, resp.status, resp.headers)
                        hops.append(hop)
                        if on_response is not None:
                            on_response(hop)
                        location = resp.headers.get("Location")
                        if resp.status in _REDIRECTS and location:
                            current = candidate_url(location, base=u.url)
                            continue
                        out = Response(current, resp.status, hops)
                        if 200 <= resp.status < 300:
                            self._read(resp, w, out, max_bytes, too_large, sink, truncate, keep)
                            reusable = not out.truncated
                        return out
                    except (u3e.HTTPError, OSError, DeadlineExceeded) as e:
                        raise self._failure(e, w) from None
                    finally:
                        if reusable and not w.over():
                            resp.release_conn()  # the body was read to its end: keep-alive
                        else:
                            resp.close()  # never drain what a hostile server may still send
        raise FetchFailed("download_failed", f"redirect loop, or more than {limit} redirects (crawl.max_redirects)")

    def _open(self, u: Url, w: _Window) -> Any:
        retry = self._retry.new()
        retry.deadline = w.deadline
        pool = self.pm.connection_from_host(u.host or "", port=u.port, scheme=u.scheme or "http")
        try:
            return pool.urlopen(
                "GET",
                u.request_uri,
                headers=self.headers,
                retries=retry,
                redirect=False,
                assert_same_host=False,
                preload_content=False,
                decode_content=True,
                release_conn=False,
                timeout=Timeout(connect=self.timeout_s, read=self.timeout_s),
            )
        except (u3e.HTTPError, OSError, DeadlineExceeded) as e:
            raise self._failure(e, w) from None

    def _read(
        self,
        resp: Any,
        w: _Window,
        out: Response,
        max_bytes: int,
        too_large: str,
        sink: Path | None,
        truncate: bool,
        keep: int = 0,
    ) -> None:
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > max_bytes and not truncate and "Content-Encoding" not in resp.headers:
            raise FetchFailed("invalid_image", too_large)
        h = hashlib.sha256()
        chunks: list[bytes] = []
        f = None  # the sink, opened only once the body outgrows ``keep``; closed below
        try:
            while True:
                if w.over():
                    raise DeadlineExceeded()
                data = resp.read1(min(1 << 16, max_bytes + 1 - out.size))
                if not data:
                    break
                if out.size + len(data) > max_bytes:
                    if not truncate:
                        raise FetchFailed("invalid_image", too_large)
                    data, out.truncated = data[: max_bytes - out.size], True
                out.size += len(data)
                h.update(data)
                if f is None and sink is not None and out.size > keep:  # the file alone holds it from here
                    f, out.spilled = open(sink, "wb"), True  # closed in the finally below
                    f.write(b"".join(chunks))
                    chunks = []
                if f is not None:
                    f.write(data)
                else:
                    chunks.append(data)
                if out.truncated:
                    break
            if w.over():
                raise DeadlineExceeded()  # the watchdog's shutdown can look like a normal end
        finally:
            if f is not None:
                f.close()
        out.body, out.sha256 = b"".join(chunks), h.hexdigest()

    def _failure(self, e: BaseException, w: _Window) -> FetchFailed:
        if isinstance(e, DeadlineExceeded) or w.over():
            return FetchFailed(
                "download_failed", f"took longer than crawl.deadline_s ({self.deadline_s:g} s)", transient=True
            )
        if isinstance(e, u3e.MaxRetryError):
            retried = f" after {self.retries} {'retry' if self.retries == 1 else 'retries'}" if self.retries else ""
            return FetchFailed("download_failed", f"{describe(e.reason)}{retried}", transient=True)
        transient = not isinstance(e, u3e.DecodeError)
        return FetchFailed("download_failed", describe(e), transient=transient)

    def close(self) -> None:
        self.pm.clear()


def _hop_reason(hops: list[Hop], url: str, reason: str) -> str:
    return f"redirect to {url}: {reason}" if hops else reason


def describe(e: BaseException | None) -> str:
    """A stable description of a network error: no object addresses, ports of ours or times."""
    if isinstance(e, u3e.MaxRetryError):
        return describe(e.reason)
    if isinstance(e, u3e.NameResolutionError):
        return "DNS lookup failed"
    if isinstance(e, u3e.NewConnectionError):  # a subclass of ConnectTimeoutError: checked first
        cause = e.__cause__ if isinstance(e.__cause__, OSError) else None
        if cause is None and "refused: " in str(e):
            return str(e).split("refused: ", 1)[1]
        code = errno.errorcode.get(cause.errno or 0, "") if cause is not None else ""
        return f"connection failed ({code or 'no address reachable'})"
    if isinstance(e, u3e.ConnectTimeoutError):
        return "connect timed out"
    if isinstance(e, (u3e.ReadTimeoutError, TimeoutError, socket.timeout)):
        return "read timed out"
    if isinstance(e, u3e.SSLError):
        return "TLS error"
    if isinstance(e, u3e.DecodeError):
        return "body could not be decoded (Content-Encoding)"
    if isinstance(e, u3e.ProtocolError):
        return "connection broken"
    if isinstance(e, OSError) and e.errno:
        return f"connection failed ({errno.errorcode.get(e.errno, 'OSError')})"
    return f"request failed ({type(e).__name__})"
