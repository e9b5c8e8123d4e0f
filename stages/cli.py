"""``gavil``: the one console command (thin; every verb calls the same functions as DVC and Prefect)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, help="WinoGAViL benchmark pipeline.")


@app.command()
def stage(name: Annotated[str, typer.Argument(help="stage name, e.g. ingest_concepts")], params: str = "params.yaml") -> None:
    """Run one pipeline stage (this is what dvc.yaml calls)."""
    from stages._io import finite
    from stages.pipeline import run_stage

    metrics = run_stage(name, params)
    typer.echo(f"{name}: " + json.dumps(finite(metrics), sort_keys=True, default=str))


@app.command()
def flow(params: str = "params.yaml") -> None:
    """Run the whole pipeline as a Prefect flow (same stage functions, as tasks; heavy stages
    mapped over partitions on the task runner of ``prefect.task_runner``)."""
    from flows.build import run_flow

    run_flow(params_path=params)


@app.command()
def serve() -> None:
    """Serve the scheduled Prefect deployment (needs PREFECT_API_URL, see README)."""
    from flows.deploy import main

    main()


@app.command()
def query(
    sql: Annotated[str, typer.Argument(help="SQL over the stage tables (views: concepts, edges, images, ocr, scores, selection, benchmark, ...)")],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: int = 40,
) -> None:
    """Query every stage's Parquet output with DuckDB."""
    import duckdb

    from stages.query import connect, table_files

    if not table_files():
        typer.echo("no tables under data/: run `dvc repro` first", err=True)
        raise typer.Exit(2)
    con = connect()
    try:
        rel = con.sql(sql)
    except duckdb.Error as e:
        typer.echo(f"query failed: {e}\nviews: {', '.join(table_files())}", err=True)
        raise typer.Exit(2) from e
    if rel is None:
        return
    df = rel.df()
    if fmt == "csv":
        df.to_csv(sys.stdout, index=False)
    elif fmt == "json":
        typer.echo(df.to_json(orient="records", force_ascii=False, default_handler=str))
    else:
        with_pd_options(df, max_rows)


def with_pd_options(df, max_rows: int) -> None:  # noqa: ANN001
    import pandas as pd

    with pd.option_context("display.max_rows", max_rows, "display.max_columns", 50, "display.width", 200, "display.max_colwidth", 60):
        typer.echo(df.to_string(index=False, max_rows=max_rows) if len(df) else "(no rows)")


@app.command()
def report(out: str = "data/report/index.html") -> None:
    """Write one static HTML page about the run: fates, Table 1, Table 4, a gallery."""
    from stages.report import write_report

    typer.echo(f"wrote {write_report('.', out)}")


@app.command("tables")
def tables() -> None:
    """List the views `gavil query` sees and their files."""
    from stages.query import table_files

    for name, path in table_files().items():
        typer.echo(f"{name:22s} {path}")


@app.command("dvc-yaml")
def dvc_yaml_cmd(write: bool = False, check: bool = False) -> None:
    """Print dvc.yaml as generated from stages/pipeline.py (--write to save, --check to compare)."""
    from stages.pipeline import dvc_yaml, write_dvc_yaml

    text = dvc_yaml()
    if check:
        same = Path("dvc.yaml").exists() and Path("dvc.yaml").read_text() == text
        typer.echo("dvc.yaml is up to date" if same else "dvc.yaml differs from stages/pipeline.py: run `gavil dvc-yaml --write`")
        raise typer.Exit(0 if same else 1)
    if write:
        typer.echo(f"wrote {write_dvc_yaml()}")
    else:
        typer.echo(text, nl=False)


def main() -> None:  # pragma: no cover
    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
