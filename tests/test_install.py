"""The install makes ``import open_clip`` / ``import easyocr`` work from any code in the venv.

The registry's torchvision 0.28.0 is a CUDA wheel whose compiled ops do not load with the CPU torch,
so a plain ``import torchvision`` dies with ``operator torchvision::nms does not exist``. The
install (``setup.py``) puts ``winogavil_torchvision.pth`` into site-packages; it imports
``_winogavil_torchvision_hook``, which runs ``ensure_torchvision()`` just before torchvision's first
import. These tests start fresh interpreters with a clean environment (no ``PYTHONPATH``), from a
folder outside the project, as a user's own script would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.helpers import ROOT

PTH = "winogavil_torchvision.pth"
REINSTALL = "the venv's install predates the start-up hook: run `pip install -c constraints.txt -e .` again"


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONNOUSERSITE")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_install_put_the_pth_hook_into_site_packages():
    installed = Path(sysconfig.get_paths()["purelib"]) / PTH
    assert installed.exists(), REINSTALL
    assert installed.read_text() == (ROOT / PTH).read_text()


def test_open_clip_and_easyocr_import_in_a_clean_interpreter(tmp_path):
    r = _python("import open_clip, easyocr, torchvision.transforms; print('ok')", tmp_path)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:] + "\n" + REINSTALL


def test_the_hook_costs_nothing_until_torchvision_is_imported(tmp_path):
    """At start-up only the tiny hook module is imported: no torch, no gavil (so ``sys.path``, as
    the user's program sets it, decides which checkout's ``gavil`` the fix comes from)."""
    code = (
        "import sys; mods = set(sys.modules); "
        "print('_winogavil_torchvision_hook' in mods, 'torch' in mods, 'gavil' in mods); "
        "import torchvision; print('_winogavil_torchvision_hook' in sys.modules, "
        "any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path))"
    )
    r = _python(code, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[:2] == ["True False False", "True False"], r.stdout  # one shot: removed after use


def test_calling_the_fix_directly_first_still_works(tmp_path):
    """Code that calls ``ensure_torchvision()`` itself (the stages, older scripts) before importing
    torchvision: the fix removes the hook first, so the hook never re-enters it (it deadlocked)."""
    code = (
        "import sys; from gavil.models.torchvision_compat import ensure_torchvision; ensure_torchvision(); "
        "import open_clip; print(any(type(f).__name__ == 'TorchvisionFirst' for f in sys.meta_path))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "PYTHONPATH": str(ROOT)
    }  # this checkout's gavil
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stderr[-2000:]
