"""The export's Croissant metadata (``data/export/dataset/croissant.json``) as a Croissant user meets it:
``mlcroissant`` validates it (no error; its warnings are listed) and reads, per record set (one per
Hugging Face config: ``default`` and ``round_<r>``), exactly the exported rows of that config's Parquet
file, images included; its Responsible-AI fields are the card's statements, and it says "not recorded"
where the project records nothing.

Built by the real ``export`` stage from the hand-made selection of ``tests/stages/export/test_export_hf.py`` (real
sample photos, three collection rounds with their rivals).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from stages.export import CONSENT_STATEMENT, CROISSANT_FILE
from tests.stages.export.test_export_hf import _build

mlc = pytest.importorskip("mlcroissant", reason="the `test` extra installs mlcroissant (pip install -e '.[test]')")

pytestmark = pytest.mark.slow  # every test here runs the export stage on a project


@pytest.fixture
def built(in_tmp: Path) -> Path:
    _build(in_tmp)
    return in_tmp / "data/export/dataset"


def _plain(value: object) -> object:
    """A record's value as the Parquet file holds it: mlcroissant gives text as bytes, images as PIL."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _image_bytes(im: Image.Image) -> tuple[str | None, tuple[int, int]]:
    return im.format, im.size


def test_mlcroissant_validates_it_and_reads_every_config_as_exported(built: Path) -> None:
    dataset = mlc.Dataset(jsonld=str(built / CROISSANT_FILE))  # raises ValidationError on any error
    issues = dataset.metadata.ctx.issues
    assert not issues.errors
    print("mlcroissant warnings:", sorted(issues.warnings) or "none")
    doc = json.loads((built / CROISSANT_FILE).read_text())
    meta = yaml_front_matter((built / "README.md").read_text())
    assert [rs["@id"] for rs in doc["recordSet"]] == [c["config_name"] for c in meta["configs"]]
    assert [rs["@id"] for rs in doc["recordSet"]] == ["default", "round_0", "round_1"]
    for rs, config in zip(doc["recordSet"], meta["configs"]):
        path = built / config["data_files"][0]["path"]
        rows = pq.read_table(path).to_pylist()
        records = list(dataset.records(record_set=rs["@id"]))
        assert len(records) == len(rows) > 0, rs["@id"]
        for rec, row in zip(records, rows):
            got = {k.removeprefix(f"{rs['@id']}/"): v for k, v in rec.items()}
            assert set(got) == set(row)
            images = got.pop("candidate_images")
            assert {k: _plain(v) for k, v in got.items()} == {k: v for k, v in row.items() if k != "candidate_images"}
            want = [Image.open(io.BytesIO(c["bytes"])) for c in row["candidate_images"]]
            assert [_image_bytes(im) for im in images] == [_image_bytes(im) for im in want]
            assert [im.tobytes() for im in images] == [im.tobytes() for im in want]  # the same pixels
        assert {r[f"{rs['@id']}/round"] for r in records} <= (
            {0, 1} if rs["@id"] == "default" else {int(rs["@id"][6:])}
        )


def yaml_front_matter(card: str) -> dict:
    import yaml

    return yaml.safe_load(card.split("---\n")[1])


def test_the_rai_fields_are_the_cards_facts_and_say_what_is_not_recorded(built: Path) -> None:
    doc = json.loads((built / CROISSANT_FILE).read_text())
    card = (built / "README.md").read_text()
    assert doc["conformsTo"] == "http://mlcommons.org/croissant/1.1" and doc["version"] == "1.2.0"
    assert f"({CROISSANT_FILE})" in card  # the card links the Croissant file
    rai = {k.removeprefix("rai:"): v for k, v in doc.items() if k.startswith("rai:")}
    for key in ("dataCollection", "dataAnnotationProtocol", "dataAnnotationPlatform", "personalSensitiveInformation"):
        assert key in rai
    for key in ("dataBiases", "dataLimitations", "machineAnnotationTools", "dataPreprocessingProtocol"):
        assert key in rai
    for prop, value in rai.items():  # the card says the same, statement for statement
        text = value if isinstance(value, str) else " ".join(value)
        assert f"(`rai:{prop}`): {text}\n" in card, prop
    assert rai["machineAnnotationTools"] == [
        "Round 0: RN50 / openai (3 instances).",
        "Round 1: early / untrained (2 instances).",
        "Round 2: late / file:0123456789abcdef (1 instance).",
    ]
    assert "Round 1 (2 published, 0 retired)" in rai["dataCollection"]
    assert CONSENT_STATEMENT in rai["dataCollection"] and "accepts the operator's consent text" in CONSENT_STATEMENT
    review = [t for t in rai["dataPreprocessingProtocol"] if t.startswith("Image review by a person:")]
    assert review and "accepted by a named reviewer" in review[0] and "review.required: true" in review[0]
    assert doc["license"][0] == "https://creativecommons.org/licenses/by/4.0/"
    assert "/tmp" not in json.dumps(doc) and str(built) not in json.dumps(doc)  # no absolute path


def test_the_same_inputs_give_the_same_bytes(built: Path) -> None:
    first = (built / CROISSANT_FILE).read_bytes()
    _build(built.parents[2])
    assert (built / CROISSANT_FILE).read_bytes() == first
    assert first.endswith(b"}\n")


def test_a_single_round_names_test_parquet_once_and_reads_the_same_rows(built: Path) -> None:
    """The release alone (every row round 0): config ``round_0`` names ``test.parquet`` itself, and
    both record sets read its rows."""
    import pandas as pd

    from gavil.pipeline import catalog
    from gavil.pipeline.runner import run_stage
    from tests.stages.export.test_export_hf import INSTANCES, _selection

    project = built.parents[2]
    catalog.write_table(_selection().assign(round=pd.array([0] * len(INSTANCES), dtype="Int64")), "selection", project)
    run_stage("export", project / "params.yaml")
    doc = json.loads((built / CROISSANT_FILE).read_text())
    assert [d["contentUrl"] for d in doc["distribution"]] == ["test.parquet", "test.parquet"]
    dataset = mlc.Dataset(jsonld=str(built / CROISSANT_FILE))
    for rs in ("default", "round_0"):
        assert [r[f"{rs}/ID"] for r in dataset.records(record_set=rs)] == [0, 1, 2, 3]


def test_each_files_sha256_is_read_in_blocks_never_whole(built: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With images embedded a Parquet file holds every instance's candidate images (24.6 GB at 12,000
    concepts): hashing it must not load it whole. Built again with whole-file reads of the dataset's
    Parquet files refused, the document's sha256s are still each file's own."""
    import hashlib

    from gavil.pipeline.runner import run_stage

    whole = Path.read_bytes

    def refuse_parquet(self: Path) -> bytes:
        if self.suffix == ".parquet" and "dataset" in self.parts:
            raise AssertionError(f"read whole: {self}")
        return whole(self)

    monkeypatch.setattr(Path, "read_bytes", refuse_parquet)
    run_stage("export", built.parents[2] / "params.yaml")
    monkeypatch.undo()
    doc = json.loads((built / CROISSANT_FILE).read_text())
    hashes = {d["contentUrl"]: d["sha256"] for d in doc["distribution"] if "sha256" in d}
    assert hashes and all(hashlib.sha256((built / p).read_bytes()).hexdigest() == h for p, h in hashes.items())
