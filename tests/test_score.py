"""score_candidates: predictions from embeddings, no-weights behaviour, weight resolution."""

import numpy as np
import pandas as pd
import pytest

from schemas.scores import Scores
from stages._io import ParamsError, validate
from stages.score_candidates import RivalModel, WeightsUnavailable, load_rival_model, score_instances

INSTANCES = pd.DataFrame(
    {
        "instance_id": ["swow:space", "swow:ocean", "swow:night"],
        "cue": ["space", "ocean", "night"],
        "candidates": [["rocket", "cat", "moon", "coffee", "brick"], ["rocket", "cat", "moon", "coffee", "brick"], ["moon", "star", "cat", "unicorn", "brick"]],
        "associations": [["rocket", "moon"], ["cat", "brick"], ["moon", "star"]],
    }
)
PATHS = {c: f"/imgs/{c}.png" for c in ["rocket", "cat", "moon", "coffee", "brick", "star"]}
# hand-made unit embeddings: "A space" is closest to moon (0.98), then rocket (0.90); "An ocean" ties everywhere
VEC = {
    "rocket": [1, 0, 0], "moon": [0.8, 0.6, 0], "cat": [0, 1, 0], "coffee": [0, 0, 1], "brick": [0, 0.6, 0.8], "star": [0.6, 0.8, 0],
    "A space": [0.9, 0.436, 0], "An ocean": [0, 0, 0],
}  # fmt: skip


def fake_model(untrained=False):
    def emb(keys):
        return np.array([VEC[k.rsplit("/", 1)[-1].removesuffix(".png")] for k in keys], dtype=np.float32)

    return RivalModel("RN50", "untrained" if untrained else "openai", untrained, emb, emb)


def test_predictions_jaccard_and_fool_score():
    out = validate(score_instances(INSTANCES, PATHS, fake_model()), Scores).set_index("instance_id")
    space = out.loc["swow:space"]
    assert space["prompt"] == "A space" and space["predictions"] == ["moon", "rocket"]  # 0.98, 0.90
    assert space["jaccard"] == 1.0 and space["score_fool_the_ai"] == 0 and space["status"] == "ok"
    ocean = out.loc["swow:ocean"]  # all similarities tie at 0: stable order picks the first K
    assert ocean["prompt"] == "An ocean" and ocean["predictions"] == ["rocket", "cat"]
    assert ocean["jaccard"] == pytest.approx(1 / 3) and ocean["score_fool_the_ai"] == 67
    night = out.loc["swow:night"]
    assert night["status"] == "missing_image" and "unicorn" in night["reason"] and pd.isna(night["jaccard"])


def test_untrained_rows_say_so():
    out = validate(score_instances(INSTANCES[:1], PATHS, fake_model(untrained=True)), Scores)
    assert out.loc[0, "status"] == "untrained" and out.loc[0, "pretrained"] == "untrained"
    assert "random weights" in out.loc[0, "reason"]


def test_no_weights_rows_invent_nothing():
    out = validate(score_instances(INSTANCES, PATHS, None, ("RN50", "openai", "no cached weights; set score.weights_path")), Scores)
    assert (out["status"] == "no_weights").all()
    assert out["jaccard"].isna().all() and out["score_fool_the_ai"].isna().all() and out["predictions"].isna().all()
    assert out["reason"].str.contains("score.weights_path").all()


def test_schema_refuses_made_up_scores():
    out = score_instances(INSTANCES[:1], PATHS, None, ("RN50", "openai", "none"))
    out.loc[0, "jaccard"] = 0.5
    with pytest.raises(Exception, match="scores only where a model ran"):
        validate(out, Scores)


P = {"model": "RN50", "pretrained": "openai", "weights_path": None, "cache_dir": None, "allow_download": False,
     "require_weights": False, "batch_size": 8, "threads": 1}  # fmt: skip


def test_no_cache_no_download_is_actionable(tmp_path):
    with pytest.raises(WeightsUnavailable, match="score.weights_path"):
        load_rival_model({**P, "cache_dir": str(tmp_path)})


def test_bad_params_are_errors(tmp_path):
    with pytest.raises(ParamsError, match="not an open_clip architecture"):
        load_rival_model({**P, "model": "NoSuchNet"})
    with pytest.raises(ParamsError, match="does not exist"):
        load_rival_model({**P, "weights_path": str(tmp_path / "RN50.pt")})
    with pytest.raises(ParamsError, match="unknown for RN50"):
        load_rival_model({**P, "pretrained": "no-such-tag"})


@pytest.mark.slow
def test_untrained_and_local_weights_file_run_the_real_model(tmp_path):
    """open_clip RN50 with random weights, then the same weights from a local file: same embeddings."""
    import torch

    from tests.conftest import IMAGES

    torch.manual_seed(0)
    rnd = load_rival_model({**P, "pretrained": None})
    assert rnd.untrained and rnd.pretrained == "untrained"
    imgs = [str(IMAGES / "cat.png"), str(IMAGES / "rocket.jpg")]
    e1 = rnd.embed_images(imgs)
    assert e1.shape == (2, 1024) and np.allclose(np.linalg.norm(e1, axis=1), 1, atol=1e-5)
    assert rnd.embed_texts(["A cat"]).shape == (1, 1024)

    import open_clip

    torch.manual_seed(0)
    model = open_clip.create_model("RN50", pretrained=None)
    path = tmp_path / "rn50-test.pt"
    torch.save(model.state_dict(), path)
    loaded = load_rival_model({**P, "pretrained": None, "weights_path": str(path)})
    assert not loaded.untrained and loaded.pretrained.startswith("file:")
    assert np.allclose(loaded.embed_images(imgs), e1, atol=1e-5)
