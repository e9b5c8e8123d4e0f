"""The params sections of the original pipeline stages (ingest ... evaluate, prefect), one frozen
model each, with defaults equal to the shipped ``params.yaml``. Registered in
:class:`gavil.params.Params`; new sections live in their own ``stages/_config_<topic>.py``."""

from __future__ import annotations

import re
import zoneinfo
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from gavil.domain.vocabulary import CANDIDATE_SIZES, CrawlSource
from gavil.params.base import (
    Device,
    Fraction,
    NonNegInt,
    Percent,
    PosInt,
    Precision,
    Seconds,
    Section,
    refuse_unknown,
    runtime_field,
)


class IngestParams(Section):
    path: str = "data/sample/winogavil/swow.csv"
    format: Literal["auto", "swow_r100", "swow_strength_r1", "swow_strength_r123", "winogavil_swow"] = "auto"
    lowercase: bool = True


class ProfanityParams(Section):
    extra_words: list[str] = ["butt"]
    allow_words: list[str] = []


class PerHost(Section):
    max_connections: PosInt = 2
    delay_s: Seconds = 0.25


class BingParams(Section):
    endpoint: str = "https://www.bing.com/images/async"


class GreedyParams(Section):
    url_template: str = (
        "https://commons.wikimedia.org/w/index.php?search={concept}&title=Special:MediaSearch&type=image"
    )

    @field_validator("url_template")
    @classmethod
    def _placeholder(cls, v: str) -> str:
        if "{concept}" not in v:
            raise ValueError("needs a {concept} placeholder")
        return v


class CrawlParams(Section):
    source: CrawlSource = "local"
    local_dir: str = "data/sample/images"
    urllist_path: str = "data/sample/winogavil/image2url.json"
    top_n: PosInt = 3
    threads: PosInt = runtime_field(8)
    partition_size: PosInt = runtime_field(500)
    timeout_s: Annotated[float, Field(gt=0)] = 10
    deadline_s: Annotated[float, Field(gt=0)] = 120  # s: a whole fetch (all hops, retries, waits, headers, body)
    retries: NonNegInt = 3
    backoff_s: Seconds = 0.5
    max_retry_after_s: NonNegInt = 60
    max_redirects: NonNegInt = 5
    max_bytes: PosInt = 20_000_000
    max_page_bytes: PosInt = 5_000_000  # bytes (decoded): a larger search-result page fails its search
    max_robots_bytes: Annotated[int, Field(ge=512_000)] = 524_288  # bytes of robots.txt parsed (RFC 9309: >= 500 KiB)
    per_host: PerHost = runtime_field(PerHost())
    user_agent: str = "winogavil-pipeline/0.1 (research benchmark crawler; honours robots.txt and X-Robots-Tag noai)"
    respect_robots: bool = True  # robots.txt (RFC 9309) and X-Robots-Tag noai on every hop; false: neither
    min_side: PosInt = 64
    # pixels, from the header before decoding; <= Pillow's MAX_IMAGE_PIXELS (its bomb warning)
    max_pixels: Annotated[int, Field(ge=1, le=89_478_485)] = 50_000_000
    # MB of decoded image data all validating threads hold at once (an image needing more: invalid)
    decode_budget_mb: Annotated[int, Field(ge=16)] = 384
    # Pillow format names kept (>= 1, any case); others are unsupported_format
    accept_formats: Annotated[list[str], Field(min_length=1)] = ["JPEG", "PNG", "WEBP", "GIF"]
    phash_max_distance: Annotated[int, Field(ge=0, le=64)] | None = 4
    phash_min_std: Annotated[float, Field(ge=0, le=128)] = 2.0  # grey levels: flatter images skip the phash test
    allow_private_hosts: bool = False
    bing: BingParams = BingParams()
    greedy: GreedyParams = GreedyParams()

    @field_validator("source", mode="before")
    @classmethod
    def _no_google(cls, v: Any) -> Any:
        if v == "google":
            raise ValueError("google is not supported: icrawler's Google parser is broken upstream; use bing")
        return v


class OcrParams(Section):
    canvas_size: Annotated[int, Field(ge=32)] = 640
    match_threshold: Percent = 80
    min_confidence: Fraction = 0.3
    min_word_len: PosInt = 4
    # numerics (gavil/models/precision.py): both change the detections, so both are in the cache key
    # fp32 | bf16 | auto (bf16 where the CPU/GPU runs it natively). auto: bf16 made the same
    # decisions as fp32 and as readtext on all 200 images of benchmarks/ocr.py, 2.8x faster
    # (README "Precision and device")
    precision: Precision = "auto"
    device: Device = "auto"  # cpu | cuda | auto (cuda when torch sees one)
    batch_size: PosInt = runtime_field(8)
    partition_size: PosInt = runtime_field(500)


class SwowInstanceParams(Section):
    max_associations: Annotated[int, Field(ge=2, le=4)] = 4
    min_r123_count: NonNegInt = 10
    min_concreteness: Annotated[float, Field(ge=1, le=5)] | None = 4.0  # Brysbaert 1-5; associations and distractors
    max_connectivity: NonNegInt | None = None  # drop instances with a larger candidates_connectivity_score


class InstancesParams(Section):
    seed: int = 13
    game_sets: dict[int, NonNegInt] = {5: 4, 6: 4, 10: 2, 12: 2}
    swow: SwowInstanceParams = SwowInstanceParams()

    @field_validator("game_sets")
    @classmethod
    def _sizes(cls, v: dict[int, int]) -> dict[int, int]:
        bad = sorted(set(v) - set(CANDIDATE_SIZES))
        if bad:
            raise ValueError(f"keys must be among {CANDIDATE_SIZES} (candidates per set), got {bad}")
        return v


class ScoreParams(Section):
    model: str = "RN50"
    pretrained: str | None = "openai"
    weights_path: str | None = None
    cache_dir: str | None = None
    allow_download: bool = True
    require_weights: bool = False
    precision: Precision = "fp32"  # the rival's scores define the benchmark: bf16 only by choice
    device: Device = "auto"
    batch_size: PosInt = runtime_field(32)
    threads: PosInt = runtime_field(2)
    loader_workers: NonNegInt = runtime_field(1)
    partition_size: PosInt = runtime_field(200)


class ReleaseFile(Section):
    file: str
    dataset: Literal["game", "swow_baseline"]


class CrowdParams(Section):
    creations_file: str = "crowd_creations.csv"
    solves_file: str = "crowd_solves.csv"
    accepted_status: list[str] = ["Submitted", "Approved"]
    columns: dict[str, str] = {
        "candidates": "Input.candidates",
        "cue_1": "Answer.cue1",
        "associations_1": "Answer.associations1",
        "score_fool_the_ai_1": "Answer.fool1",
        "cue_2": "Answer.cue2",
        "associations_2": "Answer.associations2",
        "score_fool_the_ai_2": "Answer.fool2",
        "instance_id": "Input.instance_id",
        "selection": "Answer.selection",
    }

    @field_validator("columns")
    @classmethod
    def _all_fields(cls, v: dict[str, str]) -> dict[str, str]:
        known = set(cls.model_fields["columns"].default)
        refuse_unknown(set(v) - known, known, "annotations.crowd.columns")
        missing = sorted(known - set(v))
        if missing:
            raise ValueError(f"missing {missing}: map each of our fields to the CSV column holding it")
        return v


class AnnotationsParams(Section):
    release_dir: str = "data/sample/winogavil"  # a folder (dvc.yaml depends on it; empty: no released files)
    release_files: list[ReleaseFile] = [
        ReleaseFile(file="game_5_6.csv", dataset="game"),
        ReleaseFile(file="game_10_12.csv", dataset="game"),
        ReleaseFile(file="swow.csv", dataset="swow_baseline"),
    ]
    raw_dir: str = "data/sample/raw"  # a folder of batch folders (dvc.yaml depends on it)
    annotator_key_env: str = "GAVIL_ANNOTATOR_KEY"
    # kf_... of the key ids are hashed with (README "Annotator ids"); null: the key recorded in
    # data/ledger/annotator_key.json by the last import must not change
    annotator_key_fingerprint: Annotated[str, Field(pattern=r"^kf_[0-9a-f]{16}$")] | None = None
    # columns holding a person's identity in any input file: hashed before anything is stored
    identity_columns: list[str] = [
        "WorkerId",
        "spymaster_id",
        "solver_id",
        "worker_id",
        "workerId",
        "Turkle.Username",
        "Turkle.User",
        "PROLIFIC_PID",
        "participant_id",
        "user_id",
        "username",
        "email",
    ]
    crowd: CrowdParams = CrowdParams()


class RetiredEntry(Section):
    """One retired benchmark instance: its dataset, its permanent ``ID`` and why (README
    "Retiring an instance")."""

    dataset: Literal["game", "swow_baseline"]
    ID: NonNegInt
    reason: Annotated[str, Field(min_length=3, pattern=r"\S")]


class SelectParams(Section):
    min_solver_jaccard: Fraction = 0.8
    min_solvers: PosInt = 3
    retired: list[RetiredEntry] = []

    @field_validator("retired")
    @classmethod
    def _once(cls, v: list[RetiredEntry]) -> list[RetiredEntry]:
        keys = [(e.dataset, e.ID) for e in v]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"each (dataset, ID) is retired once; repeated: {dup}")
        return v


class ExportParams(Section):
    copy_images: bool = True


class ModelEntry(Section):
    name: str
    kind: Literal["open_clip", "text"]
    model: str
    pretrained: str | None = None
    weights_path: str | None = None

    @model_validator(mode="after")
    def _explicit_pretrained(self) -> ModelEntry:
        if self.kind == "open_clip" and "pretrained" not in self.model_fields_set:
            raise ValueError(f"model {self.name!r}: set 'pretrained' (a tag, or null for random weights explicitly)")
        return self

    def as_dict(self) -> dict[str, Any]:
        """The entry as written (for :meth:`gavil.models.loading.ModelSpec.from_params`)."""
        return self.model_dump(exclude_unset=True)


class EvaluateParams(Section):
    models: list[ModelEntry] = [
        ModelEntry(name="clip-rn50", kind="open_clip", model="RN50", pretrained="openai", weights_path=None),
        ModelEntry(name="clip-vit-b-32", kind="open_clip", model="ViT-B-32", pretrained="openai", weights_path=None),
        ModelEntry(name="text-minilm-l6", kind="text", model="all-MiniLM-L6-v2"),
    ]
    bootstrap: NonNegInt = 1000
    seed: int = 0
    precision: Precision = "fp32"  # open_clip models (text models always run fp32)
    device: Device = "auto"
    release_predictions_dir: str = "data/sample/winogavil/test_sets_with_zero_shot_predictions"

    @field_validator("models")
    @classmethod
    def _unique(cls, v: list[ModelEntry]) -> list[ModelEntry]:
        names = [m.name for m in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"model names must be unique; repeated: {dup}")
        return v


class TaskRunnerParams(Section):
    kind: Literal["thread", "dask"] = "thread"
    threads: PosInt | None = None
    dask_address: str | None = None
    dask_workers: PosInt = 2
    dask_threads_per_worker: PosInt = 1


_CRON_FIELD = re.compile(r"^[\w*/,?#LW-]+$")


class DeploymentParams(Section):
    cron: str | None = None  # five (or six) cron fields, e.g. "0 3 * * *"; null: on demand
    stages: list[str] | None = None

    @field_validator("cron")
    @classmethod
    def _cron(cls, v: str | None) -> str | None:
        if v is not None and not (5 <= len(v.split()) <= 6 and all(_CRON_FIELD.match(f) for f in v.split())):
            raise ValueError("not a cron expression like '0 3 * * *' (minute hour day month weekday)")
        return v


class PrefectParams(Section):
    """Orchestration only: no stage reads it (flows/build.py, flows/deploy.py)."""

    task_timeout_s: Annotated[float, Field(gt=0)] | None = 21600
    network_retries: NonNegInt = 2
    retry_delay_s: Seconds = 30
    timezone: str = "UTC"  # an IANA time zone name for the crons
    task_runner: TaskRunnerParams = TaskRunnerParams()
    deployments: dict[str, DeploymentParams] = {
        "nightly-annotations": DeploymentParams(
            cron="0 3 * * *", stages=["import_annotations", "select_instances", "export", "evaluate"]
        ),
        "full-build": DeploymentParams(cron=None, stages=None),
    }

    @field_validator("timezone")
    @classmethod
    def _zone(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError("not an IANA time zone name (e.g. UTC, Europe/Berlin)") from None
        return v
