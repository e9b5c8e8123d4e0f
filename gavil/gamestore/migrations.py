"""The game store's tables, version by version: :data:`MIGRATIONS` takes a store of schema version
``v`` to ``v + 1`` (:func:`gavil.gamestore.store.connect` applies them, all in one transaction, up to
:data:`gavil.gamestore.store.SCHEMA_VERSION`; the tables are described in :mod:`gavil.gamestore.store`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from gavil.gamestore.rekey import rekey_names

# the first release's tables, less its leases (version 2 replaces them)
_TABLES_V1 = """
CREATE TABLE players(
  player_id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, display_name TEXT NOT NULL,
  name_key TEXT NOT NULL UNIQUE, created_at REAL NOT NULL);
CREATE TABLE tasks(
  task_id TEXT PRIMARY KEY, set_id TEXT NOT NULL, spymaster_id TEXT NOT NULL REFERENCES players(player_id),
  candidates TEXT NOT NULL, created_at REAL NOT NULL, UNIQUE(set_id, spymaster_id));
CREATE TABLE creations(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL UNIQUE,
  task_id TEXT NOT NULL REFERENCES tasks(task_id), spymaster_id TEXT NOT NULL, cue TEXT NOT NULL,
  cue_norm TEXT NOT NULL, content_key TEXT NOT NULL UNIQUE, candidates TEXT NOT NULL, associations TEXT NOT NULL,
  rival_status TEXT NOT NULL CHECK (rival_status IN ('ok', 'untrained', 'no_weights')),
  rival_predictions TEXT, score_fool_the_ai INTEGER CHECK (score_fool_the_ai BETWEEN 0 AND 100),
  created_at REAL NOT NULL, UNIQUE(task_id, cue_norm));
CREATE TABLE solves(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  solver_id TEXT NOT NULL, selection TEXT NOT NULL, jaccard REAL NOT NULL, created_at REAL NOT NULL,
  UNIQUE(instance_id, solver_id));
CREATE TABLE settings(key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""

# version 1 -> 2: served-work leases with ids and expiry, single-use invitations, the rival's
# background state; the old leases (unauthenticated reservations) are dropped: their players are
# simply served again
_MIGRATE_1_TO_2 = """
ALTER TABLE creations ADD COLUMN rival_state TEXT NOT NULL DEFAULT 'done'
  CHECK (rival_state IN ('pending', 'done', 'failed'));
ALTER TABLE solves ADD COLUMN lease_id TEXT;
CREATE UNIQUE INDEX solves_lease ON solves(lease_id);
DROP TABLE IF EXISTS leases;
CREATE TABLE leases(
  lease_id TEXT PRIMARY KEY, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  solver_id TEXT NOT NULL REFERENCES players(player_id), issued_at REAL NOT NULL, expires_at REAL NOT NULL,
  UNIQUE(instance_id, solver_id));
CREATE INDEX leases_live ON leases(instance_id, expires_at);
CREATE TABLE invitations(
  code_hash TEXT PRIMARY KEY, created_at REAL NOT NULL,
  used_by TEXT UNIQUE REFERENCES players(player_id), used_at REAL);
CREATE INDEX creations_pending ON creations(rival_state) WHERE rival_state = 'pending';
"""


# version 3 -> 4: collection rounds. Every creation names its round and the identity of the rival
# that scored it (models entry, architecture, weights: pretrained tag or "file:<sha256[:16]>", and
# the sha256 of the weights file). A store with creations gets round 1 for them: a closed round from
# the first to the last creation whose rival was not recorded (null identity); the next round a
# maintainer opens is 2. The swow_af variant's rows (spymaster "variant:swow_af") get no round.
_MIGRATE_3_TO_4 = """
CREATE TABLE rounds(
  round_id INTEGER PRIMARY KEY CHECK (round_id >= 1), rival TEXT, architecture TEXT, pretrained TEXT,
  weights_sha256 TEXT, opened_at REAL NOT NULL, closed_at REAL, CHECK (closed_at IS NULL OR closed_at >= opened_at));
CREATE UNIQUE INDEX rounds_one_open ON rounds(closed_at IS NULL) WHERE closed_at IS NULL;
ALTER TABLE creations ADD COLUMN round INTEGER REFERENCES rounds(round_id);
ALTER TABLE creations ADD COLUMN rival_model TEXT;
ALTER TABLE creations ADD COLUMN rival_architecture TEXT;
ALTER TABLE creations ADD COLUMN rival_weights TEXT;
ALTER TABLE creations ADD COLUMN rival_sha256 TEXT;
INSERT INTO rounds (round_id, opened_at, closed_at)
  SELECT 1, lo, hi FROM (SELECT MIN(created_at) AS lo, MAX(created_at) AS hi FROM creations
  WHERE spymaster_id NOT LIKE 'variant:%') WHERE lo IS NOT NULL;
UPDATE creations SET round = 1 WHERE spymaster_id NOT LIKE 'variant:%'
"""

# version 4 -> 5, players' flags and their review (gavil.domain.flags): one flag per player and
# association; a review covers the association's flags up to flags_through; one retire at most
_FLAGS_V5 = """
CREATE TABLE flags(
  flag_id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  player_id TEXT NOT NULL REFERENCES players(player_id),
  category TEXT NOT NULL CHECK (category IN ('offensive', 'wrong', 'unsolvable', 'other')),
  reason TEXT NOT NULL CHECK (length(reason) <= 200), created_at REAL NOT NULL, UNIQUE(instance_id, player_id));
CREATE TABLE flag_reviews(
  review_id INTEGER PRIMARY KEY AUTOINCREMENT, instance_id TEXT NOT NULL REFERENCES creations(instance_id),
  decision TEXT NOT NULL CHECK (decision IN ('keep', 'retire')), note TEXT NOT NULL CHECK (length(note) <= 200),
  reviewer TEXT NOT NULL, flags_through INTEGER NOT NULL, reviewed_at REAL NOT NULL);
CREATE UNIQUE INDEX flag_reviews_one_retire ON flag_reviews(instance_id) WHERE decision = 'retire';
CREATE INDEX flag_reviews_instance ON flag_reviews(instance_id, flags_through);
"""

# version 4 -> 5, solver checks (gavil.gamestore.gold): published instances served as gold items (their
# serving id looks like a creation's), their leases (apart from creations' leases, which reference
# creations) and the answers to them; a lease id is unique across both lease tables' answers
_GOLD_V5 = """
CREATE TABLE gold_items(
  gold_id TEXT PRIMARY KEY, instance_id TEXT NOT NULL UNIQUE, source_uid TEXT NOT NULL, creation_id TEXT,
  cue TEXT NOT NULL, candidates TEXT NOT NULL, associations TEXT NOT NULL, images TEXT NOT NULL,
  active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)), added_at REAL NOT NULL);
CREATE TABLE gold_leases(
  lease_id TEXT PRIMARY KEY, gold_id TEXT NOT NULL REFERENCES gold_items(gold_id),
  solver_id TEXT NOT NULL REFERENCES players(player_id), issued_at REAL NOT NULL, expires_at REAL NOT NULL,
  UNIQUE(gold_id, solver_id));
CREATE TABLE gold_answers(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, gold_id TEXT NOT NULL REFERENCES gold_items(gold_id),
  solver_id TEXT NOT NULL REFERENCES players(player_id), selection TEXT NOT NULL,
  jaccard REAL NOT NULL CHECK (jaccard BETWEEN 0 AND 1), created_at REAL NOT NULL, lease_id TEXT NOT NULL UNIQUE,
  UNIQUE(gold_id, solver_id));
CREATE INDEX gold_answers_solver ON gold_answers(solver_id);
CREATE TABLE gold_flags(
  gold_id TEXT NOT NULL REFERENCES gold_items(gold_id), player_id TEXT NOT NULL REFERENCES players(player_id),
  category TEXT NOT NULL CHECK (category IN ('offensive', 'wrong', 'unsolvable', 'other')),
  reason TEXT NOT NULL CHECK (length(reason) <= 200), created_at REAL NOT NULL, PRIMARY KEY (gold_id, player_id));
"""

# version 5 -> 6, answers that count (gavil.domain.gold.counts): each answer records whether it counted when
# it was given (null: stored before version 6, counted as the game counted it then), and each lease whether
# it holds one of an association's select.min_solvers places (a pending or failed solver's lease holds none)
_COUNTED_V6 = """
ALTER TABLE solves ADD COLUMN counted INTEGER CHECK (counted IN (0, 1));
ALTER TABLE leases ADD COLUMN counted INTEGER NOT NULL DEFAULT 1 CHECK (counted IN (0, 1));
CREATE INDEX flags_player ON flags(player_id, created_at);
CREATE INDEX gold_flags_player ON gold_flags(player_id, created_at);
"""

# version 6 -> 7, players' consent (gavil.domain.consent): each acceptance names the version (sha256) of the
# consent text the player was shown, once per player and version; a withdrawal is one row per player (final)
_CONSENT_V7 = """
CREATE TABLE consents(
  player_id TEXT NOT NULL REFERENCES players(player_id), version TEXT NOT NULL CHECK (length(version) = 64),
  accepted_at REAL NOT NULL, PRIMARY KEY (player_id, version));
CREATE INDEX consents_player ON consents(player_id, accepted_at);
CREATE TABLE consent_withdrawals(
  player_id TEXT PRIMARY KEY REFERENCES players(player_id), withdrawn_at REAL NOT NULL,
  last_version TEXT, leases_released INTEGER NOT NULL DEFAULT 0);
"""

MIGRATIONS: dict[int, str | Callable[[sqlite3.Connection], None]] = {
    0: _TABLES_V1,
    1: _MIGRATE_1_TO_2,
    2: rekey_names,
    3: _MIGRATE_3_TO_4,
    4: _FLAGS_V5 + _GOLD_V5,
    5: _COUNTED_V6,
    6: _CONSENT_V7,
}
"""SQL (or a function of the connection) taking a store of version ``v`` to ``v + 1`` (version 0:
no tables; its step creates version 1's tables, then every later step applies)."""
