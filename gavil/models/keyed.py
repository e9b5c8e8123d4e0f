"""Random draws keyed by an item's id instead of its row position: a value per (id, seed,
purpose) that does not depend on the row order nor on which other items are present. Used by
``aflite`` (classifier splits, the KL's random reduction, the ``plant`` audit) and, by
:func:`content_seed`, ``adversarial_filter`` (each instance's pool draws)."""

from __future__ import annotations

import hashlib
import json

import numpy as np

_U64 = np.uint64


def _splitmix64(z: np.ndarray) -> np.ndarray:
    """SplitMix64's output function (Steele, Lea & Flood 2014, "Fast splittable pseudorandom number
    generators", OOPSLA; constants of Stafford's Mix13), elementwise on uint64 (wrapping): a
    bijection of 64-bit values whose outputs look independent and uniform."""
    z = z + _U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    mixed: np.ndarray = z ^ (z >> _U64(31))
    return mixed


def _blake64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def id_hashes(ids: np.ndarray | list[str]) -> np.ndarray:
    """(n,) uint64: the first 8 bytes (little-endian) of BLAKE2b (RFC 7693; Python's hashlib) of
    each id's UTF-8 text."""
    return np.fromiter((_blake64(str(i)) for i in ids), dtype=np.uint64, count=len(ids))


def draw_keys(h: np.ndarray, seed: int, *purpose: object) -> np.ndarray:
    """(n,) uint64 draw values of instances with id hashes ``h`` (:func:`id_hashes`) for one
    ``purpose`` (e.g. ``("split", phase, classifier)``): ``splitmix64(h ^ blake2b64(seed, purpose))``.
    Ranking instances by them is a random order keyed by id: an instance's value depends on its
    id, the seed and the purpose only (distinct ids give distinct values unless their 64-bit hashes
    collide)."""
    key = _blake64(json.dumps([seed, *purpose]))
    return _splitmix64(h ^ _U64(key))


def content_seed(text: str) -> int:
    """A 64-bit seed from ``text`` (first 8 bytes of its UTF-8 sha256, little-endian): draws keyed by
    an instance's id, so no instance's draws depend on its row position or on the other instances."""
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
