"""pandera without its dask typing, in the processes that validate pandas tables only.

pandera builds a table model's schema by asking which DataFrame, Series and Index types exist
(``pandera.typing.get_dataframe_types`` and its siblings); the first such call imports
``pandera.typing.dask``, which imports ``dask.dataframe`` when dask is installed: about 0.4 CPU-s,
in each of the 13 stage processes of a ``dvc repro`` (dask is installed here for the cluster, and
no table of this project is a dask frame). :func:`skip_dask_typing` registers that module as pandera
finds it when dask is *not* installed (``DASK_INSTALLED = False``), so the answer leaves dask's
types out and nothing else changes. It does nothing where pandera's dask typing or
``dask.dataframe`` is already imported (a Dask worker that loaded it keeps the real one).
"""

from __future__ import annotations

import sys
import types

_MODULE = "pandera.typing.dask"


def skip_dask_typing() -> bool:
    """Register pandera's dask typing as "dask not installed" unless it (or ``dask.dataframe``) is
    imported already. Returns whether it did; call it before a table model's first schema is built
    (the runner does before it imports a stage's module: ``gavil.pipeline.runner._module``)."""
    if _MODULE in sys.modules or "dask.dataframe" in sys.modules:
        return False
    stub = types.ModuleType(_MODULE, "pandera's dask typing, as without dask (gavil.compat.pandera_dask)")
    stub.DASK_INSTALLED = False  # type: ignore[attr-defined]
    sys.modules[_MODULE] = stub
    return True
