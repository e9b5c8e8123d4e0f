"""robots.txt (RFC 9309), parsed by protego: fetched once per origin per crawl run.

- The group for our product token (``crawl.user_agent`` up to the first ``/``, e.g.
  ``winogavil-pipeline``) applies, else the ``*`` group; within it the longest matching rule wins
  (``Allow`` on a tie); ``*`` and ``$`` wildcards work (RFC 9309 §2.2.2, §2.2.3).
- Fetched from ``scheme://host:port/robots.txt`` of every URL fetched (each redirect hop
  included), through the same guarded client (URL guard, pinned addresses, politeness, deadline);
  redirects are followed up to five hops or ``crawl.max_redirects`` if more (§2.3.1.2).
- At most ``crawl.max_robots_bytes`` are read (RFC 9309 §2.5 asks for at least 500 KiB; the rest,
  and a line cut there, are ignored).
- Errors (§2.3.1.3, §2.3.1.4): 2xx: the rules; 4xx (401 and 403 included): unavailable, so
  everything is allowed; 5xx, 429, timeouts, connection and DNS errors, more redirects than
  allowed: unreachable, so everything is disallowed, and the candidate is a *transient*
  ``download_failed`` (tried again next run). 429 is read as the server being overloaded (as
  Google does), not as "unavailable". A robots.txt whose URL or redirect the URL guard refuses
  (e.g. a redirect to a loopback address) is unreachable too, but *permanently*: the candidate is
  ``refused_url`` and is not tried again.

Thread-safe; one lock per origin, so a slow robots.txt holds only the downloads from its own origin.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from protego import Protego
from urllib3.util import Url

from stages.crawl_images.client import Client, FetchFailed
from stages.crawl_images.urlguard import origin


@dataclass(frozen=True)
class _Rules:
    parser: Any = None  # Protego, or None: allow_all / disallow_all below
    allow_all: bool = False
    why: str = ""  # for disallow_all: the stable reason
    transient: bool = False
    status: str = "download_failed"  # for disallow_all: the candidate's status


class Robots:
    """robots.txt verdicts per origin for one crawl run (RFC 9309; see the module docstring)."""

    def __init__(self, client: Client, user_agent: str, max_bytes: int, max_redirects: int) -> None:
        self.client, self.max_bytes = client, max_bytes
        self.token = user_agent.split("/", 1)[0].strip()  # the product token (RFC 9309 §2.2.1)
        self.max_redirects = max(5, max_redirects)
        self._lock = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._rules: dict[str, _Rules] = {}

    def check(self, u: Url) -> None:
        """Pass if robots.txt of ``u``'s origin lets our product token fetch ``u``.

        Raises:
            FetchFailed: ``opted_out`` (disallowed by a rule; permanent), ``refused_url``
                (robots.txt refused by the URL guard; permanent) or ``download_failed``
                (robots.txt unreachable; transient).
        """
        key = origin(u)
        with self._lock:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:  # one fetch per origin; other origins are not held
            rules = self._rules.get(key)
            if rules is None:
                rules = self._rules[key] = self._fetch(key)
        if rules.parser is not None:
            if not rules.parser.can_fetch(u.url, self.token):
                raise FetchFailed("opted_out", f"robots.txt of {key} disallows {self.token}")
        elif not rules.allow_all:
            raise FetchFailed(
                rules.status,
                f"robots.txt of {key} unreachable ({rules.why}): everything disallowed (RFC 9309 2.3.1.4)",
                transient=rules.transient,
            )

    def _fetch(self, key: str) -> _Rules:
        try:
            r = self.client.fetch(
                key + "/robots.txt",
                max_bytes=self.max_bytes,
                too_large="",
                truncate=True,
                max_redirects=self.max_redirects,
                own_deadline=True,  # its verdict holds for the whole run: not cut short by one image's deadline
            )
        except FetchFailed as e:
            if e.status == "refused_url":  # the guard's verdict: the same next run
                return _Rules(why=e.reason, status="refused_url")
            return _Rules(why=e.reason, transient=True)
        if 200 <= r.status < 300:
            text = r.body.decode("utf-8", errors="replace")
            if r.truncated:  # past the parsing limit: drop the line cut in two
                text = text[: text.rfind("\n") + 1]
            return _Rules(parser=Protego.parse(text))
        if 400 <= r.status < 500 and r.status != 429:
            return _Rules(allow_all=True)
        return _Rules(why=f"HTTP {r.status}", transient=True)
