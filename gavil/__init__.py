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
