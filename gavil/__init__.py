"""The project's library: everything the stages share, by role.

- :mod:`gavil.pipeline`: the stage registry, the runner, the table catalog and ``dvc.yaml`` generation.
- :mod:`gavil.params`: the typed ``params.yaml`` sections.
- :mod:`gavil.models`: model loading (open_clip, sentence-transformers, EasyOCR numerics), embeddings.
- :mod:`gavil.domain`: the WinoGAViL rules and vocabulary, names, the ID ledger.
- :mod:`gavil.game`: the annotation game's web app (routes, serving, rival); :mod:`gavil.gamestore`: its SQLite store.
- :mod:`gavil.io`, :mod:`gavil.cli`, :mod:`gavil.report`, :mod:`gavil.query`, :mod:`gavil.errors`,
  :mod:`gavil.progress`.

Stages (``stages/``) import this package and never each other; this package never imports a stage
(the registry loads them by name).
"""

import os as _os

# OpenBLAS's idle threads spin for about 2^28 cycles after every call before they sleep; between the
# many small GEMMs of a fit (AfLite's phases) two spinning threads burned a third of the stage's CPU
# (28.5 vs 20.9 CPU-s, the same wall time). 2^4 cycles: they sleep at once. Read by OpenBLAS when
# numpy first loads it, so it is set before any import of numpy here; a value the user set wins.
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
