"""Which files a live crawl still owns: an exclusive ``flock(2)`` held for as long as it writes.

A crawl run (a partition in a thread, a Dask worker, a second process) holds the lock of its
staging folder and of its journal segment while it works. The kernel drops the lock when the
owner closes the file or dies (also on SIGKILL), so a lock that can be taken is *proof* that its
owner is gone: only then are its leftovers removed (:func:`held`). Locks are per open file, so
threads of one process exclude each other too. ``fcntl.flock`` is used directly rather than the
``filelock`` package because the check must never create a file or folder (``filelock`` creates
both) and a journal segment is locked through its own append descriptor.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class Hold:
    """An exclusive lock on ``path`` (created if missing), held until :meth:`release` (or until the
    process ends). Blocks while another owner holds it. Raises OSError if ``path`` cannot be opened."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the lock
            self.fd = -1


def held(path: Path) -> bool:
    """Whether a live owner holds the lock of ``path`` (False if the file does not exist).

    Never creates ``path``; takes and at once drops the lock when it is free.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
