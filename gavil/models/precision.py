"""Numerics of the model stages: ``precision`` (fp32 | bf16 | auto) and ``device`` (auto | cpu | cuda).

Shared by ``ocr_filter`` (EasyOCR's CRAFT detector and recogniser), ``score_candidates`` and
``evaluate`` (open_clip). bf16 runs under ``torch.autocast`` (convolutions and matrix products in
bfloat16, accumulation and the outputs handed back in float32); convolutional models are also
put in channels-last memory format, which oneDNN's bf16 kernels (and cuDNN's) prefer.

- ``device: auto`` -> ``cuda`` when ``torch.cuda.is_available()``, else ``cpu``. ``cuda`` without
  a CUDA device is a :class:`gavil.errors.ParamsError`.
- ``precision: auto`` -> ``bf16`` where the hardware runs it natively: a CUDA device with bf16
  (``torch.cuda.is_bf16_supported()``), or a CPU with AMX or AVX-512-BF16 units (Linux
  ``/proc/cpuinfo`` flags ``amx_bf16`` / ``avx512_bf16``, or torch's CPU capability ``AMX``);
  ``fp32`` elsewhere (bf16 is emulated there and slower than fp32).

Outputs depend on both (bf16 changes the numbers; a GPU's fp32 kernels differ from a CPU's in
the last bits), so caches key their entries by :func:`numerics_id` of the *resolved* values,
e.g. ``bf16-cpu``: switching precision or device never mixes results.
"""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path
from typing import Any

from gavil.errors import ParamsError

PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")


def flags_native_bf16(cpuinfo: str) -> bool:
    """True if the ``flags`` lines of a ``/proc/cpuinfo`` text name ``amx_bf16`` or ``avx512_bf16``."""
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[-1].split()}
    return bool(flags & {"amx_bf16", "avx512_bf16"})


@cache
def cpu_native_bf16() -> bool:
    """True if this CPU has AMX-BF16 or AVX-512-BF16 units (bf16 at native speed): torch's CPU
    capability says ``AMX``, or (Linux) ``/proc/cpuinfo`` lists :func:`flags_native_bf16`'s flags."""
    try:
        import torch

        if "AMX" in str(torch.backends.cpu.get_cpu_capability()).upper():
            return True
    except (ImportError, AttributeError):  # pragma: no cover - torch is a dependency
        pass
    try:
        return flags_native_bf16(Path("/proc/cpuinfo").read_text(errors="replace"))
    except OSError:
        return False


#: The library a torch build links for CUDA (or ROCm, which torch also reports as ``cuda``), by
#: platform: a torch without any of them is a CPU-only build and can see no CUDA device.
_GPU_LIBS = ("libtorch_cuda.so", "libtorch_hip.so", "torch_cuda.dll")


@cache
def torch_is_cpu_only() -> bool:
    """True if the installed torch is a CPU-only build (its ``lib`` folder holds none of
    :data:`_GPU_LIBS`), found without importing torch (about 0.9 CPU-s); False if it may have a GPU
    build (then ask ``torch.cuda``) or is not found."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    folders = list(spec.submodule_search_locations or []) if spec else []
    if not folders:
        return False
    lib = Path(folders[0]) / "lib"
    return lib.is_dir() and not any((lib / name).exists() for name in _GPU_LIBS)


def resolve_device(device: str) -> str:
    """``auto`` | ``cpu`` | ``cuda`` -> ``cpu`` or ``cuda``. ``cpu``, and ``auto`` with a CPU-only torch
    build (:func:`torch_is_cpu_only`), are resolved without importing torch.

    Raises:
        ParamsError: ``cuda`` asked for but torch sees no CUDA device, or an unknown name.
    """
    if device not in DEVICES:
        raise ParamsError(f"device must be one of {DEVICES}, got {device!r}")
    if device == "cpu" or (device == "auto" and torch_is_cpu_only()):
        return "cpu"
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ParamsError("device: cuda, but torch sees no CUDA device (CPU-only torch or no GPU); use auto or cpu")
    return device


def resolve_precision(precision: str, device: str) -> str:
    """``auto`` | ``fp32`` | ``bf16`` on a resolved ``device`` -> ``fp32`` or ``bf16`` (see module doc).

    Raises:
        ParamsError: an unknown name, or ``bf16`` on a CUDA device without bf16 support.
    """
    import torch

    if precision not in PRECISIONS:
        raise ParamsError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if device == "cuda":
        native = torch.cuda.is_bf16_supported()
        if precision == "bf16" and not native:
            raise ParamsError("precision: bf16, but this CUDA device has no bf16 support; use auto or fp32")
    else:
        native = cpu_native_bf16()
    if precision == "auto":
        return "bf16" if native else "fp32"
    return precision


def resolve(precision: str, device: str) -> tuple[str, str]:
    """(precision, device) params -> resolved (``fp32``|``bf16``, ``cpu``|``cuda``)."""
    dev = resolve_device(device)
    return resolve_precision(precision, dev), dev


def numerics_id(precision: str, device: str) -> str:
    """The cache-key label of resolved numerics, e.g. ``fp32-cpu``, ``bf16-cuda``."""
    return f"{precision}-{device}"


def autocast(precision: str, device: str) -> contextlib.AbstractContextManager[Any]:
    """``torch.autocast`` to bfloat16 for resolved ``bf16``; a no-op context for ``fp32``."""
    import torch

    if precision != "bf16":
        return contextlib.nullcontext()
    return torch.autocast(device_type=device, dtype=torch.bfloat16)


def is_convolutional(module: Any) -> bool:
    """True for a model whose compute is mostly convolutions (CRAFT, ResNet towers): more than
    one Conv2d (a ViT has a single patch-embedding convolution)."""
    import torch

    return sum(isinstance(m, torch.nn.Conv2d) for m in module.modules()) > 1


def channels_last(module: Any) -> Any:
    """Put a convolutional module's 4-d weights in channels-last format (in place; returned)."""
    import torch

    return module.to(memory_format=torch.channels_last)
