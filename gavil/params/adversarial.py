"""Params of the seeds' adversarial methods: ``adversarial_filter`` (SWAG's Adversarial Filtering,
Zellers et al. 2018 §3.2-3.4, Algorithm 1) and ``aflite`` (WinoGrande's AfLite, Sakaguchi et al.
2020 §4, Algorithm 1). Defaults are the papers' values; the sources are in each field's comment
and in docs/adversarial-filtering.md / "AfLite (WinoGrande)"."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from gavil.params.base import Fraction, NonNegInt, PosInt, Section

AfMember = Literal["text", "rival"]
AfJudge = Literal["length", "k_shortest", "surface", "text"]
#: m or k: an absolute number of instances (an int >= 1) or a fraction of them (0 < x < 1).
Size = Annotated[int, Field(ge=1)] | Annotated[float, Field(gt=0, lt=1)]


def resolve_size(v: int | float, n: int) -> int:
    """An absolute count, or ``round(v * n)`` (at least 1) for a fraction."""
    return int(v) if isinstance(v, int) else max(1, round(v * n))


class AdversarialFilterParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {
        "text_model": None,
        "rival_model": "open_clip",
        "judge_text_model": None,
    }

    members: list[AfMember] = ["text", "rival"]  # feature sources: text = text_model, rival = rival_model
    text_model: str = "text-minilm-l6"  # models entry embedding candidate names (offline)
    rival_model: str = "rival"  # models entry of the rival member (needs weights)
    pool_size: PosInt = 1023  # SWAG: N- = 1023 negatives per context
    replacements: PosInt = 2  # SWAG: N_easy = 2 replacements per context per iteration
    test_fraction: Fraction = 0.2  # SWAG: 80/20 train/test split each iteration
    cheap_iterations: NonNegInt = 100  # swagaf: 100 iterations with the cheap model first
    ensemble_iterations: NonNegInt = 50  # swagaf: then 50 with the ensemble
    patience: PosInt = 10  # stop once this many iterations in a row replace nothing
    mlp_hidden: PosInt = 64  # hidden units of the ensemble's MLP
    # held-out judges of other families than the members (gavil.models.judges): length / k_shortest /
    # surface (names' characters), text = judge_text_model; AF stops once all are near chance
    judges: list[AfJudge] = ["length", "k_shortest", "surface"]  # + "text" opt-in (the mpnet extra)
    judge_text_model: str | None = None  # models entry of the text judge (must differ from text_model)
    chance_tolerance: Fraction = 0.05  # judges' held-out Jaccard and accuracy within this of chance
    judge_every: PosInt = 5  # judge every this many iterations (and the final assignment)
    # instances held out of every stopping decision: the reported judge scores are the judges retrained on
    # the other instances and scored on these, before and after AF (a figure nothing tuned)
    report_fraction: Fraction = 0.2
    seed: int = 0

    @model_validator(mode="after")
    def _judges_other_family(self) -> AdversarialFilterParams:
        if "text" in self.judges and self.judge_text_model in (None, self.text_model):
            raise ValueError(
                f"judge_text_model {self.judge_text_model!r} is the adversary's text_model: a judge must be of another family"
            )
        if len(set(self.judges)) != len(self.judges):
            raise ValueError("judges must not repeat")
        return self

    @field_validator("members")
    @classmethod
    def _some(cls, v: list[str]) -> list[str]:
        if not v or len(set(v)) != len(v):
            raise ValueError("members must be a non-empty list without repeats of: text, rival")
        return v


class AflitePlantParams(Section):
    """``aflite.plant``: an audit of AfLite itself (off by default; stages/aflite/report.py)."""

    fraction: Fraction = 0.0  # audit: plant a spurious feature in this fraction of instances (keyed by id); 0 = off
    strength: Annotated[float, Field(gt=0)] = 1.0  # its value on the planted instances' association rows (0 elsewhere)
    seed: int = 0  # which instances: hash(seed, instance_uid)


class AfliteParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"model": None}

    model: str = "text-minilm-l6"  # models entry: precomputed embeddings (WinoGrande: RoBERTa fine-tuned)
    n_classifiers: PosInt = 64  # WinoGrande: n = 64 linear classifiers per phase
    train_size: Size = 0.3409  # m: WinoGrande 15,000 of 44,000 instances (an int = absolute)
    cutoff: Size = 0.0114  # k: WinoGrande 500 of 44,000 removed per phase (an int = absolute)
    tau: Fraction = 0.75  # WinoGrande: remove instances with predictability score >= 0.75
    correct: Literal["jaccard", "exact"] = "jaccard"  # a held-out prediction's credit
    image_disjoint: bool = False  # test instances share no candidate with the training ones
    max_iter: PosInt = 200  # logistic regression iterations (per classifier, either solver)
    solver: Literal["batched", "sklearn"] = "batched"  # batched: a phase's classifiers in one fit (same flags)
    kl_bins: PosInt = 20  # histogram bins of the KL-divergence assessment
    write_debiased: bool = False  # opt in: write the kept instances to data/export/debiased.csv
    seed: int = 0  # keys every draw (splits, the KL's random reduction) with the instance ids
    plant: AflitePlantParams = AflitePlantParams()  # audit: precision/recall of the flags vs a planted feature
