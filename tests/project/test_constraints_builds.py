"""The README's test command on a researcher's machine: installed from the public index alone, Linux
torch comes as a CUDA build with its CUDA runtime beside it. `gavil constraints --write/--check`
(gavil.compat.constraints.constraints_text) must give the same constraints.txt as beside the CPU
build this machine keeps, instead of refusing the CUDA one."""

from __future__ import annotations

from importlib import metadata

from gavil.compat.constraints import constraints_text
from tests.helpers import ROOT

CUDA_RUNTIME = ["nvidia-cublas==13.1.0.3; platform_system == 'Linux'", "nvidia-cudnn-cu13==9.13.0.50", "triton==3.6.0"]


def _as_cuda_build(monkeypatch) -> None:
    """Make the installed torch read as the public index's Linux build: ``2.13.0+cu130`` whose
    metadata pins a CUDA runtime that is not installed here."""
    version, requires = metadata.version, metadata.requires

    def fake_version(name: str) -> str:
        if name.lower().startswith(("nvidia-", "triton")):
            raise AssertionError(f"{name}: the CUDA runtime torch pins itself must not be followed")
        return "2.13.0+cu130" if name.lower() == "torch" else version(name)

    def fake_requires(name: str) -> list[str] | None:
        got = requires(name)
        return [*(got or []), *CUDA_RUNTIME] if name.lower() == "torch" else got

    monkeypatch.setattr(metadata, "version", fake_version)
    monkeypatch.setattr(metadata, "requires", fake_requires)


def test_a_cuda_torch_gives_the_same_constraints_as_the_cpu_build(monkeypatch):
    cpu = constraints_text(ROOT / "pyproject.toml")
    _as_cuda_build(monkeypatch)
    cuda = constraints_text(ROOT / "pyproject.toml")
    assert cuda == cpu
    assert "torch==2.13.0\n" in cuda and "nvidia" not in cuda and "triton" not in cuda
