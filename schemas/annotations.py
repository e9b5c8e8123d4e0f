"""Tables of the ``import_annotations`` stage: instances, solver answers, rejected rows, players' flags.

Raw input formats (new collections), documented in the README:

- creations (CSV or JSONL): ``instance_id, spymaster_id, cue, candidates, associations``
  and optionally ``score_fool_the_ai`` (as shown by the game at creation time);
  ``candidates``/``associations`` are JSON lists of image names.
- solves (CSV or JSONL): ``instance_id, solver_id, selection`` (JSON list).
"""

import pandas as pd
import pandera.pandas as pa
from pandera.typing import Series

from gavil.domain.flags import FLAG_CATEGORIES, FLAG_STATES, MAX_FLAG_TEXT, REVIEW_DECISIONS
from gavil.domain.gold import GOLD_STATUSES
from gavil.domain.vocabulary import CANDIDATE_SIZES
from schemas import StrictModel, exact, list_field

DATASETS = ["game", "swow_baseline"]
ORIGINS = ["release", "raw"]


class Instances(StrictModel):
    """One row per imported association instance (released or created by a spymaster)."""

    instance_uid: Series[str] = pa.Field(unique=True, description="origin:file:id, stable across runs")
    origin: Series[str] = pa.Field(isin=ORIGINS)
    dataset: Series[str] = pa.Field(isin=DATASETS)
    source_file: Series[str]
    source_line: Series[int] = pa.Field(ge=1, description="1-based line in source_file (a CSV header is line 1)")
    release_id: Series[pd.Int64Dtype] = pa.Field(nullable=True, description="ID column of the released file")
    cue: Series[str]
    candidates: Series[object] = list_field("str", min_len=5)
    associations: Series[object] = list_field("str", min_len=2)
    num_associations: Series[int] = pa.Field(ge=2)
    num_candidates: Series[int] = pa.Field(isin=list(CANDIDATE_SIZES))
    score_fool_the_ai: Series[pd.Int64Dtype] = pa.Field(nullable=True, ge=0, le=100)
    solvers_jaccard_mean: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, description="as released (null for raw)", metadata=exact("as released")
    )
    solvers_jaccard_std: Series[float] = pa.Field(
        nullable=True, ge=0, le=1, description="as released (null for raw)", metadata=exact("as released")
    )
    annotation_index: Series[pd.Int64Dtype] = pa.Field(nullable=True)
    images_source: Series[str] = pa.Field(nullable=True)
    task_id: Series[str] = pa.Field(
        nullable=True, description="creation task (raw): the two cues given for one candidate set"
    )
    cue_weight: Series[float] = pa.Field(
        nullable=True, description="release swow.csv: the cue's SWOW weight", metadata=exact("as released")
    )
    associations_mean_weight: Series[float] = pa.Field(
        nullable=True, description="release swow.csv: mean R123 count", metadata=exact("as released")
    )
    candidates_connectivity_score: Series[float] = pa.Field(
        nullable=True, description="release swow.csv: ambiguity measure", metadata=exact("as released")
    )
    spymaster: Series[str] = pa.Field(nullable=True, description="keyed hash of the spymaster id (never the raw id)")
    cue_flag: Series[str] = pa.Field(
        nullable=True, description="why the cue is inappropriate (profanity filter), raw instances only"
    )
    round: Series[int] = pa.Field(
        ge=0,
        description="collection round: 0 = the released data (and batches that name none), else the game's round",
    )
    rival_model: Series[str] = pa.Field(
        nullable=True,
        description="the models: entry of the rival that scored the creation (the game's round rival); "
        "null: released data, a batch that names none, a store from before rounds",
    )
    rival_weights: Series[str] = pa.Field(
        nullable=True,
        description="that rival's weights as the game loaded them: pretrained tag, file:<sha256[:16]> or untrained",
    )
    withdrawn: Series[str] = pa.Field(
        nullable=True,
        description="a game creation whose spymaster withdrew consent: 'withdrawn: player withdrew consent "
        "(<UTC time>)'; null otherwise (select_instances withholds it unless published)",
    )

    @pa.dataframe_check(error="associations must be a subset of candidates, K = len(associations)")
    def consistent(cls, df: pd.DataFrame) -> pd.Series:
        return pd.Series(
            [
                set(a) <= set(c) and len(a) == k and len(c) == n
                for a, c, k, n in zip(
                    df["associations"], df["candidates"], df["num_associations"], df["num_candidates"]
                )
            ],
            index=df.index,
            dtype=bool,
        )


class Solves(StrictModel):
    """One row per valid solver answer to a raw instance."""

    instance_uid: Series[str]
    solver: Series[str] = pa.Field(description="keyed hash of the solver id (never the raw id)")
    selection: Series[object] = list_field("str", min_len=1)
    source_file: Series[str]
    source_line: Series[int] = pa.Field(ge=1)

    @pa.dataframe_check(error="one answer per solver per instance")
    def one_answer(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["instance_uid", "solver"]).any()


class AnnotationRejects(StrictModel):
    """One row per input row that was not imported, with where it was and why."""

    source_file: Series[str]
    source_line: Series[int] = pa.Field(ge=1)
    kind: Series[str] = pa.Field(isin=["release", "creation", "solve"])
    reason: Series[str]
    row: Series[str] = pa.Field(description="the offending row as JSON, annotator ids removed")


class Flags(StrictModel):
    """One row per player's flag on a game association, with the review that covers it (the game's
    ``flags`` and ``flag_reviews``; the review rule: :mod:`gavil.domain.flags`). Empty when no game
    was played or nobody flagged."""

    instance_uid: Series[str] = pa.Field(description="the flagged instance (instances.instance_uid)")
    flag_id: Series[int] = pa.Field(unique=True, ge=1, description="the flag's number in the game's store")
    player: Series[str] = pa.Field(description="keyed hash of the flagging player's id (never the raw id)")
    category: Series[str] = pa.Field(isin=list(FLAG_CATEGORIES))
    reason: Series[str] = pa.Field(
        str_length={"max_value": MAX_FLAG_TEXT}, description="the player's words (may be empty)"
    )
    flagged_at: Series[float] = pa.Field(description="Unix seconds, as the game stored it", metadata=exact("stored"))
    state: Series[str] = pa.Field(
        isin=list(FLAG_STATES), description="open (no review covers it yet), kept or retired by the review"
    )
    decision: Series[str] = pa.Field(nullable=True, isin=list(REVIEW_DECISIONS), description="null while open")
    review_note: Series[str] = pa.Field(nullable=True)
    reviewer: Series[str] = pa.Field(nullable=True)
    reviewed_at: Series[float] = pa.Field(nullable=True, description="Unix seconds", metadata=exact("stored"))
    source_file: Series[str] = pa.Field(description="<game store>#flags")
    weight: Series[bool] = pa.Field(
        description="the reporter counts (game.gold on: passed the gold check; off: every reporter)"
    )
    holds: Series[bool] = pa.Field(
        description="open, of weight, and the instance's open reports of weight hold an unpublished instance out"
    )

    @pa.dataframe_check(error="one flag per player per instance")
    def one_flag(cls, df: pd.DataFrame) -> bool:
        return not df.duplicated(["instance_uid", "player"]).any()

    @pa.dataframe_check(error="a flag is open exactly when no review decided it")
    def open_iff_undecided(cls, df: pd.DataFrame) -> pd.Series:
        return (df["state"] == "open") == df["decision"].isna()


class GoldChecks(StrictModel):
    """One row per game solver the gold check judged (``game.gold``; docs/dynamic.md "Solver
    checks (gold items)"): every solver with gold answers and, with the switch on, every solver of
    the game's answers. A solver not ``passed`` (switch on) has their game answers in
    ``annotation_rejects`` with the status as the reason's first word."""

    solver: Series[str] = pa.Field(unique=True, str_startswith="a_", description="keyed hash, never the raw id")
    gold_answers: Series[int] = pa.Field(ge=0, description="valid answers to gold items")
    gold_mean_jaccard: Series[float] = pa.Field(
        nullable=True,
        ge=0,
        le=1,
        description="mean Jaccard of the gold answers (a fraction), rounded to 2 places; null without any",
        metadata=exact("rounded to 2 places (the release's rule)"),
    )
    gold_status: Series[str] = pa.Field(isin=GOLD_STATUSES)
    reason: Series[str] = pa.Field(
        nullable=True, description="why the answers do not count (null: passed, not_checked)"
    )
    excluded_answers: Series[int] = pa.Field(ge=0, description="game answers kept out of solves by the check")
