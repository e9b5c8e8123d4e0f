"""``gavil params set KEY=VALUE``: checked edits of params.yaml that touch only the value they set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from gavil.errors import ParamsError
from gavil.params import load_params
from gavil.params.edit import set_params
from tests.helpers import ROOT


def _leaves(d: dict, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += _leaves(v, (*prefix, k))
        else:
            out.append(((*prefix, k), v))
    return out


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copy(ROOT / "dvc.yaml", tmp_path / "dvc.yaml")
    return tmp_path


def test_setting_every_key_to_its_own_value_changes_only_that_value(project):
    """A sweep over every leaf of params.yaml (block keys, one-line lists and mappings): the edit is the
    value's text alone, so writing a key's own value back keeps the file's meaning and every line that
    does not hold that value (comments, quotes, layout)."""
    import difflib

    text = (project / "params.yaml").read_text()
    data = yaml.safe_load(text)
    settable = 0
    for key, value in _leaves(data):
        before = (project / "params.yaml").read_text().splitlines()
        dump = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()
        pair = ".".join(map(str, key)) + "=" + dump
        try:
            set_params(project / "params.yaml", [pair])
        except ParamsError as e:  # inside an inline {...} mapping: refused, never mangled
            assert "set the parent whole" in str(e), (key, e)
            continue
        settable += 1
        after = (project / "params.yaml").read_text().splitlines()
        changed = [op for op in difflib.SequenceMatcher(a=before, b=after).get_opcodes() if op[0] != "equal"]
        assert len(changed) <= 1, (key, changed)  # one contiguous run of lines: the value's own
        assert yaml.safe_load((project / "params.yaml").read_text()) == data, key
        assert load_params(project / "params.yaml") == load_params(ROOT / "params.yaml"), key
    assert settable >= 100


def test_block_style_lists_and_mappings_are_set_too(project):
    """A params.yaml written in block style (as yaml.safe_dump writes it): lists and mappings spanning
    lines are replaced by the new value; everything else stays."""
    data = yaml.safe_load((project / "params.yaml").read_text())
    (project / "params.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    set_params(
        project / "params.yaml",
        [
            "evaluate.models=[clip-rn50, text-minilm-l6]",
            "models.clip-rn50={kind: open_clip, model: RN50, pretrained: openai}",
        ],
    )
    p = load_params(project / "params.yaml")
    assert p.evaluate.models == ["clip-rn50", "text-minilm-l6"] and p.models["clip-rn50"].model == "RN50"
    data["evaluate"]["models"] = ["clip-rn50", "text-minilm-l6"]
    data["models"]["clip-rn50"] = {"kind": "open_clip", "model": "RN50", "pretrained": "openai"}
    assert yaml.safe_load((project / "params.yaml").read_text()) == data


def test_a_set_changes_that_value_only_and_keeps_its_comment(project):
    before = (project / "params.yaml").read_text().splitlines()
    out = set_params(project / "params.yaml", ["select.min_solver_jaccard=0.9", "evaluate.models=[text-minilm-l6]"])
    after = (project / "params.yaml").read_text().splitlines()
    changed = [(a, b) for a, b in zip(before, after) if a != b]
    assert len(before) == len(after) and len(changed) == 2, changed
    assert all("#" in b and b.split("#", 1)[1] == a.split("#", 1)[1] for a, b in changed)
    p = load_params(project / "params.yaml")
    assert p.select.min_solver_jaccard == 0.9 and p.evaluate.models == ["text-minilm-l6"]
    assert out[:2] == [
        "select.min_solver_jaccard: 0.8 -> 0.9",
        "evaluate.models: ['clip-rn50', 'clip-vit-b-32', 'text-minilm-l6'] -> ['text-minilm-l6']",
    ]


def test_a_bad_value_writes_nothing_and_names_the_key(project):
    before = (project / "params.yaml").read_bytes()
    for pair in ["select.min_solver_jaccard=2", "crawl.top_n=many", "ocr.no_such_key=1", "nosection.x=1"]:
        with pytest.raises(ParamsError) as e:
            set_params(project / "params.yaml", ["crawl.top_n=1", pair])
        assert pair.split("=")[0].split(".")[0] in str(e.value)
        assert (project / "params.yaml").read_bytes() == before


def test_changing_an_input_path_or_adding_a_model_rewrites_dvc_yaml(project):
    from gavil.pipeline.dvc import refresh_dvc_yaml

    set_params(project / "params.yaml", ["ingest.path=my/swow.tsv", "annotations.release_dir="])
    assert refresh_dvc_yaml(project / "dvc.yaml", project / "params.yaml")
    assert not refresh_dvc_yaml(project / "dvc.yaml", project / "params.yaml")  # current now
    dvc = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert "my/swow.tsv" in dvc["ingest_concepts"]["deps"]
    assert "data/sample/winogavil" not in dvc["import_annotations"]["deps"]  # switched off: no empty path
    assert not [d for s in dvc.values() for d in s["deps"] if d in ("", ".")]
    set_params(
        project / "params.yaml",
        ["models.my-text={kind: text, model: all-MiniLM-L6-v2}", "evaluate.models=[text-minilm-l6, my-text]"],
    )
    assert refresh_dvc_yaml(project / "dvc.yaml", project / "params.yaml")
    dvc = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    assert "models.my-text.model" in dvc["evaluate"]["params"]


@pytest.mark.slow
def test_a_stage_refuses_while_dvc_yaml_lists_other_inputs_than_params_yaml(project):
    """A hand edit of an input path without regenerating dvc.yaml: the stage stops with the fix before
    DVC could record outputs against inputs it did not track; after `gavil dvc-yaml --write` it runs."""
    from gavil.pipeline.dvc import check_stage_params, write_dvc_yaml

    for stage in ("ingest_concepts", "crawl_images", "import_annotations", "evaluate"):
        check_stage_params(stage, load_params(project / "params.yaml"), project / "dvc.yaml")
    text = (project / "params.yaml").read_text()
    cases = [
        (
            "ingest_concepts",
            "path: data/sample/winogavil/swow.csv",
            "path: my/swow.tsv",
            "lists 'data/sample/winogavil/swow.csv' .* where params.yaml names 'my/swow.tsv'",
        ),
        (
            "import_annotations",
            "release_dir: data/sample/winogavil",
            "release_dir: ''",
            "lists 'data/sample/winogavil' .* no longer names",
        ),
    ]
    for stage, old, new, says in cases:
        (project / "params.yaml").write_text(text.replace(old, new, 1))
        with pytest.raises(ParamsError, match=f"{says}.*gavil dvc-yaml --write"):
            check_stage_params(stage, load_params(project / "params.yaml"), project / "dvc.yaml")
        write_dvc_yaml(project / "dvc.yaml", project / "params.yaml")
        check_stage_params(stage, load_params(project / "params.yaml"), project / "dvc.yaml")
        (project / "params.yaml").write_text(text)
        write_dvc_yaml(project / "dvc.yaml", project / "params.yaml")
