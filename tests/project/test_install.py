"""The install: ``import open_clip`` / ``import easyocr`` work from any code, and the torchvision bridge
acts only where torch and torchvision are builds for different devices.

On this machine torch is a CPU build (``2.13.0+cpu``) and torchvision the public index's CUDA build
(``0.28.0+cu130``), whose compiled ops do not load beside it; on a researcher's machine both come
from one index and match. The install puts ``winogavil_torchvision.pth`` into site-packages
(``gavil/compat/build_hook.py``); its line imports :mod:`gavil.compat.torchvision_bridge`, which
installs a start-up finder only when the two builds differ. Both ways are tested here: the real
mismatched pair, and fake ``torch``/``torchvision`` packages (first on ``PYTHONPATH``) whose version
files say the builds match or differ. The tests start fresh interpreters from a folder outside the
project, as a user's own script would.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from gavil.compat import torchvision_bridge as bridge
from tests.helpers import ROOT

PTH = "winogavil_torchvision.pth"
REINSTALL = "the venv's install predates the start-up file: run `pip install -c constraints.txt -e .` again"

TORCH_CPU = "__version__ = '2.13.0+cpu'\ndebug = False\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
TORCH_CU130 = "__version__ = '2.13.0+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\nhip: Optional[str] = None\n"
TORCH_MACOS = "__version__ = '2.13.0'\ndebug = False\ncuda: Optional[str] = None\nhip: Optional[str] = None\n"
TV_CU130 = "__version__ = '0.28.0+cu130'\ngit_version = 'x'\n"
TV_CPU = "__version__ = '0.28.0+cpu'\ngit_version = 'x'\n"
TV_MACOS = "__version__ = '0.28.0'\ngit_version = 'x'\n"


def _python(code: str, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONNOUSERSITE")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize(
    ("torch_py", "tv_py", "flavours", "acts"),
    [
        (TORCH_CPU, TV_CU130, ("cpu", "cu130"), True),  # this machine: a local CPU torch, the index's torchvision
        (TORCH_CU130, TV_CU130, ("cu130", "cu130"), False),  # the public index on Linux: both CUDA 13.0
        (TORCH_CPU, TV_CPU, ("cpu", "cpu"), False),  # both from PyTorch's CPU index
        (TORCH_MACOS, TV_MACOS, (None, None), False),  # macOS / Windows wheels carry no local label
        (TORCH_CU130, TV_CPU, ("cu130", "cpu"), True),
        (None, TV_CU130, (None, "cu130"), False),  # no torch: torchvision's own import reports it
    ],
)
def test_the_bridge_acts_only_where_the_builds_differ(torch_py, tv_py, flavours, acts):
    assert (bridge.build_flavour(torch_py, "torch"), bridge.build_flavour(tv_py, "torchvision")) == flavours
    assert bridge.needed(torch_py or "", tv_py) is acts


def test_the_install_put_the_start_up_file_into_site_packages():
    installed = Path(sysconfig.get_paths()["purelib"]) / PTH
    assert installed.exists(), REINSTALL
    assert installed.read_text() == (ROOT / "gavil" / "compat" / PTH).read_text()


def test_open_clip_and_easyocr_import_in_a_clean_interpreter(tmp_path):
    r = _python("import open_clip, easyocr, torchvision.transforms; print('ok')", tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:] + "\n" + REINSTALL


def test_at_start_up_the_bridge_imports_no_torch_and_acts_as_needed_says(tmp_path):
    """Start-up costs two version-file reads: no torch import; a finder only where the builds differ
    (here they do), removed after its one use."""
    code = (
        "import sys; from gavil.compat import torchvision_bridge as b; "
        "print('torch' in sys.modules, b.needed(), any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path)); "
        "import torchvision; print(any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path), b.shimmed)"
    )
    r = _python(code, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    first, second = r.stdout.split("\n")[:2]
    needed = bridge.needed()
    assert first == f"False {needed} {needed}", r.stdout
    assert second == f"False {needed}", r.stdout  # one shot; the shim only where the builds differ


def _fake_pair(root: Path, torch_py: str, tv_py: str) -> Path:
    """Fake ``torch`` and ``torchvision`` packages: version files as given; importing the fake
    ``torchvision`` records the finders then on ``sys.meta_path``; importing the fake ``torch``
    fails loudly, so a bridge that imported it (to register operators) would be seen."""
    for name, text in (("torch", torch_py), ("torchvision", tv_py)):
        (root / name).mkdir(parents=True)
        (root / name / "version.py").write_text("from typing import Optional\n" + text)
    (root / "torch" / "__init__.py").write_text("raise RuntimeError('the bridge imported torch')\n")
    (root / "torchvision" / "__init__.py").write_text(
        "import sys\nFINDERS = [type(f).__name__ for f in sys.meta_path]\n"
    )
    return root


@pytest.mark.parametrize(("torch_py", "tv_py", "acts"), [(TORCH_CU130, TV_CU130, False), (TORCH_CPU, TV_CPU, False)])
def test_where_the_builds_match_the_bridge_does_nothing(tmp_path, torch_py, tv_py, acts):
    """A researcher's install (matching builds): no finder at start-up, nothing registered, torch never
    imported by the bridge; ``import torchvision`` is torchvision's own."""
    fake = _fake_pair(tmp_path / "site", torch_py, tv_py)
    code = (
        "import sys; import gavil.compat.torchvision_bridge as b; "
        "print(b.needed(), any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path)); "
        "import torchvision; print('TorchvisionFirst' in torchvision.FINDERS, 'torch' in sys.modules, b.shimmed)"
    )
    r = _python(code, tmp_path, pythonpath=fake)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == [f"{acts} {acts}", "False False False"], r.stdout


def test_where_the_builds_differ_the_bridge_runs_before_torchvision(tmp_path):
    """The same fakes with a CPU torch beside a CUDA torchvision: the finder is first on
    ``sys.meta_path`` at start-up and runs the fix at the first ``import torchvision`` (which imports
    the fake torch here, and so fails: the bridge did act)."""
    fake = _fake_pair(tmp_path / "site", TORCH_CPU, TV_CU130)
    code = (
        "import sys; import gavil.compat.torchvision_bridge as b; "
        "print(b.needed(), type(sys.meta_path[0]).__name__); import torchvision"
    )
    r = _python(code, tmp_path, pythonpath=fake)
    assert r.stdout.split("\n")[0] == "True TorchvisionFirst", r.stdout + r.stderr[-2000:]
    assert "the bridge imported torch" in r.stderr


def test_ensure_torchvision_registers_nothing_where_the_operators_exist(tmp_path):
    """Where ``torchvision::nms`` already exists (torchvision's own ``_C`` loaded), the bridge
    registers no operator of its own."""
    code = (
        "import torch; lib = torch.library.Library('torchvision', 'DEF'); "
        "lib.define('nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor'); "
        "from gavil.compat.torchvision_bridge import ensure_torchvision; import gavil.compat.torchvision_bridge as b; "
        "ensure_torchvision(); print(b.shimmed)"
    )
    r = _python(code, tmp_path)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def test_calling_the_fix_directly_first_still_works(tmp_path):
    """Code that calls ``ensure_torchvision()`` itself (the stages) before importing torchvision:
    the fix removes the finder first, so the finder never re-enters it."""
    code = (
        "import sys; from gavil.compat.torchvision_bridge import ensure_torchvision; ensure_torchvision(); "
        "import open_clip; print(any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path))"
    )
    r = _python(code, tmp_path, pythonpath=ROOT)  # this checkout's gavil
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]


def test_the_build_hook_and_start_up_file_live_with_the_bridge():
    """Nothing of the bridge sits at the repository root; pyproject.toml names the hook in gavil/compat."""
    assert not [p.name for p in ROOT.iterdir() if "torchvision" in p.name or p.name in ("setup.py", "MANIFEST.in")]
    text = (ROOT / "pyproject.toml").read_text()
    assert 'path = "gavil/compat/build_hook.py"' in text
    assert "gavil/compat/" + PTH in (ROOT / "gavil" / "compat" / "build_hook.py").read_text()


def test_a_project_copy_imports_its_own_code(tmp_path):
    """The start-up file loads the bridge without importing ``gavil``: a copy of the project run from
    its own folder (a scratch project, a collaborator's second checkout, a stage process) imports its
    own ``gavil``, not the installed one; the bridge stays one module per process."""
    shutil.copytree(ROOT / "gavil", tmp_path / "gavil", ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "gavil" / "marker.py").write_text("HERE = True\n")
    code = (
        "import sys, gavil, gavil.marker, gavil.compat.torchvision_bridge as b; "
        "print(gavil.__file__); print(b is sys.modules.get('_winogavil_torchvision_bridge', b))"
    )
    r = _python(code, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    where, one = r.stdout.split("\n")[:2]
    assert where == str(tmp_path / "gavil" / "__init__.py") and one == "True", r.stdout
