"""The input side of an image-embedding pass: images decoded and preprocessed ahead of the model on
threads (:func:`prefetched`), open_clip's preprocess with its tensor steps in NumPy
(:func:`array_preprocess`, bit-identical), and the glibc heap kept small while threads decode
(:func:`limit_malloc_arenas`, :func:`release_free_memory`). Used by :mod:`gavil.models.loading`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    import torch
    from PIL.Image import Image as PILImage

T = TypeVar("T")
R = TypeVar("R")


def limit_malloc_arenas(max_arenas: int = 2) -> bool:
    """Cap glibc malloc arenas (like ``MALLOC_ARENA_MAX``, which only works before start-up).

    Decoding on threads while the main thread frees the tensors fragments one arena per thread;
    at scale that roughly doubled peak RSS (docs/benchmarks.md). No-op (False) where glibc is absent.
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(-8, max_arenas))  # M_ARENA_MAX = -8
    except (OSError, AttributeError):
        return False


def release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc ``malloc_trim``); no-op elsewhere."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name:
        try:
            ctypes.CDLL(name).malloc_trim(0)
        except (OSError, AttributeError):
            pass


def prefetched(chunks: Sequence[T], load: Callable[[T], R], workers: int, depth: int | None = None) -> Iterator[R]:
    """Yield ``load(chunk)`` for each chunk in order, loading up to ``depth`` chunks (default
    ``workers + 1``, at least 2: every thread busy; a fixed 2 made 8 threads work like 2,
    ``benchmarks/clip_device.py``) ahead on ``workers`` threads (0 = inline), so decoding overlaps
    the forward pass. Threads, not processes: safe inside Prefect's task threads, where forking is not.
    """
    depth = max(2, workers + 1) if depth is None else depth
    if workers <= 0:
        for c in chunks:
            yield load(c)
        return
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gavil-decode") as ex:
        pending = deque(ex.submit(load, c) for c in chunks[:depth])
        nxt = depth
        while pending:
            result = pending.popleft().result()
            if nxt < len(chunks):
                pending.append(ex.submit(load, chunks[nxt]))
                nxt += 1
            yield result


def array_preprocess(preprocess: Callable[[PILImage], torch.Tensor]) -> Callable[[PILImage], np.ndarray]:
    """open_clip's image ``preprocess`` as a function PIL RGB image -> (3, H, W) float32 array, the
    same values bit for bit, with the tensor steps done in NumPy.

    open_clip's preprocess is a torchvision ``Compose``: PIL steps (``Resize`` bicubic, ``CenterCrop``,
    ``MaybeConvertMode``), then ``ToTensor`` (``uint8 -> float32 / 255``, HWC -> CHW) and ``Normalize``
    (``(x - mean) / std`` per channel, float32). Those last two are element-wise IEEE float32 ops, so
    NumPy computes identical values; it does them on the calling (loader) thread alone, where torch's
    element-wise kernels start an OpenMP team of ``threads`` per call, which competes with the forward
    pass for the same cores (measured 6-8x slower per image on 2 loaded cores: docs/benchmarks.md
    "Scoring"). The PIL steps are open_clip's own objects, called unchanged.

    A preprocess of any other shape (not PIL steps, then one ``ToTensor``, then one ``Normalize``) is
    used as it is (its tensor output converted to an array), so nothing changes where the shortcut
    does not apply. ``tests/stages/score_candidates/test_score.py`` checks the identity against open_clip's preprocess.
    """
    from torchvision.transforms import Compose, Normalize, ToTensor

    steps = list(preprocess.transforms) if isinstance(preprocess, Compose) else []
    cut = next((i for i, s in enumerate(steps) if isinstance(s, ToTensor)), None)
    tail = steps[cut + 1 :] if cut is not None else []
    if cut is None or len(tail) != 1 or not isinstance(tail[0], Normalize) or tail[0].inplace:
        return lambda im: preprocess(im).numpy()
    pil_steps, to_tensor, norm = steps[:cut], steps[cut], tail[0]
    mean = np.asarray(norm.mean, dtype=np.float32).reshape(-1, 1, 1)
    std = np.asarray(norm.std, dtype=np.float32).reshape(-1, 1, 1)

    def to_input(im: PILImage) -> np.ndarray:
        for step in pil_steps:
            im = step(im)
        if im.mode != "RGB":  # ToTensor's other modes (16-bit, float): leave them to torchvision
            out: np.ndarray = norm(to_tensor(im)).numpy()
            return out
        x = np.asarray(im, dtype=np.uint8).transpose(2, 0, 1).astype(np.float32)  # ToTensor: CHW float32
        x /= np.float32(255)
        x -= mean  # Normalize: (x - mean) / std, float32
        x /= std
        return x

    return to_input
