"""What a new user building their own benchmark hits (issue 48), each one line naming the key, the
file or the word: a missing ``crawl.local_dir`` is one error line with the fix (no traceback), image
files that match no concept are named, and concepts flagged profane are named, not only counted."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pandas as pd
import pytest
import yaml

from gavil.params import parse_params
from gavil.pipeline import catalog
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.stage import unmatched_file_line
from stages.filter_profanity import profane_line
from tests.helpers import BIN, ROOT


def _project(tmp: Path, local_dir: str) -> None:
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["crawl"]["source"], params["crawl"]["local_dir"] = "local", local_dir
    (tmp / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    fates = pd.DataFrame({"concept": ["flower", "cat"], "status": ["ok", "ok"], "reason": [None, None]})
    fates["reason"] = fates["reason"].astype("str")
    catalog.write_table(fates, "concept_filter", tmp)


@pytest.mark.slow
def test_a_missing_local_dir_is_one_line_naming_the_key_and_the_fix(tmp_path):
    _project(tmp_path, "my_images")
    p = subprocess.run([str(BIN / "gavil"), "stage", "crawl_images"], cwd=tmp_path, capture_output=True, text=True)
    out = (p.stdout + p.stderr).strip()
    assert p.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) <= 3, out
    assert "crawl.local_dir my_images does not exist" in out and "gavil params set crawl.local_dir=" in out


def test_image_files_that_match_no_concept_are_named(tmp_path):
    for name in ("flowers.jpg", "cat.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    crawl = parse_params(yaml.safe_load((ROOT / "params.yaml").read_text())).crawl
    cfg = CrawlConfig.from_params(crawl.model_copy(update={"source": "local", "local_dir": str(tmp_path)}))
    line = unmatched_file_line(cfg, ["flower", "cat"])
    assert line is not None and "1 image file(s)" in line and "flowers.jpg" in line and "cat.png" not in line
    assert unmatched_file_line(cfg, ["flowers", "cat"]) is None


def test_profane_concepts_are_named_on_the_console():
    fates = pd.DataFrame(
        {"concept": ["pot", "cat", "butt"], "status": ["profane", "ok", "profane"], "reason": ["x"] * 3}
    )
    line = profane_line(fates)
    assert line is not None and "2 concept(s)" in line and "'butt', 'pot'" in line and "profanity.allow_words" in line
    assert profane_line(fates.assign(status="ok")) is None
