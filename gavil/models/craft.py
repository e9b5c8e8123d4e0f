"""EasyOCR's CRAFT text detector at the numerics ``ocr.precision`` names (stage ``ocr_filter``).

- ``fp32``: CRAFT as EasyOCR builds it, what ``readtext`` runs.
- ``bf16``: BatchNorms folded into the convolutions (:func:`fold_batch_norm`), channels-last, under
  bf16 autocast (:func:`fast_detector`); ``auto`` picks it where the hardware runs bf16 natively.
- ``int8`` (CPU only, opt-in): post-training static quantization with PyTorch's FX graph mode on
  the ``x86`` engine (oneDNN/FBGEMM kernels; AVX-512 VNNI where the CPU has it): per-channel int8
  weights, uint8 activations (``reduce_range``), BatchNorm and ReLU fused into the convolutions.
  The activation scales are not measured at run time: they are read from
  :data:`QPARAMS_PATH`, written once by ``benchmarks/ocr_int8_calibrate.py`` from histogram
  observers run over the OCR benchmark set's calibration seed, so the quantized detector depends
  only on the commit (every machine with the same torch builds the same model). Integer
  accumulation makes its outputs independent of the thread count. On this project's 2-core
  AVX-512 CPU the int8 detector is about 6.0x faster than fp32 and 2.2x faster than bf16
  (``benchmarks/ocr_limits.py``); on the 240-image OCR set it let 2 of the 105 words ``readtext``
  read through (``benchmarks/ocr_agreement.py``), so it is opt-in; the default is fp32.

The recogniser always stays fp32 (its confidences moved by up to 0.2 under bf16,
``tests/pipeline/test_precision.py``), and it only runs where CRAFT found text.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, NotRequired, Protocol, TypedDict

from gavil.errors import ParamsError

if TYPE_CHECKING:
    import torch
    from torch.ao.quantization.observer import ObserverBase


class ObserverQParams(TypedDict):
    """One activation's int8 quantization: real value = ``scale`` * (q - ``zero_point``)."""

    scale: float
    zero_point: int


class QParams(TypedDict):
    """:data:`QPARAMS_PATH`'s content: the torch that traced CRAFT, and each activation observer's
    quantization by the name FX gives it (``activation_post_process_<n>``)."""

    torch: str
    observers: dict[str, ObserverQParams]
    calibration: NotRequired[dict[str, object]]  # how the file was made (benchmarks/ocr_int8_calibrate.py)


class HasDetector(Protocol):
    """What :func:`fast_detector` uses of an ``easyocr.Reader``: its CRAFT network."""

    detector: torch.nn.Module


#: Read at run time and changing outputs: a code dep of the stages that import this module
#: (:mod:`gavil.pipeline.codedeps`).
__data_files__ = ("craft_int8_qparams.json",)
#: ``ocr.precision`` values.
OCR_PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "int8")
#: The int8 detector's activation scales and zero points, by observer name (JSON).
QPARAMS_PATH = Path(__file__).with_name(__data_files__[0])
_EXAMPLE = (1, 3, 64, 64)  # FX traces shapes symbolically: any input size runs


def resolve_ocr(precision: str, device: str) -> tuple[str, str]:
    """``ocr.precision`` / ``ocr.device`` -> resolved (``fp32``|``bf16``|``int8``, ``cpu``|``cuda``).

    ``int8`` runs on the CPU: ``device: auto`` resolves to ``cpu`` with it.

    Raises:
        ParamsError: ``int8`` with ``device: cuda``, or what :func:`gavil.models.precision.resolve`
            raises for the others (unknown names, bf16 or cuda the machine lacks).
    """
    from gavil.models.precision import resolve, resolve_device

    if precision != "int8":
        return resolve(precision, device)
    if device == "cuda":
        resolve_device(device)  # the clearer error where there is no GPU at all
        raise ParamsError(
            "ocr.precision: int8 runs on the CPU only (PyTorch's x86 quantized kernels): set ocr.device: cpu"
            " (or auto), or ocr.precision: auto/bf16 to use the GPU"
        )
    return "int8", "cpu"


def numerics_label(precision: str, device: str) -> str:
    """The cache-key label of resolved numerics: ``fp32-cpu``, ``bf16-cuda``, or for int8 the
    stored scales' digest too (``int8-cpu-q1a2b3c4d``): new scales never reuse old detections."""
    from gavil.models.precision import numerics_id

    label = numerics_id(precision, device)
    return f"{label}-q{qparams_digest()}" if precision == "int8" else label


@cache
def qparams_digest() -> str:
    """First 8 hex digits of the sha256 of :data:`QPARAMS_PATH`'s bytes."""
    return hashlib.sha256(QPARAMS_PATH.read_bytes()).hexdigest()[:8]


def fold_batch_norm(module: torch.nn.Module) -> torch.nn.Module:
    """Fold every eval-mode ``BatchNorm2d`` that directly follows a ``Conv2d`` inside an
    ``nn.Sequential`` into that convolution (torch's ``fuse_conv_bn_eval``), recursively; returns
    ``module`` changed in place. CRAFT's VGG16-BN backbone and U-net blocks are such pairs.

    Same function, one pass fewer: in fp32 the outputs move by ~1e-7 (float rounding); under bf16
    the saved BatchNorm pass is ~12 % of the detector's time on this CPU (``benchmarks/ocr.py``)."""
    import torch
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    for name, child in module.named_children():
        if isinstance(child, torch.nn.Sequential):
            mods, i = list(child), 0
            out: list[torch.nn.Module] = []
            while i < len(mods):
                conv, nxt = mods[i], mods[i + 1] if i + 1 < len(mods) else None
                if isinstance(conv, torch.nn.Conv2d) and isinstance(nxt, torch.nn.BatchNorm2d) and not nxt.training:
                    out.append(fuse_conv_bn_eval(conv, nxt))
                    i += 2
                else:
                    out.append(fold_batch_norm(conv))
                    i += 1
            setattr(module, name, torch.nn.Sequential(*out))
        else:
            fold_batch_norm(child)
    return module


def fast_detector(reader: HasDetector, precision: str, device: str) -> None:
    """Replace ``reader.detector`` (an ``easyocr.Reader``'s CRAFT) for resolved ``precision``:
    ``bf16``: channels-last, BatchNorms folded, under bf16 autocast; ``int8``:
    :func:`quantize_int8`; ``fp32``: left exactly as EasyOCR built it. Either way the detector
    hands back float32 maps, the dtype EasyOCR's post-processing (NumPy) expects.

    Raises:
        RuntimeError: int8 whose stored scales do not fit this torch/EasyOCR (see :func:`quantize_int8`).
    """
    if precision == "int8":
        reader.detector = quantize_int8(reader.detector)
        return
    if precision != "bf16":
        return
    import torch

    from gavil.models.precision import autocast, channels_last

    class Detector(torch.nn.Module):
        def __init__(self, net: torch.nn.Module) -> None:
            super().__init__()
            self.net = channels_last(fold_batch_norm(net.eval()))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with autocast(precision, device):
                y, feature = self.net(x.contiguous(memory_format=torch.channels_last))
            return y.float(), feature.float()

    reader.detector = Detector(reader.detector).eval()


def prepare_int8(net: torch.nn.Module) -> torch.fx.GraphModule:
    """A copy of ``net`` (CRAFT, eval) prepared for int8 static quantization on the ``x86``
    engine (FX graph mode, torch's default ``x86`` qconfig: histogram observers on activations,
    per-channel min/max on weights); ``net`` is left as it was.

    Raises:
        RuntimeError: this torch has no ``x86`` quantized engine.
    """
    import copy

    import torch

    if "x86" not in torch.backends.quantized.supported_engines:
        raise RuntimeError("ocr.precision: int8 needs PyTorch's x86 quantized engine, which this torch lacks")
    torch.backends.quantized.engine = "x86"
    with _quiet():  # importing torch.ao.quantization warns too
        from torch.ao.quantization import get_default_qconfig_mapping
        from torch.ao.quantization.quantize_fx import prepare_fx

        return prepare_fx(copy.deepcopy(net).eval(), get_default_qconfig_mapping("x86"), (torch.zeros(_EXAMPLE),))


def _observers(prepared: torch.nn.Module) -> dict[str, ObserverBase]:
    """The activation observers of a :func:`prepare_int8` model, by module name."""
    from torch.ao.quantization.observer import ObserverBase

    return {n: m for n, m in prepared.named_modules() if isinstance(m, ObserverBase) and "activation_post_process" in n}


def calibrate_int8(net: torch.nn.Module, inputs: list[torch.Tensor]) -> QParams:
    """Run ``inputs`` (tensors 1 x 3 x H x W, normalised as EasyOCR does: ``normalizeMeanVariance``)
    through a :func:`prepare_int8` copy of ``net``; return what :data:`QPARAMS_PATH` stores:
    ``{"torch": version, "observers": {name: {"scale": float, "zero_point": int}}}``."""
    import torch

    prepared = prepare_int8(net)
    with torch.no_grad():
        for x in inputs:
            prepared(x)
    obs: dict[str, ObserverQParams] = {}
    for name, m in sorted(_observers(prepared).items()):
        qparams: Callable[[], tuple[torch.Tensor, torch.Tensor]] = m.calculate_qparams  # torch leaves it untyped
        scale, zero_point = qparams()
        obs[name] = {"scale": float(scale.reshape(-1)[0]), "zero_point": int(zero_point.reshape(-1)[0])}
    return {"torch": torch.__version__, "observers": obs}


def quantize_int8(net: torch.nn.Module, qparams: QParams | None = None) -> torch.nn.Module:
    """``net`` (CRAFT, eval, fp32) -> its int8 model (a ``GraphModule`` returning float32 maps),
    each activation observer's scale and zero point taken from ``qparams`` (default: the file
    :data:`QPARAMS_PATH`), not from data; weights are quantized from ``net`` itself.

    Raises:
        RuntimeError: the stored observers are not this model's (another torch or EasyOCR traced
            it differently): recalibrate with ``python benchmarks/ocr_int8_calibrate.py``.
    """
    import torch
    from torch.ao.quantization.quantize_fx import convert_fx

    stored: dict[str, ObserverQParams] = (qparams or json.loads(QPARAMS_PATH.read_text()))["observers"]
    prepared = prepare_int8(net)
    observers = _observers(prepared)
    if set(observers) != set(stored):
        raise RuntimeError(
            f"{QPARAMS_PATH.name} holds scales for {len(stored)} observers, this torch traced {len(observers)}"
            " different ones: recalibrate with `python benchmarks/ocr_int8_calibrate.py` (or use ocr.precision: bf16)"
        )
    for name, m in observers.items():
        q = stored[name]
        scale = torch.tensor([q["scale"]], dtype=torch.float32)
        zero_point = torch.tensor([q["zero_point"]], dtype=torch.int32)
        # the stored values, not the data's (convert_fx asks each observer for them)
        m.calculate_qparams = _fixed(scale, zero_point)  # type: ignore[method-assign]
    with _quiet():
        return _quiet_module(convert_fx(prepared)).eval()


def _fixed(scale: torch.Tensor, zero_point: torch.Tensor) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """An observer's ``calculate_qparams`` that answers ``(scale, zero_point)`` whatever it saw."""

    def calculate_qparams(**_: object) -> tuple[torch.Tensor, torch.Tensor]:
        return scale, zero_point

    return calculate_qparams


#: torch 2.13 warns, at preparation, conversion and in every forward, that its quantized tensor
#: types and the observers' ``reduce_range`` will be removed in a future release (the FX path then
#: moves to torchao; constraints.txt pins torch).
_DEPRECATED = r"(torch\.quantize_per_tensor, torch\.quantize_per_channel and other quantized tensor|Please use quant_min and quant_max)"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """That one deprecation warning silenced (the stage's log is for its own findings)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_DEPRECATED, category=UserWarning)
        yield


def _quiet_module(net: torch.nn.Module) -> torch.nn.Module:
    """``net`` wrapped so that its forward runs under :func:`_quiet`."""
    import torch

    class Quiet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            with _quiet():
                maps: tuple[torch.Tensor, torch.Tensor] = self.net(x)  # CRAFT's (score maps, features)
            return maps

    return Quiet()
