"""Packaging step (hatchling build hook; not imported by the installed package): put
``winogavil_torchvision.pth`` at the root of the wheel, i.e. into site-packages.

Python runs the file's one line (it loads ``gavil/compat/torchvision_bridge.py`` by its path, without
importing the ``gavil`` package) at every start-up of
the environment, so ``import torchvision`` works from any code where a CPU torch sits beside a
CUDA torchvision (see :mod:`gavil.compat.torchvision_bridge`, which does nothing where the two
builds match). ``pyproject.toml`` names this file under ``[tool.hatch.build.targets.wheel.hooks.custom]``;
both wheel kinds get the file through hatchling's public build data: ``force_include`` for
``pip install .`` and ``force_include_editable`` for ``pip install -e .``.
"""

from __future__ import annotations

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PTH = "gavil/compat/winogavil_torchvision.pth"


class TorchvisionBridgeHook(BuildHookInterface):  # type: ignore[misc,unused-ignore]  # hatchling: build-only, absent from the venv (Any)
    """Adds :data:`PTH` to the wheel's root (regular and editable wheels)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, object]) -> None:
        """Called by hatchling before each wheel is built; ``version`` is ``standard`` or ``editable``."""
        key = "force_include_editable" if version == "editable" else "force_include"
        files = build_data.setdefault(key, {})
        assert isinstance(files, dict)  # hatchling's build data: source path -> path in the wheel
        files[PTH] = "winogavil_torchvision.pth"
