"""A stage's process keeps its freed memory for reuse (glibc), so recycled numpy temporaries cost no page faults."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only"
)

# AfLite's shape: (classifiers, rows) float64 temporaries of a few MB, made and freed every iteration,
# their sizes varying as columns converge. Prints the minor page faults of the second pass.
LOOP = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    {setup}
    x = np.random.default_rng(0).random((64, 40000))
    def passes():
        for i in range(30):
            y = np.exp(-np.abs(x[:, : 40000 - 1000 * (i % 7)]))
            z = np.log1p(y) + y * 2.0
            w = np.where(z > 1, z, y)
            del y, z, w
    passes()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    passes()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(setup: str) -> int:
    code = LOOP.format(setup=setup)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def test_a_running_stage_reuses_freed_temporaries_without_page_faults() -> None:
    # the stage's own entry (runner._running, what gavil stage, the flow and the workers go through) sets it
    setup = (
        "from gavil.pipeline import runner\n"
        "ctx = runner._running('safety_score'); ctx.__enter__()\n"
        "from gavil.pipeline import allocator\n"
        "assert allocator._done, 'runner._running did not set the allocator'"
    )
    default, stage = _faults(""), _faults(setup)
    assert default > 10_000, f"the loop no longer shows glibc's default cost ({default} faults): make it larger"
    assert stage <= default // 20, f"{stage} page faults with the stage's settings vs {default} without"
