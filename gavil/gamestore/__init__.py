"""The collection game's persistent state: one SQLite store (``<game.store_dir>/game.sqlite``).

It knows SQL and nothing of HTTP or of serving: :mod:`.store` (connect, transactions, read
snapshots, JSON cells, the submissions reader, checkpoints, the store's path), :mod:`.migrations`
and :mod:`.rekey` (the tables, version by version), :mod:`.review` (players' flags and the admin's
reviews read back), :mod:`.gold` (the gold tables: what is stored, and the reader) and
:mod:`.consent` (players' acceptances of the consent text and withdrawals). Its refusals
are the domain errors of :mod:`gavil.errors` (``NotFound``, ``Forbidden``, ``Conflict``,
``Expired``); the rules it applies live in :mod:`gavil.domain`. The web app (:mod:`gavil.game`)
writes it and ``import_annotations`` reads it; it imports neither.
"""
