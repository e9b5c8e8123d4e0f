"""Annotator privacy: worker ids are replaced by a keyed hash before anything is stored.

The key comes from the environment variable named by ``annotations.annotator_key_env``
(default ``GAVIL_ANNOTATOR_KEY``), else from ``.secrets/annotator_key`` (git-ignored; created
with 32 random bytes on first use). It is never written to params, outputs or logs. The same
key gives the same hash across runs, so per-annotator statistics stay joinable.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

SECRET_FILE = Path(".secrets/annotator_key")


def annotator_key(env_var: str = "GAVIL_ANNOTATOR_KEY", secret_file: Path = SECRET_FILE) -> bytes:
    """The HMAC key: env var, else the secrets file (created if missing, mode 0600)."""
    value = os.environ.get(env_var)
    if value:
        return value.encode()
    if not secret_file.exists():
        secret_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
    return secret_file.read_text().strip().encode()


def key_fingerprint(key: bytes) -> str:
    """A fingerprint of the key that can be stored and compared (``kf_`` + 16 hex): an HMAC of a
    fixed message under the key, so it reveals nothing about the key or any id."""
    return "kf_" + hmac.new(key, b"winogavil-pipeline annotator key fingerprint", hashlib.sha256).hexdigest()[:16]


def hash_annotator(raw_id: str, key: bytes) -> str:
    """``hmac-sha256(key, id)``, first 16 hex chars, prefixed ``a_`` (not reversible without the key)."""
    return "a_" + hmac.new(key, raw_id.strip().encode(), hashlib.sha256).hexdigest()[:16]
