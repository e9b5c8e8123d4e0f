"""Schema version 2 -> 3 of the game's store (:mod:`gavil.gamestore.store`): display names and cues are
compared by their TR39 skeleton from then on, so every stored key is made again."""

from __future__ import annotations

import json
import sqlite3


def rekey_names(con: sqlite3.Connection) -> None:
    """Version 2 -> 3: names are compared by their TR39 skeleton. Players get ``look_key`` and a
    new ``name_key`` (:func:`gavil.domain.names.display_name_keys`), creations a new ``cue_norm``
    and ``content_key`` (:func:`gavil.domain.vocabulary.name_key`). Rows that the new keys make
    twins were both accepted before: each keeps its row, the later one's key made unique with its
    id (no new row can match it); ``import_annotations`` and selection decide about such twins."""
    from gavil.domain.names import display_name_keys
    from gavil.domain.vocabulary import name_key

    con.execute("ALTER TABLE players ADD COLUMN look_key TEXT")
    seen: set[str] = set()

    def unique(key: str, row_id: str) -> str:
        key = key if key not in seen else f"{key}\x00{row_id}"
        seen.add(key)
        return key

    players = con.execute("SELECT player_id, display_name FROM players ORDER BY created_at, player_id").fetchall()
    con.execute("UPDATE players SET name_key = '#' || player_id")  # free every old key first
    for pid, name in players:
        cf, look = (pid, pid) if pid.startswith("variant:") else display_name_keys(name)
        con.execute(
            "UPDATE players SET name_key = ?, look_key = ? WHERE player_id = ?",
            (unique("cf\x1f" + cf, pid)[3:], unique("look\x1f" + look, pid)[5:], pid),
        )
    con.execute("CREATE UNIQUE INDEX players_look ON players(look_key)")
    rows = con.execute("SELECT seq, instance_id, task_id, cue, candidates FROM creations ORDER BY seq").fetchall()
    con.execute("UPDATE creations SET content_key = '#' || instance_id, cue_norm = '#' || instance_id")
    for seq, iid, task, cue, cands in rows:
        content = json.dumps([name_key(cue), sorted(name_key(c) for c in json.loads(cands))], ensure_ascii=False)
        norm = unique(f"task\x1f{task}\x1f{name_key(cue)}", iid).split("\x1f", 2)[2]
        con.execute(
            "UPDATE creations SET content_key = ?, cue_norm = ? WHERE seq = ?", (unique(content, iid), norm, seq)
        )
