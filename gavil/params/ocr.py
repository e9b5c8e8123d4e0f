"""Params section ``ocr`` (stage ``ocr_filter``): the OCR engine and its settings, and the
text-image rejection rule (percent and fraction thresholds)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from gavil.params.base import Device, Fraction, NonNegInt, OcrPrecision, Percent, PosInt, Section, runtime_field


class OcrParams(Section):
    # ppocr: PP-OCRv6 small (ONNX Runtime, models in the rapidocr wheel; gavil/models/ppocr.py) |
    # easyocr: EasyOCR's readtext computation (the reference engine; precision/device/batch_size below).
    # Measured on the OCR truth set: docs/benchmarks.md "OCR against the truth"
    engine: Literal["ppocr", "easyocr"] = "ppocr"
    canvas_size: Annotated[int, Field(ge=32)] = 2560
    match_threshold: Percent = 80
    min_confidence: Fraction = 0.3
    min_word_len: PosInt = 4
    # adjacent OCR tokens joined beyond the concept's word count before matching: 1 joins
    # "LOBS" + "TER" for "lobster"; 0 is the one-token rule
    join_tokens: NonNegInt = 1
    # ppocr: the detector sees the image scaled up so its short side is at least this (px)
    ppocr_min_side: PosInt = 736
    # ppocr: the detector sees at most this (px) on the long side (PaddleOCR caps at 960; recognition
    # still reads each box from the full-resolution image); None: the whole canvas
    ppocr_max_side: PosInt | None = 800
    # easyocr numerics (gavil/models/precision.py, gavil/models/craft.py): both change the detections, so both are in the cache key
    # fp32 | bf16 | auto (bf16 where the CPU/GPU runs it natively) | int8 (CPU only, opt-in,
    # gavil/models/craft.py). fp32 is readtext's own computation (tests/stages/ocr_filter/test_ocr.py); on the OCR
    # benchmark set bf16 and int8 each let through a word readtext read (benchmarks/ocr_agreement.py)
    precision: OcrPrecision = "fp32"
    device: Device = "auto"  # cpu | cuda | auto (cuda when torch sees one)
    # easyocr: 1: on this 2-core CPU (bf16), 8 same-shaped images at once took 1.11-1.18x as long per
    # image (benchmarks/ocr_batch.py); 2 and 4, fp32 and GPUs were not measured
    batch_size: PosInt = runtime_field(1)
    # ppocr: ONNX Runtime intra-op threads per process, capped by the process's share of the cores
    # (OMP_NUM_THREADS, set for worker processes: gavil/pipeline/parallel.py); same readings for any number
    threads: PosInt = runtime_field(2)
    # concepts per partition; None: enough partitions for 4 per worker, at least 32 concepts each
    # (stages/ocr_filter.py MIN_PARTITION; gavil/pipeline/parallel.py)
    partition_size: PosInt | None = runtime_field(None)

    @model_validator(mode="after")
    def _engine_runs_there(self) -> OcrParams:
        """Cross-field rules, refused when the params load rather than when the stage runs:
        PP-OCR runs on the CPU only, and so does the int8 EasyOCR detector."""
        if self.engine == "ppocr" and self.device == "cuda":
            raise ValueError(
                "ocr.device: cuda needs ocr.engine: easyocr (ocr.engine: ppocr runs on ONNX Runtime's CPU"
                " kernels): set ocr.engine: easyocr, or ocr.device: auto/cpu"
            )
        if self.precision == "int8" and self.device == "cuda":
            raise ValueError(
                "ocr.precision: int8 runs on the CPU only (PyTorch's x86 quantized kernels): set ocr.device: cpu"
                " (or auto), or ocr.precision: auto/bf16 to use the GPU"
            )
        return self
