"""Params section ``paper``: the paper's analyses beyond Table 4, run by ``evaluate``
(:mod:`stages.evaluate.captions`, :mod:`~stages.evaluate.association_types`,
:mod:`~stages.evaluate.supervised`, :mod:`~stages.evaluate.published`)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from gavil.params.base import Fraction, PosInt, Section, unique_names


class SupervisedParams(Section):
    """Table 5: a classifier on frozen embeddings (paper §3.2: Adam, lr 1e-3, batch 128, 7 epochs, 5 seeds)."""

    enabled: bool = True
    models: list[str] = ["text-minilm-l6"]  # names from paper.text_models whose embeddings are the features
    features: list[Literal["names", "captions"]] = ["captions"]  # what the text models embed per candidate
    seeds: list[int] = [0, 1, 2, 3, 4]
    epochs: PosInt = 7
    lr: float = Field(default=1e-3, gt=0)
    batch_size: PosInt = 128
    # unified: the paper's one training set of train_pairs pairs for both groups, whole candidate sets as
    # test/dev; per_group: the released run_trainable.py (a classifier per group on every eligible pair)
    protocol: Literal["unified", "per_group"] = "unified"
    train_pairs: PosInt | None = 9326  # unified: pairs sampled for training (paper §3.2); null = every eligible pair
    test_fraction: Fraction = 0.1
    dev_fraction: Fraction = 0.1


class PaperParams(Section):
    MODEL_REFS: ClassVar[dict[str, str | None]] = {"text_models": "text"}

    release_dir: str = "data/sample/winogavil"
    captions_file: str = "ofa_image_caption_predictions.csv"
    association_types_file: str = "model_analysis_on_different_association_types.csv"
    # models entries of kind text (Table 7). Not text-mpnet by default: its weights come from an optional
    # extra, and a default run must compute the same with and without it (add it to reproduce Table 7's MPNet row)
    text_models: list[str] = ["text-minilm-l6"]
    tie_break: Literal["stable", "datacomp"] = "stable"
    supervised: SupervisedParams = SupervisedParams()

    @field_validator("text_models")
    @classmethod
    def _unique(cls, v: list[str]) -> list[str]:
        return unique_names(v)

    @model_validator(mode="after")
    def _known_supervised_models(self) -> PaperParams:
        unknown = sorted(set(self.supervised.models) - set(self.text_models))
        if unknown:
            raise ValueError(f"paper.supervised.models {unknown} are not names in paper.text_models")
        return self
