"""Starting the collection game (``gavil game``, ``gavil game-hits``): the playable candidate sets
(:func:`game_sets`), the secrets (:func:`secret_from_env`), and the :class:`Game` over a project
(:func:`build_game`), with the ``swow_af`` variant and the gold items it serves.

It reads the project's tables (``candidate_sets``, ``ocr``, ``selection``, ``af_instances``, the
``embeddings`` cache) through the catalog and imports no stage module.
"""

from __future__ import annotations

import gc
import json
import os
import secrets
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gavil.domain.privacy import annotator_key
from gavil.domain.profanity import ProfanityFilter
from gavil.errors import GavilError
from gavil.game.consent import ConsentText
from gavil.game.rival import Rival, load_rival
from gavil.game.rounds import check_rival, current_round
from gavil.game.service import CandidateSet, Game
from gavil.game.variant import VariantInstance
from gavil.gamestore.gold import gold_items, store_gold
from gavil.gamestore.store import connect, store_file
from gavil.params import Params
from gavil.pipeline import catalog
from schemas.ocr import accepted_images

if TYPE_CHECKING:
    from starlette.applications import Starlette


class NoCandidateSets(GavilError):
    """The project has no candidate set whose every image is accepted."""


def game_sets(root: Path = Path(".")) -> tuple[list[CandidateSet], dict[str, Path]]:
    """The candidate sets whose every candidate has an accepted image (``candidate_sets`` and
    ``ocr`` tables), and sha256 -> image file for those images.

    Raises:
        catalog.MissingInput: the tables do not exist (run ``dvc repro build_instances``).
        NoCandidateSets: none is playable.
    """
    sets = catalog.read_table("candidate_sets", root)
    images = accepted_images(catalog.read_table("ocr", root))
    out: list[CandidateSet] = []
    paths: dict[str, Path] = {}
    for sid, cands in zip(sets["set_id"], sets["candidates"]):
        if all(c in images for c in cands):
            out.append(CandidateSet(sid, tuple(cands), tuple(images[c][0] for c in cands)))
            paths |= {images[c][0]: root / images[c][1] for c in cands}
    if not out:
        raise NoCandidateSets(
            "no candidate set has an accepted image for every candidate: run `dvc repro build_instances` "
            "with more images (instances.game_sets)"
        )
    return out, paths


def secret_from_env(env: str, what: str) -> str:
    """The secret in env var ``env``; a fresh random one (printed once to stderr) when unset."""
    value = os.environ.get(env, "")
    if value:
        return value
    value = secrets.token_urlsafe(12)
    print(f"game: {env} is not set; this run's {what} is: {value}", file=sys.stderr)
    return value


def build_game(
    params: Params, root: Path = Path("."), rival: Rival | None = None, ask_consent: bool = True
) -> tuple[Game, dict[str, Path]]:
    """The game over the project in ``root`` (tables, store, rival); and sha256 -> image file.

    The game collects the round open in the store (:mod:`gavil.game.rounds`) against that round's
    rival; with no round open it loads no rival and refuses creations (solving goes on).

    Args:
        rival: a rival to use instead of loading the open round's (tests, benchmarks).
        ask_consent: players accept the text of ``root / game.consent_path`` before any work
            (:mod:`gavil.game.consent`; ``gavil game`` always asks); false only for tests of other rules.

    Raises:
        RoundError: the open round's rival entry changed in params.yaml since the round was opened.
        GameError: ``ask_consent`` and the consent text cannot be read.
    """
    sets, paths = game_sets(root)
    consent = ConsentText(root / params.game.consent_path) if ask_consent else None
    g = params.game
    if rival is None:
        con = connect(store_file(root / g.store_dir))  # created or migrated here, before the rival loads
        try:
            open_round = current_round(con)
        finally:
            con.close()
        if open_round is None:
            rival = Rival("no_weights", "New associations are not being collected right now; you can still solve.")
        else:
            check_rival(open_round, params)
            assert open_round.rival is not None
            images = {s: str(p) for s, p in paths.items()}
            rival = load_rival(params, images, [catalog.path("embeddings", root=root)], open_round.rival)
    prof = params.profanity
    game = Game(
        store_file(root / g.store_dir),
        sets,
        rival,
        g,
        params.select.min_solvers,
        secret_from_env(g.join_code_env, "join code") if g.identity == "shared_code" else None,
        secret_from_env(g.admin_token_env, "admin token"),
        annotator_key(params.annotations.annotator_key_env),
        ProfanityFilter(prof.extra_words, prof.allow_words).reason,
        consent,
    )
    if g.serve_af_variant:
        paths |= serve_af_variant(game, root)
    if g.gold.enabled:
        paths |= serve_gold(game, root)
    return game, paths


class TooFewGoldItems(GavilError):
    """``game.gold.enabled`` but fewer published instances are servable than a new solver must answer."""


def serve_gold(game: Game, root: Path = Path(".")) -> dict[str, Path]:
    """Store the published instances whose every candidate has an accepted image (``selection``
    status selected, ``ocr``) as the active gold items (:func:`gavil.gamestore.gold.store_gold`);
    returns sha256 -> image file of their images.

    Raises:
        catalog.MissingInput: no ``selection`` table (run ``dvc repro select_instances``).
        TooFewGoldItems: fewer than ``game.gold.items`` are servable.
    """
    images = accepted_images(catalog.read_table("ocr", root))
    items = gold_items(catalog.read_table("selection", root), images)
    active = store_gold(game.db, items, game.clock())
    need = game.p.gold.items
    if active < need:
        game.close()
        raise TooFewGoldItems(
            f"game.gold.enabled: {active} published instance(s) have an accepted image for every candidate, "
            f"a new solver must answer game.gold.items = {need}: lower game.gold.items, crawl images for the "
            "published instances' candidates (dvc repro), or set game.gold.enabled: false"
        )
    print(f"game: serving {active} gold items; new solvers answer {need} first", file=sys.stderr)
    return {images[c][0]: root / images[c][1] for it in items for c in it.candidates}


def serve_af_variant(game: Game, root: Path = Path(".")) -> dict[str, Path]:
    """Store the ``swow_af`` variant's instances (``af_instances``: status ok, every candidate with an
    accepted image) as solve tasks (:meth:`Game.serve_variant`); returns sha256 -> image file of their images.

    Raises:
        catalog.MissingInput: no variant table (run ``dvc repro adversarial_filter``).
    """
    af = catalog.read_table("af_instances", root)
    images = accepted_images(catalog.read_table("ocr", root))
    out: list[VariantInstance] = []
    for iid, cue, status, cands, assoc in zip(
        af["instance_id"], af["cue"], af["status"], af["candidates"], af["associations"]
    ):
        if status == "ok" and all(c in images for c in cands):
            out.append(
                VariantInstance(f"swow_af:{iid}", cue, tuple(cands), tuple(assoc), tuple(images[c][0] for c in cands))
            )
    added = game.serve_variant(out)
    print(f"game: serving {len(out)} swow_af instances as solve tasks ({added} new)", file=sys.stderr)
    return {images[c][0]: root / images[c][1] for v in out for c in v.candidates}


def settle_heap() -> int:
    """Collect the start-up garbage, then put every object alive now out of the garbage collector's
    reach (``gc.freeze``): call it in a server process once its game is built, before it serves.

    Python's full collection walks every tracked object while holding the GIL. A built game
    tracks about 510,000 (torch, open_clip and the rival model, the candidate sets, the imported
    modules); one full collection of that heap took 240 ms on an idle core, and under a 500-player
    crowd on 2 cores it came now and then during the players' arrival: every request in flight
    waited for it (joins p95 326-366 ms in three of five runs against 90-103 ms in the others,
    ``benchmarks/game_load.py``). The frozen objects live as long as the server anyway; what the
    requests create is still collected as before, at the cost of what they create.

    Returns:
        how many objects are frozen (``gc.get_freeze_count()``; ``GET /api/admin/stats`` reports it).
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


#: The environment variable through which ``gavil game --workers N`` tells its worker processes
#: which params file to load and how many processes serve (JSON: ``{"params": path, "workers": N}``).
WORKER_ENV = "GAVIL_GAME_WORKER"


def prepare_workers(params: Params, params_file: str, workers: int, root: Path = Path(".")) -> Game:
    """The start-up work of ``gavil game --workers N``, done once in the parent before the worker
    processes start (each then builds its own game, :func:`worker_app`, finding nothing left to do):
    the store created or migrated, the open round's rival entry checked, the gold items and variant
    instances stored, the shared throttle file created (:mod:`gavil.gamestore.limits`), and the join
    code and admin token put in the environment (one random secret for every process when unset).

    Returns:
        the parent's game, whose rival thread scores every process's creations (it takes the
        rival's lock before any worker exists, :class:`gavil.game.rival.RivalWorker`, so the
        requests' processes never run the text encoder); :meth:`Game.close` it after serving.

    Raises:
        RoundError: the open round's rival entry changed in params.yaml since the round was opened.
        NoCandidateSets, TooFewGoldItems, catalog.MissingInput: as :func:`build_game`.
    """
    from gavil.gamestore.limits import SharedWindows, limits_file
    from gavil.gamestore.store import set_synchronous, share_writers

    share_writers()  # the rival's writes here take turns with the workers'
    set_synchronous(params.game.synchronous)
    g = params.game
    store = store_file(root / g.store_dir)
    connect(store).close()  # created or migrated here, once, before any worker opens it
    if g.identity == "shared_code":
        os.environ[g.join_code_env] = secret_from_env(g.join_code_env, "join code")
    os.environ[g.admin_token_env] = secret_from_env(g.admin_token_env, "admin token")
    game, _ = build_game(params, root)  # the open round's rival entry checked, its model loaded
    SharedWindows(limits_file(store), 0).close()
    os.environ[WORKER_ENV] = json.dumps({"params": str(Path(params_file).resolve()), "workers": workers})
    return game


def worker_app() -> Starlette:
    """The app of one worker process of ``gavil game --workers N`` (uvicorn's app factory): the
    params named in :data:`WORKER_ENV` with ``game.workers`` N, the store's durability set, the game
    built over the project in the working directory (:func:`build_game`, its rival loaded here).

    Raises:
        KeyError: :data:`WORKER_ENV` is not set (only :func:`prepare_workers` sets it).
    """
    from gavil.game.web import create_app
    from gavil.gamestore.store import set_synchronous, share_writers
    from gavil.params import load_params

    share_writers()  # the store's writers take turns with the other processes' (a file lock)
    given = json.loads(os.environ[WORKER_ENV])
    p = load_params(given["params"])
    p = p.replace(game={"workers": given["workers"]})
    set_synchronous(p.game.synchronous)
    game, images = build_game(p)
    app = create_app(game, images)
    settle_heap()  # a full collection of the start-up heap would stall every request (its docstring)
    return app


class CannotListen(GavilError):
    """``gavil game`` cannot listen on its address (in use, or not this machine's)."""


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` for the worker processes to share (they listen and
    accept on it). Made with ``IPPROTO_TCP`` named: asyncio sets ``TCP_NODELAY`` only on connections
    of such a socket, and uvicorn's own (protocol 0) left Nagle's algorithm on, so an answer waited
    for the client's delayed ACK (40 ms measured on each POST with a body).

    Raises:
        CannotListen: the address cannot be bound (the message names it and why).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise CannotListen(f"game: cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock
