"""What every benchmark script shares: the machine line and the results file."""

from __future__ import annotations

import json
import os
import platform
import random
import re
import shutil
import sys
from pathlib import Path
from typing import Any

from gavil.pipeline.codedeps import PACKAGES

ROOT = Path(__file__).resolve().parents[1]


def letters(n: int) -> str:
    """``n`` spelled in letters (0 -> a, ..., 9 -> j): synthetic cues are words, which have no digits
    (:mod:`gavil.domain.names`)."""
    return str(n).translate(str.maketrans("0123456789", "abcdefghij"))


def machine(extra: str = "") -> str:
    """e.g. ``x86_64, 2 cores, Python 3.11.7`` (plus ``extra``)."""
    line = f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    return f"{line}, {extra}" if extra else line


def gpu_name() -> str:
    """e.g. ``NVIDIA H100 80GB HBM3, torch 2.11.0+cu130, CUDA 13.0`` where torch sees a GPU, else ``""``."""
    import torch

    if not torch.cuda.is_available():
        return ""
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``benchmarks/results/<name>.json`` (2-space indent, trailing newline)."""
    dest = ROOT / "benchmarks" / "results" / f"{name}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(json.dumps(result, indent=2) + "\n")
    return dest


def copy_project(dest: Path, with_params: bool = True) -> Path:
    """Copy the code (gavil, stages, schemas, flows), the embedded sample, the game's folder (a
    ``dvc.yaml`` input, empty but for its README), the review decisions file (an input of
    ``ocr_filter`` in dvc.yaml) and dvc.yaml (and params.yaml) into ``dest``, a scratch project the
    benchmark may write ``data/`` into."""
    for name in (*PACKAGES, "data/sample", "data/game", "data/review"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("dvc.yaml", "params.yaml") if with_params else ("dvc.yaml",):
        shutil.copy(ROOT / name, dest / name)
    return dest


def tool_env(**extra: str) -> dict[str, str]:
    """The environment for child processes: this venv's bin first on PATH (``gavil``, ``dvc``),
    DVC analytics off, plus ``extra``."""
    return {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DVC_NO_ANALYTICS": "1",
        **extra,
    }


def _noto_section() -> str:
    """ATTRIBUTION.md from its Noto Color Emoji section on (its table lists the emoji files)."""
    text = (ROOT / "data/sample/images/ATTRIBUTION.md").read_text()
    return text[text.index("Noto Color Emoji") :]


def sample_photos() -> list[Path]:
    """The embedded sample's photos (``data/sample/images``, .jpg/.png), sorted by name; the 136x128
    Noto emoji bitmaps there (they complete released candidate sets for the sample's HF export) are
    no photos and are left out, so benchmarks keep measuring web-sized photos."""
    emoji = set(re.findall(r"^\| `?([\w-]+\.png)`? \|", _noto_section(), re.M))
    return sorted(
        p
        for p in (ROOT / "data/sample/images").iterdir()
        if p.suffix.lower() in (".jpg", ".png") and p.name not in emoji
    )


def random_view(src: Path, rng: random.Random, min_fraction: float, long_sides: tuple[int, ...]) -> Any:
    """A random view of photo ``src`` as a PIL RGB image: a crop keeping ``min_fraction``-1 of each
    side, mirrored half the time, resized (bicubic) so its long side is one of ``long_sides`` px."""
    from PIL import Image, ImageOps

    im = Image.open(src).convert("RGB")
    w, h = im.size
    cw, ch = int(w * rng.uniform(min_fraction, 1.0)), int(h * rng.uniform(min_fraction, 1.0))
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    im = im.crop((x, y, x + cw, y + ch))
    if rng.random() < 0.5:
        im = ImageOps.mirror(im)
    scale = rng.choice(long_sides) / max(im.size)
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    return im.resize(size, Image.Resampling.BICUBIC)
