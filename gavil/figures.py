"""The documentation's committed pictures, drawn by the project from its own code and data.

- :func:`pipeline_svg`: the stage graph of :data:`gavil.pipeline.registry.STAGES` (every stage, every
  edge), in layers by longest path, drawn with matplotlib, text kept as text: ``docs/pipeline.svg``, shown by the README and ``docs/pipeline.md``
  (where the Mermaid version needs a browser with internet access; this one does not).
- :func:`instance_svg`: one instance of the embedded sample as a solver sees it, the cue above the
  candidate images, its associations outlined: ``docs/instance.svg`` (the release row and the sample
  images, what the export's Hugging Face dataset holds for it).

Both are written by ``gavil docs --write`` and compared by ``gavil docs --check``: matplotlib's SVG
writer with a fixed hash salt and no date gives the same bytes for the same input on every machine.

- :func:`leaderboard_svg`: the per-round model leaderboard of a project's ``evaluation`` table (mean
  Jaccard per model on each collection round and on every round together), drawn by
  ``gavil round leaderboard`` and by ``gavil report``; ``docs/dynamic.md`` shows the one a two-round
  project made (``tests/game/test_dynamic_e2e.py``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import pandas as pd

#: The sample instance the README shows (a release game instance whose five images ship in the sample; CLIP RN50 missed one of its three associations).
INSTANCE_ID = 2647

_SVG_RC: dict[str, Any] = {"svg.fonttype": "none", "svg.hashsalt": "winogavil-pipeline", "font.family": "DejaVu Sans"}


def _svg(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None}, bbox_inches="tight", pad_inches=0.05)
    plt.close(fig)
    return buf.getvalue()


def pipeline_layout(stages: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, tuple[float, float]]:
    """Stage -> (x, y) in a layered drawing of the DAG: layer = longest path from a stage with no
    input (so every arrow points down), stages of a layer ordered by the mean position of their
    inputs (two sweeps), centred; ties keep registry order."""
    preds: dict[str, list[str]] = {s: [] for s in stages}
    for a, b in edges:
        preds[b].append(a)
    layer: dict[str, int] = {}
    for s in stages:  # registry order is a DAG order
        layer[s] = 1 + max((layer[p] for p in preds[s]), default=-1)
    rows: dict[int, list[str]] = {}
    for s in stages:
        rows.setdefault(layer[s], []).append(s)
    x: dict[str, float] = {}
    for _ in range(2):
        for i in sorted(rows):
            order = sorted(
                rows[i],
                key=lambda s: (
                    sum(x.get(p, 0.0) for p in preds[s]) / len(preds[s]) if preds[s] else -1e9,
                    stages.index(s),
                ),
            )
            rows[i] = order
            for j, s in enumerate(order):
                x[s] = j - (len(order) - 1) / 2
    return {s: (x[s], -float(layer[s])) for s in stages}


def transitive_reduction(edges: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """``edges`` without those another path implies (``crawl_images -> evaluate`` when ``crawl_images ->
    ocr_filter -> evaluate`` exists): the same order of stages, fewer arrows to read."""
    succ: dict[str, set[str]] = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)

    def reachable(a: str, b: str, skip: tuple[str, str]) -> bool:
        todo, seen = [a], {a}
        while todo:
            n = todo.pop()
            for m in succ.get(n, ()):
                if (n, m) == skip or m in seen:
                    continue
                if m == b:
                    return True
                seen.add(m)
                todo.append(m)
        return False

    return [e for e in edges if not reachable(e[0], e[1], e)]


def pipeline_svg() -> str:
    """The pipeline's stage graph as SVG text: a box per stage, an arrow per edge of the DAG's transitive
    reduction (every table that flows between stages is on ``docs/pipeline.md``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from gavil.pipeline.registry import STAGES, upstream

    names = [s.name for s in STAGES]
    edges = transitive_reduction([(u, s.name) for s in STAGES for u in upstream(s)])
    pos = {n: (x * 2.0, y * 0.8) for n, (x, y) in pipeline_layout(names, edges).items()}
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    with plt.rc_context(cast(Any, _SVG_RC)):
        fig, ax = plt.subplots(figsize=((max(xs) - min(xs) + 2.2) * 1.05, (max(ys) - min(ys) + 0.7) * 1.05))
        for u, v in edges:
            (x0, y0), (x1, y1) = pos[u], pos[v]
            ax.add_patch(
                FancyArrowPatch(
                    (x0, y0 - 0.17), (x1, y1 + 0.17), arrowstyle="-|>", mutation_scale=9, color="#777777", lw=0.8
                )
            )
        for n, (x, y) in pos.items():
            box = FancyBboxPatch((x - 0.8, y - 0.16), 1.6, 0.32, boxstyle="round,pad=0.02", fc="#eef3fb", ec="#3b6bb5")
            ax.add_patch(box)
            ax.text(x, y, n, ha="center", va="center", fontsize=9)
        ax.set_xlim(min(xs) - 0.9, max(xs) + 0.9)
        ax.set_ylim(min(ys) - 0.3, max(ys) + 0.3)
        ax.set_aspect("equal")
        ax.set_axis_off()
        return _svg(fig)


def rooms_svg() -> str:
    """The rooms of :mod:`gavil.rooms` and their declared arrows as SVG text (``docs/rooms.svg``): one box per room with
    what it holds, an arrow from each importer to what it imports, arrows implied by a longer path
    left out (:func:`transitive_reduction`), placed at :data:`gavil.rooms.POSITIONS` (every arrow points down)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    from gavil.rooms import ARROWS, POSITIONS, ROOMS

    names = list(ROOMS)
    edges = transitive_reduction(sorted(ARROWS, key=lambda e: (names.index(e[0]), names.index(e[1]))))
    pos = {n: (POSITIONS[n][0] * 3.4, -POSITIONS[n][1] * 0.95) for n in names}
    xs, ys = [p[0] for p in pos.values()], [p[1] for p in pos.values()]
    with plt.rc_context(cast(Any, _SVG_RC)):
        fig, ax = plt.subplots(figsize=((max(xs) - min(xs) + 3.6) * 0.95, (max(ys) - min(ys) + 0.9) * 0.95))
        for u, v in edges:
            (x0, y0), (x1, y1) = pos[u], pos[v]
            ax.add_patch(
                FancyArrowPatch(
                    (x0, y0 - 0.25), (x1, y1 + 0.25), arrowstyle="-|>", mutation_scale=9, color="#777777", lw=0.8
                )
            )
        for n, (x, y) in pos.items():
            game = n in ("gavil.game", "gavil.gamestore", "gavil.domain")
            ax.add_patch(
                FancyBboxPatch(
                    (x - 1.55, y - 0.24),
                    3.1,
                    0.48,
                    boxstyle="round,pad=0.02",
                    fc="#fdf3e6" if game else "#eef3fb",
                    ec="#b5773b" if game else "#3b6bb5",
                )
            )
            ax.text(x, y + 0.07, n, ha="center", va="center", fontsize=9, weight="bold")
            ax.text(x, y - 0.11, ROOMS[n].split(": ", 1)[1], ha="center", va="center", fontsize=6.5, color="#444444")
        ax.set_xlim(min(xs) - 1.7, max(xs) + 1.7)
        ax.set_ylim(min(ys) - 0.4, max(ys) + 0.4)
        ax.set_aspect("equal")
        ax.set_axis_off()
        return _svg(fig)


def instance_svg(root: Path = Path("."), instance_id: int = INSTANCE_ID) -> str:
    """Instance ``instance_id`` of the embedded sample as SVG text, as the export holds it (the release row
    of ``data/sample/winogavil/winogavil_dataset.csv`` and each candidate's sample image): the cue, then
    each candidate image with its name, the associations outlined in green.

    Raises:
        KeyError: no such ID in the release, or a candidate without a sample image.
    """
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd
    from PIL import Image

    release = pd.read_csv(root / "data/sample/winogavil/winogavil_dataset.csv")
    row = release[release["ID"] == instance_id]
    if row.empty:
        raise KeyError(f"ID {instance_id} is not in the sample release")
    ex = row.iloc[0]
    cands, assoc = json.loads(ex["candidates"]), set(json.loads(ex["associations"]))
    with plt.rc_context(cast(Any, _SVG_RC)):
        fig, axes = plt.subplots(1, len(cands), figsize=(1.6 * len(cands), 2.15))
        for ax, name in zip(np.atleast_1d(axes), cands):
            files = sorted((root / "data/sample/images").glob(f"{name}.*"))
            if not files:
                raise KeyError(f"no sample image for candidate {name!r}")
            im = Image.open(files[0]).convert("RGBA")  # emoji: transparent background -> white
            im = Image.alpha_composite(Image.new("RGBA", im.size, "white"), im).convert("RGB")
            side = min(im.size)
            im = im.crop(
                ((im.width - side) // 2, (im.height - side) // 2, (im.width + side) // 2, (im.height + side) // 2)
            )
            im = im.resize((144, 144), Image.Resampling.LANCZOS)
            ax.imshow(np.asarray(im), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            hit = name in assoc
            for spine in ax.spines.values():
                spine.set_edgecolor("#1a9641" if hit else "#bbbbbb")
                spine.set_linewidth(4 if hit else 1)
            ax.set_xlabel(name + (" (association)" if hit else ""), fontsize=8, color="#1a9641" if hit else "#333")
        fig.suptitle(
            f'cue "{ex["cue"]}": {len(assoc)} associations among {len(cands)} candidates; '
            f"fool-the-AI score {ex['score_fool_the_ai']}, solvers' mean Jaccard {ex['solvers_jaccard_mean']}",
            fontsize=9,
        )
        return _svg(fig)


def leaderboard_svg(evaluation: pd.DataFrame, dataset: str = "game") -> str:
    """The per-round leaderboard as SVG text: for each collection round of ``evaluation`` (round 0 the
    release, then the game's rounds, then "all rounds"), one bar per model, its mean Jaccard x100 on
    ``dataset`` (the ``breakdown`` "all" rows: every instance of that round), the random baseline of the
    round as a dashed line, and under each bar the number of instances that bar scores (its row's
    ``n_scored``: a model that could score fewer of the round's instances shows its own n).

    Args:
        evaluation: the ``evaluation`` table (:class:`schemas.evaluate.Evaluation`: ``model_name``,
            ``dataset``, ``breakdown``, ``cell``, ``round`` (-1: every round), ``n_scored``,
            ``untrained``, ``mean_jaccard_percent``, ``random_percent``; percent, 0-100).
        dataset: ``game`` (the benchmark) or ``swow_baseline``.

    A model with no scored instance anywhere (no weights) is left out and named in the caption; a
    model run with random weights is labelled "untrained" (its numbers measure nothing).

    Raises:
        ValueError: the table has no ``breakdown`` "all" row for ``dataset``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    ev = evaluation[(evaluation["dataset"] == dataset) & (evaluation["breakdown"] == "all")]
    if ev.empty:
        known = ", ".join(sorted(set(evaluation["dataset"]))) or "none"
        raise ValueError(f"the evaluation table has no {dataset!r} rows (its datasets: {known}); name one of those")
    scored = ev.groupby("model_name")["mean_jaccard_percent"].apply(lambda s: s.notna().any())
    models = sorted(str(m) for m, ok in scored.items() if ok)
    missing = sorted(str(m) for m, ok in scored.items() if not ok)
    rounds = sorted(int(r) for r in ev["round"].unique() if int(r) >= 0) + [-1]
    untrained = {m for m in models if bool(ev.loc[ev["model_name"] == m, "untrained"].fillna(False).any())}
    width = 0.8 / max(len(models), 1)
    colors = plt.get_cmap("tab10")
    with plt.rc_context(cast(Any, _SVG_RC)):
        fig, ax = plt.subplots(figsize=(1.4 + 1.1 * len(rounds) * max(1.0, len(models) / 3), 3.6))
        for i, m in enumerate(models):
            rows = ev[ev["model_name"] == m].set_index("round")
            values = [rows["mean_jaccard_percent"].get(r, float("nan")) for r in rounds]
            xs = [k - 0.4 + width * (i + 0.5) for k in range(len(rounds))]
            label = m + (" (untrained)" if m in untrained else "")
            ax.bar(xs, [0.0 if pd.isna(v) else v for v in values], width * 0.92, label=label, color=colors(i % 10))
            counts = [int(rows["n_scored"].get(r, 0)) for r in rounds]  # what this bar scores, per round
            for x, v, c in zip(xs, values, counts):
                if not pd.isna(v):
                    ax.text(x, v + 1, f"{v:.0f}", ha="center", va="bottom", fontsize=7)
                ax.text(x, -2, f"n={c}", ha="center", va="top", rotation=90, fontsize=6, color="#555555")
        base = ev.groupby("round")["random_percent"].first()
        for k, r in enumerate(rounds):
            if r in base.index and not pd.isna(base[r]):
                ax.plot([k - 0.45, k + 0.45], [base[r], base[r]], ls="--", color="#555555", lw=1)
        names = [("all rounds" if r == -1 else "round 0 (release)" if r == 0 else f"round {r}") for r in rounds]
        ax.set_xticks(range(len(rounds)))
        ax.set_xticklabels(names, fontsize=8)
        ax.tick_params(axis="x", pad=24)  # below each bar's n
        ax.set_ylabel("mean Jaccard (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"Models on the {dataset} benchmark, per collection round (dashed: random)", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if missing:
            fig.text(0.01, -0.04, "not scored (no weights): " + ", ".join(missing), fontsize=7, color="#555555")
        return _svg(fig)


#: Committed pictures: path under the project root -> its generator (``gavil docs --write`` / ``--check``).
def pictures(root: Path) -> dict[str, Callable[[], str]]:
    """``docs/pipeline.svg``, ``docs/instance.svg`` and ``docs/rooms.svg`` (:func:`rooms_svg`) -> a
    function returning the SVG text."""
    return {
        "docs/pipeline.svg": pipeline_svg,
        "docs/instance.svg": lambda: instance_svg(root),
        "docs/rooms.svg": rooms_svg,
    }
