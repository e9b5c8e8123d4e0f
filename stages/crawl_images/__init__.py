"""Stage 3, ``crawl_images``: top-N candidate images per concept, stored content-addressed.

Sources (``crawl.source``, :mod:`.sources`), all through icrawler's feeder -> parser -> downloader
threads (:mod:`.icrawler_glue`):

- ``local`` (default, offline): a folder of ``<concept>.<ext>`` files (``crawl.local_dir``).
- ``urllist``: a JSON map concept -> image URL (or list of URLs), e.g. the WinoGAViL release's
  ``image2url.json``, so the original benchmark's images can be fetched again.
- ``bing``: web image search (every image URL of the result metadata, whatever its extension);
  the top ``crawl.top_n`` results per concept. ``crawl.bing.endpoint`` exists so tests and
  benchmarks can use 127.0.0.1.
- ``greedy``: one page of a site per concept (``crawl.greedy.url_template`` with
  ``{concept}``), its images in page order (``<img src>``, relative ones resolved, then links to
  image files).
- ``google`` is refused with a clear message (icrawler's Google parser is broken upstream;
  :class:`gavil.params.crawl.CrawlParams` refuses it).

The paper (§2.1) kept the top-ranked search result that passed its filters. Here every candidate
is downloaded and validated; ``ocr_filter`` then walks the *kept* candidates in rank order and
keeps the first one without the query text, so a rejected top result falls through.

Modules, by role: :mod:`.config` (the typed params, flattened), :mod:`.sources` (candidate URLs
per concept; names normalised; Bing metadata and page images read), :mod:`.urlguard` (which URLs
may be fetched: one parser, ambiguity refused, resolved once, globally routable addresses only,
credentials redacted), :mod:`.client` (urllib3 pinned to the checked addresses, redirects checked
hop by hop, retries, the whole-fetch deadline, size caps), :mod:`.robots` (robots.txt, RFC 9309,
protego), :mod:`.fetch` (per-host politeness and opt-outs around the client), :mod:`.icrawler_glue`
(icrawler's threads), :mod:`.validate` (Pillow: formats, size limits, perceptual hash),
:mod:`.store` (catalog ``image_store``: ``<sha[:2]>/<sha>.<ext>``, written atomically through each
run's own staging folder), :mod:`.liveness` (the locks that tell a live run's files from a dead
one's), :mod:`.journal` (catalog ``crawl_journal``: a crawl killed half-way resumes, a re-run with
the same params downloads nothing, concurrent partitions never lose a record), :mod:`.register`
(every candidate's and concept's fate, pure) and :mod:`.stage` (the entry points).

Outputs: catalog ``candidates`` (:class:`schemas.crawl.Candidates`, every candidate's fate) and
``images`` (:class:`schemas.crawl.Images`, one row per concept: ``ok``, ``profane``,
``no_results``, ``search_failed``, ``download_failed``, ``invalid_image``, ``unsupported_format``,
``duplicate``, ``opted_out``, ``refused_url`` or ``all_rejected`` - mixed failures - with reasons).
"""

from stages.crawl_images.stage import concurrent, crawl, plan, reduce, run, work

__all__ = ["concurrent", "crawl", "plan", "reduce", "run", "work"]
