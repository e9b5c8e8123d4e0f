"""Make ``import torchvision`` work when its compiled operators cannot load.

Why this exists: on the CPU-only machines this project is developed on, the only
``torchvision==0.28.0`` wheel on the registry is a CUDA build. With the CPU build of
``torch==2.13.0`` its ``_C`` extension fails to load, and importing torchvision (and so
``open_clip`` and ``easyocr``) dies with ``RuntimeError: operator torchvision::nms does
not exist`` (see the README, "Why these pins").

:func:`ensure_torchvision` first tries torchvision's own extension. Only if that fails
and no ``torchvision::nms`` operator is registered does it define ``nms`` and ``qnms``
with ``torch.library`` and a pure-torch CPU kernel (greedy NMS, the same algorithm as
torchvision's C++ kernel). On a normal CPU or CUDA install it does nothing.

This is enough for the imports and for ``torchvision.transforms`` (all open_clip and
EasyOCR need). ``torchvision.ops`` still reports its compiled ops as missing in shim
mode; the pipeline calls none of them and never decodes images with ``torchvision.io``
(Pillow does that).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading

log = logging.getLogger(__name__)
_lock = threading.Lock()
_done = False
#: True when this module had to provide ``torchvision::nms`` itself.
shimmed = False


def _nms_cpu(dets, scores, iou_threshold: float):  # pragma: no cover - exercised via torchvision.ops.nms
    import torch

    if dets.numel() == 0:
        return torch.empty((0,), dtype=torch.long, device=dets.device)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = torch.argsort(scores, descending=True, stable=True)
    suppressed = torch.zeros(dets.shape[0], dtype=torch.bool)
    keep = []
    for idx in order.tolist():
        if suppressed[idx]:
            continue
        keep.append(idx)
        xx1 = torch.maximum(x1[idx], x1)
        yy1 = torch.maximum(y1[idx], y1)
        xx2 = torch.minimum(x2[idx], x2)
        yy2 = torch.minimum(y2[idx], y2)
        inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
        iou = inter / (areas[idx] + areas - inter)
        suppressed |= iou > iou_threshold
    return torch.tensor(keep, dtype=torch.long, device=dets.device)


def _qnms_cpu(dets, scores, iou_threshold: float):  # pragma: no cover - quantized path unused here
    return _nms_cpu(dets.dequantize(), scores.dequantize(), iou_threshold)


def _torchvision_ops_load() -> bool:
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return False
    pkg = os.path.dirname(spec.origin)
    for name in os.listdir(pkg):
        if name.startswith("_C") and name.endswith((".so", ".pyd")):
            try:
                torch.ops.load_library(os.path.join(pkg, name))
                return True
            except OSError:
                return False
    return False


def ensure_torchvision() -> None:
    """Idempotently make ``import torchvision`` safe in this process.

    The project's install calls it before torchvision's first import (``_winogavil_torchvision_hook``,
    put on ``sys.meta_path`` by ``winogavil_torchvision.pth``); calling it directly still works (it
    first removes that hook, which has nothing left to do).

    Raises:
        ImportError: if torch itself is not installed.
    """
    global _done, shimmed
    hook = sys.modules.get("_winogavil_torchvision_hook")  # the install's start-up hook (setup.py)
    if hook is not None:
        # the fix runs now: the hook must not run it again from inside (find_spec("torchvision") below)
        hook.uninstall()
    with _lock:
        if _done:
            return
        import torch

        has_op = False
        try:
            has_op = hasattr(torch.ops.torchvision, "nms")
        except (AttributeError, RuntimeError):
            has_op = False
        if not has_op and not _torchvision_ops_load():
            lib = torch.library.Library("torchvision", "DEF")
            # torchvision's _meta_registrations registers fake kernels for exactly
            # these two operators unconditionally, so both must exist.
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.impl("nms", _nms_cpu, "CPU")
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
            lib.impl("qnms", _qnms_cpu, "CPU")
            # keep a reference so the registration lives as long as the process
            globals()["_lib"] = lib
            shimmed = True
            log.info("torchvision's compiled ops did not load; registered a pure-torch torchvision::nms")
        _done = True
