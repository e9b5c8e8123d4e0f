"""The exported benchmark: exactly the released ``winogavil_dataset.csv`` columns, in order."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from gavil.domain.vocabulary import CANDIDATE_SIZES, RELEASE_DATASET_COLUMNS
from schemas import StrictModel, exact, list_field

#: Released column order (WinoGAViL-experiments assets/winogavil_dataset.csv): ``benchmark.csv``'s columns.
BENCHMARK_COLUMNS = list(RELEASE_DATASET_COLUMNS)
#: ``benchmark.parquet``'s columns: the released ones, then the collection round and its rival.
BENCHMARK_TABLE_COLUMNS = [*BENCHMARK_COLUMNS, "round", "rival_model", "rival_weights"]
#: The rival the released WinoGAViL data (round 0) was collected against: CLIP RN50 with OpenAI's
#: weights (paper §2.1; docs/paper.md), as open_clip names them (architecture, pretrained tag).
RELEASE_RIVAL = ("RN50", "openai")


def instance_rivals(selection: pd.DataFrame) -> pd.DataFrame:
    """Each selection row's rival, the one reading of it that ``export`` and ``evaluate`` share:
    ``rival_model`` / ``rival_weights`` (str or None, ``selection``'s index).

    A game row names the rival stored with its creation (``selection.rival_model``: the round's
    ``models:`` entry; ``rival_weights``: pretrained tag, ``file:<sha256 prefix>`` or
    ``untrained``); a released row (``origin`` ``release``) that names none gets the paper's rival,
    :data:`RELEASE_RIVAL`; any other row that names none stays null (not known)."""
    out = pd.DataFrame(index=selection.index)
    for col, paper in zip(("rival_model", "rival_weights"), RELEASE_RIVAL):
        given = selection[col] if col in selection else pd.Series([None] * len(selection), index=selection.index)
        named = given.notna() & given.astype(str).str.len().gt(0)
        from_paper = ~named & (selection["origin"] == "release")
        out[col] = [paper if p else (str(v) if n else None) for v, n, p in zip(given, named, from_paper)]
    return out


class Benchmark(StrictModel):
    candidates: Series[object] = list_field("str", min_len=5)
    cue: Series[str]
    associations: Series[object] = list_field("str", min_len=2)
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, le=100, description="null for raw instances created without a rival-model score"
    )
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int] = pa.Field(isin=list(CANDIDATE_SIZES))
    solvers_jaccard_mean: Series[float] = pa.Field(
        ge=0, le=1, metadata=exact("as selected: released or rounded to 2 places")
    )
    solvers_jaccard_std: Series[float] = pa.Field(
        ge=0, le=1, metadata=exact("as selected: released or rounded to 2 places")
    )
    ID: Series[int] = pa.Field(ge=0, unique=True)
    round: Series[pd.Int64Dtype] = pa.Field(
        nullable=True, ge=0, description="collection round (0: the release); not a column of benchmark.csv"
    )
    rival_model: Series[str] = pa.Field(
        nullable=True,
        description="the rival the instance was collected against (its round's models: entry; the release: RN50); "
        "null: not known; not a column of benchmark.csv",
    )
    rival_weights: Series[str] = pa.Field(
        nullable=True,
        description="that rival's weights: pretrained tag (the release: openai), file:<sha256 prefix> or untrained",
    )

    class Config:
        ordered = True  # plus StrictModel's strict and coerce


#: The Hugging Face features of ``data/export/dataset/test.parquet``, in column order, as the
#: dataset card's YAML writes them (``name``, ``dtype`` or ``list``, type). They follow the published
#: ``nlphuji/winogavil`` dataset (its card's "Data Fields": the release's columns with the release's
#: types, plus ``candidate_images``, one image per candidate; one split, ``test``), which DataComp's
#: ``eval_utils/wino_eval.py`` reads (``candidate_images``, ``cue``, ``candidates``, ``associations``).
HF_FEATURES: list[tuple[str, str, str]] = [
    ("candidates", "list", "string"),
    ("cue", "dtype", "string"),
    ("associations", "list", "string"),
    ("score_fool_the_ai", "dtype", "int64"),
    ("num_associations", "dtype", "int64"),
    ("num_candidates", "dtype", "int64"),
    ("solvers_jaccard_mean", "dtype", "float64"),
    ("solvers_jaccard_std", "dtype", "float64"),
    ("ID", "dtype", "int64"),
    ("round", "dtype", "int64"),
    ("rival_model", "dtype", "string"),
    ("rival_weights", "dtype", "string"),
    ("candidate_images", "list", "image"),
]


def _is_image_list(v: object, n: int) -> bool:
    """``v`` is ``n`` Hugging Face image cells: ``{"bytes": bytes | None, "path": str}``, and each
    has its bytes or at least a path."""
    if not isinstance(v, (list, tuple)) and not hasattr(v, "tolist"):
        return False
    items = list(v)  # type: ignore[call-overload]
    return len(items) == n and all(
        isinstance(x, dict)
        and set(x) == {"bytes", "path"}
        and isinstance(x["path"], str)
        and (x["bytes"] is None or isinstance(x["bytes"], bytes))
        and (x["bytes"] is not None or x["path"] != "")
        for x in items
    )


class BenchmarkDataset(StrictModel):
    """``data/export/dataset/test.parquet``: the benchmark's instances whose every candidate has an
    accepted image, plus ``candidate_images``: one Hugging Face ``Image`` cell per candidate, in
    candidate order (``bytes``: the image file's bytes, embedded; ``path``: its file name), or,
    with ``export.copy_images: false``, no bytes and the image's path relative to the project root."""

    candidates: Series[object] = list_field("str", min_len=5)
    cue: Series[str]
    associations: Series[object] = list_field("str", min_len=2)
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100)
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int] = pa.Field(isin=list(CANDIDATE_SIZES))
    solvers_jaccard_mean: Series[float] = pa.Field(
        ge=0, le=1, metadata=exact("as selected: released or rounded to 2 places")
    )
    solvers_jaccard_std: Series[float] = pa.Field(
        ge=0, le=1, metadata=exact("as selected: released or rounded to 2 places")
    )
    ID: Series[int] = pa.Field(ge=0, unique=True)
    round: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, description="collection round (0: the release)")
    rival_model: Series[str] = pa.Field(nullable=True, description="the rival it was collected against")
    rival_weights: Series[str] = pa.Field(
        nullable=True, description="that rival's weights (tag, file:<sha>, untrained)"
    )
    candidate_images: Series[object] = pa.Field(description="list of {bytes, path}: one image per candidate")

    @pa.dataframe_check(error="one image ({bytes, path}) per candidate")
    def aligned(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [_is_image_list(imgs, len(c)) for c, imgs in zip(df["candidates"], df["candidate_images"])],
            index=df.index,
            dtype=bool,
        )

    class Config:
        ordered = True  # plus StrictModel's strict and coerce
