"""The URL guard: which URLs the crawler may fetch, parsed once and resolved once.

Policy (README "Crawl: URL and robots policy"):

- **One parser.** A URL is parsed with urllib3's :func:`urllib3.util.parse_url`, the parser of the
  HTTP client that fetches it, and the parsed object is what is fetched (never re-parsed).
- **Ambiguous URLs are refused** before parsing: backslashes, whitespace, control characters,
  credentials (``user:password@``), schemes other than http/https, a missing host, more than
  :data:`MAX_URL_CHARS` characters. A URL urllib3 cannot parse (bad port, bad IPv6 literal...) is
  refused as malformed. Refusals are permanent (journaled, never retried).
- **Credentials are never stored**: :func:`candidate_url` replaces a URL's userinfo with
  ``***`` before the URL enters the journal or a table (the redacted URL is then refused).
- **Resolve once, connect to what was checked.** :class:`Resolver` resolves each host once per
  crawl run (``getaddrinfo``, at most ``crawl.timeout_s``), checks every address, and the HTTP
  client connects only to those addresses (:mod:`stages.crawl_images.client`), so a name that
  resolves public, then private (DNS rebinding) is never fetched from the private address.
- **Globally routable addresses only** (unless ``crawl.allow_private_hosts``): an address is
  refused unless ``ipaddress`` says ``is_global`` and it is not multicast or site-local; IPv6
  addresses with a zone id are refused; IPv4 embedded in IPv6 (``::ffff:a.b.c.d``, 6to4
  ``2002::/16``, NAT64 ``64:ff9b::/96``) is checked as the IPv4 address it carries.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
from typing import Any
from urllib.parse import urljoin

from urllib3.exceptions import LocationParseError
from urllib3.util import Url, parse_url

#: Longer URLs are refused (and stored cut to this length).
MAX_URL_CHARS = 4096
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*:)?(//|\\\\|/\\|\\/)([^/?#]*)@")


class Refused(Exception):
    """A URL or address the crawler may not fetch; ``reason`` is the stable, printable why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unresolvable(Exception):
    """A host name that did not resolve (transient: DNS may answer next run)."""


def redact(url: str) -> str:
    """``url`` with its userinfo (``user:password@``) replaced by ``***@``; otherwise unchanged.

    Generous on purpose: anything between ``//`` and the last ``@`` before the path is removed,
    whichever parser's view of the authority applies (backslashes included).
    """
    m = _AUTHORITY.match(url)
    if not m:
        return url
    return f"{m.group(1) or ''}{m.group(2)}***@{url[m.end() :]}"


def candidate_url(raw: str, base: str | None = None) -> str:
    """The form of a candidate URL that is journaled, stored and fetched.

    Leading and trailing ASCII whitespace is dropped (as browsers do), ``raw`` is resolved against
    ``base`` (the page it was found on; RFC 3986 reference resolution,
    :func:`urllib.parse.urljoin`) when given, its credentials are redacted (:func:`redact`) and it
    is cut to :data:`MAX_URL_CHARS` characters (a cut URL is refused when fetched). Nothing else
    changes, so the guard sees what the source said.
    """
    url = raw.strip(" \t\r\n\f")
    if base is not None:
        try:
            url = urljoin(base, url)
        except ValueError:  # e.g. an invalid IPv6 literal: kept as given, refused when fetched
            pass
    url = redact(url)
    return url if len(url) <= MAX_URL_CHARS else url[: MAX_URL_CHARS - 1] + "…"


def parse_checked(url: str) -> Url:
    """Parse ``url`` with urllib3 and refuse anything ambiguous (see the module docstring).

    Returns the parsed :class:`urllib3.util.Url`, scheme and host lower-cased; this object (not the
    string) is what the client fetches.

    Raises:
        Refused: with the reason (permanent).
    """
    if len(url) > MAX_URL_CHARS or url.endswith("…"):
        raise Refused(f"URL longer than {MAX_URL_CHARS} characters refused")
    bad = next((c for c in url if c.isspace() or ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F), None)
    if bad is not None:
        raise Refused(f"URL with whitespace or a control character (U+{ord(bad):04X}) refused")
    if "\\" in url:
        raise Refused("URL with a backslash refused (parsers disagree on where its host ends)")
    try:
        u = parse_url(url)
    except (LocationParseError, ValueError, UnicodeError):
        raise Refused("malformed URL (urllib3 cannot parse it)") from None
    scheme = (u.scheme or "").lower()
    if scheme not in ("http", "https"):
        raise Refused(f"URL scheme '{scheme}' refused (http/https only)")
    if u.auth is not None or "@" in (u.netloc or ""):
        raise Refused("URL with credentials (user:password@) refused")
    if not u.host:
        raise Refused("malformed URL (no host)")
    return u


def origin(u: Url) -> str:
    """``scheme://host:port`` of a parsed URL (robots.txt and politeness are per origin)."""
    port = u.port or (443 if u.scheme == "https" else 80)
    return f"{u.scheme}://{u.host}:{port}"


def host_key(host: str) -> str:
    """The form of a host name the resolver and the connection layer agree on."""
    return host.strip("[]").rstrip(".").lower()


def address_problem(address: str) -> str | None:
    """Why a resolved address may not be connected to, or None if it is globally routable.

    Refused: ``not ip.is_global`` (loopback, RFC 1918, carrier-grade NAT 100.64.0.0/10, link-local,
    documentation, benchmarking, reserved...), multicast, IPv6 site-local, any IPv6 zone id;
    IPv4-mapped, 6to4 and NAT64 (64:ff9b::/96) addresses are judged by the IPv4 address inside.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.scope_id:
            return "IPv6 address with a zone id"
        inner = (
            ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in _NAT64 else None)
        )
        if inner is not None:
            problem = address_problem(str(inner))
            return f"embeds {inner}, {problem}" if problem else None
        if ip in _NAT64_LOCAL or ip.is_site_local:
            return "not globally routable"
    if ip.is_multicast:
        return "multicast"
    if not ip.is_global:
        return "not globally routable"
    return None


class Resolver:
    """Resolves each host once per crawl run and checks every address (thread-safe).

    ``allow_private``: skip the address check (``crawl.allow_private_hosts``); hosts are still
    resolved once and connections still go only to those addresses. Lookups of different hosts
    run in parallel (one lock per host).
    """

    def __init__(self, allow_private: bool, timeout_s: float = 10.0) -> None:
        self.allow_private, self.timeout_s = allow_private, timeout_s
        self._lock = threading.Lock()
        self._host_locks: dict[str, threading.Lock] = {}
        self._answers: dict[str, tuple[str, ...] | Exception] = {}

    def addresses(self, host: str) -> tuple[str, ...]:
        """The checked addresses of ``host`` (IP literals included), resolved at most once.

        Raises:
            Refused: some address is not globally routable (permanent).
            Unresolvable: the name did not resolve (transient).
        """
        key = host_key(host)
        with self._lock:
            lock = self._host_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._answers:
                self._answers[key] = self._resolve(key)
        answer = self._answers[key]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def _resolve(self, key: str) -> tuple[str, ...] | Exception:
        if "%" in key and not self.allow_private:
            return Refused(f"host {key} is an IPv6 address with a zone id: refused (link-local)")
        try:
            infos = self._lookup(key)
        except (UnicodeError, ValueError):  # e.g. a label longer than 63 characters
            return Refused(f"malformed host name {key[:100]}")
        except OSError:
            return Unresolvable(f"DNS lookup of {key} failed")
        if infos is None:
            return Unresolvable(f"DNS lookup of {key} timed out")
        addrs: list[str] = []
        for family, _, _, _, sockaddr in infos:
            if family not in (socket.AF_INET, socket.AF_INET6):
                continue
            addr = str(sockaddr[0])
            if family == socket.AF_INET6 and (sockaddr[3] or "%" in addr):
                addr = f"{addr.split('%')[0]}%{sockaddr[3]}"
            if addr not in addrs:
                addrs.append(addr)
        if not addrs:
            return Unresolvable(f"DNS lookup of {key} returned no address")
        if not self.allow_private:
            for a in addrs:
                problem = address_problem(a)
                if problem:
                    return Refused(
                        f"host {key} resolves to non-public address {a} ({problem}): refused (set crawl.allow_private_hosts to allow)"
                    )
        return tuple(addrs)

    def _lookup(self, key: str) -> list | None:
        """``getaddrinfo``, given at most ``timeout_s`` seconds (None after that: the system resolver
        cannot be interrupted, so its daemon thread is left to finish on its own)."""
        out: list[Any] = []

        def ask() -> None:
            try:
                out.append(socket.getaddrinfo(key, None, type=socket.SOCK_STREAM))
            except Exception as e:  # noqa: BLE001 - handed to the caller
                out.append(e)

        t = threading.Thread(target=ask, name="crawl-dns", daemon=True)
        t.start()
        t.join(self.timeout_s)
        if not out:
            return None
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]
