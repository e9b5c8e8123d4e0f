"""The OCR engine interface (gavil/models/ocr_engine.py): the stage names no engine, the factory builds
each engine from the params, and the params' cross-field rules of ``ocr:`` are refused when they load."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pydantic
import pytest
import yaml

from gavil.errors import ParamsError
from gavil.models.ocr_engine import ENGINES, OcrEngine, engine_from_params, load_for_ocr
from gavil.params import parse_params
from gavil.params.ocr import OcrParams

ROOT = Path(__file__).resolve().parents[3]  # tests/stages/ocr_filter/ -> the project root
STAGE = ROOT / "stages" / "ocr_filter.py"
#: Modules only an engine may import: the engines' own and their libraries.
ENGINE_MODULES = ("gavil.models.easyocr_reader", "gavil.models.ppocr", "gavil.models.craft", "easyocr", "rapidocr")


def engine_names() -> set[str]:
    """Every value ``ocr.engine`` may take."""
    return set(get_args(OcrParams.model_fields["engine"].annotation))


def engine_mentions(source: str) -> list[str]:
    """Where ``source`` names an engine: a string constant equal to an engine's name, or an import
    of an engine's module (:data:`ENGINE_MODULES`, or a name imported from one of them)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and node.value in engine_names():
            found.append(f"line {node.lineno}: {node.value!r}")
        modules: list[str] = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for m in modules:
            if any(m == e or m.startswith(e + ".") for e in ENGINE_MODULES):
                found.append(f"line {node.lineno}: import {m}")
    return found


def test_the_stage_names_no_engine():
    """stages/ocr_filter.py asks the engine object for what it needs and never branches on its name."""
    assert engine_mentions(STAGE.read_text()) == []
    # the check finds what it looks for (a planted branch and engine imports)
    planted = 'from gavil.models import ppocr\nimport gavil.models.craft\nif p.engine == "easyocr": pass\n'
    assert len(engine_mentions(planted)) == 3


def test_every_engine_value_has_a_builder():
    assert set(ENGINES) == engine_names() == {"ppocr", "easyocr"}


@pytest.mark.parametrize(
    ("settings", "prefix", "suffix"),
    [
        ({"engine": "ppocr"}, "ppocr-rapidocr-", "-min736-max800"),
        ({"engine": "ppocr", "ppocr_min_side": 512}, "ppocr-rapidocr-", "-min512-max800"),
        ({"engine": "ppocr", "ppocr_max_side": None}, "ppocr-rapidocr-", "-min736"),
        ({"engine": "easyocr", "precision": "fp32", "device": "cpu"}, "easyocr-", "-en+filegrey|fp32-cpu"),
        ({"engine": "easyocr", "precision": "bf16", "device": "cpu"}, "easyocr-", "-en+filegrey|bf16-cpu"),
    ],
)
def test_the_factory_builds_each_engine_from_params(settings, prefix, suffix):
    """The label names the engine and the settings that change a reading; the reader is lazy
    (nothing is loaded until it reads); both engines decode images with :func:`load_for_ocr`."""
    engine = engine_from_params(parse_params({"ocr": settings}).ocr)
    assert isinstance(engine, OcrEngine)
    assert engine.label.startswith(prefix) and engine.label.endswith(suffix), engine.label
    assert callable(engine.read) and engine.load is load_for_ocr


def test_engine_settings_that_change_no_reading_leave_the_label():
    base = engine_from_params(OcrParams()).label
    assert engine_from_params(OcrParams(threads=1, batch_size=4, canvas_size=640)).label == base
    assert engine_from_params(OcrParams(engine="easyocr", device="cpu")).label != base


@pytest.mark.parametrize(
    ("settings", "keys", "fix"),
    [
        (
            {"engine": "ppocr", "device": "cuda"},
            ("ocr.device: cuda", "ocr.engine: ppocr"),
            "set ocr.engine: easyocr, or ocr.device: auto/cpu",
        ),
        (
            {"device": "cuda"},
            ("ocr.device: cuda", "ocr.engine: ppocr"),
            "set ocr.engine: easyocr",
        ),  # the default engine
        (
            {"engine": "easyocr", "precision": "int8", "device": "cuda"},
            ("ocr.precision: int8", "ocr.device"),
            "set ocr.device: cpu",
        ),
    ],
)
def test_cross_field_rules_are_refused_when_params_load(settings, keys, fix):
    with pytest.raises(ParamsError) as e:
        parse_params({"ocr": settings})
    msg = str(e.value)
    assert all(k in msg for k in keys) and fix in msg, msg
    assert len(msg.splitlines()) == 1 and msg.startswith("params.yaml: ocr")
    with pytest.raises(pydantic.ValidationError):  # built in code, the model refuses it too
        OcrParams(**settings)


def test_load_params_refuses_ppocr_on_cuda(tmp_path):
    from gavil.params import load_params

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["ocr"] |= {"engine": "ppocr", "device": "cuda"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(ParamsError, match=r"ocr\.device: cuda needs ocr\.engine: easyocr"):
        load_params(tmp_path / "params.yaml")
    assert parse_params({"ocr": {"engine": "easyocr", "device": "cuda"}}).ocr.device == "cuda"  # allowed


@pytest.mark.slow
def test_the_cli_prints_the_rule_in_one_line_without_a_traceback(tmp_path):
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["ocr"] |= {"engine": "ppocr", "device": "cuda"}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    gavil = Path(sys.executable).parent / "gavil"
    out = subprocess.run(
        [str(gavil), "stage", "ocr_filter"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=os.environ
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    errors = [line for line in out.stderr.splitlines() if "ocr.device: cuda" in line]
    assert len(errors) == 1 and "set ocr.engine: easyocr, or ocr.device: auto/cpu" in errors[0], out.stderr
    assert len(out.stderr.strip().splitlines()) <= 2, out.stderr  # the error and the --debug hint
