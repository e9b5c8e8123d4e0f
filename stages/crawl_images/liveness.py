"""Which files a live crawl still owns: an exclusive ``flock(2)`` held for as long as it writes.

A crawl run (a partition in a thread, a Dask worker, a second process) holds the lock of its
staging folder and of its journal segment while it works. The kernel drops the lock when the
owner closes the file or dies (also on SIGKILL), so a lock that can be taken is *proof* that its
owner is gone: only then are its leftovers removed. Locks are per open file, so threads of one
process exclude each other too. ``fcntl.flock`` is used directly rather than the ``filelock``
package because the check must never create a file or folder (``filelock`` creates both) and a
journal segment is locked through its own append descriptor.

**The protocol that closes the gap between creating a lock file and locking it.** An owner
creates its lock file and then locks it: for that instant the file exists and is free, and a
cleaner would take the owner for dead. So a cleaner removes leftovers only while it *holds* their
lock (:func:`claim`), and an owner, once its lock is held, checks that its path still names the
file it locked (:meth:`Hold.linked`); if not, a cleaner removed it first, and the owner starts
again under a new name. Either the cleaner finished before the owner held the lock (the owner sees
it and starts again) or the owner held it first (the cleaner cannot claim it): a live owner never
works in a removed folder or writes to a removed segment.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def linked(fd: int, path: Path) -> bool:
    """Whether ``path`` names the open file ``fd`` (same device and inode); False once removed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    here = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (here.st_dev, here.st_ino)


class Hold:
    """An exclusive lock on ``path`` (created if missing), held until :meth:`release` (or until the
    process ends). Blocks while another owner, or a cleaner (:func:`claim`), holds it.

    Raises:
        OSError: ``path`` cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def linked(self) -> bool:
        """Whether :attr:`path` still names the file this lock is on (False once a cleaner removed
        it before this owner held the lock, or after :attr:`path` was moved without updating it)."""
        return self.fd >= 0 and linked(self.fd, self.path)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops the lock
            self.fd = -1


def claim(path: Path) -> Hold | None:
    """The lock of ``path``, taken and *kept* when no live owner holds it (the caller removes that
    owner's leftovers, then calls :meth:`Hold.release`); None when a live owner holds it or
    ``path`` does not exist. Never creates ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    got = Hold.__new__(Hold)
    got.path, got.fd = path, fd
    return got


def held(path: Path) -> bool:
    """Whether a live owner holds the lock of ``path`` (False if the file does not exist).

    Never creates ``path``; takes and at once drops the lock when it is free. A check only: to
    remove what a free lock guards, use :func:`claim`, which keeps the lock while the caller does.
    """
    got = claim(path)
    if got is None:
        return path.exists()
    got.release()
    return False
