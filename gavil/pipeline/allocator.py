"""The C allocator's settings for a process that runs a stage (glibc; elsewhere nothing changes).

glibc's ``malloc`` serves a block above its *mmap threshold* with a fresh ``mmap`` and returns it to
the kernel when freed; it also hands the heap's free top back to the kernel once it exceeds the *trim
threshold*. Both start small and adapt (the mmap threshold rises to the largest block freed, at most
32 MiB, and the trim threshold follows at twice that). A stage that allocates and frees numpy
temporaries of a few to tens of MB in a loop (AfLite's batched fits: several (classifiers, rows)
matrices per iteration, ~100 iterations per fit, 14 fits on the sample) then pays the kernel for
every one: a new mapping, zero-filled page by page on first touch, unmapped again. On the sample's
``aflite`` that was 3.3-4.5 s of system time in a 22 CPU-s stage (``gavil stage aflite`` timed whole,
docs/aflite.md "On the offline sample").

:func:`keep_freed_memory` fixes both thresholds at the start of a stage (``mallopt``): blocks up to
32 MiB (glibc's maximum for this setting) come from the heap, and up to 128 MiB of freed heap stays
mapped for the next allocation. The stage's arithmetic is the same (the values a block holds do not
depend on where it lies); its peak resident memory grows by at most about the 128 MiB kept.
"""

from __future__ import annotations

import ctypes
import platform

#: ``mallopt`` parameters (glibc ``malloc.h``).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: Blocks up to this many bytes come from the heap (glibc refuses more: ``HEAP_MAX_SIZE / 2`` on 64 bits).
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
#: Freed memory at the heap's top is kept up to this many bytes.
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024

_done: bool | None = None


def keep_freed_memory() -> bool:
    """Fix glibc's mmap threshold at 32 MiB and its trim threshold at 128 MiB for this process (once;
    later calls return the first result). Returns whether both settings took: False on another C
    library (macOS, musl, Windows), where nothing is changed. Never raises."""
    global _done
    if _done is not None:
        return _done
    _done = False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # mallopt returns 1 on success and 0 on a refused value
    mmap_ok = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1
    trim_ok = mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    _done = mmap_ok and trim_ok
    return _done
