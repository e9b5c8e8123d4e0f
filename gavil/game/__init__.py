"""The collection game (``gavil game``; docs/game.md): a web application, not a stage.

Spymasters give a one-word cue for a candidate set and mark K images; the rival model predicts K
(in a background thread) and the spymaster sees the fool-the-AI score; other players solve the
association they are served. Players join with an operator-issued single-use invitation (or, opt-in,
one shared code) and accept the operator's consent text before any work. Submissions go to the SQLite store (:mod:`gavil.gamestore`), which
``import_annotations`` reads; the rules both apply are in :mod:`gavil.domain` (:mod:`gavil.domain.rules`,
:mod:`gavil.domain.gold`, :mod:`gavil.domain.flags`, :mod:`gavil.domain.leases`, :mod:`gavil.domain.consent`).

Modules: :mod:`.launch` (start-up: the playable sets, :func:`gavil.game.launch.build_game`),
:mod:`.service` (serving: joining, creation tasks, solve assignment), :mod:`.rules` (request checks
that need no store), :mod:`.consent` (the consent text, acceptances and withdrawals), :mod:`.rounds`
(collection rounds), :mod:`.flags` (players' flags and the
admin's review), :mod:`.gold` (serving gold items), :mod:`.rival` (the model), :mod:`.scores`
(dashboard and leaderboard), :mod:`.admin` (admin exports), :mod:`.variant` (the ``swow_af``
variant), :mod:`.web` (HTTP: the one place a domain error becomes a status), :mod:`.hits` (crowd
task files). Nothing outside the game, its CLI commands, flows, benchmarks and tests imports it;
importing this package loads nothing.
"""
