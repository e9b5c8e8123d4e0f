"""The rival model the spymaster plays against: the ``models`` entry ``game.rival_model`` names
(``rival``, the benchmark's rival by default) with
every game image embedded once at start-up (the pipeline's embedding cache is read first), so a
prediction is one text embedding ("A/An cue", :func:`gavil.domain.winogavil.prompt_for_cue`) and a dot
product. Without weights the rival is *absent* (``no_weights``: the game says so, fool-the-AI is
null); random weights only with ``game.rival_random_weights: true`` (``untrained`` everywhere).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from gavil.domain.winogavil import fool_the_ai_score, prompt_for_cue, top_k_positions
from gavil.errors import ParamsError
from gavil.gamestore.store import connect, transaction
from gavil.models.embeddings import Cache
from gavil.models.loading import LoadedModel, ModelSpec, RuntimeOptions, WeightsUnavailable, load_model
from gavil.params import Params

STATUSES = ("ok", "untrained", "no_weights")


@dataclass
class Rival:
    """``status``: ``ok``, ``untrained`` or ``no_weights``; ``message`` is what players see (never an
    operator's instruction: what to set or run goes to the server's console). The identity
    (``entry``, ``architecture``, ``weights``, ``sha256``) is what every creation it scores stores
    (:meth:`identity`); empty/None when not known (a rival made by hand)."""

    status: str
    message: str
    label: str = ""  # e.g. "RN50 / openai"
    model: LoadedModel | None = None
    vectors: dict[str, np.ndarray] = field(default_factory=dict)  # image sha256 -> unit vector
    entry: str = ""  # the models: entry
    architecture: str | None = None  # the open_clip architecture
    weights: str | None = None  # pretrained tag, "file:<sha256[:16]>" or "untrained"; None: no weights
    sha256: str | None = None  # sha256 of the weights file loaded; None: random weights, none, or unknown
    _text: dict[str, np.ndarray] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def predict(self, cue: str, candidate_shas: Sequence[str], k: int) -> list[int] | None:
        """The K candidate positions the model picks (rank order; ties keep candidate order), or
        None when there is no model. Cost: one text embedding (memoised per prompt) + N dot products."""
        if self.model is None:
            return None
        prompt = prompt_for_cue(cue)
        with self._lock:  # one forward pass at a time (torch uses its own threads inside)
            q = self._text.get(prompt)
            if q is None:
                q = self.model.embed_texts([prompt])[0]
                if len(self._text) < 10_000:
                    self._text[prompt] = q
        mat = np.stack([self.vectors[s] for s in candidate_shas])
        return top_k_positions(mat @ q, k)

    def prepare(self, cues: Sequence[str]) -> None:
        """Embed in one call the prompts of ``cues`` that :meth:`predict` has not memoised yet. On a
        CPU every text forward pass holds 16 rows whatever (:func:`gavil.models.loading.forward_rows`),
        so a queue of pending creations costs one pass instead of one each; the vectors are the bytes
        :meth:`predict` computes alone (a vector depends on its text only:
        ``tests/stages/score_candidates/test_score.py::test_a_vector_is_a_function_of_its_input_alone``).
        A subclass with its own ``predict`` embeds nothing here."""
        if self.model is None or type(self).predict is not Rival.predict:
            return
        with self._lock:
            todo = sorted({prompt_for_cue(c) for c in cues} - self._text.keys())[: max(0, 10_000 - len(self._text))]
            if todo:
                for prompt, vec in zip(todo, self.model.embed_texts(todo)):
                    self._text[prompt] = vec

    def identity(self) -> tuple[str | None, str | None, str | None, str | None]:
        """(entry, architecture, weights, sha256): the creations columns ``rival_model``,
        ``rival_architecture``, ``rival_weights`` and ``rival_sha256``."""
        return self.entry or None, self.architecture, self.weights, self.sha256

    def score(self, picks: Sequence[str] | None, associations: Sequence[str]) -> int | None:
        """Fool-the-AI (100 - truncated Jaccard x 100) of the picks, None without a model."""
        return None if picks is None else fool_the_ai_score(picks, associations)


def load_rival(
    params: Params, images: Mapping[str, str], cache_paths: Sequence[str | Path] = (), entry: str | None = None
) -> Rival:
    """Load the rival for ``images`` (sha256 -> file path).

    Args:
        cache_paths: embedding caches to read first (the ``embeddings`` table of score_candidates).
        entry: the ``models:`` entry (the open round's rival); default ``game.rival_model``.

    Never raises for missing weights: returns a ``no_weights`` rival whose message says how to
    provide them. Raises ParamsError for an unknown architecture or a missing weights file.
    """
    g = params.game
    name = entry or g.rival_model
    s, random = params.models[name], g.rival_random_weights
    spec = ModelSpec(
        "rival",
        "open_clip",
        s.model,
        None if random else s.pretrained,
        None if random else s.weights_path,
        None if random else s.sha256,
        name,
    )
    try:
        model = load_model(spec, RuntimeOptions.of(s))
    except WeightsUnavailable as e:
        print(f"game: NO RIVAL - {e.log_text()}", file=sys.stderr)  # the machine's cause and the fix: the console only
        return Rival(
            "no_weights",
            "There is no AI rival on this server right now, so no fool-the-AI score is recorded. "
            "Your cues and answers are saved as usual.",
            entry=name,
            architecture=s.model,
        )
    except ParamsError:
        raise
    cache = Cache([p for p in cache_paths], None)
    assert model.embed_images is not None
    vecs = cache.ensure(model.cache_key("image"), dict(images), model.embed_images) if images else {}
    import torch

    # one thread per prediction: a single prompt gains nothing from more, and on a shared CPU
    # several threads spin against each other (RN50, 2 busy cores: p50 0.18 s with 1, 0.77 s with 2)
    torch.set_num_threads(1)
    label = f"{s.model} / {model.weights_id}"
    if model.untrained:
        return Rival(
            "untrained",
            f"The AI rival is UNTRAINED ({s.model} with random weights): its guesses are for trying the game "
            "out, and its fool-the-AI scores are labelled untrained and never enter the benchmark.",
            label + " (untrained)",
            model,
            vecs,
            name,
            s.model,
            model.weights_id,
            model.weights_sha256,
        )
    return Rival(
        "ok", f"The rival model is {label}.", label, model, vecs, name, s.model, model.weights_id, model.weights_sha256
    )


class RivalWorker:
    """The one thread that runs the rival for the game, so no request ever waits on it.

    Its queue is the store: creations with ``rival_state`` pending, oldest first, up to
    :attr:`BATCH` at a time, their prompts embedded together (:meth:`Rival.prepare`; a restart
    recomputes what a stopped server left pending; memory holds nothing). For each it stores the
    rival's picks, fool-the-AI score and identity (:meth:`Rival.identity`: a creation a stopped
    server left pending names the rival that did score it) and sets ``done``, or ``failed`` (score null, the error on
    stderr) when the rival raises, so one bad row never stalls the rest. Then it sleeps until
    :meth:`wake`.

    With several server processes (``game.workers``) one thread scores for all: the one holding an
    exclusive ``flock`` of ``lock`` (the others try again every second, so another takes over when
    that process ends); it looks for pending rows every second too, since other processes store them.
    The thread runs at niceness :attr:`NICE`: on a busy CPU the requests' threads come first (the
    profile of a 300-player crowd had the rival's text encoder take one of the two cores).

    Args:
        by_name: concept name -> the sha256 of its image (every candidate of the game's sets).
        lock: the file whose lock elects the one scoring thread of several processes; None: one process.
    """

    POLL_S = 1.0  # seconds between looks for the lock and for other processes' pending rows
    BATCH = 16  # pending creations scored together: their prompts share the text encoder's forward passes
    NICE = 10  # the thread's scheduling niceness (Linux: per thread): the server's requests come first

    def __init__(self, rival: Rival, store: Path, by_name: Mapping[str, str], lock: Path | None = None) -> None:
        self.rival, self.store, self.by_name, self.lock = rival, store, by_name, lock
        self._wake, self._stop = threading.Event(), threading.Event()
        self._wake.set()  # pending creations of an earlier run first
        self._thread = threading.Thread(target=self._loop, name="gavil-rival", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A creation is pending: process the queue."""
        self._wake.set()

    def close(self) -> None:
        """Stop after the current batch (pending rows stay pending, for the next start)."""
        self._stop.set()
        self._wake.set()
        self._thread.join()

    def wait_idle(self, timeout: float) -> bool:
        """Whether no creation is pending, waiting up to ``timeout`` seconds for it."""
        con = connect(self.store, create=False)
        try:
            deadline = time.monotonic() + timeout
            while con.execute("SELECT 1 FROM creations WHERE rival_state = 'pending' LIMIT 1").fetchone():
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.02)
            return True
        finally:
            con.close()

    def _loop(self) -> None:
        with contextlib.suppress(OSError):  # background work: requests come first on a busy CPU
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.NICE)
        held = self._elected()
        if held is None and self.lock is not None:
            return  # stopped before this process was elected
        con = connect(self.store, create=False)
        try:
            while not self._stop.is_set():
                self._wake.wait(None if self.lock is None else self.POLL_S)
                self._wake.clear()
                while not self._stop.is_set() and self._batch(con):
                    pass
        finally:
            con.close()
            if held is not None:
                held.close()  # the lock goes with it

    def _elected(self) -> IO[bytes] | None:
        """With a ``lock``: wait (polling, until stopped) for its exclusive ``flock``; the open file
        holding it, or None when stopped first or without a ``lock``."""
        if self.lock is None:
            return None
        f = self.lock.open("a+b")
        while not self._stop.is_set():
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return f
            except BlockingIOError:
                self._stop.wait(self.POLL_S)
        f.close()
        return None

    def _batch(self, con: sqlite3.Connection) -> bool:
        """Score the oldest pending creations, up to :attr:`BATCH` (their prompts embedded together,
        :meth:`Rival.prepare`), and store them in one transaction; False when none is pending."""
        rows = con.execute(
            "SELECT instance_id, cue, candidates, associations FROM creations"
            " WHERE rival_state = 'pending' ORDER BY seq LIMIT ?",
            (self.BATCH,),
        ).fetchall()
        if not rows:
            return False
        # a batch that fails to embed costs only its time: each row is then embedded alone in
        # predict, and a row that fails there fails alone (its error on stderr)
        with contextlib.suppress(Exception):
            self.rival.prepare([row["cue"] for row in rows])
        updates = [self._scored(row) for row in rows]
        with transaction(con) as db:
            db.executemany(
                "UPDATE creations SET rival_predictions = ?, score_fool_the_ai = ?, rival_state = ?,"
                " rival_model = ?, rival_architecture = ?, rival_weights = ?, rival_sha256 = ?"
                " WHERE instance_id = ? AND rival_state = 'pending'",
                updates,
            )
        return True

    def _scored(self, row: sqlite3.Row) -> tuple[object, ...]:
        """The UPDATE parameters of one pending creation: its picks, score and state (``done``, or
        ``failed`` when the rival raises: the error goes to stderr), the rival's identity, its id."""
        state, preds, fool = "failed", None, None
        try:
            cands, assoc = json.loads(row["candidates"]), json.loads(row["associations"])
            pos = self.rival.predict(row["cue"], [self.by_name[n] for n in cands], len(assoc))
            names = None if pos is None else [cands[i] for i in pos]
            preds = None if names is None else json.dumps(names, ensure_ascii=False)
            fool, state = self.rival.score(names, assoc), "done"
        except Exception as e:  # the queue outlives any one row
            print(f"game: the rival failed on {row['instance_id']}: {type(e).__name__}: {e}", file=sys.stderr)
        return (preds, fool, state, *self.rival.identity(), row["instance_id"])
