"""The exported benchmark: exactly the released ``winogavil_dataset.csv`` columns, in order."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import list_field

#: Released column order (WinoGAViL-experiments assets/winogavil_dataset.csv).
BENCHMARK_COLUMNS = [
    "candidates",
    "cue",
    "associations",
    "score_fool_the_ai",
    "num_associations",
    "num_candidates",
    "solvers_jaccard_mean",
    "solvers_jaccard_std",
    "ID",
]


class Benchmark(pa.DataFrameModel):
    candidates: Series[object] = list_field("str", min_len=5)
    cue: Series[str]
    associations: Series[object] = list_field("str", min_len=2)
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100, description="null for raw instances created without a rival-model score")
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int] = pa.Field(isin=[5, 6, 10, 12])
    solvers_jaccard_mean: Series[float] = pa.Field(ge=0, le=1)
    solvers_jaccard_std: Series[float] = pa.Field(ge=0, le=1)
    ID: Series[int] = pa.Field(ge=0, unique=True)

    class Config:
        strict = True
        coerce = True
        ordered = True


class BenchmarkDataset(pa.DataFrameModel):
    """``data/export/dataset/test.parquet``: the benchmark plus each candidate's image file,
    relative to the dataset folder ("" where the pipeline has no accepted image for it)."""

    candidates: Series[object] = list_field("str", min_len=5)
    cue: Series[str]
    associations: Series[object] = list_field("str", min_len=2)
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100)
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int] = pa.Field(isin=[5, 6, 10, 12])
    solvers_jaccard_mean: Series[float] = pa.Field(ge=0, le=1)
    solvers_jaccard_std: Series[float] = pa.Field(ge=0, le=1)
    ID: Series[int] = pa.Field(ge=0, unique=True)
    candidate_images: Series[object] = list_field("str", min_len=5)

    @pa.dataframe_check(error="one image path per candidate")
    def aligned(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series([len(a) == len(b) for a, b in zip(df["candidates"], df["candidate_images"])], index=df.index, dtype=bool)

    class Config:
        strict = True
        coerce = True
        ordered = True
