"""Starting the collection game (``gavil game``, ``gavil game-hits``): the playable candidate sets
(:func:`game_sets`), the secrets (:func:`secret_from_env`), and the :class:`Game` over a project
(:func:`build_game`), with the ``swow_af`` variant and the gold items it serves.

It reads the project's tables (``candidate_sets``, ``ocr``, ``selection``, ``af_instances``, the
``embeddings`` cache) through the catalog and imports no stage module.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from gavil.domain.privacy import annotator_key
from gavil.domain.profanity import ProfanityFilter
from gavil.errors import GavilError
from gavil.game.rival import Rival, load_rival
from gavil.game.rounds import check_rival, current_round
from gavil.game.service import CandidateSet, Game
from gavil.game.variant import VariantInstance
from gavil.gamestore.gold import gold_items, store_gold
from gavil.gamestore.store import connect, store_file
from gavil.params import Params
from gavil.pipeline import catalog
from schemas.ocr import accepted_images


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


def build_game(params: Params, root: Path = Path("."), rival: Rival | None = None) -> tuple[Game, dict[str, Path]]:
    """The game over the project in ``root`` (tables, store, rival); and sha256 -> image file.

    The game collects the round open in the store (:mod:`gavil.game.rounds`) against that round's
    rival; with no round open it loads no rival and refuses creations (solving goes on).

    Args:
        rival: a rival to use instead of loading the open round's (tests, benchmarks).

    Raises:
        RoundError: the open round's rival entry changed in params.yaml since the round was opened.
    """
    sets, paths = game_sets(root)
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
