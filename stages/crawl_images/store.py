"""The content-addressed image store (catalog ``image_store``): ``<sha[:2]>/<sha>.<ext>``.

Files enter it only after validation (:mod:`stages.crawl_images.validate`) and atomically: each
crawl run (every partition, in whatever thread or process) downloads or copies into **its own**
staging folder ``.staging-<pid>-<random>`` inside the store (same file system, so a rename puts a
file in place), whose lock it holds while it works (:mod:`stages.crawl_images.liveness`).
:func:`clean_store` removes only staging folders whose lock is free, i.e. whose run is gone: a
killed crawl's leftovers go, a neighbour's downloads in progress stay. :class:`Keeper` validates,
stores and journals one file.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gavil.io import sha256_file
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.journal import Journal
from stages.crawl_images.liveness import Hold, claim
from stages.crawl_images.validate import InvalidImage, decode_budget, inspect_image

_FORMAT_EXT = {"JPEG": "jpg", "MPO": "jpg", "PNG": "png", "GIF": "gif", "WEBP": "webp", "BMP": "bmp", "TIFF": "tif"}
_LOCK = ".lock"


def image_path(store_dir: Path, sha: str, fmt: str) -> Path:
    """Where the image with this sha256 and Pillow format lives in the store."""
    return store_dir / sha[:2] / f"{sha}.{_FORMAT_EXT.get(fmt, fmt.lower())}"


def store_image(src: Path, sha: str, fmt: str, store_dir: Path, folders: set[Path] | None = None) -> Path:
    """Rename the staging file ``src`` to ``store_dir/<sha[:2]>/<sha>.<ext>`` (atomic; if that
    file is already there, ``src`` is left for its staging folder's cleanup). ``folders``: store
    folders this run already made (skips their ``mkdir``; extended)."""
    dest = image_path(store_dir, sha, fmt)
    if not dest.exists():
        if folders is None or dest.parent not in folders:
            dest.parent.mkdir(parents=True, exist_ok=True)
            if folders is not None:
                folders.add(dest.parent)
        os.chmod(src, 0o644)
        os.replace(src, dest)
    return dest


def write_new(path: Path, data: bytes) -> None:
    """Write ``data`` to the new file ``path`` (must not exist) in as few system calls as the OS
    allows: every call releases the GIL, and with many download threads each release is a round of
    thread switches (``benchmarks/crawl_vs_img2dataset.py``: ``strace -c``, context switches)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


@contextmanager
def staging(store: Path) -> Iterator[Path]:
    """This run's staging folder in ``store``, locked while the block runs, removed after it.

    The folder is made under a temporary name with its lock already held, then renamed to
    ``.staging-*``, so :func:`clean_store` never sees a live folder without its lock; a folder
    that a cleaner claimed and emptied before this run held its lock is given up for a new one
    (:mod:`stages.crawl_images.liveness`).
    """
    store.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = Path(tempfile.mkdtemp(prefix=".new-staging-", dir=store))
        hold = Hold(tmp / _LOCK)
        final = store / f".staging-{os.getpid()}-{tmp.name.rsplit('-', 1)[-1]}"
        try:
            os.rename(tmp, final)
        except OSError:  # a cleaner claimed the lock for an instant and removed the folder
            hold.release()
            continue
        hold.path = final / _LOCK
        if hold.linked():
            break
        hold.release()  # a cleaner removed the lock file before this run held it: start again
        shutil.rmtree(final, ignore_errors=True)
    try:
        yield final
    finally:
        shutil.rmtree(final, ignore_errors=True)  # the lock file goes too; released below
        hold.release()


def clean_store(store: Path) -> list[str]:
    """Remove staging folders of crawl runs that are gone; returns their names.

    A folder is removed while its lock is claimed (:func:`stages.crawl_images.liveness.claim`),
    so a live run (another partition, thread or process) holding it keeps it, and a run about to
    hold it finds it gone and makes a new one. Folders still being created (``.new-staging-*``)
    are removed only when their lock file exists and can be claimed; a ``.staging-*`` folder with
    no lock file is a removal cut short and goes.
    """
    removed: list[str] = []
    if not store.is_dir():
        return removed
    for d in sorted([*store.glob(".staging-*"), *store.glob(".new-staging-*")]):
        lock = d / _LOCK
        got = claim(lock)
        if got is None and (d.name.startswith(".new-") or lock.exists() or not d.exists()):
            continue
        try:
            shutil.rmtree(d, ignore_errors=True)
        finally:
            if got is not None:
                got.release()
        removed.append(d.name)
    return removed


class Keeper:
    """Validates, stores and journals fetched files (thread-safe); the local source uses it alone.

    ``staging``: this run's staging folder (:func:`staging`).
    """

    def __init__(
        self, cfg: CrawlConfig, journal: Journal, downloads: dict[str, dict], store_dir: Path, staging: Path
    ) -> None:
        self.cfg, self.journal, self.downloads, self.store_dir = cfg, journal, downloads, store_dir
        self.staging = staging
        self._n = 0
        self._n_lock = threading.Lock()
        self._folders: set[Path] = set()  # store folders made by this run

    def staging_file(self) -> Path:
        """A new file name in this run's staging folder."""
        with self._n_lock:
            self._n += 1
            return self.staging / f"{self._n}.part"

    def record(
        self,
        url: str,
        status: str,
        reason: str | None = None,
        transient: bool = False,
        check: str | None = None,
        **image: Any,
    ) -> dict:
        """Journal the outcome of ``url`` (``status``, ``reason``; ``image``: the kept file's fields)
        and remember it in ``downloads``; returns the record. ``transient``: tried again next run."""
        rec = {
            "kind": "download",
            "url": url,
            "status": status,
            "reason": reason,
            "transient": transient,
            "check": check or self.cfg.check_key,
            **image,
        }
        self.downloads[url] = rec
        self.journal.append(rec)
        return rec

    def keep_file(
        self,
        url: str,
        file: Path,
        check: str | None = None,
        sha: str | None = None,
        staged: bool = False,
        data: bytes | None = None,
        unwritten: bool = False,
    ) -> dict:
        """Validate ``file`` (fetched from ``url``), store it and journal the outcome.

        ``sha``: its sha256 when already known (hashed while downloading); ``staged``: ``file`` is
        in this run's staging folder (renamed into the store); otherwise it is copied there first;
        ``data``: ``file``'s bytes when already in memory (validated from them, not read back);
        ``unwritten``: ``file`` is a staging name not yet written: ``data`` is written to it only
        once it passes and is not in the store already (one write; nothing on disk otherwise).
        Returns the journal record; a file that fails validation is ``invalid_image`` or
        ``unsupported_format`` with a reason that names no path.
        """
        try:
            info = inspect_image(
                file,
                self.cfg.min_side,
                self.cfg.max_pixels,
                self.cfg.accept_formats,
                with_phash=True,
                budget=decode_budget(self.cfg.decode_budget_bytes),
                data=data,
            )
        except InvalidImage as e:
            return self.record(url, e.status, e.reason, check=check)
        sha = sha or sha256_file(file)
        if unwritten and data is not None:
            if not image_path(self.store_dir, sha, info.format).exists():
                write_new(file, data)
        elif not staged and not image_path(self.store_dir, sha, info.format).exists():
            copy = self.staging_file()
            shutil.copyfile(file, copy)
            file = copy
        dest = store_image(file, sha, info.format, self.store_dir, self._folders)
        return self.record(
            url,
            "kept",
            None,
            check=check,
            sha256=sha,
            path=dest.as_posix(),
            width=info.width,
            height=info.height,
            format=info.format,
            bytes=len(data) if data is not None else dest.stat().st_size,
            phash=info.phash,
            grey_std=info.grey_std,
        )
