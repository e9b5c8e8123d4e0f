"""Only showable instances are published (issue 45): a new instance, from a raw batch, a crowd batch
or the game, whose candidates are not all concepts with an accepted image (one OCR rejected, one never
crawled because it was profane, a typo that is no concept) is ``withheld`` with the reason naming the
candidate and why; it gets no ID and no line in the export; the console says how many. Release
instances (their images are the release's own) and published instances are not touched."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from gavil.params import parse_params
from gavil.pipeline import catalog
from stages import select_instances
from stages.import_annotations import import_all
from stages.select_instances import select
from stages.select_instances.showable import image_fates, unshowable_reason

KEY = b"k"
GOOD = ["rocket", "cat", "moon", "coffee", "brick"]


def _ocr(accepted: list[str], rejected: dict[str, str]) -> pd.DataFrame:
    rows = [(c, "a" * 64, f"data/images/{c}.png", "accepted", None) for c in accepted]
    rows += [(c, "b" * 64, f"data/images/{c}.png", "rejected_text", why) for c, why in rejected.items()]
    return pd.DataFrame(
        {
            "concept": [r[0] for r in rows],
            "sha256": [r[1] for r in rows],
            "path": [r[2] for r in rows],
            "source_url": pd.array([None] * len(rows), dtype="str"),
            "rank": pd.array([1] * len(rows), dtype="Int64"),
            "candidates_read": pd.array([1] * len(rows), dtype="Int64"),
            "status": [r[3] for r in rows],
            "reason": pd.array([r[4] for r in rows], dtype="str"),
            "ocr_text": pd.array([None] * len(rows), dtype="str"),
            "ocr_confidence": [float("nan")] * len(rows),
            "match_token": pd.array([None] * len(rows), dtype="str"),
            "match_score": [float("nan")] * len(rows),
        }
    )


def _batch(tmp_path, sets: dict[str, list[str]]):
    raw = tmp_path / "raw" / "b1"
    raw.mkdir(parents=True)
    creations, solves = [], []
    for iid, cands in sets.items():
        assoc = cands[:2]
        creations.append(
            {"instance_id": iid, "spymaster_id": "S", "cue": "space", "candidates": cands, "associations": assoc}
        )
        solves += [{"instance_id": iid, "solver_id": s, "selection": assoc} for s in ("A", "B", "C")]
    (raw / "creations.jsonl").write_text("".join(json.dumps(r) + "\n" for r in creations))
    (raw / "solves.jsonl").write_text("".join(json.dumps(r) + "\n" for r in solves))
    return import_all(None, [], tmp_path / "raw", KEY)


SETS = {
    "ok": GOOD,
    "ocr_rejected": ["rocket", "cat", "moon", "coffee", "sign"],
    "profane": ["rocket", "cat", "moon", "coffee", "butt"],
    "typo": ["rocket", "cat", "moon", "coffee", "brikc"],
}


def test_instances_with_a_candidate_that_cannot_be_shown_are_withheld_with_the_reason(in_tmp, capsys):
    res = _batch(in_tmp, SETS)
    for name in ("instances", "solves", "flags", "gold_checks"):
        catalog.write_table(getattr(res, name), name)
    catalog.write_table(_ocr(GOOD, {"sign": "the image shows its word 'sign'"}), "ocr")
    select_instances.run(parse_params({}))
    sel = catalog.read_table("selection").set_index("instance_uid")
    status = {uid.split(":")[-1]: s for uid, s in sel["status"].items()}
    assert status == {"ok": "selected", "ocr_rejected": "withheld", "profane": "withheld", "typo": "withheld"}
    reasons = {uid.split(":")[-1]: r for uid, r in sel["reason"].items()}
    assert "'sign' has no accepted image (rejected_text: the image shows its word 'sign')" in reasons["ocr_rejected"]
    assert "'butt' has no image" in reasons["profane"] and "'brikc' has no image" in reasons["typo"]
    assert all(reasons[k].endswith("otherwise selected") for k in ("ocr_rejected", "profane", "typo"))
    assert sel.loc[sel["status"] == "withheld", "ID"].isna().all()  # no permanent ID
    assert "3 instance(s) withheld: a candidate has no accepted image" in capsys.readouterr().err


def test_published_and_release_instances_are_not_held(tmp_path):
    res = _batch(tmp_path, {"typo": ["rocket", "cat", "moon", "coffee", "brikc"]})
    fates = image_fates(_ocr(GOOD, {}))
    first = select(res.instances, res.solves, 0.8)  # no images given: published as before
    assert first["status"].tolist() == ["selected"]
    from stages.select_instances import update_ledger

    again = select(res.instances, res.solves, 0.8, ledger=update_ledger(first, None), images=fates)
    assert again["status"].tolist() == ["selected"]  # published: its ID stays (only an admin retires)
    release = res.instances.assign(origin="release")
    assert select(release, res.solves, 0.8, images=fates)["status"].tolist() == ["insufficient_solvers"]  # not held


@pytest.mark.parametrize("k", range(5))
def test_the_reason_names_the_first_candidate_that_cannot_be_shown(k):
    fates = image_fates(_ocr(GOOD, {}))
    cands = list(GOOD)
    cands[k] = "zzz"
    assert "candidate 'zzz'" in (unshowable_reason(cands, fates) or "")
    assert unshowable_reason(GOOD, fates) is None
