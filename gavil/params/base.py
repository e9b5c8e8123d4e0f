"""The building blocks of params sections: :class:`Section` (strict, frozen, unknown keys refused),
the unit types (:data:`Percent`, :data:`Fraction`, ...) and :func:`runtime_field` for knobs that do not
change outputs, and :attr:`Section.MODEL_REFS` for fields naming ``models`` entries. See
:mod:`gavil.params` for the rules."""

from __future__ import annotations

import difflib
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field


def runtime_field(default: Any = ..., **kw: Any) -> Any:
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
#: Model numerics (resolved by :mod:`gavil.models.precision`): ``auto`` = bf16 where the CPU/GPU runs it natively.
Precision = Literal["auto", "fp32", "bf16"]
#: The OCR detector's numerics (:mod:`gavil.models.craft`): :data:`Precision`, or int8 (CPU, opt-in).
OcrPrecision = Literal["auto", "fp32", "bf16", "int8"]
#: Where a model runs: ``auto`` = cuda when torch sees a GPU.
Device = Literal["auto", "cpu", "cuda"]


class Section(BaseModel):
    """Base of every section: strict types, unknown keys refused, immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    #: Its fields that name entries of the ``models`` section (a name or a list of names; a nested
    #: block's field as ``block.field``) -> the kind those entries must be (None: any). Checked by :func:`gavil.params.parse_params`;
    #: ``dvc.yaml`` adds the named entries' keys to the params of the stages that read the section.
    MODEL_REFS: ClassVar[dict[str, str | None]] = {}

    def model_names(self, field: str | None = None) -> list[str]:
        """The ``models`` entries it names (in ``field``, else in all of :attr:`MODEL_REFS`), in order."""
        names: list[str] = []
        for f in [field] if field else self.MODEL_REFS:
            v: Any = self
            for part in f.split("."):  # a field of a nested block: "safety.model"
                v = getattr(v, part)
            names += [v] if isinstance(v, str) else list(v or [])  # None: the optional reference is off
        return list(dict.fromkeys(names))

    @classmethod
    def output_keys(cls) -> list[str]:
        """Keys that can change outputs (``dvc.yaml`` params), in declaration order."""
        return [k for k, f in cls.model_fields.items() if not (f.json_schema_extra or {}).get("runtime")]  # type: ignore[union-attr]


def refuse_unknown(unknown: set[str], known: set[str], where: str) -> None:
    if unknown:
        key = sorted(unknown)[0]
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        hint = f"did you mean {where}.{close[0]}?" if close else f"valid keys: {', '.join(sorted(known))}"
        raise ValueError(f"unknown key {key!r}: {hint}")


def unique_names(v: list[str]) -> list[str]:
    """A list of models entry names, refused when a name repeats (a validator body)."""
    dup = sorted({n for n in v if v.count(n) > 1})
    if dup:
        raise ValueError(f"model names must be unique; repeated: {dup}")
    return v
