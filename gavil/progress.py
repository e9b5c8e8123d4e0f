"""Progress for long loops: tqdm's counter (done/total, rate, ETA) printed as plain lines at most
every ``interval`` seconds, so it shows on the console under ``dvc repro`` and in Prefect's logs
(the flow logs prints) alike. Short loops (< ``min_total`` items) stay silent. :func:`heartbeat` covers
one long call that cannot report progress itself (a model load)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TextIO, TypeVar

from tqdm import tqdm

T = TypeVar("T")


class _Lines:
    """A file-like sink that turns tqdm's carriage-return refreshes into printed lines."""

    def write(self, s: str) -> None:
        s = s.strip("\r\n ")
        if s:
            print(s, flush=True)

    def flush(self) -> None:
        pass


def progress(
    items: Iterable[T], desc: str, total: int | None = None, interval: float = 5.0, min_total: int = 50
) -> Iterator[T]:
    """Iterate ``items`` reporting ``desc: n/total [elapsed<ETA, rate]`` every ``interval`` s."""
    n = total if total is not None else (len(items) if hasattr(items, "__len__") else None)  # type: ignore[arg-type]
    beat = active()
    if n is not None and n < min_total:
        for i, item in enumerate(items, 1):
            yield item
            if beat is not None:
                beat.detail = f"{desc} {i}/{n}"
        return
    bar = tqdm(
        items, desc=desc, total=n, mininterval=interval, maxinterval=interval * 4, file=_Lines(), ascii=True, ncols=80
    )
    for i, item in enumerate(bar, 1):
        yield item
        if beat is not None:
            beat.detail = f"{desc} {i}/{n}" if n is not None else f"{desc} {i}"


class Heartbeat:
    """Prints ``<stage>: <phase> [<progress>] (<s> s in this step, <s> s in all)`` every ``interval``
    seconds from a daemon thread while a stage runs (the runner wraps every stage in one), so a step
    that reports nothing itself (loading a model, one long encode, one slow image on a loaded
    machine) still shows a line at least that often; :func:`progress` loops add their latest count.
    The thread sleeps on an event, so the beat does not wait for the work. Console only: it never
    touches an output. Use as a context manager; :meth:`phase` names the step."""

    def __init__(self, stage: str, interval: float = 10.0):
        import threading
        import time

        self._time = time.monotonic
        self.stage, self.interval = stage, interval
        self._phase, self._since = "starting", self._time()
        self._start = self._since
        self.detail = ""  # the latest count of a progress() loop in this step
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"{stage}-heartbeat", daemon=True)

    def phase(self, text: str) -> None:
        """Name the step now running (printed at once, and on every beat until the next one)."""
        self._phase, self._since, self.detail = text, self._time(), ""
        print(f"{self.stage}: {text}", flush=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            now = self._time()
            detail = f" [{self.detail}]" if self.detail else ""
            print(
                f"{self.stage}: {self._phase}{detail} ({now - self._since:.0f} s in this step, "
                f"{now - self._start:.0f} s in all)",
                flush=True,
            )

    def __enter__(self) -> Heartbeat:
        _ACTIVE.beat = self
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        _ACTIVE.beat = None
        self._stop.set()
        self._thread.join()


def _local() -> threading.local:
    import threading

    return threading.local()


_ACTIVE = _local()  # the heartbeat of the stage running in this thread (Prefect runs stages in threads)


def active() -> Heartbeat | None:
    """The :class:`Heartbeat` of the stage running in this thread, or None."""
    return getattr(_ACTIVE, "beat", None)


def step(text: str) -> None:
    """Name the step now running for this thread's :class:`Heartbeat` (no-op outside one)."""
    beat = getattr(_ACTIVE, "beat", None)
    if beat is not None:
        beat.phase(text)


@contextmanager
def heartbeat(desc: str, interval: float = 10.0, file: TextIO | None = None) -> Iterator[None]:
    """Around one long call that reports nothing itself (loading a model, a solver): prints
    ``desc`` when it starts, then ``desc: still running (N s)`` every ``interval`` seconds from a
    daemon thread until the block ends (stdout unless ``file``; flushed). Output goes to the
    console only, never into a stage's outputs."""
    out = file or sys.stdout
    print(desc, file=out, flush=True)
    done = threading.Event()
    t0 = time.monotonic()

    def beat() -> None:
        while not done.wait(interval):
            print(f"{desc}: still running ({time.monotonic() - t0:.0f} s)", file=out, flush=True)

    thread = threading.Thread(target=beat, daemon=True, name="heartbeat")
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
