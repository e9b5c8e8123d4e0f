"""docs/your-own-benchmark.md, run as a reader runs it: its ``bash`` blocks, word for word and in order,
in a fresh clone of this repository (this venv's commands on PATH, as after the first set-up command),
from nothing but the small concept file and image folder the page makes, to an exported benchmark
and a served game."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.helpers import BIN, ROOT

PAGE = ROOT / "docs" / "your-own-benchmark.md"


def bash_blocks(text: str) -> list[str]:
    """The page's fenced ``bash`` blocks, in order."""
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("PYTEST")}
    return env | {
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(home),
        "DVC_NO_ANALYTICS": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_HOME": str(home / "hf"),
        "GAVIL_ANNOTATOR_KEY": "recipe-test-key",
    }


@pytest.mark.slow
def test_the_own_benchmark_recipe_runs_verbatim_to_an_export_and_a_game(tmp_path):
    blocks = bash_blocks(PAGE.read_text())
    last = blocks[-1].strip().splitlines()
    assert len(blocks) >= 5 and last[-1].startswith("gavil game"), "the game is served last"
    assert last[0] == "gavil round open --rival rival", "a round is opened before the game"
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = _env(tmp_path / "home")
    outputs = []
    for block in blocks[:-1]:
        r = subprocess.run(
            ["bash", "-e", "-c", block], cwd=clone, env=env, capture_output=True, text=True, timeout=1800
        )
        assert r.returncode == 0, (
            f"this block failed:\n{block}\n--- stdout\n{r.stdout[-3000:]}\n--- stderr\n{r.stderr[-3000:]}"
        )
        outputs.append(r.stdout)
    joined = "\n".join(outputs)
    # what the page says happened
    assert re.search(r"dinner\s+1\.00\s+selected\s+0", joined), joined[-2000:]
    assert re.search(r"sky\s+0\.78\s+below_threshold", joined), joined[-2000:]
    bench = (clone / "data/export/benchmark.csv").read_text().splitlines()
    assert len(bench) == 2 and ",dinner," in bench[1]
    assert "num_rows: 1" in joined  # the Hugging Face dataset, loaded by the page's python line
    concepts = json.loads((clone / "data/metrics/ingest_concepts.json").read_text())
    assert concepts["concepts"] == 19  # 5 cues and their 14 responses
    built = subprocess.run(
        ["gavil", "query", "select count(*) as n from swow_instances where status = 'ok'", "--format", "json"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    assert json.loads(built.stdout) == [{"n": 5}], built.stderr
    # the last block serves the game: it answers on its port with the page's candidate sets
    game = subprocess.Popen(
        ["bash", "-c", blocks[-1]], cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        port = int(re.search(r"--port (\d+)", blocks[-1]).group(1))
        deadline, status = time.monotonic() + 120, None
        while time.monotonic() < deadline and game.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=5) as resp:
                    status = json.loads(resp.read())
                    break
            except OSError:
                time.sleep(1)
        assert status is not None, "the game did not answer"
        assert status["round"] == 1, status  # the page's round is the one the game collects
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as resp:
            assert resp.status == 200 and b"WinoGAViL" in resp.read()
    finally:
        game.terminate()
        try:
            out, _ = game.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            game.kill()
            out, _ = game.communicate()
    assert "6 candidate sets" in out, out[-2000:]
    assert sys.executable  # this venv's interpreter ran every block (BIN first on PATH)
