"""The embedding cache: one row per (model, weights, kind, key) embedding."""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from schemas import StrictModel


class EmbeddingCache(StrictModel):
    """L2-normalised embeddings, keyed so each image / text is embedded once per model.

    ``key`` is the image's sha256 (kind ``image``) or the exact text embedded (kind ``text``:
    a prompt like "A moon" for CLIP, a word for a text model). ``vector`` holds ``dim``
    little-endian float32 values.
    """

    model: Series[str] = pa.Field(description="architecture or text model id, e.g. RN50")
    weights_id: Series[str] = pa.Field(
        description="pretrained tag, file:<sha256[:16]>, untrained, or text model id, then |<precision>-<device> "
        "that computed the vector (e.g. openai|fp32-cpu): other numerics never share entries"
    )
    kind: Series[str] = pa.Field(isin=["image", "text"])
    key: Series[str]
    dim: Series[int] = pa.Field(gt=0)
    vector: Series[object]

    @pa.dataframe_check(error="vector must be dim float32 values (bytes)")
    def vector_bytes(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [isinstance(v, bytes) and len(v) == 4 * d for v, d in zip(df["vector"], df["dim"])],
            index=df.index,
            dtype=bool,
        )

    @pa.dataframe_check(error="one row per (model, weights_id, kind, key)")
    def unique_keys(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["model", "weights_id", "kind", "key"]).any()
