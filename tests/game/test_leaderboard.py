"""The per-round model leaderboard picture (`gavil round leaderboard`, the report's "Per collection
round" section; docs/dynamic.md): drawn from the evaluation table the evaluate stage aggregates."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from gavil.cli import app
from gavil.errors import GavilError
from gavil.figures import leaderboard_svg
from gavil.pipeline import catalog
from stages.evaluate import aggregate


def predictions() -> tuple[pd.DataFrame, dict[str, int]]:
    """Two models over rounds 0-2 (4 instances each): "strong" solves round 0, half of round 1 and
    nothing of round 2; "weak" solves nothing and could not score one instance of round 1 (a missing
    image); "absent" had no weights (no scored row)."""
    rows, rounds = [], {}
    for r in range(3):
        for i in range(4):
            iid = f"r{r}-{i}"
            rounds[iid] = r
            hit = 1.0 if r == 0 or (r == 1 and i < 2) else 0.0
            for model, jac, status in (
                ("strong", hit, "ok"),
                ("weak", None if (r, i) == (1, 3) else 0.0, "missing_image" if (r, i) == (1, 3) else "untrained"),
                ("absent", None, "no_weights"),
            ):
                rows.append(
                    {
                        "model_name": model,
                        "weights_id": "x",
                        "dataset": "game",
                        "instance_id": iid,
                        "num_candidates": 5,
                        "status": status,
                        "jaccard": jac,
                        "random_jaccard": 0.3,
                    }
                )
    return pd.DataFrame(rows), rounds


def evaluation() -> pd.DataFrame:
    pred, rounds = predictions()
    return aggregate(pred, 50, 0, rounds, "1.2.0")


def texts(svg: str) -> list[str]:
    """The SVG's text runs (matplotlib writes text as text with svg.fonttype none)."""
    return [t.strip() for t in re.findall(r">([^<>]+)</text>", svg)]


def test_the_picture_shows_each_round_and_every_model_that_was_scored():
    svg = leaderboard_svg(evaluation())
    words = " ".join(texts(svg))
    for label in ("round 0 (release)", "round 1", "round 2", "all rounds", "n=4", "n=12"):
        assert label in words, label
    assert "strong" in words and "weak (untrained)" in words  # random weights are labelled
    assert "not scored (no weights): absent" in words
    # the n under each bar counts what that bar scores: strong 4 per round, weak 3 on round 1, 11 in all
    ns = [t for t in texts(svg) if t.startswith("n=")]
    assert ns == ["n=4", "n=4", "n=4", "n=12", "n=4", "n=3", "n=4", "n=11"], ns
    numbers = [int(v) for v in texts(svg) if v.isdigit()]  # axis ticks, then each model's bar labels
    assert numbers[-8:] == [100, 50, 0, 50, 0, 0, 0, 0]  # strong, weak: round 0, 1, 2, all (percent)
    assert leaderboard_svg(evaluation()) == svg  # same table, same bytes


def test_an_unknown_dataset_is_refused_naming_the_ones_there():
    with pytest.raises(ValueError, match="its datasets: game"):
        leaderboard_svg(evaluation(), "swow_baseline")


def test_the_cli_writes_the_picture_from_the_projects_evaluation_table(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    before = runner.invoke(app, ["round", "leaderboard"])
    assert isinstance(before.exception, GavilError) and "run `dvc repro` first" in str(before.exception)
    catalog.write_table(evaluation(), "evaluation", tmp_path)
    done = runner.invoke(app, ["round", "leaderboard", "--out", "lb.svg"])
    assert done.exit_code == 0, done.output
    assert "round 2" in (tmp_path / "lb.svg").read_text()
