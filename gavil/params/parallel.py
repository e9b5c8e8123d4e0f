"""Params section ``parallel``: how ``gavil stage`` (what ``dvc repro`` runs) spreads a partitioned
stage's partitions over worker processes on this machine (:mod:`gavil.pipeline.parallel`). Every key
is a runtime knob: outputs are the same bytes for any number of processes, so no stage depends on
this section in ``dvc.yaml``."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gavil.params.base import Fraction, PosInt, Section, runtime_field

#: MB, at least 64: below that no stage's worker (Python, pandas and its tables) starts.
MemoryMB = Annotated[int, Field(ge=64)]


class WorkerMemory(Section):
    """One worker process's peak memory (MB), per partitioned stage (measured on the sample and at
    scale, docs/benchmarks.md; raise it where your images or models are larger)."""

    crawl_images: MemoryMB = runtime_field(600)
    ocr_filter: MemoryMB = runtime_field(2500)
    score_candidates: MemoryMB = runtime_field(1500)
    evaluate: MemoryMB = runtime_field(2500)


class ParallelParams(Section):
    processes: PosInt | None = runtime_field(None)  # at most this many worker processes; None: one per core
    memory_fraction: Annotated[Fraction, Field(gt=0)] = runtime_field(0.8)  # of the available memory (psutil)
    worker_memory_mb: WorkerMemory = runtime_field(WorkerMemory())
