"""Stage 9, ``export``: the benchmark in the released WinoGAViL layouts, a dataset folder, a card.

Writes, from the ``selected`` instances:

- ``benchmark.csv`` / ``benchmark.parquet``: the game benchmark with exactly the columns of
  ``winogavil_dataset.csv`` in its order (:data:`schemas.export.BENCHMARK_COLUMNS`; the Parquet
  table adds each instance's collection ``round``), JSON list
  cells, Python float repr (``1.0``, ``0.87``), LF, permanent ``ID``s (the ID ledger). Importing the release and
  exporting at 0.8 reproduces ``winogavil_dataset.csv`` byte for byte (tested).
- ``game_5_6.csv``, ``game_10_12.csv``, ``swow.csv``: the release's split layouts (with
  ``annotation_index`` and ``images_source``; SWOW weights), CRLF, whole numbers without ``.0``
  as the release writes them, each row's split ID; cell for cell equal to the release files.
- ``dataset/test.parquet`` + ``dataset/README.md``: a Hugging Face dataset folder that
  ``datasets.load_dataset("data/export/dataset")`` loads offline as split ``test`` (config
  ``default``: every round; config ``round_<r>``: round r's instances alone, :func:`round_configs`), with the
  fields and types of the published ``nlphuji/winogavil`` (:data:`schemas.export.HF_FEATURES`):
  the benchmark's columns (with ``round``) plus ``candidate_images``, one ``Image`` per candidate (the image
  file's bytes embedded in the Parquet file). Instances with a candidate that has no accepted
  image are left out of the folder and counted in its card. The card (YAML front matter:
  license, configs, features, splits; then counts, threshold, rival model, licenses,
  attribution) holds no date, so its bytes are the same on every machine.

The dataset version ``1.<round>.<patch>`` (:func:`gavil.domain.versions.dataset_version`: the highest collection round in
the benchmark, ``export.patch``) and a changelog (published and retired game instances per round,
:func:`changelog`) go to the card and the metrics (``version`` in ``data/metrics/export.json``).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from gavil.domain.versions import dataset_version
from gavil.domain.vocabulary import RELEASE_GAME_COLUMNS, RELEASE_SWOW_COLUMNS
from gavil.io import atomic_path, csv_text, csv_writer, sha256_file, validate
from gavil.pipeline import catalog
from schemas.export import (
    BENCHMARK_COLUMNS,
    BENCHMARK_TABLE_COLUMNS,
    HF_FEATURES,
    RELEASE_RIVAL,
    BenchmarkDataset,
    instance_rivals,
)
from schemas.ocr import accepted_images

if TYPE_CHECKING:
    from gavil.params import Params


class RoundChange(TypedDict):
    """One collection round's line of the changelog (``round`` None: not known)."""

    round: int | None
    published: int
    retired: int


class DatasetConfig(TypedDict):
    """One Hugging Face config of the dataset folder: its name, its ``test`` split's file (relative
    to the folder), the split's size in Arrow memory (``num_bytes``) and rows."""

    name: str
    path: str
    num_bytes: int
    num_examples: int


class Metrics(TypedDict):
    """``data/metrics/export.json``."""

    instances: int
    by_num_candidates: dict[int, int]
    split_files: dict[str, int]  # split -> rows
    candidates_with_image: int
    candidates_total: int
    dataset_instances: int  # rows of dataset/test.parquet (every candidate has an image)
    dataset_left_out: int  # benchmark instances left out of it (a candidate without an image)
    dataset_images: int  # distinct images in it
    dataset_configs: dict[str, int]  # Hugging Face config (default, round_<r>) -> rows of its test split
    round: int  # the highest collection round in the benchmark (0: the release only)
    version: str  # the dataset version, 1.<round>.<patch> (dataset_version)
    changelog: list[RoundChange]  # per round: instances published (selected) and retired


#: Release split file -> its catalog name.
SPLIT_FILES = {"game_5_6": "split_game_5_6", "game_10_12": "split_game_10_12", "swow": "split_swow"}

GAME_SPLIT_COLUMNS = list(RELEASE_GAME_COLUMNS)
SWOW_SPLIT_COLUMNS = list(RELEASE_SWOW_COLUMNS)


def benchmark_table(selection: pd.DataFrame, dataset: str = "game") -> pd.DataFrame:
    """Selected instances of ``dataset`` in ID order: the released columns, then ``round`` and the
    rival it was collected against, ``rival_model`` / ``rival_weights``
    (:class:`schemas.export.Benchmark`; a selection without ``round`` gives round 0; the rival:
    :func:`schemas.export.instance_rivals`, the paper's RN50/openai for released rows)."""
    sel = selection[(selection["status"] == "selected") & (selection["dataset"] == dataset)].sort_values("ID")
    if "round" not in sel:
        sel = sel.assign(round=pd.array([0] * len(sel), dtype="Int64"))
    rivals = instance_rivals(sel)
    sel = sel.assign(rival_model=rivals["rival_model"], rival_weights=rivals["rival_weights"])
    return sel[BENCHMARK_TABLE_COLUMNS].reset_index(drop=True)


def round_rivals(bench: pd.DataFrame) -> list[tuple[int | None, str | None, str | None, int]]:
    """The rivals of the benchmark's rounds: (round, rival_model, rival_weights, instances) per
    distinct triple of ``bench`` (:func:`benchmark_table`), rounds ascending (``None``, not known,
    last), a round's rivals by name (a round has one; a rival not known is ``None``, last)."""
    counts: dict[tuple[int | None, str | None, str | None], int] = {}
    for r, m, w in zip(bench["round"], bench["rival_model"], bench["rival_weights"]):
        key = (None if pd.isna(r) else int(r), None if pd.isna(m) else str(m), None if pd.isna(w) else str(w))
        counts[key] = counts.get(key, 0) + 1
    order = sorted(counts, key=lambda k: tuple((v is None, v if v is not None else 0) for v in k))
    return [(r, m, w, counts[(r, m, w)]) for r, m, w in order]


def changelog(selection: pd.DataFrame) -> list[RoundChange]:
    """Per collection round (ascending; ``None`` last: rows whose round is not known), the game
    benchmark's ``published`` (status selected) and ``retired`` instance counts."""
    game = selection[(selection["dataset"] == "game") & selection["status"].isin(["selected", "retired"])]
    rounds = game["round"] if "round" in game else pd.Series([0] * len(game), index=game.index)
    keys = sorted({None if pd.isna(r) else int(r) for r in rounds}, key=lambda r: (r is None, r or 0))
    out: list[RoundChange] = []
    for r in keys:
        mine = game[rounds.isna()] if r is None else game[rounds == r]
        out.append(
            {
                "round": r,
                "published": int((mine["status"] == "selected").sum()),
                "retired": int((mine["status"] == "retired").sum()),
            }
        )
    return out


def to_release_csv(bench: pd.DataFrame) -> str:
    """The CSV text of the released columns (:data:`schemas.export.BENCHMARK_COLUMNS`; ``round`` is
    left out, so the release's rows give the release's bytes), formatted as the release (JSON list
    cells, pandas float repr, LF), every cell spreadsheet-safe (:func:`gavil.io.csv_text`; no
    released cell needs a change)."""
    out = bench[BENCHMARK_COLUMNS].copy()
    for col in ("candidates", "associations"):
        out[col] = out[col].map(json.dumps)
    return csv_text(out, lineterminator="\n")


def release_cell(value: object) -> str:
    """A cell as the release's split files write it: lists as JSON, whole numbers without a
    fraction (``1``, ``0``, ``98``), other floats by Python repr (``0.833333333``), null empty."""
    if isinstance(value, list):
        return json.dumps(value)
    if value is None or (isinstance(value, float) and value != value) or value is pd.NA:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return str(value)


def split_table(selection: pd.DataFrame, split: str) -> tuple[list[str], list[list[str]]]:
    """(header, rows of cells) for one release split file, selected rows in import order."""
    sel = selection[(selection["status"] == "selected") & (selection["split"] == split)]
    cols = SWOW_SPLIT_COLUMNS if split == "swow" else GAME_SPLIT_COLUMNS
    source = sel.rename(columns={"split_id": "ID_"}).drop(columns="ID").rename(columns={"ID_": "ID"})
    rows = [[release_cell(v) for v in rec] for rec in source[cols].itertuples(index=False)]
    return cols, rows


def to_split_csv(header: list[str], rows: list[list[str]]) -> str:
    """A release split file's text as the release writes it: CRLF between rows and none after the last
    (``game_5_6.csv``, ``game_10_12.csv`` and ``swow.csv`` end without one), every cell spreadsheet-safe
    (:func:`gavil.io.csv_writer`)."""
    buf = io.StringIO()
    w = csv_writer(buf, lineterminator="\r\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue().removesuffix("\r\n")


#: Rows per Parquet row group in ``dataset/test.parquet``: what ``datasets`` decodes at once
#: (Hugging Face's own default for image data). Within a row group each distinct image's bytes
#: are stored once (dictionary encoding), however many instances show it.
ROW_GROUP_ROWS = 100
_ARROW = {"string": pa.string(), "int64": pa.int64(), "float64": pa.float64()}
_IMAGE = pa.struct([("bytes", pa.binary()), ("path", pa.string())])  # datasets.Image's storage


def hf_arrow_schema() -> pa.Schema:
    """The Arrow schema of ``dataset/test.parquet``, from :data:`schemas.export.HF_FEATURES`."""
    fields = []
    for name, kind, typ in HF_FEATURES:
        inner = _IMAGE if typ == "image" else _ARROW[typ]
        fields.append(pa.field(name, pa.list_(inner) if kind == "list" else inner))
    return pa.schema(fields)


def dataset_table(bench: pd.DataFrame, images: dict[str, tuple[str, str]], embed: bool = True) -> pd.DataFrame:
    """The dataset folder's rows: the instances of ``bench`` whose every candidate has an image in
    ``images`` (concept -> (sha256, path), :func:`schemas.ocr.accepted_images`), plus
    ``candidate_images``, one ``{"bytes", "path"}`` cell per candidate, in candidate order.

    ``embed``: the cell holds the file's bytes and its name ``<concept>.<ext>``; otherwise no bytes
    and the file's path relative to the project root (decodable only from there). Each file is
    read once; cells showing the same image share one ``bytes`` object."""
    keep = pd.Series([all(c in images for c in cands) for cands in bench["candidates"]], index=bench.index, dtype=bool)
    out = bench.loc[keep].reset_index(drop=True)  # a boolean Series: an empty list would select columns
    blobs: dict[str, bytes] = {}

    def cell(concept: str) -> dict[str, Any]:
        path = images[concept][1]
        if not embed:
            return {"bytes": None, "path": path}
        if concept not in blobs:
            blobs[concept] = Path(path).read_bytes()
        return {"bytes": blobs[concept], "path": f"{concept}{Path(path).suffix}"}

    # list[Any]: pandas-stubs' assign() takes sequences of scalars; a column of lists of dicts is valid pandas
    cells: list[Any] = [[cell(c) for c in cands] for cands in out["candidates"]]
    return out.assign(candidate_images=cells)


def _arrow_cell(v: object) -> object:
    """A cell as Arrow takes it: pandas' missing values (``pd.NA``, a NaN in a nullable string
    column such as ``rival_model``) become None; anything else as it is."""
    return None if v is pd.NA or (isinstance(v, float) and v != v) else v


def write_dataset_parquet(ds: pd.DataFrame, path: str | Path) -> tuple[pd.DataFrame, int]:
    """Validate ``ds`` (:class:`schemas.export.BenchmarkDataset`) and write it atomically with the
    Hugging Face schema, :data:`ROW_GROUP_ROWS` rows per row group; returns (the validated frame,
    its size in Arrow memory: the card's ``num_bytes``).

    An empty table is written with no row group at all (``datasets`` cannot read a zero-row row
    group). Not :func:`gavil.pipeline.catalog.write_table`: its schema has no binary image cells."""
    ds = validate(ds.reset_index(drop=True), BenchmarkDataset)
    schema = hf_arrow_schema()
    nbytes = 0
    with atomic_path(path, ".parquet") as tmp:
        # one dictionary page per column chunk holds each distinct image once (default limit: 1 MiB)
        with pq.ParquetWriter(tmp, schema, use_dictionary=True, dictionary_pagesize_limit=1 << 30) as w:
            for i in range(0, len(ds), ROW_GROUP_ROWS):
                part = ds.iloc[i : i + ROW_GROUP_ROWS]
                table = pa.Table.from_pydict(
                    {f.name: [_arrow_cell(v) for v in part[f.name].tolist()] for f in schema},
                    schema=schema,
                )
                nbytes += table.nbytes
                w.write_table(table)
    return ds, nbytes


#: The folder (inside the dataset folder) of the per-round files, ``round_<r>.parquet``.
ROUNDS_DIR = "rounds"


def round_configs(ds: pd.DataFrame) -> dict[int, str]:
    """Collection round -> the file (relative to the dataset folder) of config ``round_<r>``: only
    round r's rows of ``ds`` (the dataset table, :func:`dataset_table`), ascending.

    When every row of ``ds`` is of one known round (the release alone: round 0), that round's config
    names ``test.parquet`` itself (the same rows, not a second copy of the images); otherwise
    each round gets ``rounds/round_<r>.parquet``. Rows whose round is not known (null) are in the
    ``default`` config only. An empty ``ds``: no round config."""
    rounds = ds["round"]
    known = sorted({int(r) for r in rounds.dropna()})
    if len(known) == 1 and not rounds.isna().any():
        return {known[0]: "test.parquet"}
    return {r: f"{ROUNDS_DIR}/round_{r}.parquet" for r in known}


def _features_yaml(indent: str) -> str:
    return "\n".join(f"{indent}- name: {name}\n{indent}  {kind}: {typ}" for name, kind, typ in HF_FEATURES)


def _configs_yaml(configs: list[DatasetConfig]) -> tuple[str, str]:
    """(``configs:`` items, ``dataset_info:`` items) of the card's front matter, one per config."""
    files = "\n".join(
        f"- config_name: {c['name']}\n  data_files:\n  - split: test\n    path: {c['path']}" for c in configs
    )
    info = "\n".join(
        f"- config_name: {c['name']}\n  features:\n{_features_yaml('  ')}\n  splits:\n  - name: test\n"
        f"    num_bytes: {c['num_bytes']}\n    num_examples: {c['num_examples']}"
        for c in configs
    )
    return files, info


def dataset_card(
    bench: pd.DataFrame, ds: pd.DataFrame, selection: pd.DataFrame, params: Params, configs: list[DatasetConfig]
) -> str:
    """The dataset folder's README.md: YAML front matter that ``datasets`` and the Hub read
    (license, ``configs``: ``default`` with every round and ``round_<r>`` per collection round, each
    naming its ``test`` split's data file; ``dataset_info`` per config with the features and the
    split's size, checked by ``load_dataset``), then counts, how it was made, licenses.

    Carries no build date or other wall-clock value: the card is a hashed DVC output, and the
    same inputs must give the same bytes on every machine (``dvc.lock`` stays unchanged). Its facts
    are :func:`dataset_facts`, the ones ``croissant.json`` renders (:func:`croissant_metadata`)."""
    facts = dataset_facts(bench, ds, selection, params)
    return (
        _card_front_matter(facts["version"], configs)
        + _card_overview(facts, configs)
        + _card_provenance(bench, selection, params)
        + _card_rai(facts)
    )


def _card_front_matter(version: str, configs: list[DatasetConfig]) -> str:
    """The card's YAML front matter (license, version, ``configs`` and ``dataset_info``), through its
    closing ``---``."""
    config_files, config_info = _configs_yaml(configs)
    return f"""---
license: cc-by-4.0
language: [en]
pretty_name: WinoGAViL-style association benchmark
version: {version}
tags: [commonsense-reasoning, visual-reasoning]
configs:
{config_files}
dataset_info:
{config_info}
---
"""


def _card_overview(facts: DatasetFacts, configs: list[DatasetConfig]) -> str:
    """The card's title and overview (:func:`dataset_facts`): how to load it, its configs per round,
    what was left out and instances per number of candidates."""
    version, n_ds, left_out = facts["version"], facts["dataset_instances"], facts["left_out"]
    rows = "\n".join(f"| {n} | {c} |" for n, c in facts["by_num_candidates"]) or "| - | 0 |"
    per_round = "\n".join(
        f"| `{c['name']}` | {c['name'].removeprefix('round_')} | {c['num_examples']} | `{c['path']}` |"
        for c in configs[1:]
    )
    unknown = facts["unknown_round"]
    stored = (
        "embedded in `test.parquet` (each image file's bytes; `path` is its file name)"
        if facts["copy_images"]
        else "not embedded (`export.copy_images: false`): `path` is the file relative to the project root, "
        "so the images decode only when the dataset is loaded from there"
    )
    return f"""# {DATASET_TITLE}

**Version {version}** (`1.<round>.<patch>`: the highest collection round in it, round 0 being the
released WinoGAViL data; `round` names each instance's round).

Built by winogavil-pipeline. Load it with `datasets.load_dataset("<this folder>", split="test")`
(offline; the fields and types of the published `nlphuji/winogavil`). One split, `test`:
{n_ds} of the {facts["instances"]} instances of `../benchmark.csv` (same rows and IDs), each with
`candidate_images`, one image per candidate in candidate order ({facts["images"]} distinct images,
{stored}).

One config per collection round, each with split `test`: `datasets.load_dataset("<this folder>",
"round_1", split="test")` gives round 1's instances alone; the `default` config (no name) gives
every round.{f" {unknown} instances whose round is not known are in `default` only." if unknown else ""}

| config | round | instances | file |
|---|---|---|---|
| `default` | every round | {n_ds} | `test.parquet` |
{per_round}

**Left out: {left_out} instances** with at least one candidate that has no accepted image (the
crawl found none, or OCR rejected every image showing the word); `../benchmark.csv` keeps them.

Each instance: a `cue`, `num_candidates` candidate images, and the `num_associations` associations a
spymaster linked to the cue. Solvers pick exactly K images; score = Jaccard index with the associations.

| candidates (N) | instances |
|---|---|
{rows}

"""


def _card_rai(facts: DatasetFacts) -> str:
    """The card's ``Responsible AI`` section: the statements of ``croissant.json``'s ``rai:`` fields
    (:func:`rai_statements`), one list item per field, and where the Croissant file is."""
    items = "\n".join(f"- **{label}** (`rai:{prop}`): {' '.join(texts)}" for prop, label, texts in facts["rai"])
    return f"""
## Responsible AI
Croissant metadata with these fields: [`{CROISSANT_FILE}`]({CROISSANT_FILE}) (Croissant 1.1 with its
Responsible-AI vocabulary).

{items}
"""


def _rivals_md(bench: pd.DataFrame) -> str:
    """The card's table of each collection round's rival (:func:`round_rivals`): round, the rival's
    ``rival_model`` / ``rival_weights`` as the dataset's columns hold them, instances."""
    lines = []
    for r, model, weights, n in round_rivals(bench):
        label = "unknown" if r is None else (f"{r} (the release)" if r == 0 else str(r))
        paper = " (CLIP RN50, OpenAI weights: the paper's rival)" if (model, weights) == RELEASE_RIVAL else ""
        lines.append(f"| {label} | {model or 'not recorded'}{paper} | {weights or 'not recorded'} | {n} |")
    return "\n".join(lines) or "| - | - | - | 0 |"


def _card_provenance(bench: pd.DataFrame, selection: pd.DataFrame, params: Params) -> str:
    """The card's ``How it was made`` (selection rule, each round's rival model from ``bench``'s
    ``rival_model`` / ``rival_weights``, instance fates by dataset and status), ``Changelog`` (per
    collection round) and ``Licenses and attribution`` sections."""
    counts = selection.groupby(["dataset", "status"]).size()
    thr = params.select.min_solver_jaccard
    rival = params.models[params.score.model]
    log = "\n".join(
        f"| {'unknown' if e['round'] is None else e['round']} | {e['published']} | {e['retired']} |"
        for e in changelog(selection)
    )
    pairs = cast("Iterable[tuple[tuple[str, str], int]]", counts.items())  # stubs: labels are Hashable
    fates = "\n".join(f"| {d} | {s} | {c} |" for (d, s), c in pairs)
    return f"""## How it was made
- Selection: instances whose mean solver Jaccard (3 solvers, `solvers_jaccard_mean`, rounded to 2
  decimals) is >= {thr}; model scores are not used to select. IDs are permanent (a ledger):
  0..n-1 on a first build; a published instance never changes (later answers, edits or a higher
  threshold leave it as published); a retired ID leaves a gap and is never given again.
- Rival model: `score_fool_the_ai` = 100 - int(100 x Jaccard of the rival model's top-K), the
  rival each instance was collected against (columns `rival_model`, `rival_weights`: a round's
  `models:` entry and the weights the game loaded, a pretrained tag, `file:<sha256 prefix>` or
  `untrained`); released instances as released (CLIP RN50, OpenAI weights). Each round's rival:

| round | rival_model | rival_weights | instances |
|---|---|---|---|
{_rivals_md(bench)}

- The pipeline's own rival setting (`score.model`, not a round's rival): {rival.model} / {rival.pretrained}.
- Instance fates in this build (dataset / status / count):

| dataset | status | instances |
|---|---|---|
{fates}

## Changelog
Game instances by collection round: published (in `benchmark.csv`) and retired (IDs kept as gaps).

| round | published | retired |
|---|---|---|
{log}

## Licenses and attribution
{chr(10).join(f"- {line}" for line in LICENSES)}
"""


# --- The dataset's facts, rendered twice: the card (README.md) and croissant.json ----------------------


#: The file of the Croissant metadata inside the dataset folder.
CROISSANT_FILE = "croissant.json"
#: The Croissant version ``croissant.json`` conforms to (``conformsTo``).
CROISSANT_VERSION = "http://mlcommons.org/croissant/1.1"
DATASET_TITLE = "WinoGAViL-style association benchmark"
#: The licenses and attribution of the data, one statement each (card: a list; Croissant: in ``description``).
LICENSES = [
    "Annotations from the WinoGAViL release: CC-BY 4.0, non-commercial research use. Bitton, Bitton Guetta,\n"
    '  Yosef, Elovici, Bansal, Stanovsky, Schwartz (2022), "WinoGAViL: Gamified Association Benchmark to\n'
    '  Challenge Vision-and-Language Models", NeurIPS Datasets and Benchmarks.',
    "Concepts and SWOW-baseline associations derive from SWOW-EN: De Deyne, Navarro, Perfors, Brysbaert &\n"
    "  Storms (2019), Behavior Research Methods 51:987-1006 (CC BY-NC-ND 3.0).",
    "Images keep the licenses of their sources (see the crawl table's `source_url`); sample images: see\n"
    "  `data/sample/images/ATTRIBUTION.md`.",
]
#: The licenses' addresses (Croissant ``license``): the annotations', then the SWOW-EN concepts'.
LICENSE_URLS = ["https://creativecommons.org/licenses/by/4.0/", "https://creativecommons.org/licenses/by-nc-nd/3.0/"]
CITATION = (
    "@inproceedings{bitton2022winogavil, title={WinoGAViL: Gamified Association Benchmark to Challenge"
    " Vision-and-Language Models}, author={Bitton, Yonatan and Bitton Guetta, Nitzan and Yosef, Ron and"
    " Elovici, Yuval and Bansal, Mohit and Stanovsky, Gabriel and Schwartz, Roy}, booktitle={Advances in"
    " Neural Information Processing Systems (Datasets and Benchmarks Track)}, year={2022}}"
)
#: Facts this version of the project does not record, said so rather than claimed.
NOT_RECORDED = "not recorded by this version"
#: ``rai:dataCollection`` on the players' consent: what the game does (docs/review.md "Consent"), and
#: that its records stay with the operator.
CONSENT_STATEMENT = (
    "Consent of the players: round 0's (the WinoGAViL release) is not recorded by this version; in this"
    " project's game each player accepts the operator's consent text before any work, and the game's store"
    " keeps which version of the text (its sha256) each player accepted and when, and who withdrew; a"
    " withdrawn player's unpublished associations and answers are left out of later builds. These records"
    " stay with the operator (the game's admin export), not in this export."
)


class DatasetFacts(TypedDict):
    """What the dataset card and ``croissant.json`` both say, computed once (:func:`dataset_facts`).

    ``rai``: (Croissant Responsible-AI property, the card's label, its statements), in the order the
    card lists them; a single-valued property's statements are joined with spaces."""

    version: str  # 1.<round>.<patch>
    instances: int  # rows of the benchmark (benchmark.csv)
    dataset_instances: int  # rows of the dataset folder (every candidate has an image)
    left_out: int  # benchmark rows left out of the folder
    images: int  # distinct images in the folder
    copy_images: bool  # images embedded (True) or paths relative to the project root
    by_num_candidates: list[tuple[int, int]]  # (N, instances of the folder)
    unknown_round: int  # folder rows whose round is not known
    threshold: float  # select.min_solver_jaccard
    review_required: bool  # review.required: every image accepted by a person (docs/review.md)
    rivals: list[tuple[int | None, str | None, str | None, int]]  # round_rivals of the benchmark
    changelog: list[RoundChange]
    rai: list[tuple[str, str, list[str]]]


def dataset_facts(bench: pd.DataFrame, ds: pd.DataFrame, selection: pd.DataFrame, params: Params) -> DatasetFacts:
    """The facts of the dataset folder (``ds``: its rows, :func:`dataset_table`) and the benchmark
    (``bench``, :func:`benchmark_table`; ``selection``: every instance with its fate), from data and
    params alone (no clock, no absolute path): what :func:`dataset_card` and :func:`croissant_metadata`
    render."""
    _, version = dataset_version(bench["round"], params.export.patch)
    by_n = ds["num_candidates"].value_counts().sort_index()
    log = changelog(selection)
    rivals = round_rivals(bench)
    facts: DatasetFacts = {
        "version": version,
        "instances": len(bench),
        "dataset_instances": len(ds),
        "left_out": len(bench) - len(ds),
        "images": len({c for cands in ds["candidates"] for c in cands}),
        "copy_images": params.export.copy_images,
        "by_num_candidates": [(int(cast(int, n)), int(c)) for n, c in by_n.items()],  # stubs: labels are Hashable
        "unknown_round": int(ds["round"].isna().sum()),
        "threshold": params.select.min_solver_jaccard,
        "review_required": params.review.required,
        "rivals": rivals,
        "changelog": log,
        "rai": [],
    }
    facts["rai"] = rai_statements(facts)
    return facts


def _review_statement(required: bool) -> str:
    """What the data records of a person's review of the images (``review.required``, docs/review.md)."""
    if not required:
        return (
            "Image review by a person: not required for this build (review.required: false); "
            "an image may reach the dataset without a recorded review."
        )
    return (
        "Image review by a person: every image in this folder was accepted by a named reviewer "
        "(data/review/decisions.csv: who, when, decision, reason, sha256; review.required: true); the "
        "WinoGAViL release's own images were checked by its authors (paper §3.1)."
    )


def _rival_text(r: int | None, model: str | None, weights: str | None, n: int) -> str:
    where = "rounds not known" if r is None else f"round {r}"
    count = f"{n} instance{'' if n == 1 else 's'}"
    return f"{where.capitalize()}: {model or 'rival not recorded'} / {weights or 'weights not recorded'} ({count})."


def _collection_statements(facts: DatasetFacts) -> list[str]:
    """``rai:dataCollection``: how and when each collection round was collected, as far as recorded."""
    out = []
    for e in facts["changelog"]:
        r, counts = e["round"], f"{e['published']} published, {e['retired']} retired"
        if r == 0:
            out.append(
                f"Round 0 ({counts}): the WinoGAViL release, associations created and solved by players of the"
                " WinoGAViL game (Bitton et al. 2022), as published; collection dates: those of the release,"
                f" {NOT_RECORDED}."
            )
        elif r is None:
            out.append(f"Round not known ({counts}): imported without a collection round.")
        else:
            out.append(
                f"Round {r} ({counts}): associations created by spymasters in this project's game against the"
                " round's rival and solved by other players; collection dates: the game store keeps each"
                f" round's opening and closing time (`gavil round list`), not carried into this export by"
                " this version."
            )
    out.append(CONSENT_STATEMENT)
    return out


def rai_statements(facts: DatasetFacts) -> list[tuple[str, str, list[str]]]:
    """The Croissant Responsible-AI statements (``rai:`` vocabulary, Croissant RAI 1.0) of ``facts``:
    (property, the card's label, statements). Facts the project does not record are said to be not
    recorded (:data:`NOT_RECORDED`), never assumed."""
    thr, left = facts["threshold"], facts["left_out"]
    return [
        ("dataCollection", "Data collection", _collection_statements(facts)),
        ("dataCollectionType", "Collection type", ["Crowdsourcing (a game).", "Web scraping (candidate images)."]),
        (
            "dataAnnotationProtocol",
            "Annotation",
            [
                "A spymaster picks the candidates that a cue associates with, against a rival model; solvers"
                f" pick K candidates for the cue; an instance is published when its solvers' mean Jaccard is >= {thr}.",
            ],
        ),
        (
            "dataAnnotationPlatform",
            "Annotators' platform",
            [
                "Round 0: the WinoGAViL game (Bitton et al. 2022).",
                "Later rounds: this project's web game (`gavil game`).",
            ],
        ),
        ("annotatorDemographics", "Annotators' demographics", [f"Annotators' demographics: {NOT_RECORDED}."]),
        ("machineAnnotationTools", "Rival per round", [_rival_text(*r) for r in facts["rivals"]]),
        (
            "dataPreprocessingProtocol",
            "Images",
            [
                "Candidate images are crawled per concept from web image search; OCR rejects images that show"
                f" their concept's word; an instance is in this folder only when every candidate has an accepted image ({left} left out).",
                _review_statement(facts["review_required"]),
            ],
        ),
        (
            "personalSensitiveInformation",
            "Personal and sensitive information",
            [
                "No player id is exported (the pipeline keeps players' ids only as keyed hashes).",
                f"Images are web images and may show people; a review for personal information: {NOT_RECORDED}.",
            ],
        ),
        (
            "dataBiases",
            "Known biases",
            [
                "Associations are those of each round's players, whose demographics are not recorded.",
                "Instances were made to fool each round's rival model: that model and similar ones may score lower.",
            ],
        ),
        (
            "dataLimitations",
            "Limitations",
            [
                "English cues and concepts only (SWOW-EN).",
                "Rounds have different rivals: compare per-round scores with care.",
                f"Instances without an image for every candidate are left out of this folder ({left}).",
            ],
        ),
        ("dataUseCases", "Intended use", ["Evaluating vision-and-language models (split test); not for training."]),
    ]


#: The Croissant JSON-LD context (Croissant 1.1's, as ``mlcroissant`` writes it, with the RAI prefix).
CROISSANT_CONTEXT: dict[str, Any] = {
    "@language": "en",
    "@vocab": "https://schema.org/",
    "arrayShape": "cr:arrayShape",
    "citeAs": "cr:citeAs",
    "column": "cr:column",
    "conformsTo": "dct:conformsTo",
    "containedIn": "cr:containedIn",
    "cr": "http://mlcommons.org/croissant/",
    "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"},
    "dct": "http://purl.org/dc/terms/",
    "equivalentProperty": "cr:equivalentProperty",
    "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract",
    "field": "cr:field",
    "fileObject": "cr:fileObject",
    "fileProperty": "cr:fileProperty",
    "fileSet": "cr:fileSet",
    "format": "cr:format",
    "includes": "cr:includes",
    "isArray": "cr:isArray",
    "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath",
    "key": "cr:key",
    "md5": "cr:md5",
    "parentField": "cr:parentField",
    "path": "cr:path",
    "rai": "http://mlcommons.org/croissant/RAI/",
    "recordSet": "cr:recordSet",
    "references": "cr:references",
    "regex": "cr:regex",
    "repeated": "cr:repeated",
    "replace": "cr:replace",
    "samplingRate": "cr:samplingRate",
    "sc": "https://schema.org/",
    "separator": "cr:separator",
    "source": "cr:source",
    "subField": "cr:subField",
    "transform": "cr:transform",
}
#: The RAI properties that take one text (the others take a list).
_RAI_SINGLE = {"dataCollection", "annotationsPerItem", "dataSocialImpact", "dataReleaseMaintenancePlan"}
_CR_TYPES = {"string": "sc:Text", "int64": "sc:Integer", "float64": "sc:Float"}


def _croissant_field(record_set: str, name: str, kind: str, typ: str, copy_images: bool) -> dict[str, Any]:
    """One Croissant field of a record set: ``name``'s column of the record set's Parquet file.

    ``candidate_images`` (a list of ``{bytes, path}``): with ``copy_images`` the images themselves
    (``sc:ImageObject`` from each cell's ``bytes``; ``repeated``, which ``mlcroissant`` 1.1 decodes per
    element), otherwise each cell's ``path`` (text: the file relative to the project root)."""
    source: dict[str, Any] = {"extract": {"column": name}, "fileObject": {"@id": f"{record_set}.parquet"}}
    field: dict[str, Any] = {"@id": f"{record_set}/{name}", "@type": "cr:Field", "name": name, "source": source}
    if typ == "image":
        source["transform"] = {"jsonPath": "bytes" if copy_images else "path"}
        return field | {"dataType": "sc:ImageObject" if copy_images else "sc:Text", "repeated": True}
    field["dataType"] = _CR_TYPES[typ]
    if kind == "list":
        field |= {"arrayShape": "-1", "isArray": True}
    return field


def croissant_metadata(facts: DatasetFacts, configs: list[DatasetConfig], files: dict[str, str]) -> dict[str, object]:
    """The Croissant 1.1 JSON-LD of the dataset folder (``croissant.json``), from ``facts``
    (:func:`dataset_facts`, the card's facts) with the RAI vocabulary: one ``cr:FileObject`` per
    Parquet file of ``configs`` (``files``: its path relative to the folder -> sha256) and one
    ``cr:RecordSet`` per config (``default``, ``round_<r>``), its fields the dataset's columns
    (:data:`schemas.export.HF_FEATURES`), keyed by ``ID``. No date, no absolute path."""
    dist = [
        {"@id": f"{c['name']}.parquet", "@type": "cr:FileObject", "contentUrl": c["path"]}
        | {"encodingFormat": "application/x-parquet", "name": f"{c['name']}.parquet", "sha256": files[c["path"]]}
        for c in configs
    ]
    record_sets = [
        {
            "@id": c["name"],
            "@type": "cr:RecordSet",
            "description": f"Config {c['name']} of the dataset folder ({c['num_examples']} instances, `{c['path']}`).",
            "field": [_croissant_field(c["name"], *f, facts["copy_images"]) for f in HF_FEATURES],
            "key": {"@id": f"{c['name']}/ID"},
            "name": c["name"],
        }
        for c in configs
    ]
    doc: dict[str, Any] = {
        "@context": CROISSANT_CONTEXT,
        "@type": "sc:Dataset",
        "citeAs": CITATION,
        "conformsTo": CROISSANT_VERSION,
        "description": _croissant_description(facts),
        "distribution": dist,
        "inLanguage": ["en"],
        "keywords": ["commonsense-reasoning", "visual-reasoning", "vision-and-language", "association"],
        "license": LICENSE_URLS,
        "name": "winogavil-style-association-benchmark",
        "recordSet": record_sets,
        "version": facts["version"],
    }
    for prop, _, statements in facts["rai"]:
        doc[f"rai:{prop}"] = " ".join(statements) if prop in _RAI_SINGLE else statements
    return doc


def _croissant_description(facts: DatasetFacts) -> str:
    return (
        f"{DATASET_TITLE}, version {facts['version']}: {facts['dataset_instances']} of the {facts['instances']}"
        f" instances of the benchmark, each a cue, candidate images and the associations; {facts['images']}"
        f" distinct images. Licenses and attribution: {' '.join(' '.join(s.split()) for s in LICENSES)}"
    )


def write_croissant(facts: DatasetFacts, configs: list[DatasetConfig], dataset_dir: Path) -> None:
    """Write ``<dataset_dir>/croissant.json`` (:func:`croissant_metadata`): sorted keys, 2-space
    indent, LF, a final newline, each Parquet file's sha256 from its bytes (read in 1 MiB blocks: with
    images embedded a file holds every instance's candidate images, 24.6 GB at 12,000 concepts, and
    read whole it exhausted a 24 GB machine); the same inputs give the same bytes."""
    files = {c["path"]: sha256_file(dataset_dir / c["path"]) for c in configs}  # in blocks: a file may be GBs
    text = json.dumps(croissant_metadata(facts, configs, files), indent=2, sort_keys=True, ensure_ascii=False)
    with atomic_path(dataset_dir / CROISSANT_FILE, ".json") as tmp:
        tmp.write_text(text + "\n", encoding="utf-8")


def run(params: Params) -> Metrics:
    """Stage entry point: selection (+ accepted images) -> benchmark, split files, dataset folder.

    Returns the metrics: instances, by number of candidates, rows per split file, candidates
    with an image and in total."""
    selection = catalog.read_table("selection")
    bench = catalog.write_table(benchmark_table(selection), "benchmark")
    with atomic_path(catalog.path("benchmark_csv", "write"), ".csv") as tmp:
        tmp.write_text(to_release_csv(bench), encoding="utf-8")
    split_counts = {}
    for split, name in SPLIT_FILES.items():
        header, rows = split_table(selection, split)
        with atomic_path(catalog.path(name, "write"), ".csv") as tmp:
            tmp.write_text(to_split_csv(header, rows), encoding="utf-8")
        split_counts[split] = len(rows)

    images = accepted_images(catalog.read_table("ocr"))
    dataset_dir = catalog.path("dataset_dir", "write")
    shutil.rmtree(dataset_dir / "images", ignore_errors=True)  # the layout before images were embedded
    shutil.rmtree(dataset_dir / ROUNDS_DIR, ignore_errors=True)  # rounds of an earlier build
    ds, num_bytes = write_dataset_parquet(
        dataset_table(bench, images, embed=params.export.copy_images),
        catalog.path("benchmark_dataset", "write"),
    )
    configs: list[DatasetConfig] = [
        {"name": "default", "path": "test.parquet", "num_bytes": num_bytes, "num_examples": len(ds)}
    ]
    for r, rel in round_configs(ds).items():
        mine = ds[ds["round"] == r]
        size = num_bytes if rel == "test.parquet" else write_dataset_parquet(mine, dataset_dir / rel)[1]
        configs.append({"name": f"round_{r}", "path": rel, "num_bytes": size, "num_examples": len(mine)})
    with atomic_path(dataset_dir / "README.md", ".md") as tmp:
        tmp.write_text(dataset_card(bench, ds, selection, params, configs))
    write_croissant(dataset_facts(bench, ds, selection, params), configs, dataset_dir)
    top, version = dataset_version(bench["round"], params.export.patch)
    metrics: Metrics = {
        "instances": len(bench),
        "by_num_candidates": cast(dict[int, int], bench["num_candidates"].value_counts().sort_index().to_dict()),
        "split_files": split_counts,
        "candidates_with_image": sum(1 for cands in bench["candidates"] for c in cands if c in images),
        "candidates_total": int(bench["num_candidates"].sum()),
        "dataset_instances": len(ds),
        "dataset_left_out": len(bench) - len(ds),
        "dataset_images": len({c for cands in ds["candidates"] for c in cands}),
        "dataset_configs": {c["name"]: c["num_examples"] for c in configs},
        "round": top,
        "version": version,
        "changelog": changelog(selection),
    }
    return metrics
