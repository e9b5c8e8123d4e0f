"""``gavil report``: one static HTML page summarising a run (not a DVC stage: it only reads).

Sections: what was crawled and why images were rejected (crawl and OCR fates), the instance
statistics (Table 1 layout), the evaluation (Table 4 layout) with its plots, and a gallery of
selected instances showing the cue, the candidates as thumbnails (associations outlined) and the
solver score. Images are embedded as base64 thumbnails, so the page is one self-contained file.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol, cast

import pandas as pd

from gavil.io import atomic_path
from gavil.pipeline import catalog
from schemas.evaluate import ALL_ROUNDS

CSS = """body{font-family:system-ui,sans-serif;margin:2rem;max-width:1100px;color:#222}
.wide{max-width:100%;overflow-x:auto}svg,img{max-width:100%;height:auto}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}td,th{border:1px solid #ccc;padding:.25rem .6rem;text-align:right;overflow-wrap:anywhere}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.inst{border:1px solid #ddd;border-radius:6px;padding:.6rem;margin:.8rem 0}
.cands{display:flex;flex-wrap:wrap;gap:.4rem}.cand{width:110px;text-align:center;font-size:.8rem}
.cand img,.cand .none{width:104px;height:104px;object-fit:cover;border:3px solid transparent;background:#eee;display:block}
.cand.assoc img,.cand.assoc .none{border-color:#c0392b}.none{line-height:104px;color:#999}img.plot{max-width:540px;margin-right:1rem}"""


class _SelectedRow(Protocol):
    """A :class:`schemas.selection.Selection` row as ``itertuples`` yields it (the fields shown)."""

    cue: str
    dataset: str
    ID: object
    candidates: list[str]
    associations: list[str]
    num_candidates: int
    num_associations: int
    solvers_jaccard_mean: float


def _table(df: pd.DataFrame) -> str:
    """``df`` as an HTML table in a box that scrolls sideways rather than widening the page."""
    table = df.to_html(index=False, border=0, na_rep="–", float_format=lambda x: f"{x:.1f}", escape=True)
    return f'<div class="wide">{table}</div>'


def _thumb(path: str, size: int = 104) -> str:
    from PIL import Image

    with Image.open(path) as src:
        im = src.convert("RGB")
        im.thumbnail((size * 2, size * 2))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def _png(path: str) -> str:
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode()


def gallery(selection: pd.DataFrame, images: dict[str, str], n: int = 6) -> str:
    """HTML for up to ``n`` selected instances, those with the most candidate images first."""
    sel = selection[selection["status"] == "selected"].copy()
    if sel.empty:
        return "<p>No selected instances.</p>"
    sel["with_images"] = sel["candidates"].map(lambda cs: sum(c in images for c in cs) / len(cs))
    sel = sel.sort_values(["with_images", "ID"], ascending=[False, True], kind="stable").head(n)
    out = []
    # cast: pandas-stubs types every itertuples field as a scalar; list columns hold lists
    for r in cast("Iterator[_SelectedRow]", sel.itertuples(index=False)):
        cells = []
        for c in r.candidates:
            cls = "cand assoc" if c in r.associations else "cand"
            img = (
                f'<img alt="{html.escape(c)}" src="{_thumb(images[c])}">'
                if c in images
                else '<div class="none">no image</div>'
            )
            cells.append(f'<div class="{cls}">{img}{html.escape(c)}</div>')
        out.append(
            f'<div class="inst"><b>cue: {html.escape(r.cue)}</b> — {r.dataset}, ID {r.ID}, N={r.num_candidates}, K={r.num_associations}, '
            f"solvers' mean Jaccard {r.solvers_jaccard_mean:.2f}; associations outlined in red"
            f'<div class="cands">{"".join(cells)}</div></div>'
        )
    return "\n".join(out)


def _review_section(ocr: pd.DataFrame) -> str:
    """How many images wait for a reviewer (``review_pending``) and which were rejected, with the reason."""
    waiting = int((ocr.status == "review_pending").sum())
    rejected = ocr[ocr.status == "review_rejected"][["concept", "reason"]]
    head = f"<p>{waiting} image(s) wait for a review (<code>gavil review</code>); {len(rejected)} rejected by a reviewer.</p>"
    return head + (_table(rejected) if len(rejected) else "")


def build_report(root: str | Path = ".") -> str:
    """The report's HTML, from the tables under ``root/data`` (run ``dvc repro`` first)."""
    root = Path(root)
    images = catalog.read_table("images", root)
    ocr = catalog.read_table("ocr", root)
    selection = catalog.read_table("selection", root)
    table1 = catalog.read_table("table1", root)
    accepted = dict(
        zip(
            ocr.loc[ocr.status == "accepted", "concept"],
            (str(root / p) for p in ocr.loc[ocr.status == "accepted", "path"]),
        )
    )
    crawl_fates = images.groupby("status").size().rename("concepts").reset_index()
    ocr_fates = ocr.groupby("status").size().rename("concepts").reset_index()
    rejected = ocr[ocr.status == "rejected_text"][["concept", "ocr_text", "match_token", "match_score"]]
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>WinoGAViL pipeline report</title><style>{CSS}</style></head><body>",
        "<h1>WinoGAViL pipeline report</h1>",
        "<h2>Images: crawl and OCR</h2>",
        "<h3>Crawl (one row per concept)</h3>",
        _table(crawl_fates),
        "<h3>OCR text-image filter</h3>",
        _table(ocr_fates),
        "<h3>Rejected because the image shows its word</h3>",
        _table(rejected) if len(rejected) else "<p>None.</p>",
        "<h3>Image review (docs/review.md)</h3>",
        _review_section(ocr),
        "<h2>Instances (Table 1 layout)</h2>",
        _table(table1.drop(columns="min_solver_jaccard")),
    ]
    if catalog.exists("evaluation", root):
        ev = catalog.read_table("evaluation", root)
        table4 = ev[(ev.breakdown == "group") & (ev["round"] == ALL_ROUNDS)]  # each row once: every round together
        groups = table4[
            [
                "model_name",
                "dataset",
                "cell",
                "n_scored",
                "n_instances",
                "mean_jaccard_percent",
                "ci_low_percent",
                "ci_high_percent",
                "random_percent",
            ]
        ]
        parts += ["<h2>Zero-shot evaluation (Table 4 layout)</h2>", _table(groups)]
        if ev["round"].nunique() > 2:  # -1 (every round) and two or more rounds
            from gavil.figures import leaderboard_svg

            per_round = ev[(ev.breakdown == "group") & (ev["round"] != ALL_ROUNDS)]
            cols = ["round", "model_name", "dataset", "cell", "n_scored", "mean_jaccard_percent", "random_percent"]
            parts += [
                "<h2>Per collection round</h2>",
                f'<div class="plot wide">{leaderboard_svg(ev)}</div>',
                _table(per_round[cols].sort_values(["round", "model_name", "dataset", "cell"], kind="stable")),
            ]
        for plot in (catalog.path("plot_models", root=root), catalog.path("plot_candidates", root=root)):
            if plot.exists():
                parts.append(f'<img class="plot" alt="{plot.name}" src="{_png(str(plot))}">')
    parts += ["<h2>Gallery of selected instances</h2>", gallery(selection, accepted), "</body></html>"]
    return "\n".join(parts)


def write_report(root: str | Path = ".", path: str | Path | None = None) -> Path:
    """Write the report atomically; returns its path (default ``data/report/index.html``)."""
    path = Path(path) if path else catalog.path("report", "write", root)
    with atomic_path(path, ".html") as tmp:
        tmp.write_text(build_report(root), encoding="utf-8")
    return path
