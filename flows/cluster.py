"""The flow's workers: how many tasks run at once, each stage process's share of its machine's cores,
and, on a Dask cluster, the shared-storage check.

**Shared storage.** A task runs its stage in the project folder (the flow passes its absolute path),
so every Dask worker must see that folder at the same path, writable, with the same files: a shared
file system (NFS, Lustre, GPFS, ...), as on a Slurm cluster's nodes. :func:`check_workers` checks it
on every worker when the flow starts: the flow writes a random check file into the project, each
worker reads it back through its own path and writes a reply the flow must then see; a worker that
cannot is named in a one-line :class:`ProjectNotShared` with the fix, before any stage runs. A task
that lands on a worker that joined later checks the folder again (:func:`require_project`).

**Cores.** Processes x threads <= cores on every machine: a stage process gets
``cores // (tasks that may run at once on that machine)`` CPU threads (:class:`Slots`), exported as
the thread variables of :data:`gavil.pipeline.parallel.THREAD_VARS`. The task slots of a machine are
the flow's ``prefect.task_runner.threads`` (thread runner), or the summed ``nthreads`` of the Dask
workers sharing that machine's CPU set.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

from gavil.errors import GavilError
from gavil.pipeline.parallel import cores, threads_per_process

CHECK_PREFIX = ".gavil-shared-check-"
#: Where the docs say how to give every worker the project (named in the errors).
DOCS = 'docs/prefect.md, "A Dask cluster"'


class ProjectNotShared(GavilError, RuntimeError):
    """A Dask worker does not see the project folder at the flow's path (or cannot write there)."""


class NoWorkers(GavilError, RuntimeError):
    """The Dask scheduler has no worker connected."""


@dataclass(frozen=True)
class Slots:
    """How many tasks may run at once (``total``: what automatic partition sizes plan for) and the
    CPU threads of each task's stage process (by Dask worker address; ``""``: every task of this
    flow's own process; absent: the worker's environment decides)."""

    total: int
    threads: dict[str, int] = field(default_factory=dict)

    def for_worker(self, address: str) -> int | None:
        """The CPU threads of a stage process started by the worker at ``address`` ("" outside Dask)."""
        return self.threads.get(address, self.threads.get(""))


def thread_slots(threads: int | None, n_cores: int | None = None) -> Slots:
    """The thread runner: ``threads`` tasks at once (None: one per core), ``cores // threads`` each."""
    n_cores = n_cores or cores()
    total = threads or n_cores
    return Slots(total, {"": threads_per_process(total, n_cores)})


class WorkerInfo(TypedDict):
    """A Dask worker's answer to :func:`probe`: its host, CPU set, ``nthreads``, ``why`` it cannot
    use the project (None: it can) and the ``reply`` file it wrote there."""

    host: str
    cpus: list[int]
    nthreads: int
    why: str | None
    reply: str | None


def dask_slots(infos: Mapping[str, WorkerInfo]) -> Slots:
    """Slots of a Dask cluster from :func:`probe` answers (worker address -> host, cpus, nthreads):
    the workers sharing a machine's CPU set share its cores."""
    groups: dict[tuple[str, tuple[int, ...]], int] = {}
    for info in infos.values():
        key = (info["host"], tuple(info["cpus"]))
        groups[key] = groups.get(key, 0) + int(info["nthreads"])
    threads = {
        addr: threads_per_process(groups[(i["host"], tuple(i["cpus"]))], len(i["cpus"])) for addr, i in infos.items()
    }
    return Slots(max(1, sum(int(i["nthreads"]) for i in infos.values())), threads)


def probe(root: str, check_name: str, token: str, dask_worker: object = None) -> WorkerInfo:
    """Run on a Dask worker (``Client.run``): its host, CPU set and ``nthreads``, and ``why`` it
    cannot use the project at ``root`` (None: it can; then ``reply`` names the file it wrote there)."""
    info: WorkerInfo = {
        "host": socket.gethostname(),
        "cpus": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(cores())),
        "nthreads": int(getattr(getattr(dask_worker, "state", None), "nthreads", 1) or 1),
        "why": None,
        "reply": None,
    }
    folder = Path(root)
    try:
        seen = (folder / check_name).read_text() == token
    except OSError:
        seen = False
    if not folder.is_dir():
        info["why"] = "no such folder on that machine"
    elif not (folder / "params.yaml").is_file():
        info["why"] = "no params.yaml there"
    elif not seen:
        info["why"] = "another folder at that path (the check file the flow just wrote there is missing)"
    else:
        reply = folder / f"{check_name}.{secrets.token_hex(6)}"
        try:
            reply.write_text(token)
            info["reply"] = reply.name
        except OSError as e:
            info["why"] = f"the folder is not writable there ({e.strerror})"
    return info


def _not_shared(address: str, host: str, root: Path, why: str) -> ProjectNotShared:
    return ProjectNotShared(
        f"Dask worker {address} (host {host}) cannot use the project at {root}: {why}. Every worker must see the "
        f"project folder at the same path, writable (a shared file system): mount it at {root} on that machine, "
        f"or start the worker on one that has it ({DOCS})"
    )


def check_workers(address: str, root: Path, timeout_s: float = 30) -> Slots:
    """Check that every worker of the Dask scheduler at ``address`` sees the project ``root`` (see
    the module docstring); returns the cluster's :class:`Slots`.

    Raises:
        ProjectNotShared: the first worker (by address) that does not, named with its host and why.
        NoWorkers: no worker is connected.
        OSError: the scheduler cannot be reached within ``timeout_s``.
    """
    from distributed import Client

    check_name = f"{CHECK_PREFIX}{secrets.token_hex(8)}"
    token = secrets.token_hex(16)
    check = root / check_name
    check.write_text(token)
    try:
        with Client(address, timeout=timeout_s, set_as_default=False) as client:
            infos: dict[str, WorkerInfo] = client.run(probe, str(root), check_name, token)
        for addr, info in sorted(infos.items()):
            if info["why"] is None and (info["reply"] is None or not (root / info["reply"]).is_file()):
                info["why"] = "another folder at that path (its reply file did not arrive here)"
            if info["why"] is not None:
                raise _not_shared(addr, info["host"], root, info["why"])
    finally:
        for f in root.glob(f"{check_name}*"):
            with contextlib.suppress(OSError):
                f.unlink()
    if not infos:
        raise NoWorkers(
            f"no Dask worker is connected to the scheduler at {address}: start some (`dask worker {address}`, "
            f"on machines that see {root}; {DOCS})"
        )
    return dask_slots(infos)


def require_project(root: str) -> None:
    """Raise :class:`ProjectNotShared` unless this machine sees the project at ``root`` (a task's
    first step on a Dask worker, which may have joined after the flow's check)."""
    if Path(root, "params.yaml").is_file():
        return
    try:
        from distributed import get_worker

        address = get_worker().address
    except (ImportError, ValueError):
        address = "(this process)"
    why = "no such folder on that machine" if not Path(root).is_dir() else "no params.yaml there"
    raise _not_shared(address, socket.gethostname(), Path(root), why)


def worker_address() -> str:
    """The address of the Dask worker running this code, "" outside one."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return ""
