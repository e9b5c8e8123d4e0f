"""Params section ``crawl`` (stage ``crawl_images``): the image source, politeness, limits and image
validity. Units are in the key names (``_s`` seconds, ``_bytes``, ``_mb``) or the comments (pixels)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, field_validator

from gavil.domain.vocabulary import CrawlSource
from gavil.params.base import NonNegInt, PosInt, Seconds, Section, runtime_field


class PerHost(Section):
    max_connections: PosInt = 2
    delay_s: Seconds = 0.25


class BingParams(Section):
    endpoint: str = "https://www.bing.com/images/async"


class GreedyParams(Section):
    url_template: str = (
        "https://commons.wikimedia.org/w/index.php?search={concept}&title=Special:MediaSearch&type=image"
    )

    @field_validator("url_template")
    @classmethod
    def _placeholder(cls, v: str) -> str:
        if "{concept}" not in v:
            raise ValueError("needs a {concept} placeholder")
        return v


class CrawlParams(Section):
    source: CrawlSource = "local"
    local_dir: str = "data/sample/images"
    urllist_path: str = "data/sample/winogavil/image2url.json"
    top_n: PosInt = 3
    threads: PosInt = runtime_field(8)
    partition_size: PosInt | None = runtime_field(None)  # concepts; None: 4 per worker, >= 50 concepts each
    timeout_s: Annotated[float, Field(gt=0)] = 10
    deadline_s: Annotated[float, Field(gt=0)] = 120  # s: a whole fetch (all hops, retries, waits, headers, body)
    retries: NonNegInt = 3
    backoff_s: Seconds = 0.5
    max_retry_after_s: NonNegInt = 60
    max_redirects: NonNegInt = 5
    max_bytes: PosInt = 20_000_000
    max_page_bytes: PosInt = 5_000_000  # bytes (decoded): a larger search-result page fails its search
    max_robots_bytes: Annotated[int, Field(ge=512_000)] = 524_288  # bytes of robots.txt parsed (RFC 9309: >= 500 KiB)
    per_host: PerHost = runtime_field(PerHost())
    user_agent: str = (
        "winogavil-pipeline/0.1 (research benchmark crawler; honours robots.txt and X-Robots-Tag opt-outs)"
    )
    respect_robots: bool = True  # robots.txt (RFC 9309) and X-Robots-Tag noai/noimageai/noindex/noimageindex/none on every hop; false: neither
    min_side: PosInt = 64
    # pixels, from the header before decoding; <= Pillow's MAX_IMAGE_PIXELS (its bomb warning)
    max_pixels: Annotated[int, Field(ge=1, le=89_478_485)] = 50_000_000
    # MB of decoded image data all validating threads hold at once (an image needing more: invalid)
    decode_budget_mb: Annotated[int, Field(ge=16)] = 384
    # Pillow format names kept (>= 1, any case); others are unsupported_format
    accept_formats: Annotated[list[str], Field(min_length=1)] = ["JPEG", "PNG", "WEBP", "GIF"]
    phash_max_distance: Annotated[int, Field(ge=0, le=64)] | None = 4
    phash_min_std: Annotated[float, Field(ge=0, le=128)] = 2.0  # grey levels: flatter images skip the phash test
    allow_private_hosts: bool = False
    bing: BingParams = BingParams()
    greedy: GreedyParams = GreedyParams()

    @field_validator("source", mode="before")
    @classmethod
    def _no_google(cls, v: Any) -> Any:
        if v == "google":
            raise ValueError("google is not supported: icrawler's Google parser is broken upstream; use bing")
        return v
