"""Every core for a partitioned stage: how many worker processes, how many threads each, how big
the partitions, and the spawned processes that run them (``gavil stage NAME``, what ``dvc repro``
runs; the Prefect flow's share of the same rule is in :mod:`flows.build`).

- **Processes** (:func:`budget`): at most one per core this process may use (``os.sched_getaffinity``:
  a Slurm or container CPU set counts, not the machine's), at most ``parallel.processes``, and at most
  as many as fit in ``parallel.memory_fraction`` of the available memory (``psutil``) at
  ``parallel.worker_memory_mb.<stage>`` each; never more than there are partitions. One process
  (one partition, a single core, or a stage that must not run its partitions concurrently) runs the
  partitions in this process: a spawned process costs seconds of imports and model loading.
- **Threads** (:func:`threads_per_process`): ``cores // processes``, so processes x threads <= cores.
  Each worker gets it as ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS``, ``OPENBLAS_NUM_THREADS`` (and the
  other BLAS variables of :data:`THREAD_VARS`) in its environment before it imports NumPy or torch,
  and as ``torch.set_num_threads`` where torch is loaded; a models entry's ``threads`` is capped by it
  (:func:`gavil.models.loading.thread_cap`).
- **Partitions** (:func:`partition`): a stage's ``partition_size``, or with ``null`` (the default)
  :data:`PARTITIONS_PER_WORKER` partitions per worker of near-equal size, each at least the stage's own
  minimum (a partition pays for reading the stage's tables and, in a new process, a model load), so
  a small input stays one partition in one process. Outputs never depend on the partitioning or the
  number of processes: each stage's ``reduce`` registers the partitions' results in one order.
- **Workers** are spawned (``multiprocessing`` ``spawn``), never forked: a forked child inherits
  torch's and OpenMP's thread pools in a state they do not survive.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from gavil.errors import GavilError

T = TypeVar("T")
R = TypeVar("R")

#: The environment variables that size the thread pools of OpenMP (torch, scikit-learn), MKL,
#: OpenBLAS, Accelerate and numexpr. A library reads its variable once, when it is loaded.
THREAD_VARS = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
#: Automatic partition sizes give every worker this many partitions (when the minimum size allows),
#: so a slow partition is balanced by the others.
PARTITIONS_PER_WORKER = 4

_WORKERS: ContextVar[int | None] = ContextVar("gavil_planned_workers", default=None)


class WorkerDied(GavilError, RuntimeError):
    """A worker process ended in the middle of a partition (killed, out of memory, a crash in C code)."""


def cores() -> int:
    """The CPU cores this process may run on (its affinity set: a Slurm allocation or a container's
    CPU set, not the whole machine), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS has no sched_getaffinity
        return max(1, os.cpu_count() or 1)


def available_mb() -> float:
    """Memory available to new processes now (MB, ``psutil.virtual_memory().available``)."""
    import psutil

    available: int = psutil.virtual_memory().available  # bytes; psutil ships no annotations
    return available / 2**20


@dataclass(frozen=True)
class Budget:
    """How many worker processes a stage may use here, and why (the bound that set it)."""

    workers: int
    cores: int
    bound: str  # "cores" | "parallel.processes" | "memory"

    def describe(self, worker_memory_mb: float, available: float) -> str:
        """The budget as a clause for the stage's log line."""
        return (
            f"{self.cores} core(s), {available / 1024:.1f} GB available / {worker_memory_mb / 1024:.1f} GB per worker"
            f" (bound: {self.bound})"
        )


def budget(
    worker_memory_mb: float,
    limit: int | None = None,
    memory_fraction: float = 0.8,
    n_cores: int | None = None,
    available: float | None = None,
) -> Budget:
    """Worker processes a stage may run at once on this machine.

    Args:
        worker_memory_mb: one worker's peak memory (MB; ``parallel.worker_memory_mb.<stage>``).
        limit: ``parallel.processes`` (None: no limit beyond the cores).
        memory_fraction: share of ``available`` the workers may plan to use (0-1).
        n_cores, available: the cores (:func:`cores`) and available memory in MB
            (:func:`available_mb`); read from the machine when None.

    Returns:
        :class:`Budget` with ``workers`` = min(cores, limit, memory // worker_memory_mb), at least 1.
    """
    n_cores = cores() if n_cores is None else max(1, n_cores)
    available = available_mb() if available is None else available
    by_memory = max(1, int(available * memory_fraction // max(1.0, worker_memory_mb)))
    bounds = {"cores": n_cores, "parallel.processes": limit or n_cores, "memory": by_memory}
    bound = min(bounds, key=lambda k: bounds[k])  # first of the tied bounds: cores
    return Budget(bounds[bound], n_cores, bound)


def threads_per_process(processes: int, n_cores: int | None = None) -> int:
    """CPU threads one of ``processes`` processes may use: ``cores // processes``, at least 1, so
    that processes x threads <= cores (where processes <= cores)."""
    n_cores = cores() if n_cores is None else n_cores
    return max(1, n_cores // max(1, processes))


def thread_env(threads: int) -> dict[str, str]:
    """:data:`THREAD_VARS` set to ``threads``: the environment of a worker that may use that many."""
    return {k: str(max(1, threads)) for k in THREAD_VARS}


def cap_threads(threads: int) -> None:
    """Limit this process to ``threads`` CPU threads: the :data:`THREAD_VARS` (read by a library when
    it loads) and, where torch is already loaded, ``torch.set_num_threads``."""
    os.environ.update(thread_env(threads))
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(max(1, threads))


@contextlib.contextmanager
def planning_for(workers: int | None) -> Iterator[None]:
    """While the block runs, :func:`partition` sizes automatic partitions for ``workers`` workers."""
    token = _WORKERS.set(workers)
    try:
        yield
    finally:
        _WORKERS.reset(token)


def planned_workers() -> int:
    """The workers the partitions being planned are for (:func:`planning_for`); 1 outside it (a
    stage's ``run`` called directly runs its partitions one after another in this process)."""
    return max(1, _WORKERS.get() or 1)


def auto_count(n_items: int, workers: int, minimum: int) -> int:
    """How many automatic partitions: one for one worker, else :data:`PARTITIONS_PER_WORKER` per
    worker, but no more than leave each at least ``minimum`` items (at least one partition)."""
    if workers <= 1:
        return 1
    return max(1, min(PARTITIONS_PER_WORKER * workers, n_items // max(1, minimum)))


def partition(items: Sequence[T], size: int | None, minimum: int, work: int | None = None) -> list[list[T]]:
    """``items`` (in their order) in consecutive partitions: of ``size`` items each (the last may be
    shorter), or, with ``size`` None, :func:`auto_count` partitions for :func:`planned_workers`
    whose sizes differ by one at most (so each holds at least ``minimum``). ``work``: the units of
    work the items hold when that is not one per item (a local crawl's files among its concepts);
    the count is then sized by it, so a small job stays one partition in one process. ``[[]]``
    when empty: a stage always has one partition, so its reduce runs."""
    from gavil.io import partitions

    items = list(items)
    if size is not None:
        return partitions(items, size)
    k = auto_count(len(items) if work is None else min(work, len(items)), planned_workers(), minimum)
    step, extra = divmod(len(items), k)
    bounds = [i * step + min(i, extra) for i in range(k + 1)]
    return [items[a:b] for a, b in zip(bounds, bounds[1:])] or [[]]


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` while the block runs (processes started in it inherit them)."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _start_worker(threads: int) -> None:
    cap_threads(threads)


def _stop(pool: ProcessPoolExecutor) -> None:
    """Terminate ``pool``'s worker processes now (``shutdown`` would wait for their running calls)."""
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(Exception):
            proc.terminate()


def map_spawned(func: Callable[..., R], calls: list[tuple[object, ...]], processes: int, threads: int) -> list[R]:
    """``[func(*args) for args in calls]``, run on ``processes`` spawned worker processes with
    ``threads`` CPU threads each (:func:`cap_threads`, in their environment from the start);
    results in the order of ``calls``. ``func`` and the arguments travel pickled (``func`` must be
    a module-level function).

    Raises:
        WorkerDied: a worker process ended in the middle of a call (the others are stopped).
        Exception: the first call (in order) that raised, re-raised here; the rest are cancelled.
    """
    ctx = multiprocessing.get_context("spawn")
    with _environment(thread_env(threads)):
        pool = ProcessPoolExecutor(processes, mp_context=ctx, initializer=_start_worker, initargs=(threads,))
        try:
            futures = [pool.submit(func, *args) for args in calls]
            return [f.result() for f in futures]
        except BaseException as e:
            _stop(pool)  # the partitions still running would only be thrown away
            if isinstance(e, BrokenProcessPool):
                raise WorkerDied(
                    f"a worker process ended in the middle of a partition (killed, or out of memory?): with fewer at "
                    f"once (params.yaml: parallel.processes, or a larger parallel.worker_memory_mb) it may fit ({e})"
                ) from None
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
