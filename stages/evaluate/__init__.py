"""Stage 10, ``evaluate``: zero-shot evaluation of any models on the selected benchmark.

For every model ``evaluate.models`` names (``models`` entries, each at its own precision and
device: open_clip architectures with a tag or weights file, or the text-only baseline that
compares the cue with the candidates' *names*) and every selected
instance (game and SWOW baseline): top-K prediction and Jaccard, as in
:mod:`gavil.models.embeddings`. Then, as in the paper's Table 4: mean Jaccard x100 by number of
candidates (5, 6, 10, 12) and by the groups 5-6 and 10-12, each with a 95 % percentile bootstrap
CI over instances (``evaluate.bootstrap`` resamples, seeded) and the random-chance Jaccard of the
same instances (exact expectation for a uniformly random K-subset of N,
:func:`gavil.domain.winogavil.random_expected_jaccard`).

Also recomputes the release's own CLIP ViT-B/32 results from its stored predictions
(``evaluate.release_predictions_dir``) — 41.6 / 53.4 / 74.3 for game 10-12 / game 5-6 / SWOW —
as a check of this evaluation code. Embeddings come from ``score_candidates``' cache when
present; anything new goes to this stage's own cache. Models without weights get
``no_weights`` rows and null means; untrained models are labelled as such everywhere.

The paper's other analyses (Tables 5-7, published numbers, ``paper.tie_break``) live in
:mod:`stages.evaluate.paper` and its sibling modules; ``reduce`` calls them in two lines.

Partitioned by model (:mod:`stages.evaluate.spread`): ``gavil stage evaluate`` and the Prefect flow
embed for the open_clip models in parallel where each has enough to do; ``reduce`` then scores every
model from the cache, so the outputs are the same bytes however the models were spread.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

import numpy as np
import pandas as pd

from gavil.domain.versions import dataset_version
from gavil.domain.winogavil import candidate_group, fool_the_ai_score, jaccard, random_expected_jaccard
from gavil.errors import MissingInput
from gavil.io import atomic_path
from gavil.models.embeddings import Cache, score_instances
from gavil.models.loading import ModelSpec
from gavil.pipeline import catalog
from gavil.progress import step
from schemas.evaluate import ALL_ROUNDS, EvalPredictions, Evaluation
from schemas.ocr import accepted_images
from stages.evaluate import errors, paired, paper, rivals, spread
from stages.evaluate.bootstrap import bootstrap_ci
from stages.evaluate.published import TieBreak, rerank

if TYPE_CHECKING:
    from gavil.params import Params


class Metrics(TypedDict):
    """``data/metrics/evaluate.json``: Table 4 cells in percent."""

    instances: int
    dataset_version: str  # the dataset version scored (1.<round>.<patch>, gavil.domain.versions.dataset_version)
    models: dict[str, dict[str, Any]]  # model -> status, weights_sha256 and "dataset group" -> mean Jaccard %
    release_check: dict[str, Any]  # computed vs published release numbers
    paired: dict[str, Any]  # Winoground paired scores (stages/evaluate/paired.py)
    paper: dict[str, Any]  # Tables 5-7, published numbers, random chance (stages.evaluate.paper)
    embeddings_in_cache: int


RELEASE_MODEL = "clip-vit-b-32 (release predictions)"
RELEASE_FILES = {
    "game_5_6_with_predictions.csv": "game",
    "game_10_12_with_predictions.csv": "game",
    "swow_with_predictions.csv": "swow_baseline",
}
#: The release's published means x100 for its stored predictions (reference).
RELEASE_EXPECTED = {"game 10&12": 41.6, "game 5&6": 53.4, "swow_baseline 5&6": 74.3}
TABLE4_COLUMNS = [("game", "10&12"), ("game", "5&6"), ("swow_baseline", "5&6")]


def benchmark_instances(selection: pd.DataFrame) -> pd.DataFrame:
    """Selected instances (game and SWOW baseline) with instance_id = instance_uid."""
    sel = selection[selection["status"] == "selected"]
    return pd.DataFrame(
        {
            "instance_id": sel["instance_uid"].to_numpy(),
            "dataset": sel["dataset"].to_numpy(),
            "cue": sel["cue"].to_numpy(),
            "candidates": sel["candidates"].to_numpy(),
            "associations": sel["associations"].to_numpy(),
            "num_candidates": sel["num_candidates"].to_numpy(),
        }
    )


def id_key(value: str) -> tuple[int, int | str]:
    """Sort key of a release ``ID`` cell: numbers in numeric order, then anything else as text."""
    v = value.strip()
    return (0, int(v)) if v.isdigit() else (1, v)


def release_predictions(folder: Path | None) -> pd.DataFrame:
    """The release's stored CLIP ViT-B/32 predictions as :class:`schemas.evaluate.EvalPredictions` rows,
    by file and ID (none when ``folder`` is None: ``evaluate.release_predictions_dir`` empty, a project without the release).

    Raises:
        MissingInput: ``folder`` lacks one of the release's ``*_with_predictions.csv`` files.
    """
    rows: list[dict[str, Any]] = []
    if folder is None:
        return pd.DataFrame(rows, columns=list(EvalPredictions.to_schema().columns))
    for name, dataset in RELEASE_FILES.items():
        path = folder / name
        if not path.exists():
            raise MissingInput(
                f"{path} missing: evaluate.release_predictions_dir must hold the release's *_with_predictions.csv files"
            )
        with open(path, newline="", encoding="utf-8") as f:
            # by ID (digit runs as numbers): the file's row order never matters
            for rec in sorted(csv.DictReader(f), key=lambda r: id_key(r["ID"])):
                cands, assoc = json.loads(rec["candidates"]), json.loads(rec["associations"])
                pred = json.loads(rec["clip_vit_32_predictions"])
                rows.append(
                    {
                        "model_name": RELEASE_MODEL,
                        "weights_id": "release",
                        "dataset": dataset,
                        "instance_id": f"release-predictions:{Path(name).stem}:{rec['ID']}",
                        "num_candidates": len(cands),
                        "status": "ok",
                        "reason": "stored predictions from the WinoGAViL release",
                        "predictions": pred,
                        "jaccard": jaccard(pred, assoc),
                        "score_fool_the_ai": fool_the_ai_score(pred, assoc),
                        "random_jaccard": random_expected_jaccard(len(cands), len(assoc)),
                    }
                )
    return pd.DataFrame(rows, columns=list(EvalPredictions.to_schema().columns))


def aggregate(
    pred: pd.DataFrame,
    n_boot: int,
    seed: int,
    rounds: dict[str, int] | None = None,
    version: str = "1.0.0",
) -> pd.DataFrame:
    """Per model x dataset x round x cell: counts, mean Jaccard x100, CI, random baseline (Table 4
    cells). Every (model, dataset) gets its rows over all rounds together (``round``
    :data:`schemas.evaluate.ALL_ROUNDS`, -1) and then per collection round, ascending.

    Args:
        rounds: instance_id -> collection round (an id not in it, e.g. the release's stored
            predictions: round 0); None: every instance is round 0.
        version: the dataset version scored (:func:`gavil.domain.versions.dataset_version`), on every row.
    """
    rows = []
    rnd = pred["instance_id"].map(rounds or {}).fillna(0).astype(int) if len(pred) else pd.Series([], dtype=int)
    df = pred.assign(group=pred["num_candidates"].map(candidate_group), round=rnd)
    for (model, weights, dataset), whole in df.groupby(["model_name", "weights_id", "dataset"], sort=False):
        parts = [(ALL_ROUNDS, whole)] + [(int(r), whole[whole["round"] == r]) for r in sorted(whole["round"].unique())]
        for round_id, g in parts:
            cells = [
                ("num_candidates", str(n), g[g["num_candidates"] == n]) for n in sorted(g["num_candidates"].unique())
            ]
            cells += [("group", grp, g[g["group"] == grp]) for grp in ("5&6", "10&12") if (g["group"] == grp).any()]
            cells.append(("all", "all", g))
            for breakdown, cell, c in cells:
                scored = c[c["status"].isin(["ok", "untrained"])]
                base = scored if len(scored) else c
                vals = 100 * scored["jaccard"].to_numpy(dtype=float)
                lo, hi = bootstrap_ci(vals, n_boot, seed)
                rows.append(
                    {
                        "model_name": model,
                        "weights_id": weights,
                        "dataset": dataset,
                        "breakdown": breakdown,
                        "cell": cell,
                        "n_instances": len(c),
                        "n_scored": len(scored),
                        "untrained": bool((scored["status"] == "untrained").any()),
                        "mean_jaccard_percent": float(vals.mean()) if len(vals) else None,
                        "ci_low_percent": lo if len(vals) else None,
                        "ci_high_percent": hi if len(vals) else None,
                        "random_percent": 100 * float(base["random_jaccard"].mean()),
                        "round": round_id,
                        "dataset_version": version,
                    }
                )
    return pd.DataFrame(rows, columns=list(Evaluation.to_schema().columns))


def table4_by_round(ev: pd.DataFrame) -> str:
    """Per collection round (when the benchmark holds more than one): models x (game 10&12, game
    5&6, SWOW 5&6) mean Jaccard x100 [95 % percentile bootstrap CI over the round's instances]
    (scored/total), one Markdown table per round; "" otherwise."""
    per = ev[(ev["round"] != ALL_ROUNDS) & (ev["breakdown"] == "group") & (ev["model_name"] != RELEASE_MODEL)]
    rounds = sorted(per["round"].unique())
    if len(rounds) < 2:
        return ""
    out = ["\n## Per collection round (round 0: the release)\n"]
    for r in rounds:
        out.append(f"\n### Round {r}\n\n| Model | Game 10 & 12 | Game 5 & 6 | SWOW 5 & 6 |\n|---|---|---|---|")
        g = per[per["round"] == r]
        for (model, weights), m in g.groupby(["model_name", "weights_id"], sort=False):
            cells = []
            for dataset, grp in TABLE4_COLUMNS:
                x = m[(m["dataset"] == dataset) & (m["cell"] == grp)]
                if x.empty:
                    cells.append("–")
                elif pd.isna(x["mean_jaccard_percent"].iloc[0]):
                    cells.append(f"n/a (0/{int(x['n_instances'].iloc[0])})")
                else:
                    c = x.iloc[0]
                    cells.append(
                        f"{c.mean_jaccard_percent:.1f} [{c.ci_low_percent:.1f}, {c.ci_high_percent:.1f}] "
                        f"({c.n_scored}/{c.n_instances})"
                    )
            out.append(f"| {model} ({weights}) | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def table4_markdown(ev: pd.DataFrame, humans: dict[tuple[str, str], float]) -> str:
    """Models x (game 10&12, game 5&6, SWOW 5&6): mean [95 % CI] (scored/total), as Table 4, over
    every collection round together (rows with ``round`` -1)."""
    head = "| Model | Game 10 & 12 | Game 5 & 6 | SWOW 5 & 6 |\n|---|---|---|---|\n"
    lines = []
    if "round" in ev:
        ev = ev[ev["round"] == ALL_ROUNDS]
    groups = ev[ev["breakdown"] == "group"]
    for (model, weights), g in groups.groupby(["model_name", "weights_id"], sort=False):
        cells = []
        for dataset, grp in TABLE4_COLUMNS:
            r = g[(g["dataset"] == dataset) & (g["cell"] == grp)]
            if r.empty:
                cells.append("–")
            elif pd.isna(r["mean_jaccard_percent"].iloc[0]):
                cells.append(f"n/a (0/{int(r['n_instances'].iloc[0])})")
            else:
                x = r.iloc[0]
                cells.append(
                    f"{x.mean_jaccard_percent:.1f} [{x.ci_low_percent:.1f}, {x.ci_high_percent:.1f}] ({x.n_scored}/{x.n_instances})"
                )
        label = f"{model} ({weights})" + (" **untrained**" if g["untrained"].any() else "")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    rnd = []
    for dataset, grp in TABLE4_COLUMNS:
        r = groups[(groups["dataset"] == dataset) & (groups["cell"] == grp) & (groups["model_name"] != RELEASE_MODEL)]
        rnd.append(f"{r['random_percent'].iloc[0]:.1f}" if len(r) else "–")
    lines.append("| Random chance (same instances) | " + " | ".join(rnd) + " |")
    lines.append(
        "| Humans (solver mean of these instances) | "
        + " | ".join(f"{humans[c]:.1f}" if c in humans else "–" for c in TABLE4_COLUMNS)
        + " |"
    )
    note = (
        "\nMean Jaccard x100 over the instances each model could score (scored/total); 95 % percentile "
        "bootstrap CI over instances. Random chance: exact expected Jaccard of a random K-subset.\n"
    )
    return head + "\n".join(lines) + "\n" + note


def plots(ev: pd.DataFrame, models_path: str, candidates_path: str) -> None:
    """Bar chart per model with CIs (Table 4 columns) and Jaccard by number of candidates (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = ev[(ev["breakdown"] == "group") & ev["mean_jaccard_percent"].notna()]
    models = list(dict.fromkeys(groups["model_name"]))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / max(1, len(models))
    for i, m in enumerate(models):
        xs: list[float] = []
        ys: list[float] = []
        err: list[list[float]] = [[], []]
        for j, (dataset, grp) in enumerate(TABLE4_COLUMNS):
            r = groups[(groups["model_name"] == m) & (groups["dataset"] == dataset) & (groups["cell"] == grp)]
            if len(r):
                x = r.iloc[0]
                xs.append(j + i * width)
                ys.append(x.mean_jaccard_percent)
                err[0].append(x.mean_jaccard_percent - x.ci_low_percent)
                err[1].append(x.ci_high_percent - x.mean_jaccard_percent)
        ax.bar(xs, ys, width, yerr=err, capsize=3, label=m)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(TABLE4_COLUMNS))], ["game 10&12", "game 5&6", "SWOW 5&6"])
    ax.set_ylabel("Jaccard x100 (95 % CI)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    ax.set_title("Zero-shot models on the benchmark")
    fig.tight_layout()
    _save(fig, models_path)

    by_n = ev[(ev["breakdown"] == "num_candidates") & (ev["dataset"] == "game")]
    fig, ax = plt.subplots(figsize=(6, 4))
    for m, g in by_n.groupby("model_name", sort=False):
        g = g[g["mean_jaccard_percent"].notna()].sort_values("cell", key=lambda s: s.astype(int))
        if len(g):
            ax.errorbar(
                g["cell"].astype(int),
                g["mean_jaccard_percent"],
                yerr=[
                    g["mean_jaccard_percent"] - g["ci_low_percent"],
                    g["ci_high_percent"] - g["mean_jaccard_percent"],
                ],
                marker="o",
                capsize=3,
                label=m,
            )
    rnd = by_n.drop_duplicates("cell").sort_values("cell", key=lambda s: s.astype(int))
    ax.plot(rnd["cell"].astype(int), rnd["random_percent"], "k--", label="random chance")
    ax.set_xlabel("number of candidates")
    ax.set_ylabel("Jaccard x100")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7)
    ax.set_title("Game instances: Jaccard by number of candidates")
    fig.tight_layout()
    _save(fig, candidates_path)
    plt.close("all")


def _save(fig: Any, path: str) -> None:
    with atomic_path(path, ".png") as tmp:
        fig.savefig(tmp, format="png", dpi=110, metadata={"Software": None})


def _inputs() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, tuple[str, str]]]:
    selection = catalog.read_table("selection")
    return selection, benchmark_instances(selection), accepted_images(catalog.read_table("ocr"))


def _rivals() -> pd.DataFrame:
    """The game rounds' rivals (:func:`stages.evaluate.rivals.round_rivals`) from ``instances``."""
    return rivals.round_rivals(catalog.read_table("instances"))


def worker_threads(params: Params) -> int:
    """The threads one worker uses well: the most ``threads`` among ``evaluate.models``' open_clip
    entries (torch's intra-op pool; 1 without one), so ``gavil stage`` runs ``cores // threads``
    workers (:func:`gavil.pipeline.runner.worker_threads`). On 2 cores, 300 concepts, one process of
    2 threads took 45 s and 77 CPU-s where two processes of one thread took 51 s and 94 CPU-s
    (``benchmarks/parallel.py``, docs/benchmarks.md "One process or two")."""
    entries = [params.models[n] for n in params.evaluate.models]
    return max((e.threads for e in entries if e.kind == "open_clip"), default=1)


def plan(params: Params) -> list[spread.Partition]:
    """The models' embedding work in partitions (:func:`stages.evaluate.spread.plan`: an open_clip
    model with enough to embed is cut into shares of its images and prompts when there are workers
    to share them): the models of ``evaluate.models`` and each game round's rival
    (:func:`stages.evaluate.rivals.models_to_score`)."""
    _, inst, images = _inputs()
    return spread.plan(params, inst, images, rivals.models_to_score(params, _rivals()))


def work(params: Params, part: spread.Partition) -> spread.PartResult:
    """Load one partition's models and embed what scoring the benchmark needs (:func:`stages.evaluate.spread.work`)."""
    _, inst, images = _inputs()
    names = rivals.models_to_score(params, _rivals())
    return spread.work(params, part, inst, images, [catalog.path(n) for n in catalog.EMBEDDING_CACHES], names)


def run(params: Params) -> Metrics:
    """Stage entry point: selection + images + model list -> predictions, evaluation, Table 4, plots
    (:func:`plan`, :func:`work` and :func:`reduce` in this process)."""
    return reduce(params, [work(params, part) for part in plan(params)])


def reduce(params: Params, results: list[spread.PartResult]) -> Metrics:
    """Score every model from the partitions' embeddings, then everything else of the stage.

    Returns the metrics: instances, each model's status and Table 4 cells (percent), the release
    check (computed vs published), embeddings used. Names each step for the stage's heartbeat (a line at
    least every 10 s: :class:`gavil.progress.Heartbeat`, which the runner starts)."""
    return _run(params, results)


def _run(params: Params, results: list[spread.PartResult]) -> Metrics:
    p = params.evaluate
    step("reading the selection")
    round_rivals = _rivals()
    specs = [ModelSpec.of(name, params.models[name]) for name in rivals.models_to_score(params, round_rivals)]
    selection, inst, images = _inputs()
    cache = Cache([catalog.path(n) for n in catalog.EMBEDDING_CACHES], catalog.path("eval_embeddings", "write"))
    loaded: dict[str, spread.ModelInfo] = {}
    for r in results:
        cache.add_rows(r["rows"])
        loaded |= r["models"]
    rand = np.array(
        [random_expected_jaccard(len(c), len(a)) for c, a in zip(inst["candidates"], inst["associations"])], dtype=float
    )
    frames, status, shas = _score_models(specs, loaded, inst, images, cache, rand, params.paper.tie_break)
    release_dir = Path(p.release_predictions_dir) if p.release_predictions_dir else None  # "": no release
    release = release_predictions(release_dir)
    step("Table 7 text models")
    text_frames, text_meta = paper.text_rows(params, inst, cache, rand)  # Table 7 rows (names, captions)
    pred = catalog.write_table(pd.concat([*frames, *text_frames, release], ignore_index=True), "predictions")
    cache.save()
    step(f"Table 4 cells, {p.bootstrap} bootstrap resamples each")
    rounds = dict(zip(selection["instance_uid"], selection["round"].fillna(0).astype(int)))
    bench_rounds = selection.loc[(selection["status"] == "selected") & (selection["dataset"] == "game"), "round"]
    version = dataset_version(bench_rounds, params.export.patch)[1]
    ev = catalog.write_table(aggregate(pred, p.bootstrap, p.seed, rounds, version), "evaluation")
    overall = ev[ev["round"] == ALL_ROUNDS]
    step("paired scores")
    paired_metrics = paired.run(inst, pred, release_dir, p.bootstrap, p.seed)
    sel = selection[selection["status"] == "selected"].assign(group=lambda d: d["num_candidates"].map(candidate_group))
    # cast: pandas-stubs types groupby keys as tuple[Hashable, ...]; here (dataset, candidate group) pairs
    groups_of = cast("Iterable[tuple[tuple[str, str], pd.DataFrame]]", sel.groupby(["dataset", "group"]))
    humans = {(d, g): 100 * float(x["solvers_jaccard_mean"].mean()) for (d, g), x in groups_of}
    step("rounds compared: each round's rival, model error rates")
    scored = [s.name for s in specs]
    _write_round_tables(params, selection, pred, ev, round_rivals, scored, humans)
    step("plots")
    plots(overall, str(catalog.path("plot_models", "write")), str(catalog.path("plot_candidates", "write")))
    status |= text_meta["status"]
    shas |= text_meta["sha256"]
    models, release_check = _model_cells(overall, status, shas)
    metrics: Metrics = {
        "instances": len(inst),
        "dataset_version": version,
        "models": models,
        "paper": paper.analyses(params, selection, inst, pred, cache, text_meta, models),
        "release_check": {
            "computed": release_check,
            "published": RELEASE_EXPECTED,
            "matches": release_check == RELEASE_EXPECTED,
        },
        "embeddings_in_cache": len(cache),
        "paired": paired_metrics,
    }
    print(f"evaluate: embeddings reused {cache.hits}, computed {cache.computed}", file=sys.stderr)
    return metrics


def _write_round_tables(
    params: Params,
    selection: pd.DataFrame,
    pred: pd.DataFrame,
    ev: pd.DataFrame,
    round_rivals: pd.DataFrame,
    scored: list[str],
    humans: dict[tuple[str, str], float],
) -> None:
    """Write ``rival_rounds`` (:func:`stages.evaluate.rivals.rival_rounds`), ``round_errors``
    (:func:`stages.evaluate.errors.round_errors`) and ``table4.md``: Table 4 over every round, per
    round with CIs, each round's rival on later rounds, the model error rate per round.

    ``ev``: the written ``evaluation`` table; ``scored``: the entries scored (``predictions``' models);
    ``humans``: (dataset, group) -> the solvers' mean Jaccard x100."""
    version = str(ev["dataset_version"].iloc[0]) if len(ev) else "1.0.0"
    game = selection[(selection["status"] == "selected") & (selection["dataset"] == "game")]
    game_rounds = sorted({int(r) for r in game["round"].dropna()})
    rival_table = catalog.write_table(rivals.rival_rounds(round_rivals, ev, game_rounds, params), "rival_rounds")
    error_table = catalog.write_table(errors.round_errors(selection, pred, params, scored, version), "round_errors")
    with atomic_path(catalog.path("table4_md", "write"), ".md") as tmp:
        tmp.write_text(
            table4_markdown(ev[ev["round"] == ALL_ROUNDS], humans)
            + table4_by_round(ev)
            + rivals.rival_rounds_markdown(rival_table)
            + errors.round_errors_markdown(error_table)
        )


def _score_models(
    specs: list[ModelSpec],
    loaded: dict[str, spread.ModelInfo],
    inst: pd.DataFrame,
    images: dict[str, tuple[str, str]],
    cache: Cache,
    rand: np.ndarray,
    tie_break: TieBreak,
) -> tuple[list[pd.DataFrame], dict[str, str], dict[str, str | None]]:
    """Score ``inst`` (the benchmark instances) with each model of ``specs`` from the embeddings in
    ``cache`` (``loaded``: what the partitions learned of each model; ``rand``: each instance's
    random-chance Jaccard, a fraction). Returns (an :class:`schemas.evaluate.EvalPredictions` frame
    per model, model -> ``ok`` / ``untrained`` / ``no_weights``, model -> its weights' sha256)."""
    frames, status, shas = [], {}, {}
    for spec in specs:
        model, reason = spread.stand_in(spec, loaded[spec.name])
        step(f"scoring {len(inst)} instances with {spec.name}")
        scored = rerank(score_instances(inst, model, images, cache, reason or ""), tie_break)
        status[spec.name] = "no_weights" if model is None else ("untrained" if model.untrained else "ok")
        shas[spec.name] = model.weights_sha256 if model else None
        frames.append(
            pd.DataFrame(
                {
                    "model_name": spec.name,
                    "weights_id": model.weights_id if model else str(spec.pretrained),
                    "dataset": inst["dataset"].to_numpy(),
                    "instance_id": inst["instance_id"].to_numpy(),
                    "num_candidates": inst["num_candidates"].to_numpy(),
                    "status": scored["status"].to_numpy(),
                    "reason": scored["reason"].to_numpy(),
                    "predictions": scored["predictions"].to_numpy(),
                    "similarities": scored["similarities"].to_numpy(),
                    "jaccard": scored["jaccard"].to_numpy(),
                    "score_fool_the_ai": scored["score_fool_the_ai"].to_numpy(),
                    "random_jaccard": rand,
                }
            )
        )
    return frames, status, shas


def _model_cells(
    overall: pd.DataFrame, status: dict[str, str], shas: dict[str, str | None]
) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Each model's metrics (``status``, ``weights_sha256`` and its Table 4 cells: mean Jaccard
    percent, 2 decimals, None when not scored) from ``overall`` (the all-rounds evaluation rows),
    and the release check: the release model's cells, 1 decimal (NaN when absent)."""
    groups = overall[overall["breakdown"] == "group"]

    def cell(model: str, dataset: str, grp: str) -> float | None:
        r = groups[(groups["model_name"] == model) & (groups["dataset"] == dataset) & (groups["cell"] == grp)]
        return (
            None
            if r.empty or pd.isna(r["mean_jaccard_percent"].iloc[0])
            else round(float(r["mean_jaccard_percent"].iloc[0]), 2)
        )

    release_check = {f"{d} {g}": round(cell(RELEASE_MODEL, d, g) or float("nan"), 1) for d, g in TABLE4_COLUMNS}
    models = {
        m: {
            "status": status.get(m, "ok"),
            "weights_sha256": shas.get(m),  # of the weights file the model loaded (None: none / release)
            **{f"{d} {g}": cell(m, d, g) for d, g in TABLE4_COLUMNS},
        }
        for m in [*status, RELEASE_MODEL]
    }
    return models, release_check
