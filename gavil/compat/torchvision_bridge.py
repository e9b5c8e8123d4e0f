"""Bridge a CPU-only torch and a CUDA build of torchvision, so ``import torchvision`` works.

**When it acts.** torchvision's compiled operators (``torchvision/_C.so``) are built against one
torch build. Where torch is a CPU build (version ``2.13.0+cpu``) and torchvision a CUDA build
(``0.28.0+cu130``, what the public index serves on Linux), ``_C.so`` cannot load, and the first
``import torchvision`` (so ``import open_clip`` and ``import easyocr``) dies with
``RuntimeError: operator torchvision::nms does not exist``. That pair is what a machine gets when it
keeps a CPU torch wheel of its own and takes torchvision from the public index. Then, and only
then, :func:`ensure_torchvision` defines ``torchvision::nms`` and ``torchvision::qnms`` with
``torch.library`` and a pure-torch CPU kernel (greedy NMS, the algorithm of torchvision's C++
kernel), which is all open_clip and EasyOCR need (transforms; the pipeline decodes images with
Pillow, never ``torchvision.io``).

**When it does nothing.** Where both come from one install (the public index's matching
``torch==2.13.0`` and ``torchvision==0.28.0``, or both from PyTorch's CPU index), the builds
match: :func:`needed` is False, the start-up hook installs nothing, and torchvision imports as
usual. :func:`ensure_torchvision` also finds torchvision's own operators and registers nothing.

**How it runs for any code.** The install puts ``winogavil_torchvision.pth`` into site-packages
(``gavil/compat/build_hook.py``); Python runs its one line at start-up, which loads this file by
its path as ``_winogavil_torchvision_bridge`` without importing the ``gavil`` package (so a project
copy run from its own folder still imports its own ``gavil``, not the installed one). Importing
``gavil.compat.torchvision_bridge`` later gives that same module: one bridge, one state per process.
Importing it reads two small version files (no torch import) and, only when :func:`needed`, puts
:class:`TorchvisionFirst` first on :data:`sys.meta_path`: the first time anything imports
``torchvision``, the finder removes itself and calls :func:`ensure_torchvision`.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

_lock = threading.Lock()
_done = False
_probing = threading.local()  # set while this module looks a package up itself (never a trigger)
#: True when this module had to provide ``torchvision::nms`` itself.
shimmed = False

_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.M)
_TORCH_CUDA = re.compile(r"""^cuda\s*(?::[^=]*)?=\s*(None|['"]([^'"]*)['"])""", re.M)


def _version_file(package: str) -> str | None:
    """The text of ``<package>/version.py`` of the installed package, found without importing it."""
    _probing.on = True
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    finally:
        _probing.on = False
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "version.py"), encoding="utf-8") as fh:
                return fh.read()
        except OSError:
            continue
    return None


def build_flavour(version_py: str | None, package: str) -> str | None:
    """What a torch or torchvision build runs on, from the text of its ``version.py``.

    Returns ``"cpu"``, ``"cu<digits>"`` (e.g. ``"cu130"``), another local label (``"rocm6.4"``), or
    None when the file says nothing definite (no file; a version without a local label, as macOS
    and Windows wheels have; a computed value).

    torch: its ``cuda`` line when it names a version (``'13.0'`` → ``"cu130"``), else the local
    label of ``__version__`` (``2.13.0+cpu`` → ``"cpu"``). torchvision: the local label of
    ``__version__`` (``0.28.0+cu130`` → ``"cu130"``).
    """
    if version_py is None:
        return None
    m = _VERSION.search(version_py)
    label = m.group(1).partition("+")[2] if m else ""
    if package == "torch":
        cuda = _TORCH_CUDA.search(version_py)
        if cuda and cuda.group(2):
            return "cu" + cuda.group(2).replace(".", "")
    return label or None


def needed(torch_version_py: str | None = None, torchvision_version_py: str | None = None) -> bool:
    """Whether the installed torch and torchvision are builds for different devices (the case the
    bridge exists for). Both version files are read from the install unless given.

    True only when both flavours are known and differ, e.g. torch ``cpu`` with torchvision
    ``cu130``; False for matching builds and whenever either side is unknown (then torchvision's
    own import decides, and reports its own error if any).
    """
    t = build_flavour(torch_version_py if torch_version_py is not None else _version_file("torch"), "torch")
    tv = build_flavour(
        torchvision_version_py if torchvision_version_py is not None else _version_file("torchvision"), "torchvision"
    )
    return t is not None and tv is not None and t != tv


class TorchvisionFirst:
    """A :data:`sys.meta_path` finder that fixes torchvision's operators before its first import.

    It never finds a module itself (:meth:`find_spec` always returns ``None``); it only runs
    :func:`ensure_torchvision` once, the first time the name ``torchvision`` is looked up.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> None:
        """Run :func:`ensure_torchvision` when ``fullname`` is ``"torchvision"``; always return ``None``.

        Raises:
            Whatever :func:`ensure_torchvision` raises other than :class:`ImportError` (a broken
            torch install is reported at the import that needed it).
        """
        if fullname != "torchvision" or getattr(_probing, "on", False):
            return None
        uninstall()  # one shot; also keeps ensure_torchvision's own find_spec("torchvision") from recursing
        if _lock.locked():
            return None  # ensure_torchvision, called directly, is looking torchvision up itself
        try:
            ensure_torchvision()
        except ImportError:  # no torch: torchvision's import says so itself
            pass
        return None


def install() -> bool:
    """Put :class:`TorchvisionFirst` first on :data:`sys.meta_path` when :func:`needed` (and
    torchvision is not imported yet and no finder is there). Returns whether a finder is installed.
    Never raises: it runs at every interpreter start-up."""
    try:
        # by name: a finder left by another copy of this module counts too
        present = any(type(f).__name__ == "TorchvisionFirst" for f in sys.meta_path)
        if "torchvision" in sys.modules or present:
            return present
        if not needed():
            return False
        sys.meta_path.insert(0, TorchvisionFirst())
        return True
    except Exception:  # a start-up hook must never stop an interpreter
        return False


def uninstall() -> None:
    """Remove every :class:`TorchvisionFirst` from :data:`sys.meta_path` (idempotent)."""
    # by name: the finder of the start-up file's copy of this module too (one registration per process)
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "TorchvisionFirst"]


def _nms_cpu(dets: Any, scores: Any, iou_threshold: float) -> Any:  # pragma: no cover - via torchvision.ops.nms
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


def _qnms_cpu(dets: Any, scores: Any, iou_threshold: float) -> Any:  # pragma: no cover - quantized path unused
    return _nms_cpu(dets.dequantize(), scores.dequantize(), iou_threshold)


def _torchvision_ops_load() -> bool:
    """Load torchvision's own compiled operators (``_C``); False when they cannot load."""
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return False
    pkg = os.path.dirname(spec.origin)
    for name in os.listdir(pkg):
        if name.startswith("_C") and name.endswith((".so", ".pyd")):
            try:
                torch.ops.load_library(os.path.join(pkg, name))  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch (only --strict checks such calls)
                return True
            except OSError:
                return False
    return False


def ensure_torchvision() -> None:
    """Idempotently make ``import torchvision`` safe in this process.

    Registers pure-torch ``torchvision::nms``/``qnms`` only when no ``torchvision::nms`` exists
    and torchvision's own ``_C`` cannot load; otherwise registers nothing (:data:`shimmed` stays
    False). Called by the start-up finder, and directly by code that loads models (it first
    removes the finder, which then has nothing left to do).

    Raises:
        ImportError: if torch itself is not installed.
    """
    global _done, shimmed
    uninstall()
    with _lock:
        if _done:
            return
        import torch

        try:
            has_op = hasattr(torch.ops.torchvision, "nms")
        except (AttributeError, RuntimeError):
            has_op = False
        if not has_op and not _torchvision_ops_load():
            lib = torch.library.Library("torchvision", "DEF")  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch
            # torchvision's _meta_registrations registers fake kernels for exactly these two operators
            lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch
            lib.impl("nms", _nms_cpu, "CPU")  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch
            lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch
            lib.impl("qnms", _qnms_cpu, "CPU")  # type: ignore[no-untyped-call,unused-ignore]  # unannotated in torch
            globals()["_lib"] = lib  # the registration lives as long as the process
            shimmed = True
            import logging

            logging.getLogger(__name__).info(
                "torchvision's compiled ops did not load beside this torch build; registered a pure-torch "
                "torchvision::nms"
            )
        _done = True


_START_UP = "_winogavil_torchvision_bridge"  # the name the start-up file loads this file under
if __name__ != _START_UP and sys.modules.get(_START_UP) is not None:
    sys.modules[__name__] = sys.modules[_START_UP]  # one bridge per process: the one loaded at start-up
else:
    install()
