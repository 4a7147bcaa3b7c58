"""The warehouse's side: leaderboard, report, publish, ensemble, sql, runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from .. import config
from .base import (_fail, app, console, PANEL_OPS, PANEL_RESULTS, PANEL_TRAIN, print_warning, read_root, run_dir,
                   run_flow, use_prefect)
from .tables import column_widths, print_rows, terminal_width


def show_leaderboard(metrics: Optional[str] = None, dataset: Optional[str] = None, task: Optional[str] = None,
                     run_ids: Optional[list[str]] = None, wide: bool = False) -> None:
    """One table per task (or only ``task``) by the leaderboard rule (:mod:`eventatlas.results.leaderboard`);
    unknown task / dataset / metric names fail with the known ones. ``run_ids``: only the rows of the
    configurations those runs produced (what train-all / demo just ran). Each table fits the terminal
    (:func:`terminal_width`, :func:`print_rows` with ``fit``): a configuration column with one value on every row
    becomes the heading line above the table; of the others, the main columns that tell rows apart, the first
    metric's mean and the other metrics come first, the rest while there is room (a configuration column that
    still tells rows apart always), and one line names those left out; ``wide``: every column, unfolded."""
    from eventatlas.metric_specs import scale
    from eventatlas.results.leaderboard import CONFIG_COLS, UnknownName, tables
    from eventatlas.store.warehouse import Warehouse, WarehouseError

    wh = Warehouse()
    requested = [m.strip() for m in metrics.split(",") if m.strip()] if metrics else None
    try:
        boards = tables(wh, task=task, dataset=dataset, metrics=requested, run_ids=run_ids)
    except UnknownName as e:
        _fail(str(e), code=2)
    except WarehouseError as e:
        _fail(str(e))
    if not boards:
        if run_ids is not None:
            console.print("the runs produced no metrics (see `eventatlas sql \"SELECT run_id, status, error FROM "
                          "runs ORDER BY started_at DESC\"`)", soft_wrap=True, markup=False)
        else:
            console.print(f"the leaderboard in {wh.path} is empty: no completed run has metrics yet", soft_wrap=True,
                          markup=False)
        return
    scope = f"rows of the {len(run_ids)} runs just produced, " if run_ids is not None else ""
    for t in dict.fromkeys(b["task"] for b in boards):
        mine = [b for b in boards if b["task"] == t]
        ms = list(dict.fromkeys(m for b in mine for m in b["metrics"]))
        first = ms[0]
        cols = ["task", "dataset", *[c if c != "representation" else "rep" for c in CONFIG_COLS], "seeds",
                f"{first}_mean", f"{first}_std", *ms]

        def val(cells: dict, m: str, key: str) -> Any:
            v = (cells.get(m) or {}).get(key)
            return None if v is None else round(v * scale(m), 1)

        rows = [(b["task"], b["dataset"], *conf, max((c.get("n_seeds") or 0) for c in cells.values()),
                 val(cells, first, "mean"), val(cells, first, "std"), *[val(cells, m, "best") for m in ms])
                for b in mine for conf, cells in b["rows"]]
        # a configuration column empty in every row (no setting, variant or recorded precision) is left out
        keep = [i for i, c in enumerate(cols) if c in ("task", "dataset", "method") or i >= 2 + len(CONFIG_COLS)
                or any(r[i] not in (None, "") for r in rows)]
        cols, rows = [cols[i] for i in keep], [tuple(r[i] for i in keep) for r in rows]
        title = (f"{t} leaderboard from {wh.path} ({scope}mean and std over seeds of the first metric, best over "
                 "seeds of each; fractions x100)")
        width = terminal_width()
        if wide:  # every column at its full width: wider than the terminal if need be (a pager scrolls)
            print_rows(cols, rows, title=title, width=max(width, sum(column_widths(cols, rows)) + 1))
            continue
        # the other metrics before the finer configuration columns: a dataset of the task may lack the first one
        # (one table per task: mcnc_acc beside hard_sim_acc, frame_dml's bcubed_f beside ari); a configuration
        # column the shown ones do not tell apart comes back before the metrics (print_rows' rule)
        priority = ["dataset", f"{first}_mean", "method", "rep", "clustering", "variant", *[m for m in ms if m != first],
                    "setting", "split", "trained_on", f"{first}_std", "seeds", "precision", first, "task"]
        identity = ["task", "dataset", *[c if c != "representation" else "rep" for c in CONFIG_COLS]]
        print_rows(cols, rows, title=title, width=width, fit=True, priority=priority, key=identity,
                   fold=[*identity, "seeds"], hint="--wide shows every column")


@app.command(rich_help_panel=PANEL_RESULTS,
             short_help="Best value per configuration over seeds, a table per task")
def leaderboard(
    metrics: Optional[str] = typer.Option(None, "--metrics",
                                          help="comma-separated metrics; the first one sorts and gets mean/std over "
                                               "seeds (default per task, e.g. ari,bcubed_f,nmi for induction)"),
    dataset: Optional[str] = typer.Option(None, "--dataset"),
    task: Optional[str] = typer.Option(None, "--task", help="induction, naming, linking, ... (default: every task, "
                                                            "one table each)"),
    wide: bool = typer.Option(False, "--wide", help="every column, however wide (default: the columns that fit "
                              "the terminal, COLUMNS or its width)"),
) -> None:
    """Best value per configuration (task x dataset x split x setting x method x representation x clustering x
    variant x precision) over seeds, with the mean/std of the first metric, from DuckDB."""
    read_root()
    show_leaderboard(metrics, dataset, task, wide=wide)


@app.command(rich_help_panel=PANEL_RESULTS,
             short_help="Write the results report (HTML page or Markdown pages)")
def report(
    out: Path = typer.Option(Path("report.html"), "--out", "-o", help="the HTML file to write"),
    markdown: Optional[Path] = typer.Option(None, "--markdown", help="instead, write one Markdown page per declared "
                                            "experiment and the benchmarks page (benchmarks.md) into this directory "
                                            "(docs/results/ is made by this)"),
) -> None:
    """Write the results report: one self-contained HTML page (works offline) from the warehouse: leaderboard
    per task and dataset (mean ± std over seeds, best marked), metric bars, learning curves, run table."""
    from eventatlas.results.report import write_report
    from eventatlas.store.warehouse import WarehouseError

    read_root()
    if markdown is not None:
        from eventatlas.results.report import write_pages

        try:
            pages = write_pages(markdown)
        except WarehouseError as e:
            _fail(str(e))
        console.print(f"{len(pages)} page(s) written to {markdown}: {', '.join(p.name for p in pages)}",
                      soft_wrap=True, markup=False)
        return
    try:
        path = write_report(out)
    except WarehouseError as e:
        _fail(str(e))
    console.print(f"report written to {path.resolve()}", soft_wrap=True, markup=False)


def publish_paths(records: list[Path]) -> dict:
    """Land run records (after the queued ones) through the warehouse's one writer: the `publish` flow when
    a Prefect API is configured, else the publish core directly; prints what landed. Bad records are skipped
    (a warning each) while the rest lands; the last line then names them (exit 2). Runs queued because the
    warehouse was busy or could not be written: exit 1."""
    from eventatlas.store.publishing import PublishRejected, pending_dir, pending_runs
    from eventatlas.store.warehouse import WarehouseError
    from eventatlas.tracking.records import RecordError

    waiting = len(pending_runs(config.warehouse_path()))
    rejected = None
    try:
        if use_prefect():
            out = run_flow("publish", [str(r) for r in records])
        else:
            from eventatlas.store.publishing import publish_records

            out = publish_records(records, warn=print_warning).as_dict()
    except PublishRejected as e:  # the rest of the batch landed: report it, then name the skipped records
        rejected, outcome = e, getattr(e, "outcome", None)
        if outcome is None:
            _fail(str(e), code=2)
        out = outcome.as_dict()
    except (RecordError, WarehouseError) as e:
        _fail(str(e))
    n = len(out["published"]) + len(out["skipped"]) + len(out["failed"])
    console.print(f"published {n} run records "
                  f"({len(out['published'])} completed, {len(out['skipped'])} skipped, {len(out['failed'])} failed; "
                  f"{out['metric_rows']} metric rows; {len(out.get('from_queue', []))} of {waiting} queued) "
                  f"to {out['warehouse']}", soft_wrap=True, markup=False)
    if out.get("builds_from_queue"):
        console.print(f"recorded {len(out['builds_from_queue'])} queued wiki build(s): "
                      f"{', '.join(out['builds_from_queue'])}", soft_wrap=True, markup=False)
    if out.get("queued"):
        busy = out.get("queue_reason") in (None, "busy")
        state = "is busy" if busy else f"could not be written ({out['queue_reason']})"
        msg = (f"warehouse {out['warehouse']} {state}: {len(out['queued'])} run(s) stay queued in "
               f"{pending_dir(out['warehouse'])}; run `eventatlas publish --pending` "
               f"{'when it is free' if busy else 'once it can be written again'}")
        if rejected is None:
            _fail(msg, code=1)
        print_warning(msg)
    if rejected is not None:
        _fail(str(rejected), code=2)
    return out


@app.command(rich_help_panel=PANEL_OPS,
             short_help="Land run records (and the queued runs) in the warehouse")
def publish(
    paths: Optional[List[Path]] = typer.Argument(None, help="run.json files, run directories, or directories "
                                                 "searched recursively for run.json"),
    pending: bool = typer.Option(False, "--pending", help="land the runs queued while the warehouse was busy "
                                 "(every publish does this first; alone, it is all this command does)"),
) -> None:
    """Publish run records written outside a flow (e.g. by `eventatlas train`) to the warehouse, after the
    runs queued for it. Without a Prefect API (PREFECT_API_URL) this runs the publish core directly; with
    one, the `publish` flow (the warehouse's one writer either way). A bad record is skipped with a warning
    and named again at the end (exit 2) while the rest lands."""
    from eventatlas.tracking.records import RecordError, find_records

    if not paths and not pending:
        _fail("give run records to publish (PATH...) and/or --pending", code=2)
    try:  # a path with no record fails before anything starts; a bad record is skipped, named at the end
        records = find_records(paths or [])
    except RecordError as e:
        _fail(str(e), code=2)
    publish_paths(records)


@app.command(rich_help_panel=PANEL_TRAIN,
             short_help="Ensemble finished runs (E-FT) into one scored run")
def ensemble(
    runs: List[str] = typer.Argument(..., help="two or more finished batch_attention runs (run ids or run "
                                     "directories) of one dataset and one setting, e.g. seeds 0, 1, 2"),
    no_publish: bool = typer.Option(False, "--no-publish", help="write the ensemble's run record only"),
) -> None:
    """Ensemble finished runs (the paper's E-FT): per representation the runs share, their chosen epochs'
    embeddings are combined and clustered as the member runs were, and scored on the unseen mentions.
    Writes one run record (seed -1) under <data>/runs/ and publishes it like any run."""
    dirs = [run_dir(r) for r in runs]
    if len(dirs) < 2:
        _fail("an ensemble needs two or more runs", code=2)
    from eventatlas.methods.ensemble import EnsembleError, ensemble_runs

    try:
        path, summary = ensemble_runs(dirs)
    except EnsembleError as e:
        _fail(str(e), code=2)
    print_rows(["representation", "members", "rows"], summary, title=f"ensemble of {len(dirs)} runs: {path}")
    if not no_publish:
        publish_paths([path])


@app.command(rich_help_panel=PANEL_RESULTS,
             short_help="Run read-only SQL against the warehouse")
def sql(query: str = typer.Argument(..., help="SQL over the warehouse tables and views (read-only: queries, "
                                    "EXPLAIN, read-only PRAGMAs; no other file, no writes, no settings)")) -> None:
    """Run read-only SQL against the warehouse and print the last statement's table. Only queries (SELECT,
    WITH, FROM, VALUES, TABLE, DESCRIBE, SHOW, SUMMARIZE, PIVOT), EXPLAIN of one and read-only PRAGMAs run;
    they read the warehouse and the dataset Parquet files its views read, nothing else."""
    import duckdb

    from eventatlas.store.sql_session import QueryRefused, run_query
    from eventatlas.store.warehouse import Warehouse, WarehouseError

    read_root()
    try:
        cols, rows = run_query(Warehouse(), query)
    except QueryRefused as e:
        _fail(str(e), code=2)
    except duckdb.PermissionException as e:  # a query reaching past the warehouse and its datasets
        _fail(f"sql reads only the warehouse and its datasets' Parquet files: {e}", code=2)
    except duckdb.Error as e:  # the query itself is the bad input (syntax, unknown table, a locked setting)
        _fail(str(e), code=2)
    except WarehouseError as e:
        _fail(str(e))
    print_rows(cols, rows)


@app.command(rich_help_panel=PANEL_RESULTS,
             short_help="The newest runs: flow, method, status, error")
def runs(
    status: Optional[str] = typer.Option(None, "--status", help="completed, failed, skipped, ..."),
    flow: Optional[str] = typer.Option(None, "--flow", help="ingest, train-all, train, ..."),
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="newest N runs"),
) -> None:
    """The newest runs in the warehouse (ingests and trainings; a failed run's error is one line, its
    traceback in the file the line names). Fits the terminal: each run id whole on a line of its own."""
    import duckdb

    from eventatlas.store.warehouse import Warehouse, WarehouseError

    read_root()
    where, args = [], []
    for col, val in (("status", status), ("flow", flow)):
        if val:
            where.append(f"{col} = ?")
            args.append(val)
    q = ("SELECT run_id, flow, method, status, started_at, error FROM runs"
         + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY started_at DESC NULLS LAST, run_id LIMIT ?")
    try:
        cols, rows = Warehouse().query_rows(q, [*args, limit])
    except (duckdb.Error, WarehouseError) as e:
        _fail(str(e))
    # fits the terminal: a run id whole on its own line under its row (copy it from there), a failed run's error
    # under it too; a flow, method or status every row shares is the heading line
    print_rows(cols, rows, fit=True, priority=["status", "flow", "method", "started_at", "error"], key=["run_id"],
               fold=["flow", "method", "status", "error"], under=["run_id", "error"], no_wrap=["run_id"])
