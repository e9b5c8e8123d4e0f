"""Batches whose shape does not depend on what else is embedded, so a vector is a function of its
text (or image) alone, as far as the hardware allows.

Measured on this project's CPU build (torch 2.13, all-MiniLM-L6-v2, 2 threads): with
sentence-transformers' own batching (each batch padded to its longest text, batch composition
following the input), 7 of 600 vectors changed when the same texts came in another order and
58 of 250 when embedded among other texts (max |diff| 1.8e-7) — enough to move AfLite's flags
(1,296 vs 1,395 on the release). The kernels a batch runs depend on its shape; with a fixed shape
they do not depend on the other rows. So :func:`encode_texts` embeds each text in a batch of
exactly ``rows`` texts that all have its token length (padded with copies of the batch's first
text), i.e. always in a ``(rows, length)`` tensor: no padding tokens, no neighbour-dependent shape.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

import numpy as np


class SentenceEncoder(Protocol):
    """What :func:`encode_texts` uses of a ``sentence_transformers.SentenceTransformer``."""

    @property
    def tokenizer(self) -> Callable[..., Mapping[str, Sequence[Sequence[int]]]]: ...

    @property
    def max_seq_length(self) -> int | None: ...

    def encode(
        self, inputs: list[str], *, batch_size: int, normalize_embeddings: bool, show_progress_bar: bool
    ) -> np.ndarray | object: ...


#: Texts per forward pass: every batch is exactly this many rows (short groups are padded).
TEXT_ROWS = 16
#: Rows of every open_clip forward pass on a CPU, images and prompts alike (the last batch of a
#: call is padded with copies of its first row): :func:`gavil.models.loading.forward_rows`.
CLIP_ROWS = 16


def length_groups(lengths: Sequence[int], rows: int) -> list[list[int]]:
    """Indices into ``lengths`` grouped by equal length (groups in length order, indices ascending),
    each group cut into chunks of at most ``rows``."""
    by_len: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        by_len.setdefault(int(n), []).append(i)
    return [g[j : j + rows] for n in sorted(by_len) for g in [by_len[n]] for j in range(0, len(g), rows)]


def encode_texts(st: SentenceEncoder, texts: Sequence[str], rows: int = TEXT_ROWS) -> np.ndarray:
    """L2-normalised sentence-transformers embeddings of ``texts`` ((n, d) float32, input order),
    each computed in a ``(rows, token length)`` batch of texts of its own token length.

    Args:
        st: a loaded ``SentenceTransformer`` (its tokenizer gives the token lengths, truncated at
            its ``max_seq_length`` as ``encode`` does).
        texts: the texts; callers pass them sorted and unique (:class:`gavil.models.embeddings.Cache`),
            so the groups themselves are canonical too.
        rows: batch rows (a batch short of ``rows`` is padded with copies of its first text).
    """
    if not len(texts):
        return np.zeros((0, 0), dtype=np.float32)
    enc = st.tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=st.max_seq_length)
    lengths = [len(ids) for ids in enc["input_ids"]]
    out: np.ndarray | None = None
    for chunk in length_groups(lengths, rows):
        batch = [texts[i] for i in chunk]
        batch += [batch[0]] * (rows - len(batch))
        vecs = np.asarray(
            st.encode(batch, batch_size=rows, normalize_embeddings=True, show_progress_bar=False), dtype=np.float32
        )
        if out is None:
            out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float32)
        out[chunk] = vecs[: len(chunk)]
    assert out is not None
    return out
