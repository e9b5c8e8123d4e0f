"""A stage process validates its tables without pandera importing ``dask.dataframe`` (0.4 CPU-s in
each of a ``dvc repro``'s 13 processes), and validation is what it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers import ROOT

CHECK = textwrap.dedent(
    """
    import sys
    {setup}
    import pandas as pd
    import pandera.errors
    from gavil.io import validate
    from schemas.ingest import SOURCE_FORMATS, Concepts
    from pandera.typing import get_dataframe_types
    row = {{"concept": "moon", "is_cue": True, "is_candidate": True, "n_responses": 3, "n_cues": 2,
           "source_format": SOURCE_FORMATS[0]}}
    assert len(validate(pd.DataFrame([row]), Concepts)) == 1
    try:
        validate(pd.DataFrame([row | {{"concept": ""}}]), Concepts)
        refused = False
    except (pandera.errors.SchemaErrors, pandera.errors.SchemaError):
        refused = True
    print(refused, "dask.dataframe" in sys.modules, len(get_dataframe_types()))
    """
)


def _run(setup: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(setup=setup)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


@pytest.mark.parametrize(
    "entered",
    [
        "from gavil.pipeline.runner import _running\nctx = _running('ingest_concepts'); ctx.__enter__()",
        "from gavil.pipeline.runner import _module\n_module('evaluate')",  # builds a schema as it loads
    ],
    ids=["stage-run", "stage-module-import"],
)
def test_a_stage_process_validates_without_importing_dask_dataframe(entered):
    refused, dask_loaded, kinds = _run(entered)
    assert refused == "True" and dask_loaded == "False"
    plain_refused, plain_dask, plain_kinds = _run("")
    assert plain_refused == "True" and plain_dask == "True"  # pandera alone imports it (dask is installed)
    assert int(kinds) == int(plain_kinds) - 1  # the one type left out is dask's DataFrame


def test_a_process_that_imported_dask_dataframe_keeps_pandera_s_dask_typing():
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import dask.dataframe, sys\n"
            "from gavil.compat.pandera_dask import skip_dask_typing\n"
            "from pandera.typing import dask\n"
            "print(skip_dask_typing(), dask.DASK_INSTALLED)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert out.stdout.split() == ["False", "True"], out.stderr[-2000:]
