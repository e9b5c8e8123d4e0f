"""``gavil release`` as a maintainer uses it (docs/dynamic.md "Versioned export"): on the built
sample project (git + DVC, after ``dvc repro``), commit, release, change the export and commit, then
``git checkout v1.0.0 && dvc checkout`` gives the release's files back byte for byte; ``--push`` and
``dvc pull`` in a second clone give the same bytes there."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from tests.helpers import run

DVC = [sys.executable, "-m", "dvc"]


def _export_files(d: Path) -> dict[str, bytes]:
    root = d / "data/export"
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} | {
        "metrics/export.json": (d / "data/metrics/export.json").read_bytes()
    }


def _ok(p) -> str:
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p.stdout


def _refused(p, *words: str) -> None:
    out = p.stdout + p.stderr
    assert p.returncode == 2, out[-2000:]
    line = out.strip().splitlines()[0]
    assert all(w in line for w in words), out  # one line, the fix included


def test_release_tags_the_version_and_checkout_restores_it(sample_copy, tmp_path):
    d = sample_copy
    _ok(run(["git", "add", "-A"], d))
    _ok(run(["git", "commit", "-qm", "the sample's first build"], d))

    (d / "notes.txt").write_text("an untracked file\n")
    _refused(run(["gavil", "release"], d), "commit them")
    (d / "notes.txt").unlink()

    assert "tagged v1.0.0" in _ok(run(["gavil", "release"], d))
    released = _export_files(d)
    tag = _ok(run(["git", "cat-file", "-t", "v1.0.0"], d)).strip()
    assert tag == "tag"  # annotated
    assert "already marks HEAD" in _ok(run(["gavil", "release"], d))  # idempotent

    params = yaml.safe_load((d / "params.yaml").read_text())
    params["export"]["copy_images"] = False  # changes the card (and only the export re-runs)
    (d / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    _ok(run(["git", "commit", "-qam", "paths instead of image bytes"], d))
    _refused(run(["gavil", "release"], d), "not up to date", "dvc repro")
    _ok(run([*DVC, "repro"], d))
    _ok(run(["git", "add", "-A"], d))
    _ok(run(["git", "commit", "-qm", "re-export"], d))
    assert _export_files(d) != released
    _refused(run(["gavil", "release"], d), "v1.0.0 already marks commit", "export.patch")

    _ok(run(["git", "checkout", "-q", "v1.0.0"], d))
    _ok(run([*DVC, "checkout"], d))
    assert _export_files(d) == released

    # sharing: push the release, pull it into a second clone
    _ok(run([*DVC, "remote", "add", "--local", "-d", "shared", str(tmp_path / "remote")], d))
    pushed = _ok(run(["gavil", "release", "--push"], d))
    assert "already marks HEAD" in pushed and "git push --tags" in pushed
    clone = tmp_path / "clone"
    _ok(run(["git", "clone", "-q", str(d), str(clone)], tmp_path))
    _ok(run(["git", "checkout", "-q", "v1.0.0"], clone))
    _ok(run([*DVC, "remote", "add", "--local", "-d", "shared", str(tmp_path / "remote")], clone))
    _ok(run([*DVC, "pull"], clone))
    assert _export_files(clone) == released
