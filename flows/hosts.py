"""Stage processes: where the flow's tasks run a stage, so that a timeout really stops it.

Prefect runs sync tasks in threads, and a thread cannot be stopped: its ``timeout_seconds`` only
raises once the task's code returns to Python (never inside OCR, a model call or a blocked read),
and Prefect says so in a warning on every task. So each task sends its stage call (``run_stage``,
``plan_stage``, ``work_stage``, ``reduce_stage``) to a *stage process*, a child Python process that
runs one call at a time; at the deadline the task kills the process (its whole process group) and
fails with :class:`StageTimeout`.

A stage process is reused for the next call of the same flow run (models stay loaded across a
stage's partitions, as before) and ended when the flow finishes (:func:`shutdown`); it also exits by
itself when its parent dies or after :data:`IDLE_EXIT_S` idle seconds. At most ``limit`` run at
once (:func:`configure`; more calls wait for a free one, and the wait does not count against the
timeout). Whatever a stage prints (its progress lines) reaches the task as clean lines: tqdm's
carriage returns and terminal escape codes are removed, so Prefect logs one line per message.

This module imports only the standard library (and :mod:`gavil.errors`, :mod:`gavil.pipeline.parallel`,
which do too): it is also the child's entry point (``python -m flows.hosts``), which must start fast.
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import os
import pickle
import queue
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gavil.errors import GavilError
from gavil.pipeline.parallel import thread_env

DONE = "\x1egavil-stage-process-done"  # sentinel line: the call's result file is written
IDLE_EXIT_S = 900.0
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


class StageTimeout(GavilError, TimeoutError):
    """A stage call ran past its deadline; its process was killed."""


class StageProcessDied(GavilError, RuntimeError):
    """The stage process exited in the middle of a call (killed, out of memory, a crash in C code)."""


class _NotStarted(Exception):
    """The call could not be sent: the (idle) process had exited."""


def clean(text: str) -> str:
    """One log-worthy line from raw terminal output: the last carriage-return segment, escape
    codes and other control characters removed, whitespace stripped."""
    text = _ESCAPES.sub("", text)
    segments = [s for s in text.split("\r") if s.strip()]
    return _CONTROL.sub("", segments[-1]).strip() if segments else ""


class StageProcess:
    """One child process serving calls one at a time (see the module docstring)."""

    def __init__(self, cwd: str, generation: int = 0, threads: int | None = None) -> None:
        self.cwd, self.generation, self.threads = cwd, generation, threads
        self._dir = tempfile.TemporaryDirectory(prefix="gavil-stage-")
        self._calls = itertools.count()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if threads is not None:  # its share of the cores, before it loads NumPy or torch
            env |= thread_env(threads)
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-m", "flows.hosts"],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            start_new_session=True,  # its own process group: killed with everything it started
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"stage-process-{self.proc.pid}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)  # EOF: the process ended

    def alive(self) -> bool:
        return self.proc.poll() is None

    def call(
        self, func: str, args: tuple[Any, ...], timeout: float | None, sink: Callable[[str], None], what: str
    ) -> Any:
        """``func(*args)`` (``"module:function"``) in the process; its printed lines go to ``sink``.

        Raises:
            StageTimeout: past ``timeout`` seconds (the process is killed).
            StageProcessDied: the process ended during the call.
            Exception: whatever the call raised, with the child's traceback as a note.
        """
        path = Path(self._dir.name) / f"call-{next(self._calls)}.pkl"
        path.write_bytes(pickle.dumps((func, args)))
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{path}\n")
            self.proc.stdin.flush()
        except OSError as e:  # it exited while idle (its parent watch, the idle limit): nothing started
            self.kill()
            raise _NotStarted(str(e)) from e
        deadline = None if timeout is None else time.monotonic() + timeout
        finished = False
        try:
            while True:
                wait = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    line = self._lines.get(timeout=wait)
                except queue.Empty:
                    raise StageTimeout(
                        f"{what} ran longer than its timeout of {timeout:g} s (params.yaml: prefect.task_timeout_s) "
                        f"and was stopped: its process {self.proc.pid} was killed"
                    ) from None
                if line is None:
                    raise StageProcessDied(f"{what}: its process {self.proc.pid} ended with code {self.proc.wait()}")
                if line.endswith(DONE):
                    line = line[: -len(DONE)]
                    if text := clean(line):
                        sink(text)
                    finished = True
                    break
                if text := clean(line):
                    sink(text)
        finally:
            if not finished:
                self.kill()
        out = pickle.loads(path.with_suffix(".out").read_bytes())
        path.unlink(missing_ok=True)
        path.with_suffix(".out").unlink(missing_ok=True)
        if out["ok"]:
            return out["value"]
        error: BaseException = out["error"]
        error.add_note(f"in the stage process {self.proc.pid}:\n{out['traceback']}")
        raise error

    def kill(self) -> None:
        """End the process and everything it started (SIGTERM, then SIGKILL after 5 s)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._reader.join(timeout=5)  # it reads to the end of the output, then stops
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        self._dir.cleanup()


class _Pool:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[StageProcess] = []
        self.generation = 0  # bumped by shutdown(): processes busy then are ended when they finish
        self.limit = os.cpu_count() or 1
        self.slots = threading.BoundedSemaphore(self.limit)

    def configure(self, limit: int) -> None:
        with self.lock:
            self.limit = max(1, limit)
            self.slots = threading.BoundedSemaphore(self.limit)

    def take(self, cwd: str, threads: int | None = None) -> StageProcess:
        with self.lock:
            while self.idle:
                p = self.idle.pop()
                if p.alive() and p.cwd == cwd and p.threads == threads:
                    return p
                p.kill()
            generation = self.generation
        return StageProcess(cwd, generation, threads)

    def give(self, p: StageProcess) -> None:
        with self.lock:
            if p.generation == self.generation:
                self.idle.append(p)
                return
        p.kill()

    def shutdown(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
            self.generation += 1
        for p in idle:
            p.kill()


_POOL = _Pool()


def configure(limit: int) -> None:
    """At most ``limit`` stage processes at once in this process (default: one per core)."""
    _POOL.configure(limit)


def shutdown() -> None:
    """End the idle stage processes (the flow calls this when it finishes)."""
    _POOL.shutdown()


def run_in_process(
    func: str,
    *args: Any,
    timeout: float | None = None,
    sink: Callable[[str], None] = print,
    what: str | None = None,
    cwd: str | None = None,
    threads: int | None = None,
) -> Any:
    """``func(*args)`` in a stage process running in ``cwd`` (default: this directory), stopped
    after ``timeout`` seconds, with ``threads`` CPU threads
    (:func:`gavil.pipeline.parallel.thread_env`; None: this process's environment decides).

    ``func`` is ``"module:function"``; arguments and result travel pickled. See
    :meth:`StageProcess.call` for what it raises.
    """
    slots = _POOL.slots
    with slots:
        for attempt in (1, 2):
            p = _POOL.take(cwd or os.getcwd(), threads)
            try:
                value = p.call(func, args, timeout, sink, what or func)
            except _NotStarted as e:
                if attempt == 2:
                    raise StageProcessDied(f"{what or func}: could not start a stage process ({e})") from e
                continue
            except BaseException:
                if p.alive():  # the stage's own error: the process is fine (a killed one is gone)
                    _POOL.give(p)
                raise
            _POOL.give(p)
            return value
    raise AssertionError("unreachable")


# ------------------------------------------------------------------------------------------- the child
def _picklable(error: BaseException) -> BaseException:
    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(3)  # the flow's process is gone: nobody will read the result


def serve_calls() -> None:
    """The child's loop: read a call file's path per line on stdin, run it, write ``<path>.out``."""
    threading.Thread(target=_watch_parent, args=(os.getppid(),), daemon=True).start()
    while True:
        ready, _, _ = select.select([sys.stdin], [], [], IDLE_EXIT_S)
        line = sys.stdin.readline() if ready else ""
        if not line:
            return  # EOF (the parent closed the pipe) or idle too long
        path = Path(line.strip())
        func, args = pickle.loads(path.read_bytes())
        try:
            module, _, name = func.partition(":")
            out: dict[str, Any] = {"ok": True, "value": getattr(importlib.import_module(module), name)(*args)}
        except BaseException as e:  # everything goes back to the task
            out = {"ok": False, "error": _picklable(e), "traceback": traceback.format_exc()}
        try:
            data = pickle.dumps(out)
        except Exception as e:  # an unpicklable result
            data = pickle.dumps({"ok": False, "error": _picklable(e), "traceback": traceback.format_exc()})
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path.with_suffix(".out"))
        sys.stdout.flush()
        sys.stdout.write(f"\n{DONE}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    serve_calls()
