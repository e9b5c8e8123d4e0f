"""Params section ``ocr`` (stage ``ocr_filter``): the text-image rejection rule (percent and fraction
thresholds) and the OCR model's numerics."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gavil.params.base import Device, Fraction, OcrPrecision, Percent, PosInt, Section, runtime_field


class OcrParams(Section):
    canvas_size: Annotated[int, Field(ge=32)] = 2560
    match_threshold: Percent = 80
    min_confidence: Fraction = 0.3
    min_word_len: PosInt = 4
    # numerics (gavil/models/precision.py, gavil/models/craft.py): both change the detections, so both are in the cache key
    # fp32 | bf16 | auto (bf16 where the CPU/GPU runs it natively) | int8 (CPU only, opt-in,
    # gavil/models/craft.py). fp32 is the default because it is the one that misses nothing
    # readtext reads (the very same computation, tests/test_ocr.py); on the OCR benchmark set bf16
    # and int8 each let through a word readtext read (benchmarks/ocr_agreement.py; issue 27's rule:
    # "the default is the one that misses nothing")
    precision: OcrPrecision = "fp32"
    device: Device = "auto"  # cpu | cuda | auto (cuda when torch sees one)
    # 1: on this 2-core CPU (bf16), 8 same-shaped images at once took 1.11-1.18x as long per image
    # (benchmarks/ocr_batch.py); 2 and 4, fp32 and GPUs were not measured
    batch_size: PosInt = runtime_field(1)
    # concepts per partition; None: enough partitions for 4 per worker, at least 32 concepts each
    # (stages/ocr_filter.py MIN_PARTITION; gavil/pipeline/parallel.py)
    partition_size: PosInt | None = runtime_field(None)
