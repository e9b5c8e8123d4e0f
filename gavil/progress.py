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
    if n is not None and n < min_total:
        yield from items
        return
    yield from tqdm(
        items, desc=desc, total=n, mininterval=interval, maxinterval=interval * 4, file=_Lines(), ascii=True, ncols=80
    )


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
