"""Stage 7, ``import_annotations``: human annotations into instances, solves and rejects.

Inputs (docs/annotations.md "Released files and new batches"):

- **Released WinoGAViL files** (``annotations.release_files`` under ``release_dir``):
  ``game_5_6.csv``/``game_10_12.csv`` (CRLF, whole floats as ``1``), ``swow.csv``, or
  ``winogavil_dataset.csv``; recognised by header. Their solver means/stds and fool-the-AI
  scores are kept exactly as released, and their cues are not re-filtered.
- **Raw collections** (``<raw_dir>/<batch>/``, batches in name order):
  ``creations.csv|jsonl`` (:class:`schemas.raw.RawCreation`) and ``solves.csv|jsonl``
  (:class:`schemas.raw.RawSolve`), and/or crowd-platform batch-results CSVs
  (``HITId, AssignmentId, WorkerId, AssignmentStatus, SubmitTime, WorkTimeInSeconds, Input.*,
  Answer.*``) mapped by ``annotations.crowd.columns``. ``instance_id`` is unique across batches.
- **The collection game's store** (``<game.store_dir>/game.sqlite``, ``gavil game``): its
  creations after every batch's creations, its solves after every batch's solves, through the
  same raw-record rules below (docs/game.md); its players' flags, each with the admin's review,
  into the ``flags`` table (docs/dynamic.md "Flags and review").

A raw creation is accepted when: N in {5, 6, 10, 12} distinct candidates; the cue is a single
token longer than one character; K = len(associations) is within the game's limits for N
(5: 2-3, 6: 2-4, 10: 2-5, 12: 2-6); associations are distinct candidates; the instance_id and
the (cue, candidates) pair are new; within a creation task (``task_id``; a crowd creation HIT)
at most two cues, differing case-insensitively, over the same candidates. A solve is accepted
when its instance is known, the selection has exactly K distinct candidates, and the solver has
not answered that instance. Every other row goes to ``annotation_rejects`` with file, line and
reason. Cues of raw instances pass the profanity filter (``profanity`` params): a flagged cue is
kept with ``cue_flag`` and kept out of selection. Annotator ids are replaced by keyed hashes
(:mod:`gavil.domain.privacy`) before anything is stored. A file whose bytes were already imported is
skipped (idempotent re-import).

Modules, by role: :mod:`.records` (header layouts, :class:`RowError`, cell parsing, the CSV/JSONL
readers and :class:`ImportState`), :mod:`.release` (released files), :mod:`.raw` (raw creations and
solves), :mod:`.crowd` (crowd-platform batch CSVs), :mod:`.game` (the game's store) and
:mod:`.stage` (:func:`import_all`, :func:`run`).
"""

from stages.import_annotations.crowd import import_crowd
from stages.import_annotations.raw import import_creations, import_solves
from stages.import_annotations.records import (
    DATASET_HEADER,
    GAME_HEADER,
    SWOW_HEADER,
    ImportState,
    Records,
    RowError,
    header_of,
    iter_records,
    parse_float,
    parse_int,
    parse_list,
)
from stages.import_annotations.release import import_release_file
from stages.import_annotations.stage import ImportResult, import_all, run

__all__ = [
    "DATASET_HEADER",
    "GAME_HEADER",
    "ImportResult",
    "ImportState",
    "Records",
    "RowError",
    "SWOW_HEADER",
    "header_of",
    "import_all",
    "import_creations",
    "import_crowd",
    "import_release_file",
    "import_solves",
    "iter_records",
    "parse_float",
    "parse_int",
    "parse_list",
    "run",
]
