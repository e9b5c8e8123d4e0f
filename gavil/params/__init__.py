"""Typed params: :class:`Params` assembles one frozen model per ``params.yaml`` section and
:func:`load_params` / :func:`parse_params` validate them once.

**Where a key goes**: each section's type lives in its own module, named after the section
(``ocr`` -> :mod:`gavil.params.ocr`; ``adversarial_filter`` and ``aflite`` share
:mod:`gavil.params.adversarial`); shared building blocks (units, :class:`~gavil.params.base.Section`)
are in :mod:`gavil.params.base`. A stage imports its own section's type; ``dvc.yaml`` makes a
section's module a code dependency of exactly the stages that read the section
(:mod:`gavil.pipeline.codedeps`). Models are entries of the ``models`` section
(:mod:`gavil.params.models`) that consumers name (``score.model: rival``); a name that is not an
entry, or an entry of the wrong kind, is refused here.

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
  a notebook) parses too; ``dvc.yaml`` still lists each key, so the file must hold them all
  (``models`` entries excepted: a key left out of an entry takes its default and is no DVC param).

Errors are :class:`gavil.errors.ParamsError` with one line per problem and the fix.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast, get_args

import yaml
from pydantic import BaseModel, RootModel, ValidationError

from gavil.errors import ParamsError
from gavil.params.adversarial import AdversarialFilterParams, AfliteParams
from gavil.params.annotations import AnnotationsParams
from gavil.params.base import Section
from gavil.params.crawl import CrawlParams
from gavil.params.evaluate import EvaluateParams
from gavil.params.export import ExportParams
from gavil.params.game import GameParams
from gavil.params.ingest import IngestParams
from gavil.params.instances import InstancesParams
from gavil.params.models import ModelsParams
from gavil.params.ocr import OcrParams
from gavil.params.paper import PaperParams
from gavil.params.parallel import ParallelParams
from gavil.params.prefect import PrefectParams
from gavil.params.profanity import ProfanityParams
from gavil.params.review import ReviewParams
from gavil.params.score import ScoreParams
from gavil.params.select import SelectParams

__all__ = ["SECTIONS", "Params", "as_params", "load_params", "parse_params"]


class Params(Section):
    """All of ``params.yaml``. Attribute access: ``params.select.min_solver_jaccard``,
    ``params.models[params.score.model].precision``."""

    ingest: IngestParams = IngestParams()
    profanity: ProfanityParams = ProfanityParams()
    crawl: CrawlParams = CrawlParams()
    ocr: OcrParams = OcrParams()
    review: ReviewParams = ReviewParams()
    instances: InstancesParams = InstancesParams()
    models: ModelsParams = ModelsParams()
    score: ScoreParams = ScoreParams()
    annotations: AnnotationsParams = AnnotationsParams()
    select: SelectParams = SelectParams()
    export: ExportParams = ExportParams()
    evaluate: EvaluateParams = EvaluateParams()
    adversarial_filter: AdversarialFilterParams = AdversarialFilterParams()
    aflite: AfliteParams = AfliteParams()
    paper: PaperParams = PaperParams()
    parallel: ParallelParams = ParallelParams()
    prefect: PrefectParams = PrefectParams()
    game: GameParams = GameParams()

    def replace(self, **sections: Mapping[str, Any]) -> Params:
        """A copy with some sections' keys changed (validated), e.g. ``replace(select={"min_solvers": 2})``;
        ``models`` changes merge into each named entry: ``replace(models={"rival": {"device": "cpu"}})``."""
        data = self.model_dump(exclude_unset=True)
        data["models"] = self.models.as_data()
        for name, changes in sections.items():
            if name == "models":
                data[name] = {**data[name], **{n: {**data[name].get(n, {}), **e} for n, e in changes.items()}}
            else:
                data[name] = {**data.get(name, {}), **changes}
        return parse_params(data)


#: Section name -> its type (``models`` is a mapping of entries, :class:`~gavil.params.models.ModelsParams`).
SECTIONS: dict[str, type[BaseModel]] = {
    name: cast(type[BaseModel], f.annotation) for name, f in Params.model_fields.items()
}


# ---------------------------------------------------------------------------------------------- parsing
def inner_model(tp: object) -> type[BaseModel] | None:
    """The pydantic model inside an annotation (``X``, ``list[X]``, ``dict[str, X]``, ``X | None``)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in get_args(tp):
        found = inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the key at ``loc`` (for suggestions), through list items
    (``evaluate.models.1``) and dict values (``prefect.deployments.full-build``)."""
    ann: Any = Params
    for part in loc[:-1]:
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if model is not None and issubclass(model, RootModel):  # models: a mapping of entries
            ann, model = model.model_fields["root"].annotation, None
        if model is not None and isinstance(part, str) and part in model.model_fields:
            ann = model.model_fields[part].annotation
        else:  # a list index or a dict key: step into the container's element
            ann = inner_model(ann)
            if ann is None:
                return None
    found = inner_model(ann)
    return inner_model(found.model_fields["root"].annotation) if found and issubclass(found, RootModel) else found


#: Keys of earlier params.yaml layouts that now live in a ``models:`` entry (the consumer names the entry).
MOVED_TO_MODELS: dict[str, str] = {
    **{
        f"score.{k}": "models[score.model]"
        for k in (
            "pretrained",
            "weights_path",
            "cache_dir",
            "allow_download",
            "precision",
            "device",
            "batch_size",
            "threads",
            "loader_workers",
        )
    },
    "evaluate.precision": "models[evaluate.models]",
    "evaluate.device": "models[evaluate.models]",
}


def _describe(err: Mapping[str, Any]) -> str:
    loc = tuple(err["loc"])
    where = ".".join(str(x) for x in loc if not str(x).startswith(("function-", "literal[")))
    kind = err["type"]
    if kind == "extra_forbidden" and where in MOVED_TO_MODELS:
        return (
            f"{where} moved into the models: section: set {MOVED_TO_MODELS[where]}.{loc[-1]} "
            f"(the entry that {MOVED_TO_MODELS[where].split('[')[-1].rstrip(']')} names) and remove {where}"
        )
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
        params = Params.model_validate(dict(data))
    except ValidationError as e:
        _refuse(source, sorted(dict.fromkeys(_describe(err) for err in e.errors())))
    _refuse(source, _bad_model_refs(params))
    return params


def _refuse(source: str, lines: list[str]) -> None:
    """Raise one ParamsError for ``lines`` (the first two shown), or nothing without any."""
    if not lines:
        return
    if len(lines) == 1:
        raise ParamsError(f"{source}: {lines[0]}") from None
    more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
    raise ParamsError(f"{source}: {len(lines)} problems:\n  {lines[0]}\n  {lines[1]}{more}") from None


def _bad_model_refs(params: Params) -> list[str]:
    """One line per reference (a section's :attr:`~gavil.params.base.Section.MODEL_REFS` field) to a
    name that is not a ``models`` entry, or to an entry of the wrong kind."""
    names = params.models.names()
    lines = []
    for sec in SECTIONS:
        section = getattr(params, sec)
        for field, kind in getattr(section, "MODEL_REFS", {}).items():
            for name in section.model_names(field):
                if name not in params.models:
                    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
                    hint = f"did you mean {close[0]}? " if close else ""
                    lines.append(f"{sec}.{field}: no models entry {name!r}; {hint}entries: {', '.join(names)}")
                elif kind and params.models[name].kind != kind:
                    lines.append(
                        f"{sec}.{field}: models.{name} is kind {params.models[name].kind}; it must be kind: {kind}"
                    )
    return lines


def load_params(path: str | os.PathLike[str] = "params.yaml") -> Params:
    """Read and validate ``params.yaml``.

    Raises:
        ParamsError: missing file, YAML syntax error, unknown key or bad value (message names the key).
    """
    p = Path(path)
    if not p.is_file():
        raise ParamsError(f"{p} is not a file: run from the project root (where dvc.yaml is), or pass --params")
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # a SafeLoader
    except UnicodeDecodeError as e:
        raise ParamsError(
            f"{p}: not UTF-8 (byte 0x{e.object[e.start]:02x} at offset {e.start}): save it as UTF-8"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ParamsError(f"{p}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    params = parse_params(data or {}, str(p))
    missing = [  # models: entries are checked by their type (a key left out takes its default, no dvc param)
        f"{sec}.{k}"
        for sec, model in SECTIONS.items()
        if sec != "models"
        for k in model.model_fields
        if k not in (data.get(sec) or {})
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
