"""Where candidates come from (``crawl.source``): each concept's candidate URLs in rank order.

- ``local`` (default, offline): a folder of ``<concept>.<ext>`` files (``crawl.local_dir``).
- ``urllist``: a JSON map concept -> image URL (or list of URLs), e.g. the WinoGAViL release's
  ``image2url.json``, so the original benchmark's images can be fetched again.
- ``bing`` / ``greedy``: the journaled results of each concept's search page (:func:`page_url`),
  fetched by :mod:`stages.crawl_images.icrawler_glue` and read by :func:`bing_image_urls` /
  :func:`greedy_image_urls`.

Names are compared in the project's one form, :func:`gavil.domain.vocabulary.normalize_name`, on both sides
(file stems and map keys, and concepts); keys that become one name are merged in file order and
the concept's row says so (``Found.note``), never overwritten silently. Every URL passes through
:func:`stages.crawl_images.urlguard.candidate_url` (credentials redacted) before it is journaled.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote, quote_plus

from gavil.domain.vocabulary import normalize_name
from gavil.errors import MissingInput, ParamsError
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.urlguard import candidate_url, redact
from stages.crawl_images.validate import safe_concept_name

IMAGE_EXTS = ("jpg", "jpeg", "png", "gif", "bmp", "webp", "tif", "tiff")
_IMAGE_LINK = re.compile(r"\.(jpe?g|png|gif|webp|bmp|tiff?|avif)$", re.IGNORECASE)
_MURL = re.compile(r'"murl"\s*:\s*"((?:[^"\\]|\\.)*)"')


class Found(NamedTuple):
    """A concept's candidates: URLs (or local paths) in rank order, the search error if any, and a
    note for its row (e.g. map keys merged by name normalisation)."""

    urls: list[str]
    error: str | None = None
    note: str | None = None


def page_url(cfg: CrawlConfig, concept: str) -> str:
    """The search page of ``concept`` for a web source (``cfg.source`` bing or greedy), normalised
    as requests sends it, credentials redacted."""
    template = cfg.bing_endpoint if cfg.source == "bing" else cfg.greedy_url_template
    return _page_url(cfg.source, template, concept)


@functools.lru_cache(maxsize=1 << 16)
def _page_url(source: str, template: str, concept: str) -> str:
    from requests.models import PreparedRequest

    if source == "bing":
        url = f"{template}?q={quote_plus(concept)}&first=0"
    else:
        url = template.replace("{concept}", quote(concept, safe=""))
    req = PreparedRequest()
    try:
        req.prepare_url(url, None)
    except Exception:  # a malformed endpoint: kept as written, the guard refuses it
        return redact(url)
    return redact(str(req.url))


def _merge(groups: dict[str, list[tuple[str, list[str]]]], what: str) -> dict[str, Found]:
    out: dict[str, Found] = {}
    for name, entries in groups.items():
        urls = list(dict.fromkeys(u for _, us in entries for u in us))
        note = None
        if len(entries) > 1:
            keys = ", ".join(repr(k) for k, _ in entries)
            note = f"{what} {keys} are one name after normalisation: their candidates were merged in that order"
        out[name] = Found(urls, None, note)
    return out


def local_candidates(concepts: Iterable[str], local_dir: Path) -> dict[str, Found]:
    """``<local_dir>/<concept>.<ext>`` files per concept, stems and concepts compared normalised
    (unsafe concept names never match a file).

    Raises:
        MissingInput: ``local_dir`` is not a folder (one line naming the key and the fix; a
            :class:`FileNotFoundError` too).
    """
    found = _merge(_local_groups(local_dir), "files")
    return {c: found[normalize_name(c)] for c in concepts if safe_concept_name(c) and normalize_name(c) in found}


def _local_groups(local_dir: Path) -> dict[str, list[tuple[str, list[str]]]]:
    """Normalised stem -> [(file name, [path])] of the image files in ``local_dir``.

    Raises:
        MissingInput: ``local_dir`` is not a folder.
    """
    if not local_dir.is_dir():
        what = "does not exist" if not local_dir.exists() else "is not a folder"
        raise MissingInput(
            f"crawl.local_dir {local_dir} {what}: set crawl.local_dir in params.yaml to your folder of "
            "<concept>.<ext> images (`gavil params set crawl.local_dir=PATH`; docs/your-own-benchmark.md)"
        )
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    for f in sorted(local_dir.iterdir()):
        if f.is_file() and f.suffix.lower().lstrip(".") in IMAGE_EXTS:
            groups.setdefault(normalize_name(f.stem), []).append((f.name, [f.as_posix()]))
    return groups


def unmatched_local_files(concepts: Iterable[str], local_dir: Path) -> list[str]:
    """The image files of ``local_dir`` whose stem names no concept of ``concepts`` (compared
    normalised, as :func:`local_candidates` matches them), sorted by file name: ``flowers.jpg``
    beside the concept ``flower`` is one. The stage names them on the console, since such a file is
    silently never used.

    Raises:
        MissingInput: ``local_dir`` is not a folder.
    """
    wanted = {normalize_name(c) for c in concepts}
    groups = _local_groups(local_dir)
    return sorted(name for stem, entries in groups.items() if stem not in wanted for name, _ in entries)


def load_url_map(path: str) -> dict[str, Found]:
    """A JSON object concept -> URL or [URLs], keyed by normalised name (keys that collide after
    normalisation are merged in sorted key order, with a note: the file's key order never matters). URLs are redacted (no credentials).

    Raises:
        ParamsError: not a JSON object of strings / lists of strings.
    """
    data = json.loads(Path(path).read_text())
    if not isinstance(data, dict):
        raise ParamsError(f"{path}: expected a JSON object concept -> URL")
    groups: dict[str, list[tuple[str, list[str]]]] = {}
    for k, v in sorted(data.items(), key=lambda kv: kv[0]):  # colliding keys merge in key order, not file order
        urls = [v] if isinstance(v, str) else v
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ParamsError(f"{path}: value of {k!r} must be a URL or a list of URLs")
        groups.setdefault(normalize_name(k), []).append((k, [candidate_url(u) for u in urls]))
    return _merge(groups, "urllist keys")


def source_candidates(cfg: CrawlConfig, concepts: list[str], searches: dict[str, dict]) -> dict[str, Found]:
    """concept -> :class:`Found` (candidate URLs in rank order, at most ``top_n``, search error,
    note) from the config and finished searches (journal search records by
    ``"<source>|<page url>"``)."""
    if cfg.source == "local":
        found = local_candidates(concepts, Path(cfg.local_dir))
        return {
            c: Found(
                found[c].urls[: cfg.top_n] if c in found else [],
                None if safe_concept_name(c) else "concept name is not a safe file name",
                found[c].note if c in found else None,
            )
            for c in concepts
        }
    if cfg.source == "urllist":
        m = load_url_map(cfg.urllist_path)
        return {
            c: Found(hit.urls[: cfg.top_n], None, hit.note) if (hit := m.get(normalize_name(c))) else Found([])
            for c in concepts
        }
    out = {}
    for c in concepts:
        rec = searches.get(f"{cfg.source}|{page_url(cfg, c)}")
        out[c] = Found(list(rec["urls"])[: cfg.top_n], rec["error"]) if rec else Found([], "not searched")
    return out


def bing_image_urls(html: bytes, page: str) -> list[str]:
    """Every image URL (``murl``) in the result metadata of a Bing image-search page, in page order:
    whatever the extension (or none) and with its query string (icrawler's own parser keeps only
    ``.jpg`` and cuts queries). Relative URLs are resolved against ``page``."""
    from bs4 import BeautifulSoup

    urls: list[str] = []
    for tag in BeautifulSoup(html.decode("utf-8", "replace"), "lxml").find_all(True, attrs={"m": True}):
        meta = str(tag.get("m", ""))
        try:
            murl = json.loads(meta).get("murl")
        except (ValueError, AttributeError):
            m = _MURL.search(meta)
            try:
                murl = json.loads(f'"{m.group(1)}"') if m else None
            except ValueError:
                murl = None
        if isinstance(murl, str) and murl.strip():
            urls.append(candidate_url(murl, base=page))
    return list(dict.fromkeys(urls))


def greedy_image_urls(html: bytes, page: str) -> list[str]:
    """The images of one page, in page order: every ``<img src>``, then links (``<a href>``) to
    image files, resolved against the page's ``<base href>`` or its URL (relative, root-relative and
    protocol-relative references included); ``data:`` and other non-http(s) references are skipped."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html.decode("utf-8", "replace"), "lxml")
    base_tag = soup.find("base", href=True)
    base = candidate_url(str(base_tag["href"]), base=page) if base_tag else page
    refs = [str(t["src"]) for t in soup.find_all("img", src=True)]
    refs += [str(t["href"]) for t in soup.find_all("a", href=True) if _IMAGE_LINK.search(str(t["href"]).split("?")[0])]
    urls = []
    for ref in refs:
        url = candidate_url(ref, base=base)
        if url.split(":", 1)[0].lower() in ("http", "https"):
            urls.append(url)
    return list(dict.fromkeys(urls))
