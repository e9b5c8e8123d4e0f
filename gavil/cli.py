"""``gavil``: the one console command (thin; every verb calls the same functions as DVC and Prefect).

A user's mistake (bad params, a missing input, an unknown stage, a stage run before the stage
it needs) is a :class:`gavil.errors.GavilError`: ``gavil`` prints its few lines and exits 2.
``gavil --debug ...`` (or ``GAVIL_DEBUG=1``) shows the traceback too.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    import pandas as pd

    from gavil.params import Params

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="WinoGAViL benchmark pipeline.", pretty_exceptions_enable=False
)
DEBUG_ENV = "GAVIL_DEBUG"


@app.callback()
def _options(
    debug: Annotated[bool, typer.Option("--debug", help="show tracebacks (also: GAVIL_DEBUG=1)")] = False,
) -> None:
    if debug:
        os.environ[DEBUG_ENV] = "1"


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help="stage name, e.g. ingest_concepts")],
    params: str = "params.yaml",
    processes: Annotated[
        int | None,
        typer.Option(min=1, help="at most this many worker processes for a partitioned stage (default: cores, memory)"),
    ] = None,
) -> None:
    """Run one pipeline stage (this is what dvc.yaml calls); refused while dvc.yaml does not list the
    params the stage reads (run `gavil dvc-yaml --write`). A partitioned stage runs its partitions on
    as many worker processes as the cores and memory allow (params.yaml: parallel)."""
    from gavil.io import finite
    from gavil.params import load_params
    from gavil.pipeline.dvc import check_stage_params
    from gavil.pipeline.registry import spec
    from gavil.pipeline.runner import run_stage

    spec(name)
    p = load_params(params)
    check_stage_params(name, p)
    metrics = run_stage(name, p, processes=processes)
    typer.echo(f"{name}: " + json.dumps(finite(metrics), sort_keys=True, default=str))


@app.command()
def flow(params: str = "params.yaml") -> None:
    """Run the whole pipeline as a Prefect flow (same stage functions, as tasks; heavy stages
    mapped over partitions on the task runner of ``prefect.task_runner``)."""
    from flows.build import run_flow

    run_flow(params_path=params)


@app.command()
def server(
    port: Annotated[int | None, typer.Option(help="default: the port of PREFECT_API_URL, else 4200")] = None,
    host: str = "127.0.0.1",
    timeout: Annotated[float, typer.Option(help="seconds to wait for its health endpoint")] = 120,
    stop: Annotated[bool, typer.Option("--stop", help="stop the server `gavil server` started")] = False,
) -> None:
    """Start a local Prefect server in the background; returns once it answers
    (docs/prefect.md "Deployments and schedules")."""
    from flows import server as prefect_server

    if stop:
        typer.echo(prefect_server.stop())
        return
    s = prefect_server.start(port, host, timeout)
    where = f"pid {s.pid}, log {s.log}" if s.pid else "already running"
    typer.echo(f"Prefect server ready: {s.ui} ({where}); stop it with `gavil server --stop`")
    typer.echo(f"export PREFECT_API_URL={s.api}")


@app.command()
def serve(
    wait: Annotated[float, typer.Option(help="seconds to wait for the Prefect API to answer")] = 60,
    stop: Annotated[
        bool, typer.Option("--stop", help="stop the running `gavil serve` (it pauses its deployments) and wait for it")
    ] = False,
) -> None:
    """Serve the Prefect deployments of params.yaml until stopped (Ctrl-C or `gavil serve --stop`);
    one at a time: a second one refuses (needs a server: `gavil server`, README)."""
    from flows import deploy
    from flows.server import require_api

    if stop:
        typer.echo(deploy.stop())
        return
    require_api(wait)
    deploy.main()


@app.command()
def trigger(
    deployment: Annotated[str, typer.Argument(help="a deployment of params.yaml: prefect.deployments")],
    wait: Annotated[float, typer.Option(help="seconds to wait for the API and the deployment")] = 120,
    watch: Annotated[
        bool, typer.Option("--watch", help="wait for the run to finish; exit 1 unless it completed")
    ] = False,
) -> None:
    """Start a run of a served deployment now (waits until `gavil serve` has registered it)."""
    from flows import server as prefect_server

    run = prefect_server.trigger(deployment, wait, watch)
    ui = (prefect_server.api_url() or "").removesuffix("/api")
    typer.echo(
        f"flow run {run.name} ({run.id}): {run.state.name if run.state else 'Scheduled'}; {ui}/runs/flow-run/{run.id}"
    )
    if watch and not (run.state and run.state.is_completed()):
        raise typer.Exit(1)


@app.command()
def query(
    sql: Annotated[
        str,
        typer.Argument(
            help="SQL over the stage tables (views: concepts, edges, images, ocr, scores, selection, benchmark, ...)"
        ),
    ],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
    max_rows: int = 40,
) -> None:
    """Query every stage's Parquet output with DuckDB."""
    import duckdb

    from gavil.io import csv_text
    from gavil.query import connect, table_files

    if not table_files():
        typer.echo("no tables under data/: run `dvc repro` first", err=True)
        raise typer.Exit(2)
    con = connect()
    try:
        rel = con.sql(sql)
    except duckdb.Error as e:
        from gavil.query import missing_table_hint

        hint = missing_table_hint(str(e))
        typer.echo(hint or f"query failed: {e}\nviews: {', '.join(table_files())}", err=True)
        raise typer.Exit(2) from e
    if rel is None:
        return
    df = rel.df()
    if fmt == "csv":
        sys.stdout.write(csv_text(df))  # spreadsheet-safe, like every CSV the project writes
    elif fmt == "json":
        typer.echo(df.to_json(orient="records", force_ascii=False, default_handler=str))
    else:
        with_pd_options(df, max_rows)


def with_pd_options(df: pd.DataFrame, max_rows: int) -> None:
    import pandas as pd

    with pd.option_context(
        "display.max_rows", max_rows, "display.max_columns", 50, "display.width", 200, "display.max_colwidth", 60
    ):
        typer.echo(df.to_string(index=False, max_rows=max_rows) if len(df) else "(no rows)")


@app.command()
def report(out: str = "data/report/index.html") -> None:
    """Write one static HTML page about the run: fates, Table 1, Table 4, a gallery."""
    from gavil.report import write_report

    typer.echo(f"wrote {write_report('.', out)}")


params_app = typer.Typer(help="Change params.yaml from the shell, checked (docs/params.md lists every key).")
app.add_typer(params_app, name="params")


@params_app.command("set")
def params_set(
    pairs: Annotated[list[str], typer.Argument(help="KEY=VALUE pairs: dotted keys, YAML values (e.g. crawl.top_n=3)")],
    params: str = "params.yaml",
) -> None:
    """Set params.yaml keys (validated first, comments kept) and regenerate dvc.yaml when a stage's inputs change."""
    from gavil.params.edit import set_params
    from gavil.pipeline.dvc import refresh_dvc_yaml

    for line in set_params(params, pairs):
        typer.echo(line)
    dvc_yaml = Path(params).parent / "dvc.yaml"
    if refresh_dvc_yaml(dvc_yaml, params):
        typer.echo(f"wrote {dvc_yaml} (what the stages depend on changed)")


ledger_app = typer.Typer(help='The permanent ID ledger (docs/annotations.md "Permanent IDs").')
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("new")
def ledger_new(
    force: Annotated[bool, typer.Option("--force", help="even if the ledger has changes git does not hold")] = False,
) -> None:
    """Start a new benchmark's permanent IDs: an empty ID ledger and no annotator-key fingerprint.

    The ledger and the fingerprint are in git, so the old ones stay in its history. Refused while the
    ledger has changes git does not hold (they would be lost), unless --force."""
    from gavil.pipeline.ledger import start_new_ledger

    for line in start_new_ledger(Path("."), force=force):
        typer.echo(line)


@app.command()
def release(
    push: Annotated[bool, typer.Option("--push", help="also `dvc push` the release's outputs")] = False,
) -> None:
    """Tag HEAD as the dataset version the export wrote (`v1.<round>.<patch>`, data/metrics/export.json).

    Refused unless the git work tree is clean and `dvc status` finds the pipeline up to date; a tag
    that marks another commit is never moved (docs/dynamic.md "Versioned export")."""
    from gavil.pipeline.release import release as tag_release

    for line in tag_release(Path("."), push=push):
        typer.echo(line)


@app.command()
def review(
    host: Annotated[str | None, typer.Option(help="default: review.host (127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="default: review.port")] = None,
    params: str = "params.yaml",
) -> None:
    """Serve the image review page: accept or reject (with a reason) each image the OCR let through;
    decisions are appended to review.decisions_path, applied by the next `dvc repro` (docs/review.md)."""
    import uvicorn

    from gavil.params import load_params
    from gavil.review.web import create_app, queue, review_items

    p = load_params(params)
    if host is not None or port is not None:  # checked as params.yaml's keys are (a loopback host only)
        p = p.replace(review={k: v for k, v in (("host", host), ("port", port)) if v is not None})
    root = Path(params).parent
    items = review_items(root)
    decisions = root / p.review.decisions_path
    q = queue(items, decisions)  # a broken decisions file stops here, in one line
    bind, at = p.review.host, p.review.port
    typer.echo(f"review: {q['left']} image(s) wait, {q['reviewed']} reviewed; decisions go to {decisions}", err=True)
    typer.echo(f"review: open http://{bind}:{at}/", err=True)
    uvicorn.run(create_app(items, decisions), host=bind, port=at, log_level="warning", proxy_headers=False)


game_app = typer.Typer(help="The collection game (docs/game.md).", invoke_without_command=True)
app.add_typer(game_app, name="game")


@game_app.callback()
def game(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="default: game.host (127.0.0.1)")] = None,
    port: Annotated[int | None, typer.Option(help="default: game.port")] = None,
    workers: Annotated[
        int | None, typer.Option(help="server processes on one store; default: game.workers (1)")
    ] = None,
    params: str = "params.yaml",
) -> None:
    """Serve the spymaster/solver game; players join with the code in $GAVIL_GAME_JOIN_CODE."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from gavil.game.launch import build_game, settle_heap
    from gavil.game.web import create_app
    from gavil.gamestore.store import set_synchronous
    from gavil.params import load_params

    p = load_params(params)
    if workers is not None:
        p = p.replace(game={"workers": workers})  # validated as game.workers is (1 to 64)
    bind, at = host or p.game.host, p.game.port if port is None else port
    if p.game.workers > 1:
        return serve_workers(p, params, bind, at)
    set_synchronous(p.game.synchronous)
    g, images = build_game(p)
    app = create_app(g, images)
    settle_heap()  # before serving: a full collection of the start-up heap would stall every request
    typer.echo(f"game: {len(g.sets)} candidate sets, rival: {g.rival.status} ({g.rival.message[:120]})", err=True)
    typer.echo(f"game: store {g.store}; open http://{bind}:{at}/", err=True)
    # proxy_headers off: uvicorn would believe X-Forwarded-For from any local client; the app reads it
    # itself, only from the proxies named in game.trusted_proxies (gavil.game.web.client_address)
    # keep-alive 75 s: a player's connection outlives their think time, so the next request needs no new
    # connection (and never races the server closing an idle one)
    uvicorn.run(
        app,
        host=bind,
        port=at,
        log_level="warning",
        proxy_headers=False,
        timeout_keep_alive=75,
    )


def serve_workers(p: Params, params: str, bind: str, at: int) -> None:
    """``gavil game`` from ``game.workers`` processes on one store (uvicorn's workers, each building
    its game with :func:`gavil.game.launch.worker_app`), after the start-up work done once here
    (:func:`gavil.game.launch.prepare_workers`)."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from gavil.game.launch import listening_socket, prepare_workers, settle_heap
    from gavil.gamestore.store import store_file

    n = p.game.workers
    sock = listening_socket(bind, at)
    parent = prepare_workers(p, params, n)
    settle_heap()  # the parent's rival thread scores for every worker: no full collection of its start-up heap
    typer.echo(f"game: {len(parent.sets)} candidate sets, {n} server processes, rival: {parent.rival.status}", err=True)
    typer.echo(f"game: store {store_file(p.game.store_dir)}; open http://{bind}:{at}/", err=True)
    config = uvicorn.Config(
        "gavil.game.launch:worker_app",
        factory=True,
        workers=n,
        host=bind,
        port=at,
        log_level="warning",
        proxy_headers=False,
        timeout_keep_alive=75,
    )
    try:
        Multiprocess(config, sockets=[sock]).run()  # what uvicorn.run does with workers, on this socket
    finally:
        parent.close()  # its rival thread (pending creations stay pending, for the next start)


@game_app.command("hits")
def game_hits(
    out: Annotated[str, typer.Option(help="folder for the task CSVs and HTML templates")] = "data/hits",
    image_url: Annotated[str, typer.Option(help="URL prefix the crowd platform loads images from")] = "",
    creations: Annotated[
        str | None, typer.Option(help="a creation batch-results CSV: also write solve tasks for its cues")
    ] = None,
    params: str = "params.yaml",
) -> None:
    """Write crowd-platform creation (and solve) task CSVs + HTML templates the import reads back."""
    from gavil.game.hits import write_hits
    from gavil.params import load_params

    for f in write_hits(load_params(params), Path(out), image_url, Path(creations) if creations else None):
        typer.echo(f"wrote {f}")


round_app = typer.Typer(help="Collection rounds of the game (docs/dynamic.md).", no_args_is_help=True)
app.add_typer(round_app, name="round")


def _store(params: str) -> Path:
    from gavil.gamestore.store import store_file
    from gavil.params import load_params

    return store_file(Path(params).parent / load_params(params).game.store_dir)


@round_app.command("open")
def round_open(
    rival: Annotated[
        str | None,
        typer.Option(help="the models: entry (open_clip) the round is collected against; omitted: propose one"),
    ] = None,
    params: str = "params.yaml",
) -> None:
    """Open the next collection round against RIVAL (its architecture, tag and sha256 pin are recorded);
    restart `gavil game` to serve it. Without --rival: propose the best open_clip model of
    evaluate.models on the rounds so far (the evaluation table) and open nothing (exit 2)."""
    from gavil.game.rounds import open_round, propose_rival
    from gavil.params import load_params
    from gavil.pipeline import catalog

    p = load_params(params)
    if rival is None:
        root = Path(params).parent
        ev = catalog.read_table("evaluation", root) if catalog.exists("evaluation", root) else None
        best = propose_rival(p, ev)
        if best is None:
            typer.echo(
                "name the rival: --rival NAME (no scored open_clip model of evaluate.models to propose)", err=True
            )
        else:
            typer.echo(
                f"proposed rival: {best[0]} (mean Jaccard {best[1]:.1f} % on the game benchmark, every round so far); "
                f"open it with `gavil round open --rival {best[0]}`",
                err=True,
            )
        raise typer.Exit(2)
    r = open_round(_store(params), p, rival)
    typer.echo(f"round {r.round_id} open, rival {r.rival_label()}; restart `gavil game` to collect it")


@round_app.command("close")
def round_close(params: str = "params.yaml") -> None:
    """Close the open round: the game refuses new associations (solving goes on); then `dvc repro`."""
    from gavil.game.rounds import close_round

    r = close_round(_store(params))
    typer.echo(f"round {r.round_id} closed (rival {r.rival_label()}); `dvc repro` folds it into the benchmark")


@round_app.command("list")
def round_list(params: str = "params.yaml") -> None:
    """The rounds of the game's store with their rival, times (UTC) and counts of creations and solves."""
    from datetime import UTC, datetime

    from gavil.game.rounds import list_rounds

    def at(t: float | None) -> str:
        return "-" if t is None else datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")

    rounds = list_rounds(_store(params))
    if not rounds:
        typer.echo("no rounds yet (round 0 is the released data): `gavil round open --rival NAME`")
    cols = ("round", "state", "rival", "opened_at", "closed_at", "creations", "solves")
    rows = [
        (str(r.round_id), "open" if r.is_open else "closed", r.rival_label(), at(r.opened_at), at(r.closed_at))
        + (str(r.creations), str(r.solves))
        for r in rounds
    ]
    widths = [max(len(c), *(len(row[i]) for row in rows)) for i, c in enumerate(cols)] if rows else []
    for row in [cols, *rows] if rows else []:
        typer.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


@round_app.command("leaderboard")
def round_leaderboard(
    out: Annotated[str, typer.Option(help="the SVG file to write")] = "data/report/leaderboard.svg",
    dataset: Annotated[str, typer.Option(help="game (the benchmark) or swow_baseline")] = "game",
) -> None:
    """Draw the per-round model leaderboard (mean Jaccard per model on each round and on all rounds,
    from the evaluation table) as an SVG picture; run `dvc repro` first."""
    from gavil.errors import GavilError
    from gavil.figures import leaderboard_svg
    from gavil.io import atomic_path
    from gavil.pipeline import catalog

    if not catalog.exists("evaluation"):
        raise GavilError("no evaluation table yet: run `dvc repro` first")
    try:
        svg = leaderboard_svg(catalog.read_table("evaluation"), dataset)
    except ValueError as e:
        raise GavilError(str(e)) from None
    with atomic_path(Path(out), ".svg") as tmp:
        Path(tmp).write_text(svg, encoding="utf-8")
    typer.echo(f"wrote {out}")


@app.command("tables")
def tables() -> None:
    """List the views `gavil query` sees and their files."""
    from gavil.query import table_files

    for name, path in table_files().items():
        typer.echo(f"{name:22s} {path}")


@app.command("sample-embeddings")
def sample_embeddings(model: str = "all-MiniLM-L6-v2") -> None:
    """Rewrite data/sample/embeddings.parquet (shipped in git) from the stages' embedding caches.

    Run after `dvc repro` on the sample, once with the file removed (so the stages compute every
    vector): a fresh clone's first run then embeds no text of the sample (docs/benchmarks.md)."""
    from gavil.models.embeddings import ship_text_vectors
    from gavil.pipeline import catalog

    out = catalog.entry("sample_embeddings").path
    caches = [catalog.entry(n).path for n in catalog.EMBEDDING_CACHES if n != "sample_embeddings"]
    typer.echo(f"wrote {out}: {ship_text_vectors(caches, out, model)} rows")


@app.command("dvc-yaml")
def dvc_yaml_cmd(write: bool = False, check: bool = False) -> None:
    """Print dvc.yaml as generated from gavil/pipeline/registry.py (--write to save, --check to compare)."""
    from gavil.pipeline.dvc import dvc_yaml, write_dvc_yaml

    text = dvc_yaml()
    if check:
        same = Path("dvc.yaml").exists() and Path("dvc.yaml").read_text() == text
        typer.echo(
            "dvc.yaml is up to date"
            if same
            else "dvc.yaml differs from gavil/pipeline/registry.py: run `gavil dvc-yaml --write`"
        )
        raise typer.Exit(0 if same else 1)
    if write:
        typer.echo(f"wrote {write_dvc_yaml()}")
    else:
        typer.echo(text, nl=False)


@app.command("docs")
def docs_cmd(
    write: Annotated[bool, typer.Option("--write", help="rewrite the generated blocks of docs/")] = False,
    check: Annotated[bool, typer.Option("--check", help="exit 1 if a generated block is out of date")] = False,
) -> None:
    """The generated parts of docs/ (pipeline diagram, table catalog, params reference): --check or --write."""
    from gavil.docs import stale
    from gavil.docs import write as write_docs

    if write:
        changed = write_docs(Path("."))
        typer.echo(f"wrote {', '.join(changed)}" if changed else "docs/ is up to date")
        return
    old = stale(Path("."))
    typer.echo(f"out of date: {', '.join(old)}: run `gavil docs --write`" if old else "docs/ is up to date")
    if check or old:
        raise typer.Exit(1 if old else 0)


@app.command()
def constraints(
    write: Annotated[bool, typer.Option("--write", help="write constraints.txt")] = False,
    check: Annotated[bool, typer.Option("--check", help="exit 1 if constraints.txt differs")] = False,
    public: Annotated[
        bool,
        typer.Option("--public", help="resolve every pin from the public index alone, pip's configuration ignored"),
    ] = False,
) -> None:
    """Print the exact versions of this environment's dependency closure (constraints.txt; --write saves it)."""
    from gavil.compat.constraints import CONSTRAINTS_HEADER, constraints_text, resolve_public

    if public:
        report = resolve_public(Path("constraints.txt"), Path("."))
        typer.echo(report.summary())
        raise typer.Exit(0 if report.ok else 1)
    text, path = constraints_text(), Path("constraints.txt")
    if check:
        old = path.read_text().splitlines() if path.exists() else []
        new = text.splitlines()
        diff = [f"-{x}" for x in old if x not in new] + [f"+{x}" for x in new if x not in old]
        typer.echo("constraints.txt is current" if not diff else "\n".join(diff[:20]))
        if diff:
            typer.echo("constraints.txt differs from this environment: gavil constraints --write", err=True)
        raise typer.Exit(1 if diff else 0)
    if write:
        path.write_text(text)
        typer.echo(f"wrote {path} ({len(text.splitlines()) - CONSTRAINTS_HEADER.count(chr(10))} pins)")
    else:
        typer.echo(text, nl=False)


def main() -> None:
    """The console entry point: runs the app; a GavilError prints its message and exits 2."""
    from gavil.errors import GavilError

    os.environ.setdefault("DVC_NO_ANALYTICS", "1")
    try:
        app()
    except GavilError as e:
        if os.environ.get(DEBUG_ENV, "") not in ("", "0"):
            raise
        typer.echo(f"error: {e}\n(traceback: gavil --debug ...)", err=True)
        sys.exit(2)


if __name__ == "__main__":  # pragma: no cover
    main()
