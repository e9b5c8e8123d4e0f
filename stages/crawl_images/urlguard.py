"""The URL guard: which URLs the crawler may fetch, parsed once and resolved once.

Policy (docs/crawl-policy.md):

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
- **Globally routable addresses only** (unless ``crawl.allow_private_hosts``), the same rule for
  direct hosts, DNS answers, redirect hops and robots.txt fetches: see :func:`address_problem`.
  A refused address is a permanent ``refused_url`` (journaled, never retried).
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


def _net(block: str, what: str) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]:
    return ipaddress.ip_network(block), what


#: IANA IPv4 Special-Purpose Address Registry
#: (https://www.iana.org/assignments/iana-ipv4-special-registry, RFC 6890 and its updates), every
#: entry refused outright, whether IANA marks it globally reachable or not (anycast service
#: addresses, AS112 sinks and relays serve no images), and the multicast space (RFC 5771).
SPECIAL_V4 = (
    _net("0.0.0.0/8", "this network, RFC 791"),
    _net("10.0.0.0/8", "private-use, RFC 1918"),
    _net("100.64.0.0/10", "shared address space (carrier-grade NAT), RFC 6598"),
    _net("127.0.0.0/8", "loopback, RFC 1122"),
    _net("169.254.0.0/16", "link-local, RFC 3927"),
    _net("172.16.0.0/12", "private-use, RFC 1918"),
    _net("192.0.0.0/24", "IETF protocol assignments, RFC 6890"),
    _net("192.0.2.0/24", "documentation TEST-NET-1, RFC 5737"),
    _net("192.31.196.0/24", "AS112-v4, RFC 7535"),
    _net("192.52.193.0/24", "AMT, RFC 7450"),
    _net("192.88.99.0/24", "deprecated 6to4 relay anycast, RFC 7526"),
    _net("192.168.0.0/16", "private-use, RFC 1918"),
    _net("192.175.48.0/24", "direct delegation AS112 service, RFC 7534"),
    _net("198.18.0.0/15", "benchmarking, RFC 2544"),
    _net("198.51.100.0/24", "documentation TEST-NET-2, RFC 5737"),
    _net("203.0.113.0/24", "documentation TEST-NET-3, RFC 5737"),
    _net("224.0.0.0/4", "multicast, RFC 5771"),
    _net("240.0.0.0/4", "reserved, RFC 1112"),
    _net("255.255.255.255/32", "limited broadcast, RFC 919"),
)

#: IANA IPv6 Special-Purpose Address Registry
#: (https://www.iana.org/assignments/iana-ipv6-special-registry) inside global unicast 2000::/3,
#: refused outright (Teredo 2001::/32 and 6to4 2002::/16 are judged by the IPv4 addresses they
#: embed instead, see :data:`EMBEDDINGS`). Everything outside 2000::/3 is refused too (IANA IPv6
#: Address Space registry: reserved, unique-local fc00::/7, link-local fe80::/10, site-local
#: fec0::/10, multicast ff00::/8, 64:ff9b:1::/48 local-use NAT64 (RFC 8215), discard 100::/64...),
#: except the embedding forms of :data:`EMBEDDINGS`.
SPECIAL_V6 = (
    _net("2001:1::/48", "IETF protocol assignments (PCP, TURN, DNS-SD anycast), RFC 2928"),
    _net("2001:2::/48", "benchmarking, RFC 5180"),
    _net("2001:3::/32", "AMT, RFC 7450"),
    _net("2001:4:112::/48", "AS112-v6, RFC 7535"),
    _net("2001:10::/28", "deprecated ORCHID, RFC 4843"),
    _net("2001:20::/28", "ORCHIDv2, RFC 7343"),
    _net("2001:30::/28", "drone remote ID, RFC 9374"),
    _net("2001::/23", "IETF protocol assignments, RFC 2928"),  # after the /32 Teredo check
    _net("2001:db8::/32", "documentation, RFC 3849"),
    _net("2620:4f:8000::/48", "direct delegation AS112 service, RFC 7534"),
    _net("3fff::/20", "documentation, RFC 9637"),
)
_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_OUTSIDE_V6 = (
    _net("::1/128", "loopback, RFC 4291"),
    _net("::/128", "unspecified, RFC 4291"),
    _net("ff00::/8", "multicast, RFC 4291"),
    _net("fe80::/10", "link-local, RFC 4291"),
    _net("fec0::/10", "deprecated site-local, RFC 3879"),
    _net("fc00::/7", "unique-local, RFC 4193"),
    _net("64:ff9b:1::/48", "local-use IPv4/IPv6 translation, RFC 8215"),
    _net("100::/64", "discard-only, RFC 6666"),
    _net("100:0:0:1::/64", "dummy prefix, RFC 9780"),
    _net("5f00::/16", "SRv6 SIDs, RFC 9602"),
)

#: IPv6 forms that carry an IPv4 address, judged by that address (:func:`embedded_ipv4`).
EMBEDDINGS = (
    _net("::ffff:0:0/96", "IPv4-mapped, RFC 4291"),
    _net("::ffff:0:0:0/96", "IPv4-translated, RFC 2765"),
    _net("::/96", "IPv4-compatible (deprecated), RFC 4291"),
    _net("64:ff9b::/96", "NAT64 well-known prefix, RFC 6052"),
    _net("2002::/16", "6to4, RFC 3056"),
    _net("2001::/32", "Teredo, RFC 4380"),
)
_ISATAP = "ISATAP interface identifier, RFC 5214"


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[str, tuple[ipaddress.IPv4Address, ...]] | None:
    """The IPv4 addresses an IPv6 address carries, with the form's name, or None.

    Forms (:data:`EMBEDDINGS`): IPv4-mapped ``::ffff:a.b.c.d`` (``ip.ipv4_mapped``),
    IPv4-translated ``::ffff:0:a.b.c.d``, IPv4-compatible ``::a.b.c.d``, NAT64 ``64:ff9b::a.b.c.d``
    (RFC 6052 /96 format: the last 32 bits), 6to4 ``2002:AABB:CCDD::`` (``ip.sixtofour``), Teredo
    ``2001:0:SERVER::~CLIENT`` (``ip.teredo``: the server and the un-obfuscated client), and an
    ISATAP interface identifier ``...:0:5efe:a.b.c.d`` / ``...:200:5efe:a.b.c.d`` in any prefix
    (RFC 5214 §6.1; the prefix is judged as well).
    """
    n = int(ip)
    low = ipaddress.IPv4Address(n & 0xFFFFFFFF)
    for net, what in EMBEDDINGS:
        if ip in net:
            if ip.ipv4_mapped is not None:
                return what, (ip.ipv4_mapped,)
            if ip.sixtofour is not None:
                return what, (ip.sixtofour,)
            if ip.teredo is not None:
                return what, ip.teredo
            return what, (low,)
    if ((n >> 32) & 0xFCFFFFFF) == 0x00005EFE:  # u/g bits of the first octet may be set
        return _ISATAP, (low,)
    return None


def _where(ip: ipaddress.IPv6Address, what: str) -> str:
    net = next(n for n, w in EMBEDDINGS if w == what and ip in n)
    return f"{net} {what}"


def address_problem(address: str) -> str | None:
    """Why a resolved address may not be connected to, or None if it is globally routable.

    The rule (one for direct hosts, DNS answers, redirects and robots.txt fetches):

    - IPv4: refused inside any :data:`SPECIAL_V4` block (IANA special-purpose registry, multicast),
      or whatever ``ipaddress`` does not call ``is_global``.
    - IPv6 with a zone id (``%eth0``): refused.
    - IPv6 carrying an IPv4 address (:func:`embedded_ipv4`: mapped, translated, compatible, NAT64,
      6to4, Teredo, ISATAP): judged by every IPv4 address inside, each by the IPv4 rule (Python's
      ``is_global`` calls ``::127.0.0.1`` and ``::ffff:0:7f00:1`` global: it is not used for these).
    - Other IPv6: refused outside global unicast ``2000::/3`` (loopback, unspecified, multicast,
      link-local, site-local, unique-local, local-use NAT64 ``64:ff9b:1::/48``, discard, SRv6...),
      inside any :data:`SPECIAL_V6` block, or whatever ``ipaddress`` does not call ``is_global``.

    Returns a stable, printable reason naming the block and its RFC.
    """
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv4Address):
        for net, what in SPECIAL_V4:
            if ip in net:
                return f"not globally routable: {net} {what}"
        return None if ip.is_global else "not globally routable"
    if ip.scope_id:
        return "IPv6 address with a zone id"
    for net, what in _OUTSIDE_V6[:2]:  # ::1 and :: sit inside ::/96: named as what they are
        if ip in net:
            return f"not globally routable: {net} {what}"
    found = embedded_ipv4(ip)
    if found is not None and found[0] != _ISATAP:
        what, inner = found
        for v4 in inner:
            problem = address_problem(str(v4))
            if problem:
                return f"embeds {v4} ({_where(ip, what)}); {problem}"
        return None
    for net, what in _OUTSIDE_V6:
        if ip in net:
            return f"{'multicast' if ip.is_multicast else 'not globally routable'}: {net} {what}"
    if ip not in _GLOBAL_UNICAST:
        return f"not globally routable: outside global unicast {_GLOBAL_UNICAST}, reserved by IANA"
    for net, what in SPECIAL_V6:
        if ip in net:
            return f"not globally routable: {net} {what}"
    if not ip.is_global:
        return "not globally routable"
    if found is not None:  # ISATAP: a routable prefix, and the IPv4 address it forwards to
        v4 = found[1][0]
        problem = address_problem(str(v4))
        if problem:
            return f"embeds {v4} ({_ISATAP}); {problem}"
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
            except Exception as e:  # handed to the caller
                out.append(e)

        t = threading.Thread(target=ask, name="crawl-dns", daemon=True)
        t.start()
        t.join(self.timeout_s)
        if not out:
            return None
        if isinstance(out[0], Exception):
            raise out[0]
        return out[0]
