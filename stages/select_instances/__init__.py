"""Stage 8, ``select_instances``: solvable-by-humans scores, the >= ``select.min_solver_jaccard``
selection (:mod:`.stage`) and the permanent ID ledger (:mod:`.ledger`)."""

from stages.select_instances.ledger import content_fingerprint, update_ledger
from stages.select_instances.report import annotator_stats, distributions, table1, table1_markdown
from stages.select_instances.stage import run, select

__all__ = [
    "annotator_stats",
    "content_fingerprint",
    "distributions",
    "run",
    "select",
    "table1",
    "table1_markdown",
    "update_ledger",
]
