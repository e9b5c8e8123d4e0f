"""Startup hook: make ``import torchvision`` (and so ``open_clip``, ``easyocr``) work from any code.

The project's install puts ``winogavil_torchvision.pth`` into site-packages (see ``setup.py``); its one
line imports this module when Python starts. This module only inserts :class:`TorchvisionFirst` at
the front of :data:`sys.meta_path`: it imports nothing else, so a program that never imports
torchvision pays for one tiny import. The first time anything imports ``torchvision``, the finder
removes itself and calls :func:`gavil.models.torchvision_compat.ensure_torchvision` (which loads
torchvision's compiled ops, or registers pure-torch ``torchvision::nms``/``qnms`` when the registry's
CUDA wheel cannot load them with the CPU torch), then lets the normal import go on.

It imports ``gavil`` only at that moment, never at start-up, so ``sys.path`` (the current directory,
``PYTHONPATH``) decides which checkout's ``gavil`` it uses, as for any other import. If torch or
gavil cannot be imported, it does nothing and torchvision's own import reports what is missing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any


class TorchvisionFirst:
    """A :data:`sys.meta_path` finder that fixes torchvision's operators before its first import.

    It never finds a module itself (:meth:`find_spec` always returns ``None``); it only runs the fix
    once, the first time the name ``torchvision`` is looked up.
    """

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None) -> Any:
        """Run ``ensure_torchvision()`` when ``fullname`` is ``"torchvision"``; always return ``None``.

        Raises:
            Whatever ``ensure_torchvision`` raises other than :class:`ImportError` (a broken torch
            install is reported at the import that needed it).
        """
        if fullname != "torchvision":
            return None
        uninstall()  # one shot; also keeps ensure_torchvision's own find_spec("torchvision") from recursing
        running = sys.modules.get("gavil.models.torchvision_compat")
        if running is not None and getattr(running, "_lock", None) is not None and running._lock.locked():
            return None  # ensure_torchvision, called directly, is looking torchvision up itself: never re-enter it
        try:
            from gavil.models.torchvision_compat import ensure_torchvision
        except ImportError:
            return None
        try:
            ensure_torchvision()
        except ImportError:  # no torch: torchvision's import says so itself
            pass
        return None


def install() -> None:
    """Put the finder first in :data:`sys.meta_path` unless torchvision is imported or it is there already."""
    if "torchvision" in sys.modules or any(isinstance(f, TorchvisionFirst) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, TorchvisionFirst())


def uninstall() -> None:
    """Remove every :class:`TorchvisionFirst` from :data:`sys.meta_path` (idempotent)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchvisionFirst)]


install()
