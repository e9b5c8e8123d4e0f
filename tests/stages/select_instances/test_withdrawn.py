"""A withdrawn spymaster's instances in selection (stages.select_instances.consent): unpublished ones
are withheld with the withdrawal first in the reason, whatever else held them; published ones, and
rows that are no instance of their own, are left as they are."""

from __future__ import annotations

import pandas as pd

from stages.select_instances.consent import published_note, withdraw, withdrawn_of

WHY = "withdrawn: player withdrew consent (2026-01-01T09:30:00Z)"


def test_unpublished_rows_are_withheld_with_the_withdrawal_first_and_the_rest_untouched():
    rows: list[dict[str, object]] = [
        {"instance_uid": "raw:a", "status": "selected", "reason": None},
        {"instance_uid": "raw:b", "status": "withheld", "reason": "unshowable: candidate 'x' has no image"},
        {"instance_uid": "raw:c", "status": "selected", "reason": None},  # published
        {"instance_uid": "raw:d", "status": "rejected", "reason": "content differs"},
        {"instance_uid": "raw:e", "status": "below_threshold", "reason": "solver mean 0.5 < 0.8"},  # not withdrawn
    ]
    out = withdraw(rows, {u: WHY for u in ("raw:a", "raw:b", "raw:c", "raw:d")}, {"raw:c"})
    assert [(r["status"], r["reason"]) for r in out] == [
        ("withheld", f"{WHY}; otherwise selected"),
        ("withheld", f"{WHY}; otherwise withheld: unshowable: candidate 'x' has no image"),
        ("selected", None),
        ("rejected", "content differs"),
        ("below_threshold", "solver mean 0.5 < 0.8"),
    ]


def test_the_column_and_the_published_note():
    inst = pd.DataFrame({"instance_uid": ["raw:a", "raw:b"], "withdrawn": [WHY, None]})
    assert withdrawn_of(inst) == {"raw:a": WHY}
    assert withdrawn_of(inst.drop(columns="withdrawn")) == {}  # an instances table from before the column
    assert published_note(None) == "" and published_note(float("nan")) == ""
    assert published_note(WHY).startswith(WHY) and "its ID stays" in published_note(WHY)
