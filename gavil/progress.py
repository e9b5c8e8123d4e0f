"""Progress for long loops: tqdm's counter (done/total, rate, ETA) printed as plain lines at most
every ``interval`` seconds, so it shows on the console under ``dvc repro`` and in Prefect's logs
(the flow logs prints) alike. Short loops (< ``min_total`` items) stay silent."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TypeVar

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
