"""The crawl's liveness locks under real contention: several processes that each clean the store
(or compact the journal) and then work in their own staging folder (or journal segment), the way
partitions on a pool of worker processes do. Nothing a live run owns may be removed: not a
staging folder it is writing into, not a journal line it wrote."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stages.crawl_images.journal import Journal
from tests.helpers import ROOT

PROCESSES = 4
SECONDS = 4.0

# every loop: clean the store as a partition starts, then write three files into this run's folder
STAGING_LOOP = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from stages.crawl_images.store import clean_store, staging
store, deadline, runs, lost = Path("store"), time.monotonic() + {seconds}, 0, 0
while time.monotonic() < deadline:
    clean_store(store)
    with staging(store) as d:
        try:
            for i in range(3):
                (d / f"{{i}}.part").write_bytes(b"x" * 100)
            lost += not all((d / f"{{i}}.part").read_bytes() == b"x" * 100 for i in range(3))
        except OSError:
            lost += 1
    runs += 1
print(runs, lost)
"""

# every loop: a writer appends three records and closes its segment, then compacts the journal
JOURNAL_LOOP = """
import sys, time
sys.path.insert(0, {root!r})
from stages.crawl_images.journal import Journal
deadline, runs = time.monotonic() + {seconds}, 0
while time.monotonic() < deadline:
    j = Journal("j")
    for i in range(3):
        j.append({{"kind": "download", "url": f"{tag}-{{runs}}-{{i}}", "status": "kept"}})
    j.close()
    Journal("j").compact()
    runs += 1
print(runs)
"""


def _run_all(script: str, cwd, **fmt: str) -> list[str]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script.format(root=str(ROOT), seconds=SECONDS, tag=f"w{k}", **fmt)],
            cwd=cwd,
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(PROCESSES)
    ]
    outs = [p.communicate(timeout=SECONDS + 60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * PROCESSES, outs
    return outs


@pytest.mark.slow
def test_cleaning_the_store_never_removes_a_live_runs_staging_folder(tmp_path):
    outs = [tuple(map(int, o.split())) for o in _run_all(STAGING_LOOP, tmp_path)]
    runs, lost = sum(r for r, _ in outs), sum(x for _, x in outs)
    assert runs > 100 * PROCESSES  # the processes really overlapped, many times over
    assert lost == 0, f"{lost} of {runs} runs lost files from their own staging folder"
    assert [p.name for p in (tmp_path / "store").iterdir()] == []  # every run's folder went with it


@pytest.mark.slow
def test_compacting_the_journal_never_loses_a_live_writers_record(tmp_path):
    written = 3 * sum(int(o) for o in _run_all(JOURNAL_LOOP, tmp_path))
    assert written > 30 * PROCESSES
    _, downloads = Journal(tmp_path / "j").load()
    assert len(downloads) == written, f"{written - len(downloads)} of {written} records lost"
