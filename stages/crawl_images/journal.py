"""The crawl journal: what makes a crawl resumable.

Every finished search and download is appended to a journal (catalog ``crawl_journal``, one
JSON-lines segment per run, a torn last line ignored) *after* its file is renamed into the
store, so a crawl killed half-way and re-run downloads only what is missing and never keeps a
half-written file; a re-run with the same params downloads nothing (only transient failures -
timeouts, 429, 5xx - are tried again; see :func:`reusable`).

Concurrent writers (partitions in threads, Dask workers, a second process) each append to their
own segment and hold its lock while they write (:mod:`stages.crawl_images.liveness`);
:meth:`Journal.compact` merges only segments whose writer is gone, and :meth:`Journal.load` reads
again if a compaction removed a segment under it, so no record is ever lost to a neighbour.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from gavil.io import atomic_path
from stages.crawl_images.liveness import Hold, claim, linked


class Journal:
    """Append-only JSON-lines journal of finished searches and downloads (resumable crawls).

    Each writer appends to its own segment ``<dir>/seg-<ns>-<pid>-<rand>.jsonl`` (so parallel
    partitions never interleave), flushing every line. :meth:`load` merges segments in name
    order (later records win) and skips a torn last line left by a killed process.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.dir = Path(directory)
        self._lock = threading.Lock()
        self._fh: Any = None

    def load(self) -> tuple[dict[str, dict], dict[str, dict]]:
        """(searches by key, downloads by url) from every segment (read again from the start if a
        concurrent compaction removed a listed segment: its records are then in the merged one)."""
        while True:
            try:
                return _read(self.segments())
            except FileNotFoundError:
                continue

    def segments(self) -> list[Path]:
        """The segment files, in name order (records of later segments win)."""
        return sorted(self.dir.glob("seg-*.jsonl")) if self.dir.is_dir() else []

    def append(self, rec: dict[str, Any]) -> None:
        """Append one record (a line, flushed); the first append opens this writer's segment."""
        line = json.dumps(rec, sort_keys=True) + "\n"
        with self._lock:
            if self._fh is None:
                self._fh = self._open_segment()
            self._fh.write(line)
            self._fh.flush()

    def _open_segment(self) -> Any:
        """A new segment, opened for appending and locked ("a live writer owns this segment"); one
        that a compaction claimed and removed before the lock was held is given up for another
        (:mod:`stages.crawl_images.liveness`), so no line is ever written to a removed file."""
        self.dir.mkdir(parents=True, exist_ok=True)
        while True:
            path = self.dir / f"seg-{time.time_ns()}-{os.getpid()}-{uuid.uuid4().hex[:8]}.jsonl"
            fh = open(path, "a", encoding="utf-8")
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            if linked(fh.fileno(), path):
                return fh
            fh.close()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._fh.close()
                self._fh = None

    def compact(self) -> None:
        """Merge the segments no live writer holds into one (latest record per key), atomically,
        then drop them, holding each one's lock (:func:`~stages.crawl_images.liveness.claim`) until
        then. Segments of live writers (other partitions or processes) are left alone.
        The merged segment takes the place of the newest one it replaces in the name order."""
        self.close()
        if not self.dir.is_dir():
            return
        lock = Hold(self.dir / ".compact.lock")  # one compaction at a time
        claims = [c for c in map(claim, self.segments()) if c is not None]  # kept until they are merged
        try:
            dead = [c.path for c in claims]
            if len(dead) <= 1:
                return
            searches, downloads = _read(dead)
            target = self.dir / f"seg-{dead[-1].name.split('-')[1]}-~compact.jsonl"  # sorts after its peers
            with atomic_path(target, ".part") as tmp:
                with open(tmp, "w", encoding="utf-8") as f:
                    for rec in [*searches.values(), *downloads.values()]:
                        f.write(json.dumps(rec, sort_keys=True) + "\n")
            for s in dead:
                if s != target:
                    s.unlink(missing_ok=True)
        finally:
            for c in claims:
                c.release()
            lock.release()


def _read(segments: list[Path]) -> tuple[dict[str, dict], dict[str, dict]]:
    searches: dict[str, dict] = {}
    downloads: dict[str, dict] = {}
    for seg in segments:
        with open(seg, encoding="utf-8") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # torn line of a killed writer
                if rec.get("kind") == "search":
                    searches[rec["key"]] = rec
                elif rec.get("kind") == "download":
                    downloads[rec["url"]] = rec
    return searches, downloads


def reusable(rec: dict | None, check_key: str) -> bool:
    """Whether a journal download record stands: not transient, same checks, file still stored."""
    if rec is None or rec.get("transient") or rec.get("check") != check_key:
        return False
    return rec["status"] != "kept" or Path(rec["path"]).exists()
