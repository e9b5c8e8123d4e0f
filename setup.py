"""The one build step pyproject.toml cannot say: install ``winogavil_torchvision.pth`` into site-packages.

Everything else about the package is in ``pyproject.toml``. A ``.pth`` file at the top of a wheel lands
in site-packages, and Python runs its ``import`` line at start-up; ours imports
``_winogavil_torchvision_hook``, which makes ``import torchvision`` (and ``open_clip``, ``easyocr``)
work in the project's venv from any code (see that module and ``gavil/models/torchvision_compat.py``).

- ``pip install .`` (a wheel): :class:`BuildPyWithPth` copies the file into ``build_lib``, the wheel's root.
- ``pip install -e .`` (PEP 660): setuptools' editable wheel leaves ``build_lib`` out, so
  :class:`EditableWheelWithPth` adds the file to the editable wheel next to setuptools' own ``.pth``.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = "winogavil_torchvision.pth"
HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPyWithPth(build_py):
    """``build_py`` that also puts :data:`PTH` at the root of ``build_lib`` (so of the wheel)."""

    def run(self) -> None:
        super().run()
        self.copy_file(os.path.join(HERE, PTH), os.path.join(self.build_lib, PTH), preserve_mode=False)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), os.path.join(self.build_lib, PTH)]


class _StrategyWithPth:
    """Wraps setuptools' editable strategy: writes its files, then :data:`PTH`."""

    def __init__(self, strategy: Any) -> None:
        self.strategy = strategy

    def __call__(self, wheel: Any, files: list[str], mapping: dict[str, str]) -> None:
        self.strategy(wheel, files, mapping)
        with open(os.path.join(HERE, PTH), "rb") as fh:
            wheel.writestr(PTH, fh.read())

    def __enter__(self) -> _StrategyWithPth:
        self.strategy.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.strategy.__exit__(*exc)


class EditableWheelWithPth(editable_wheel):
    """``editable_wheel`` whose wheel also carries :data:`PTH` (setuptools has no public option for it)."""

    def _select_strategy(self, *args: Any, **kwargs: Any) -> Any:
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


if not hasattr(editable_wheel, "_select_strategy"):  # the one private hook (setuptools 64 to 84.2.1 at least)
    raise RuntimeError(f"this setuptools has no editable_wheel._select_strategy, so setup.py cannot add {PTH}")

setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
