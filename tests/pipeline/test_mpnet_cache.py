"""An untracked user cache never decides what a stage computes (same commit, same bytes): a verified
MPNet folder left in the cache by another install does not make an environment without the ``mpnet``
extra load MPNet."""

from __future__ import annotations

import pytest

from gavil.models import mpnet as _mpnet
from tests.helpers import hide_mpnet_parts


def test_a_cached_folder_without_the_installed_parts_is_unavailable(tmp_path, monkeypatch):
    folder = tmp_path / f"all-mpnet-base-v2-{_mpnet.ARCHIVE_SHA256[:12]}"
    (folder / "all-mpnet-base-v2").mkdir(parents=True)
    (folder / ".verified").write_text(_mpnet.WEIGHTS_SHA256 + "\n")  # as an earlier install leaves it

    hide_mpnet_parts(monkeypatch)
    with pytest.raises(_mpnet.MpnetUnavailable, match="not installed"):
        _mpnet.mpnet_folder(tmp_path)
