"""Typed params: one frozen model per ``params.yaml`` section, parsed and validated once.

- **Unknown keys are refused**, naming the closest valid key (``select.min_solver_jacard`` ->
  "did you mean select.min_solver_jaccard?").
- **Units are part of the type.** Thresholds are fractions in [0, 1] (``select.min_solver_jaccard``,
  ``ocr.min_confidence``) except where the library speaks percent (``ocr.match_threshold``: a
  rapidfuzz ratio, 0-100). A fraction where a percent is expected (``match_threshold: 0.8``) or a
  percent where a fraction is expected (``min_solver_jaccard: 80``) is an error that says which.
- **Runtime knobs** (``runtime=True`` below: partition sizes, threads, batch sizes, loader workers,
  politeness delays) do not change a stage's outputs, so ``dvc.yaml`` leaves them out of the
  stage's params and changing them re-runs nothing. The ``prefect`` section is orchestration only.
- Every section has defaults equal to the shipped ``params.yaml``, so a partial mapping (a test,
  a notebook) parses too; ``dvc.yaml`` still lists each key, so the file must hold them all.

Errors are :class:`stages.errors.ParamsError` with one line per problem and the fix.
"""

from __future__ import annotations

import difflib
import os
import re
import zoneinfo
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from stages.domain import CANDIDATE_SIZES, CrawlSource
from stages.errors import ParamsError


def _runtime(default: Any = ..., **kw: Any) -> Any:
    """A field that does not change outputs: left out of dvc.yaml's params."""
    return Field(default, json_schema_extra={"runtime": True}, **kw)


def _percent(v: float) -> float:
    if not 0 <= v <= 100:
        raise ValueError(f"{v} is not a percent in [0, 100]")
    if 0 < v <= 1:
        raise ValueError(f"this threshold is a percent (0-100); {v} looks like a fraction: write {v * 100:g}")
    return v


def _fraction(v: float) -> float:
    if 5 <= v <= 100:
        raise ValueError(f"this threshold is a fraction (0-1); {v} looks like a percent: write {v / 100:g}")
    if not 0 <= v <= 1:
        raise ValueError(f"{v} is not a fraction in [0, 1]")
    return v


Percent = Annotated[float, AfterValidator(_percent)]
Fraction = Annotated[float, AfterValidator(_fraction)]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]


class Section(BaseModel):
    """Base of every section: strict types, unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    @classmethod
    def output_keys(cls) -> list[str]:
        """Keys that can change outputs (``dvc.yaml`` params), in declaration order."""
        return [k for k, f in cls.model_fields.items() if not (f.json_schema_extra or {}).get("runtime")]  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------- sections
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
    threads: PosInt = _runtime(8)
    partition_size: PosInt = _runtime(500)
    timeout_s: Annotated[float, Field(gt=0)] = 10
    deadline_s: Annotated[float, Field(gt=0)] = 120  # s: a whole fetch (all hops, retries, waits, headers, body)
    retries: NonNegInt = 3
    backoff_s: Seconds = 0.5
    max_retry_after_s: NonNegInt = 60
    max_redirects: NonNegInt = 5
    max_bytes: PosInt = 20_000_000
    max_page_bytes: PosInt = 5_000_000  # bytes (decoded): a larger search-result page fails its search
    max_robots_bytes: Annotated[int, Field(ge=512_000)] = 524_288  # bytes of robots.txt parsed (RFC 9309: >= 500 KiB)
    per_host: PerHost = _runtime(PerHost())
    user_agent: str = "winogavil-pipeline/0.1 (research benchmark crawler; honours robots.txt and X-Robots-Tag noai)"
    respect_robots: bool = True  # robots.txt (RFC 9309) and X-Robots-Tag noai on every hop; false: neither
    min_side: PosInt = 64
    max_pixels: PosInt = 50_000_000
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
    gpu: bool = False
    batch_size: PosInt = _runtime(8)
    partition_size: PosInt = _runtime(500)


class SwowInstanceParams(Section):
    max_associations: Annotated[int, Field(ge=2, le=4)] = 4
    min_r123_count: NonNegInt = 10


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
    batch_size: PosInt = _runtime(32)
    threads: PosInt = _runtime(2)
    loader_workers: NonNegInt = _runtime(1)
    partition_size: PosInt = _runtime(200)


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
        _refuse_unknown(set(v) - known, known, "annotations.crowd.columns")
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


class SelectParams(Section):
    min_solver_jaccard: Fraction = 0.8
    min_solvers: PosInt = 3


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
        """The entry as written (for :meth:`stages._models.ModelSpec.from_params`)."""
        return self.model_dump(exclude_unset=True)


class EvaluateParams(Section):
    models: list[ModelEntry] = [
        ModelEntry(name="clip-rn50", kind="open_clip", model="RN50", pretrained="openai", weights_path=None),
        ModelEntry(name="clip-vit-b-32", kind="open_clip", model="ViT-B-32", pretrained="openai", weights_path=None),
        ModelEntry(name="text-minilm-l6", kind="text", model="all-MiniLM-L6-v2"),
    ]
    bootstrap: NonNegInt = 1000
    seed: int = 0
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


class Params(Section):
    """All of ``params.yaml``. Attribute access: ``params.select.min_solver_jaccard``."""

    ingest: IngestParams = IngestParams()
    profanity: ProfanityParams = ProfanityParams()
    crawl: CrawlParams = CrawlParams()
    ocr: OcrParams = OcrParams()
    instances: InstancesParams = InstancesParams()
    score: ScoreParams = ScoreParams()
    annotations: AnnotationsParams = AnnotationsParams()
    select: SelectParams = SelectParams()
    export: ExportParams = ExportParams()
    evaluate: EvaluateParams = EvaluateParams()
    prefect: PrefectParams = PrefectParams()

    def replace(self, **sections: Mapping[str, Any]) -> Params:
        """A copy with some sections' keys changed (validated), e.g. ``replace(select={"min_solvers": 2})``."""
        data = self.model_dump()
        for name, changes in sections.items():
            data[name] = {**data[name], **changes}
        return parse_params(data)


SECTIONS: dict[str, type[Section]] = {
    name: cast(type[Section], f.annotation) for name, f in Params.model_fields.items()
}


# ---------------------------------------------------------------------------------------------- parsing
def _refuse_unknown(unknown: set[str], known: set[str], where: str) -> None:
    if unknown:
        key = sorted(unknown)[0]
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"did you mean {where}.{close[0]}?" if close else f"valid keys: {', '.join(sorted(known))}"
        raise ValueError(f"unknown key {key!r}: {hint}")


def _inner_model(tp: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``list[X]``, ``dict[str, X]``, ``X | None``)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the key at ``loc`` (for suggestions), through list items
    (``evaluate.models.1``) and dict values (``prefect.deployments.full-build``)."""
    ann: Any = Params
    for part in loc[:-1]:
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is not None and isinstance(part, str) and part in model.model_fields:
            ann = model.model_fields[part].annotation
        else:  # a list index or a dict key: step into the container's element
            ann = _inner_model(ann)
            if ann is None:
                return None
    return _inner_model(ann)


def _describe(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    where = ".".join(str(x) for x in loc if not str(x).startswith(("function-", "literal[")))
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = _model_at(loc)
        known = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        prefix = ".".join(str(x) for x in loc[:-1])
        hint = (
            f"did you mean {prefix + '.' if prefix else ''}{close[0]}?"
            if close
            else f"valid keys here: {', '.join(known)}"
        )
        return f"unknown key {where}: {hint}"
    msg = str(err["msg"]).removeprefix("Value error, ")
    if kind == "missing":
        return f"{where} is required"
    shown = repr(err.get("input"))
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return f"{where} = {shown}: {msg}"


def parse_params(data: Mapping[str, Any], source: str = "params.yaml") -> Params:
    """Validate a params mapping (all of ``params.yaml`` or some sections).

    Raises:
        ParamsError: one line per problem, each naming the key and the fix.
    """
    if not isinstance(data, Mapping):
        raise ParamsError(f"{source}: expected a mapping of sections ({', '.join(SECTIONS)})")
    try:
        return Params.model_validate(dict(data))
    except ValidationError as e:
        lines = sorted(dict.fromkeys(_describe(err) for err in e.errors()))
        if len(lines) == 1:
            raise ParamsError(f"{source}: {lines[0]}") from None
        more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
        raise ParamsError(f"{source}: {len(lines)} problems:\n  {lines[0]}\n  {lines[1]}{more}") from None


def load_params(path: str | os.PathLike = "params.yaml") -> Params:
    """Read and validate ``params.yaml``.

    Raises:
        ParamsError: missing file, YAML syntax error, unknown key or bad value (message names the key).
    """
    p = Path(path)
    if not p.is_file():
        raise ParamsError(f"{p} is not a file: run from the project root (where dvc.yaml is), or pass --params")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except UnicodeDecodeError as e:
        raise ParamsError(
            f"{p}: not UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start}): save it as UTF-8"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{p}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    params = parse_params(data or {}, str(p))
    missing = [
        f"{sec}.{k}" for sec, model in SECTIONS.items() for k in model.model_fields if k not in (data.get(sec) or {})
    ]
    if missing:
        raise ParamsError(
            f"{p} lacks {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}: write every key (dvc.yaml tracks "
            "each one; the shipped params.yaml has them all)"
        )
    return params


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key written twice in one mapping (YAML would keep the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def as_params(params: Params | Mapping[str, Any]) -> Params:
    """``params`` if already parsed, else :func:`parse_params` of it (tests and notebooks pass dicts)."""
    return params if isinstance(params, Params) else parse_params(params, "params")
