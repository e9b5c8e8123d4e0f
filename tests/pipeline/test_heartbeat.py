"""Long stages say something at least every 10 s, whatever the load: the runner wraps every stage in a
heartbeat thread, and progress loops feed it their latest count."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from gavil.progress import Heartbeat, active, progress
from tests.helpers import ROOT

#: A stage whose one step holds the interpreter busy for 24 s in pure Python (no line of its own),
#: run through the real runner in a new interpreter.
_SILENT_STAGE = """
import time, sys
import stages.ocr_filter as m
def run(params):
    t = time.monotonic()
    while time.monotonic() - t < 24:
        sum(i * i for i in range(20000))
    return {"concepts": 0}
m.run = run
from gavil.params import Params
from gavil.pipeline.runner import run_stage
run_stage("ocr_filter", Params())
print("done", flush=True)
"""


@pytest.mark.slow
def test_a_silent_step_on_a_loaded_machine_still_prints_every_10_s(tmp_path):
    """Two busy processes share the cores; the stage prints nothing itself for 24 s; the longest gap
    between console lines stays under 10 s (plus a second of scheduling slack)."""
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(2, os.cpu_count() or 2))]
    try:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-c", _SILENT_STAGE], cwd=tmp_path, env=env, stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        stamps, lines = [time.monotonic()], []
        for line in proc.stdout:
            stamps.append(time.monotonic())
            lines.append(line.strip())
        assert proc.wait(timeout=120) == 0
    finally:
        for p in busy:
            p.kill()
    assert lines[-1] == "done"
    beats = [x for x in lines if x.startswith("ocr_filter: starting (")]
    assert len(beats) >= 2, lines
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert max(gaps[1:-1] or [0]) < 11, (gaps, lines)


def test_progress_loops_feed_the_heartbeat_their_count(capsys):
    with Heartbeat("stage", interval=3600) as beat:
        assert active() is beat
        for i in progress(range(7), "images"):
            if i == 3:
                assert beat.detail == "images 3/7"
        assert beat.detail == "images 7/7"
    assert active() is None
