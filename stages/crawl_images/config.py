"""The crawl's runtime configuration: :class:`CrawlConfig`, built from the typed ``crawl`` params.

Validation (known source, ``google`` refused, ``top_n >= 1``, a ``{concept}`` placeholder in
``greedy.url_template`` ...) happens once, in :class:`gavil.params.crawl.CrawlParams`; this module only
flattens the section into what the crawl code reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gavil.domain.vocabulary import CrawlSource

if TYPE_CHECKING:
    from gavil.params.crawl import CrawlParams


@dataclass(frozen=True)
class CrawlConfig:
    """The ``crawl`` params section, flattened for the crawl code. Units: seconds, pixels, bytes."""

    source: CrawlSource
    local_dir: str
    urllist_path: str
    bing_endpoint: str
    greedy_url_template: str  # holds "{concept}" (checked by CrawlParams)
    top_n: int
    threads: int
    timeout_s: float
    deadline_s: float
    retries: int
    backoff_s: float
    max_retry_after_s: int
    max_redirects: int
    max_bytes: int
    max_page_bytes: int
    max_robots_bytes: int
    per_host_connections: int
    per_host_delay_s: float
    user_agent: str
    respect_robots: bool
    min_side: int
    max_pixels: int
    decode_budget_bytes: int  # crawl.decode_budget_mb, in bytes (10**6 per MB)
    accept_formats: tuple[str, ...]
    phash_max_distance: int | None
    phash_min_std: float
    allow_private_hosts: bool

    @classmethod
    def from_params(cls, p: CrawlParams) -> CrawlConfig:
        """From the validated ``crawl`` section (``params.crawl``)."""
        return cls(
            source=p.source,
            local_dir=p.local_dir,
            urllist_path=p.urllist_path,
            bing_endpoint=p.bing.endpoint,
            greedy_url_template=p.greedy.url_template,
            top_n=p.top_n,
            threads=p.threads,
            timeout_s=p.timeout_s,
            deadline_s=p.deadline_s,
            retries=p.retries,
            backoff_s=p.backoff_s,
            max_retry_after_s=p.max_retry_after_s,
            max_redirects=p.max_redirects,
            max_bytes=p.max_bytes,
            max_page_bytes=p.max_page_bytes,
            max_robots_bytes=p.max_robots_bytes,
            per_host_connections=p.per_host.max_connections,
            per_host_delay_s=p.per_host.delay_s,
            user_agent=p.user_agent,
            respect_robots=p.respect_robots,
            min_side=p.min_side,
            max_pixels=p.max_pixels,
            decode_budget_bytes=p.decode_budget_mb * 1_000_000,
            accept_formats=tuple(f.upper() for f in p.accept_formats),
            phash_max_distance=p.phash_max_distance,
            phash_min_std=p.phash_min_std,
            allow_private_hosts=p.allow_private_hosts,
        )

    @property
    def check_key(self) -> str:
        """What a download record's validity depends on (a change fetches and validates again).

        v3: the perceptual hash is computed from a reduced decode (JPEG draft, ``Image.reduce``).
        """
        return (
            f"v3;min_side={self.min_side};max_pixels={self.max_pixels};decode_budget={self.decode_budget_bytes}"
            f";private={self.allow_private_hosts}"
            f";robots={self.respect_robots};max_bytes={self.max_bytes};formats={','.join(self.accept_formats)}"
        )

    @property
    def search_check(self) -> str:
        """What a search record's validity depends on (the parsers' version, ``top_n``, the page limits)."""
        return (
            f"v2;top_n={self.top_n};private={self.allow_private_hosts};robots={self.respect_robots}"
            f";max_page_bytes={self.max_page_bytes}"
        )

    @property
    def agent(self) -> str:
        """The product token of ``user_agent`` (what robots.txt groups are matched against)."""
        return self.user_agent.split("/", 1)[0].strip()
