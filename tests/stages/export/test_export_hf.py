"""The export's Hugging Face folder as a user of the ecosystem meets it: ``datasets.load_dataset``
on the folder (offline) gives split ``test`` with the published ``nlphuji/winogavil`` fields and
types, and a zero-shot loop that reads exactly what DataComp's ``eval_utils/wino_eval.py`` reads
(``candidate_images``, ``cue``, ``candidates``, ``associations`` of split ``test``) runs on it.

The folder is built by the real ``export`` stage (``run_stage``) from a small hand-made
selection whose candidates are real sample photos (``data/sample/images``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from gavil.pipeline import catalog
from gavil.pipeline.runner import run_stage
from stages.select_instances import content_fingerprint
from tests.helpers import IMAGES, ROOT, run_stages

datasets = pytest.importorskip("datasets", reason="the `test` extra installs datasets (pip install -e '.[test]')")

#: concepts whose sample photo the synthetic OCR table accepts
WITH_IMAGE = ["astronaut", "brick", "camera", "cat", "clock", "coffee", "coin", "flower", "grass", "horse", "moon"]
WITH_IMAGE += ["rocket", "star", "stone"]
# (candidates, cue, associations, dataset, status): the game rows below "selected" with every image go to the folder
INSTANCES = [
    (["cat", "moon", "rocket", "coffee", "brick"], "space", ["moon", "rocket"], "game", "selected"),
    (["horse", "grass", "cat", "coin", "clock", "star"], "farm", ["horse", "grass"], "game", "selected"),
    (WITH_IMAGE[:10], "time", ["clock", "coin", "camera"], "game", "selected"),
    (WITH_IMAGE[:12], "night", ["moon", "star"], "game", "selected"),
    (["cat", "moon", "logo", "coffee", "brick"], "brand", ["logo", "cat"], "game", "selected"),  # logo: no image
    (["cat", "moon", "text", "coffee", "brick", "star"], "word", ["text", "cat"], "game", "selected"),  # rejected
    (["cat", "moon", "rocket", "coffee", "brick"], "gray", ["moon", "brick"], "game", "below_threshold"),
    (["cat", "moon", "rocket", "coffee", "brick"], "sky", ["moon", "rocket"], "swow_baseline", "selected"),
]
ROUNDS = [0, 0, 1, 1, 0, 2, 2, 0]  # each instance's collection round (0: the release)
# each round's rival as imported (instances -> selection): released rows name none (the export gives the
# paper's RN50/openai), round 1 was played against `early` with random weights, round 2 against `late`'s file
RIVALS = {0: (None, None), 1: ("early", "untrained"), 2: ("late", "file:0123456789abcdef")}


def _selection() -> pd.DataFrame:
    rows, next_id = [], {"game": 0, "swow_baseline": 0}
    for i, (cands, cue, assoc, dataset, status) in enumerate(INSTANCES):
        selected = status == "selected"
        rows.append(
            {
                "instance_uid": f"raw:{i}",
                "origin": "release" if ROUNDS[i] == 0 and dataset == "game" else "raw",
                "dataset": dataset,
                "split": "swow" if dataset == "swow_baseline" else ("game_5_6" if len(cands) <= 6 else "game_10_12"),
                "split_id": i,
                "fingerprint": content_fingerprint(dataset, cue, cands, assoc),
                "cue": cue,
                "candidates": cands,
                "associations": assoc,
                "num_associations": len(assoc),
                "num_candidates": len(cands),
                "score_fool_the_ai": None if i == 1 else 50,  # raw rows may lack a rival score
                "annotation_index": None,
                "images_source": "random",
                "cue_weight": None,
                "associations_mean_weight": None,
                "candidates_connectivity_score": None,
                "spymaster": "h_spy",
                "solvers": ["a_1", "a_2", "a_3"],
                "solver_jaccards": [1.0, 1.0, 0.5],
                "n_solvers": 3,
                "late_answers": 0,
                "solvers_jaccard_mean": 0.83 if selected else 0.5,
                "solvers_jaccard_std": 0.24,
                "solvers_agreement": 0.5,
                "status": status,
                "reason": None if selected else "below 0.8",
                "ID": next_id[dataset] if selected else None,
                "round": ROUNDS[i],
                "rival_model": RIVALS[ROUNDS[i]][0],
                "rival_weights": RIVALS[ROUNDS[i]][1],
            }
        )
        next_id[dataset] += selected
    df = pd.DataFrame(rows)
    for col in ("score_fool_the_ai", "annotation_index", "n_solvers", "ID", "round"):
        df[col] = df[col].astype("Int64")
    return df


def _ocr(project: Path) -> pd.DataFrame:
    rows = []
    for src in sorted(IMAGES.glob("*.*")):
        concept = src.stem
        if concept not in WITH_IMAGE + ["text"] or src.suffix == ".md":
            continue
        sha = hashlib.sha256(src.read_bytes()).hexdigest()
        rel = f"data/images/{sha[:2]}/{sha}{src.suffix}"
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, project / rel)
        accepted = concept != "text"
        rows.append(
            {
                "concept": concept,
                "sha256": sha,
                "path": rel,
                "source_url": str(src),
                "rank": 1,
                "candidates_read": 1,
                "status": "accepted" if accepted else "rejected_text",
                "reason": None if accepted else "#1: OCR read 'text'",
                "ocr_text": "" if accepted else "text",
                "ocr_confidence": None,
                "match_token": None if accepted else "text",
                "match_score": None if accepted else 100.0,
            }
        )
    rows.append(
        {"concept": "logo", "status": "no_image", "reason": "crawl status no_results: none", "candidates_read": 0}
    )
    df = pd.DataFrame(rows)
    for col in ("rank", "candidates_read"):
        df[col] = df[col].astype("Int64")
    return df


def _build(project: Path, copy_images: bool = True) -> dict:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["export"]["copy_images"] = copy_images
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    catalog.write_table(_selection(), "selection", project)
    catalog.write_table(_ocr(project), "ocr", project)
    return run_stage("export", project / "params.yaml")


@pytest.fixture
def built(in_tmp: Path) -> tuple[Path, dict]:
    return in_tmp, _build(in_tmp)


def _front_matter(card: str) -> dict:
    m = re.match(r"---\n(.*?)\n---\n", card, re.S)
    assert m, "the card starts with YAML front matter"
    return yaml.safe_load(m.group(1))


def _expected_features():
    from datasets import Features, List, Value
    from datasets import Image as HFImage

    return Features(
        {
            "candidates": List(Value("string")),
            "cue": Value("string"),
            "associations": List(Value("string")),
            "score_fool_the_ai": Value("int64"),
            "num_associations": Value("int64"),
            "num_candidates": Value("int64"),
            "solvers_jaccard_mean": Value("float64"),
            "solvers_jaccard_std": Value("float64"),
            "ID": Value("int64"),
            "round": Value("int64"),
            "rival_model": Value("string"),
            "rival_weights": Value("string"),
            "candidate_images": List(HFImage()),
        }
    )


def test_load_dataset_on_the_folder_gives_split_test_with_the_published_fields(built, tmp_path):
    project, metrics = built
    folder = project / "data/export/dataset"
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "croissant.json", "rounds", "test.parquet"]
    loaded = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"))
    assert list(loaded) == ["test"]
    ds = loaded["test"]
    assert ds.features == _expected_features()
    assert ds["ID"] == [0, 1, 2, 3] and ds["cue"] == ["space", "farm", "time", "night"]
    assert ds["score_fool_the_ai"] == [50, None, 50, 50]
    assert ds["num_candidates"] == [5, 6, 10, 12] and ds["solvers_jaccard_mean"] == [0.83] * 4
    assert metrics["instances"] == 6 and metrics["dataset_instances"] == 4 and metrics["dataset_left_out"] == 2
    assert metrics["dataset_images"] == 13

    card = (folder / "README.md").read_text()
    meta = _front_matter(card)
    assert meta["license"] == "cc-by-4.0"
    assert meta["configs"][0] == {"config_name": "default", "data_files": [{"split": "test", "path": "test.parquet"}]}
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert info["default"]["features"] == _expected_features()._to_yaml_list()  # what datasets itself writes
    assert [(s["name"], s["num_examples"]) for s in info["default"]["splits"]] == [("test", 4)]
    assert "Left out: 2 instances" in card and "4 of the 6 instances" in card
    assert ds["round"] == [0, 0, 1, 1]
    assert meta["version"] == metrics["version"] == "1.2.0" and "**Version 1.2.0**" in card  # 1.<highest round>.0
    assert metrics["changelog"] == [
        {"round": 0, "published": 3, "retired": 0},
        {"round": 1, "published": 2, "retired": 0},
        {"round": 2, "published": 1, "retired": 0},  # its below-threshold instance is not published
    ]
    # every row names the rival it was collected against: the release the paper's, a game round its own
    assert ds["rival_model"] == ["RN50", "RN50", "early", "early"]
    assert ds["rival_weights"] == ["openai", "openai", "untrained", "untrained"]
    assert "| 0 (the release) | RN50 (CLIP RN50, OpenAI weights: the paper's rival) | openai | 3 |" in card
    assert "| 1 | early | untrained | 2 |" in card and "| 2 | late | file:0123456789abcdef | 1 |" in card
    bench = pd.read_parquet(project / "data/export/benchmark.parquet")
    assert list(bench["round"]) == [0, 0, 1, 1, 0, 2]
    assert list(bench["rival_model"]) == ["RN50", "RN50", "early", "early", "RN50", "late"]
    assert list(bench["rival_weights"])[-1] == "file:0123456789abcdef"
    header = (project / "data/export/benchmark.csv").read_text().splitlines()[0]
    assert not {"round", "rival_model", "rival_weights"} & set(header.split(","))  # the release's columns
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", card), "no dates in a DVC-hashed output"


class WinoGAViLSplit:
    """What DataComp's ``WinoDataset.__getitem__`` returns, written anew: (transformed
    candidate images, transformed cue, which candidates are associations)."""

    def __init__(self, hf_dataset, transform, text_transform):
        self._dataset, self.transform, self.text_transform = hf_dataset, transform, text_transform

    def __len__(self) -> int:
        return len(self._dataset)

    def __getitem__(self, index: int):
        example = self._dataset[index]
        return (
            self.transform(example["candidate_images"]),
            self.text_transform(example["cue"]),
            np.isin(example["candidates"], example["associations"]),
        )


def test_each_round_is_a_config_and_default_is_every_round(built, tmp_path):
    """``load_dataset(folder, "round_<r>")`` gives round r's rows alone, with the same features;
    the default config every round; the card declares one config per round and nothing else."""
    project, metrics = built
    folder = project / "data/export/dataset"
    meta = _front_matter((folder / "README.md").read_text())
    names = [c["config_name"] for c in meta["configs"]]
    assert names == ["default", "round_0", "round_1"]  # round 2's only dataset instance has a rejected image
    assert [i["config_name"] for i in meta["dataset_info"]] == names
    assert metrics["dataset_configs"] == {"default": 4, "round_0": 2, "round_1": 2}
    assert datasets.get_dataset_config_names(str(folder)) == names
    whole = datasets.load_dataset(str(folder), split="test", cache_dir=str(tmp_path / "c"))
    by_round: dict[int, list[int]] = {}
    for i, r in zip(whole["ID"], whole["round"]):
        by_round.setdefault(r, []).append(i)
    for r, ids in by_round.items():
        part = datasets.load_dataset(str(folder), f"round_{r}", split="test", cache_dir=str(tmp_path / "c"))
        assert part.features == _expected_features()
        assert part["ID"] == ids and set(part["round"]) == {r}
        assert [len(x) for x in part["candidate_images"]] == part["num_candidates"]  # images decode
    assert sorted(p.name for p in (folder / "rounds").iterdir()) == ["round_0.parquet", "round_1.parquet"]
    # a rebuild with fewer rounds leaves no stale round file behind
    sel = _selection().assign(round=pd.array([0] * len(INSTANCES), dtype="Int64"))
    catalog.write_table(sel, "selection", project)
    metrics = run_stage("export", project / "params.yaml")
    assert metrics["dataset_configs"] == {"default": 4, "round_0": 4}
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "croissant.json", "test.parquet"]
    meta = _front_matter((folder / "README.md").read_text())
    assert meta["configs"][1] == {"config_name": "round_0", "data_files": [{"split": "test", "path": "test.parquet"}]}
    part = datasets.load_dataset(str(folder), "round_0", split="test", cache_dir=str(tmp_path / "c2"))
    assert part["ID"] == [0, 1, 2, 3]


def test_a_datacomp_style_zero_shot_loop_runs_on_the_folder(built, tmp_path):
    """DataComp's evaluator: load split ``test``, for each instance stack one preprocessed image
    per candidate, score them against the cue, take the top-K, Jaccard with the associations."""
    import torch
    from sklearn.metrics import jaccard_score

    project, _ = built
    ds = datasets.load_dataset(str(project / "data/export/dataset"), split="test", cache_dir=str(tmp_path / "c"))
    originals = {p.stem: Image.open(p).size for p in IMAGES.glob("*.*") if p.suffix != ".md"}
    seen: list[tuple[int, list[tuple[int, int]]]] = []

    def transform(imgs):
        sizes = [im.size for im in imgs]
        seen.append((len(imgs), sizes))
        return torch.stack(
            [torch.from_numpy(np.asarray(im.convert("RGB").resize((32, 32)), dtype=np.float32)) for im in imgs]
        )

    def text_transform(cue: str) -> torch.Tensor:  # a stand-in "text encoder": a fixed vector per cue
        g = torch.Generator().manual_seed(sum(map(ord, cue)))
        return torch.rand(1, 3, generator=g)

    loader = torch.utils.data.DataLoader(
        WinoGAViLSplit(ds, transform, text_transform), batch_size=1, shuffle=False, collate_fn=lambda b: b[0]
    )
    scores, groups = [], []
    for images, text, y_true in loader:
        n_images, n_assoc = len(images), int(y_true.sum())
        image_features = images.mean(dim=(1, 2))  # a stand-in "image encoder": mean colour, (N, 3)
        logits = (text @ image_features.T).squeeze(0).numpy()
        topk = np.argsort(logits)[-n_assoc:]
        y_pred = np.isin(np.arange(n_images), topk)
        scores.append(jaccard_score(y_true, y_pred))
        groups.append(n_images)
    assert groups == [5, 6, 10, 12] and all(0 <= s <= 1 for s in scores)
    for (count, sizes), cands in zip(seen, ds["candidates"]):
        assert count == len(cands) and sizes == [originals[c] for c in cands]  # each candidate's own photo


def test_images_are_the_files_bytes_once_per_row_group_and_rebuilds_are_identical(built):
    import pyarrow.parquet as pq

    project, _ = built
    folder = project / "data/export/dataset"
    table = pq.read_table(folder / "test.parquet")
    first = table.column("candidate_images")[0].as_py()
    assert [c["path"] for c in first] == ["cat.png", "moon.png", "rocket.jpg", "coffee.png", "brick.png"]
    assert first[0]["bytes"] == (IMAGES / "cat.png").read_bytes()
    raw = sum(len(c["bytes"]) for row in table.column("candidate_images").to_pylist() for c in row)
    assert (folder / "test.parquet").stat().st_size < raw / 2  # dictionary-encoded: each image stored once
    before = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    _build(project)
    assert {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    q = catalog.read_table("benchmark_dataset", project)  # the catalog view of the same table
    assert len(q) == 4 and len(q["candidate_images"][3]) == 12


@pytest.mark.slow
def test_without_copy_images_the_cells_name_the_project_files(in_tmp, tmp_path_factory, monkeypatch):
    metrics = _build(in_tmp, copy_images=False)
    assert metrics["dataset_instances"] == 4
    monkeypatch.chdir(in_tmp)  # the paths are relative to the project root
    ds = datasets.load_dataset("data/export/dataset", split="test", cache_dir=str(tmp_path_factory.mktemp("c")))
    first = ds[0]["candidate_images"]
    assert [im.size for im in first] == [Image.open(next(IMAGES.glob(f"{c}.*"))).size for c in ds[0]["candidates"]]
    card = (in_tmp / "data/export/dataset/README.md").read_text()
    assert "not embedded" in card


@pytest.mark.slow
def test_no_instance_with_every_image_gives_an_empty_counted_folder(in_tmp):
    sel = _selection()
    sel["candidates"] = [[*c[:-1], "logo"] for c in sel["candidates"]]  # logo has no image
    sel["associations"] = [[c[0], c[1]] for c in sel["candidates"]]
    sel["num_associations"] = 2
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    (in_tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    catalog.write_table(sel, "selection")
    catalog.write_table(_ocr(in_tmp), "ocr")
    metrics = run_stage("export", "params.yaml")
    assert metrics["dataset_instances"] == 0 and metrics["dataset_left_out"] == 6
    folder = in_tmp / "data/export/dataset"
    assert len(pd.read_parquet(folder / "test.parquet")) == 0
    meta = _front_matter((folder / "README.md").read_text())
    assert [c["config_name"] for c in meta["configs"]] == ["default"]  # no round has a row
    assert meta["dataset_info"][0]["splits"][0]["num_examples"] == 0
    assert json.loads((in_tmp / "data/metrics/export.json").read_text())["instances"] == 6


@pytest.mark.slow
@pytest.mark.parametrize("empty", ["no rows", "none selected"])
def test_an_empty_benchmark_exports_empty_counted_files(in_tmp, empty):
    """A new project whose benchmark is still empty (no release files, no game data yet): the
    export writes empty, valid files and says 0, it does not crash."""
    sel = _selection()
    sel = sel.iloc[0:0] if empty == "no rows" else sel.assign(status="below_threshold", reason="below 0.8", ID=None)
    sel["ID"] = sel["ID"].astype("Int64")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    (in_tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    catalog.write_table(sel, "selection")
    catalog.write_table(_ocr(in_tmp), "ocr")
    metrics = run_stage("export", "params.yaml")
    assert metrics["instances"] == 0 and metrics["dataset_instances"] == 0
    assert len(pd.read_parquet(in_tmp / "data/export/dataset/test.parquet")) == 0


# --- The README's lines, verbatim, on a project built from the sample by the real stages ---------------


TOUR = ROOT / "docs/tour.md"


def _readme_block(lang: str, marker: str, page: Path = ROOT / "README.md") -> str:
    blocks = re.findall(rf"```{lang}\n(.*?)```", page.read_text(), re.S)
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, f"one {page.name} {lang} block with {marker!r}"
    return found[0]


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the install's hook, no path tricks
    return env | {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}


@pytest.mark.slow
def test_the_export_reproduces_the_release_files_byte_for_byte(export_build):
    """benchmark.csv and the three split files, built by the real stages from the sample release."""
    pairs = [
        ("benchmark.csv", "winogavil_dataset.csv"),
        *((f, f) for f in ("game_5_6.csv", "game_10_12.csv", "swow.csv")),
    ]
    for ours, theirs in pairs:
        built = (export_build / "data/export" / ours).read_bytes()
        assert built == (export_build / "data/sample/winogavil" / theirs).read_bytes(), ours
    # the release (round 0) names its rival, the paper's CLIP RN50 with OpenAI's weights, in the Parquet
    # table and the dataset folder (the CSV above keeps the release's columns and bytes)
    for table in ("benchmark.parquet", "dataset/test.parquet"):
        rivals = pd.read_parquet(
            export_build / "data/export" / table, columns=["round", "rival_model", "rival_weights"]
        )
        assert len(rivals) and set(map(tuple, rivals.values.tolist())) == {(0, "RN50", "openai")}, table
    card = (export_build / "data/export/dataset/README.md").read_text()
    assert "| 0 (the release) | RN50 (CLIP RN50, OpenAI weights: the paper's rival) | openai |" in card


@pytest.mark.slow
def test_the_readme_scoring_loop_picks_what_the_project_scorer_picks(export_build, tmp_path):
    """The README's Python block, verbatim, in a fresh interpreter in the project folder, scores the 8
    release instances whose candidates all have a sample image; on every one it picks the same top-K as
    the project's scorer (``gavil.models.embeddings.score_instances``, what ``evaluate`` and
    ``score_candidates`` run) with the same random RN50 weights (both seed 0, as DataComp's
    ``create_model`` does): eval mode, the "A/An cue" prompt, normalised features, DataComp's top-K."""
    metrics = json.loads((export_build / "data/metrics/export.json").read_text())
    assert metrics == {"hf_instances": 8, "instances": 3563, "version": "1.0.0"}
    ds = datasets.load_dataset(str(export_build / "data/export/dataset"), split="test", cache_dir=str(tmp_path))
    assert ds["ID"] == [1331, 1332, 1333, 2643, 2644, 2645, 2646, 2647]
    code = _readme_block("python", 'load_dataset("data/export/dataset", split="test")')
    code += "\nimport json as _json\nprint(_json.dumps({str(k): v for k, v in picks.items()}))\n"
    r = subprocess.run(
        [sys.executable, "-c", code], cwd=export_build, env=_clean_env(tmp_path), capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summary, picked = r.stdout.strip().splitlines()[-2:]
    assert re.fullmatch(r"8 instances, mean Jaccard (0|1)\.\d\d", summary), r.stdout
    readme_picks = {int(k): v for k, v in json.loads(picked).items()}

    from gavil.models.embeddings import Cache, score_instances
    from gavil.models.loading import ModelSpec, RuntimeOptions, load_model
    from schemas.ocr import accepted_images

    before = Path.cwd()
    os.chdir(export_build)
    try:
        images = accepted_images(pd.read_parquet("data/ocr/ocr.parquet"))
    finally:
        os.chdir(before)
    images = {c: (sha, str(export_build / path)) for c, (sha, path) in images.items()}
    instances = pd.DataFrame(
        {"instance_id": [str(i) for i in ds["ID"]], "cue": ds["cue"], "candidates": ds["candidates"]}
        | {"associations": ds["associations"]}
    )
    model = load_model(ModelSpec("rn50", "open_clip", "RN50", None), RuntimeOptions(threads=2))
    scored = score_instances(instances, model, images, Cache([], None))
    assert (scored["status"] == "untrained").all(), scored[["status", "reason"]]
    project_picks = {int(i): sorted(p) for i, p in zip(scored["instance_id"], scored["predictions"])}
    assert {i: sorted(p) for i, p in readme_picks.items()} == project_picks


@pytest.mark.slow
def test_the_readme_example_batch_is_selected_as_the_readme_says(export_build, tmp_path):
    """The tour's worked batch (docs/tour.md): copy it (its ``cp`` line, verbatim), run the stages
    ``dvc repro`` re-runs for it, then the page's query: all three instances selected with IDs
    3563-3565, and the numbers the page quotes (3,566 instances, 11 in the Hugging Face dataset)."""
    project = shutil.copytree(export_build, tmp_path / "proj")
    cp_line, query_line = _readme_block("bash", "raw_example/batch-0001", TOUR).strip().split("\n")
    assert cp_line.endswith(" && dvc repro")
    subprocess.run(["bash", "-c", cp_line.removesuffix(" && dvc repro")], cwd=project, check=True)
    metrics = run_stages(project, ["import_annotations", "select_instances", "export"])
    assert metrics["instances"] == 3566 and metrics["dataset_instances"] == 11
    env = {"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}  # this venv's `gavil` command
    out = subprocess.run(["bash", "-c", query_line], cwd=project, env=os.environ | env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line.split() for line in out.stdout.strip().split("\n")]
    assert rows == [["cue", "status", "ID"], ["space", "selected", "3563"], ["meow", "selected", "3564"]] + [
        ["wall", "selected", "3565"]
    ]
    tour = " ".join(TOUR.read_text().split())
    assert "IDs 3563-3565" in tour and "3,566 instances and the Hugging Face dataset 11" in tour
