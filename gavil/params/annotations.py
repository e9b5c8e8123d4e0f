"""Params section ``annotations`` (stage ``import_annotations``): released files, raw batch folders,
crowd-platform CSVs and the annotator-id key."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from gavil.params.base import Section, refuse_unknown


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
    # kf_... of the key ids are hashed with (docs/annotations.md "Annotator ids and the key"); null: the key recorded in
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
