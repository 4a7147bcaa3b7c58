"""Methods and their runs: train, train-all, methods, embed, cluster, demo."""
from __future__ import annotations

import json
import os
import typing
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.markup import escape

from .. import config
from .base import (_fail, app, check_device, check_method, console, dataset_dir, ingested_datasets, local_engine,
                   not_ingested, PANEL_OPS, PANEL_TRAIN, print_warning, reads_demo, run_flow, seed_option, split,
                   split_seeds, unknown, wants_prefect)
from .tables import print_rows

DEMO_ROOT_ENV = "EVENTATLAS_DEMO_ROOT"


@app.command(rich_help_panel=PANEL_TRAIN, short_help="Embed a dataset's mentions (cached)")
def embed(
    dataset: str = typer.Argument(..., help="ingested dataset name"),
    representation: Optional[List[str]] = typer.Option(None, "--representation", "-r",
                                                       help="sentence, trigger, mask, mix, window4 (default all)"),
    model: Optional[str] = typer.Option(None, "--model", help="HF id or local path (default all-MiniLM-L6-v2)"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
) -> None:
    """Embed a dataset's mentions (runs the `embed` flow; cached by content and options)."""
    dataset_dir(dataset)
    check_device(device)
    out = run_flow("embed", dataset, split(representation), model, {"device": device})
    print_rows(["representation", "embeddings"], sorted(out.items()), title=f"embeddings of {dataset}")


@app.command(rich_help_panel=PANEL_TRAIN, short_help="Cluster a dataset's mentions")
def cluster(
    dataset: str = typer.Argument(..., help="ingested dataset name"),
    representation: str = typer.Option("trigger", "--representation", "-r"),
    algorithm: str = typer.Option("agglomerative", "--algorithm", "-a",
                                  help="agglomerative, manifold, manifold_sym, affinity"),
    n_clusters: Optional[int] = typer.Option(None, "--n-clusters", "-k", help="default: number of gold types, else the best silhouette"),
    model: Optional[str] = typer.Option(None, "--model"),
    seed: int = typer.Option(0, "--seed", callback=seed_option),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N (embedding)"),
) -> None:
    """Cluster a dataset's mentions (runs the `cluster` flow); prints the assignments path."""
    dataset_dir(dataset)
    algorithms = ("agglomerative", "manifold", "manifold_sym", "affinity")
    if algorithm not in algorithms:
        unknown("clustering algorithm", algorithm, algorithms)
    check_device(device)
    assignments = run_flow("cluster", dataset, representation, algorithm, n_clusters, model, seed, device)
    import pyarrow.parquet as pq

    table = pq.read_table(assignments)
    how = (table.schema.metadata or {}).get(b"n_clusters", b"").decode()
    console.print(f"{table.num_rows} mentions of {dataset} -> {len(set(table['cluster'].to_pylist()))} clusters "
                  f"({algorithm} over {representation}; {how}) -> {assignments}", markup=False, soft_wrap=True)


@app.command("train-all", rich_help_panel=PANEL_TRAIN,
             short_help="Train the method x dataset grid, print its rows")
def train_all(
    methods: Optional[List[str]] = typer.Option(None, "--methods", help="method names (default untuned); "
                                                "`eventatlas methods` lists them with their parameters"),
    datasets: Optional[List[str]] = typer.Option(None, "--datasets", help="default: every ingested dataset each "
                                                 "method applies to"),
    seeds: Optional[List[str]] = typer.Option(None, "--seeds", help="default 0"),
    params: Optional[str] = typer.Option(None, "--params",
                                         help='JSON {method: {param: value}}, e.g. \'{"untuned": {"k_seen": 10}}\''),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N (methods that set their own "
                               "device in --params keep it)"),
    resume: bool = typer.Option(False, "--resume", help="continue killed runs of the same configuration from "
                                "their last checkpoint"),
    report: bool = typer.Option(False, "--report", help="refresh the results page <data>/report.html at the end"),
    runner: str = typer.Option("local", "--runner", help="where the cells run: local | process[:N] | dask[:N] | "
                               "dask:tcp://host:8786 (an existing Dask scheduler) | ray[:N] | ray:ADDRESS (an "
                               "existing Ray cluster; extra [ray]); see README 'Scale out'"),
) -> None:
    """Train the grid and print the leaderboard rows it produced (through the `train-all` flow when a Prefect
    API is configured or the runner is one of Prefect's, else in this process: see EVENTATLAS_PREFECT)."""
    from eventatlas.modeling.device import DeviceUnavailable
    from ..methods import ParamError

    try:
        s = split_seeds(seeds)
        p = json.loads(params) if params else None
    except json.JSONDecodeError as e:
        _fail(f"bad --params: {e}", code=2)
    except ValueError as e:  # --seeds, named in the message
        _fail(str(e), code=2)
    m = split(methods) or ["untuned"]
    for name in m:
        check_method(name)
    ds = split(datasets)
    if ds:
        have = ingested_datasets()
        for name in ds:
            if name not in have:
                not_ingested(name)
    from eventatlas.pipelines.train_grid import check, train_all as pipeline
    from eventatlas.run.scaleout import parse_runner

    kwargs = dict(datasets=ds, methods=m, seeds=s, params=p, device=device, resume=resume, report=report,
                  runner=runner)
    try:
        parse_runner(runner)
        if wants_prefect(runner):
            check(m, p, device)  # before Prefect starts: it is slow, and binds its log handlers to stdout
            out = run_flow("train-all", **kwargs)
        else:
            out = pipeline(**kwargs, engine=local_engine(runner))
    except (ParamError, DeviceUnavailable, ValueError) as e:
        _fail(str(e), code=2)
    except RuntimeError as e:  # runs failed (published with their status), or a cluster without a GPU worker
        _fail(str(e))
    queued = out.get("queued") or []
    console.print(f"{out['runs'] - len(queued)} runs published to {out['warehouse']}", soft_wrap=True, markup=False)
    if queued:  # trained and kept on disk, not lost: the warehouse was held by another process
        from eventatlas.store.publishing import pending_dir

        print_warning(f"the warehouse {out['warehouse']} was busy: {len(queued)} trained run(s) are queued in "
                      f"{pending_dir(out['warehouse'])}; `eventatlas publish --pending` lands them (so does the next "
                      "flow)")
        return
    if out.get("report"):
        console.print(f"results report: {out['report']}", soft_wrap=True, markup=False)
    from .results import show_leaderboard

    show_leaderboard(run_ids=_run_ids(out))


def _run_ids(flow_out: dict) -> list[str]:
    """The run ids of a train-all result (its run records)."""
    from eventatlas.tracking.records import read_record

    return [read_record(r)["run"]["run_id"] for r in flow_out.get("records") or []]


@app.command(rich_help_panel=PANEL_TRAIN,
             short_help="One run of a method on a dataset, without Prefect")
def train(
    method: str = typer.Argument(..., help="method name (`eventatlas methods` lists them)"),
    dataset: str = typer.Argument(..., help="ingested dataset name (or a dataset directory)"),
    seed: int = typer.Option(0, "--seed", callback=seed_option),
    params: Optional[str] = typer.Option(None, "--params", help="JSON config of the method, e.g. "
                                         '\'{"train": {"epochs": 3}}\''),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    resume: bool = typer.Option(False, "--resume", help="continue the unfinished run of this configuration"),
) -> None:
    """One run without Prefect (also under `accelerate launch` / `torchrun` for data-parallel training).

    Writes the run record under <data>/runs/<run_id>/ and prints its path; land it in the warehouse
    with `eventatlas publish <path>`."""
    from ..methods import get_spec

    check_method(method)
    ddir = dataset_dir(dataset)  # names first: refused before the method's config (numpy) or torch load
    try:
        p = json.loads(params) if params else {}
    except json.JSONDecodeError as e:
        _fail(f"bad --params (not JSON): {e}", code=2)
    try:
        get_spec(method).validate(p)
    except ValueError as e:  # ParamError is a ValueError; its message names --params where it is about them
        _fail(str(e) if "--params" in str(e) else f"--params: {e}", code=2)
    check_device(device)
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    path = run_method(method, ddir, seed=seed, params=p, device=device, resume=resume, flow="cli-train")
    if int(os.environ.get("RANK", "0")) == 0:
        run = read_record(path)["run"]
        console.print(f"{run['status']}: {path}" + (f" ({run['error']})" if run.get("error") else ""), markup=False,
                      soft_wrap=True)
        if run["status"] == "failed":
            raise typer.Exit(1)
        for line in run_summary(path):
            console.print(line, markup=False, soft_wrap=True, highlight=False)


def type_text(ann: Any) -> str:
    """A config field's type as a user reads it: ``'a' | 'b'`` for Literal choices, ``X | None`` for
    Optional, ``list of X``, ``dict[K, V]``."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in args)
    if origin is typing.Union or type(ann).__name__ == "UnionType":
        parts = [type_text(a) for a in args if a is not type(None)]
        return " | ".join(parts) + (" | None" if type(None) in args else "")
    if origin in (list, tuple, set, frozenset):
        inner = type_text(args[0]) if args else "any"
        return f"list of ({inner})" if " | " in inner else f"list of {inner}"
    if origin is dict:
        return f"dict[{', '.join(type_text(a) for a in args)}]"
    if ann is type(None):
        return "None"
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def config_lines(cls: Any, indent: str = "    ", prefix: str = "") -> list[str]:
    """``key: type = default  (description)`` per field; a nested config's fields as ``key.sub``."""
    lines = []
    for key, f in cls.model_fields.items():
        ann = f.annotation
        if isinstance(ann, type) and hasattr(ann, "model_fields"):
            lines += config_lines(ann, indent, f"{prefix}{key}.")
            continue
        default = f.default_factory() if f.default_factory else f.default
        default = default.model_dump(mode="json") if hasattr(default, "model_dump") else default
        about = f"  ({f.description})" if f.description else ""
        lines.append(f"{indent}{prefix}{key}: {type_text(ann)} = {default!r}{about}")
    return lines


@app.command(rich_help_panel=PANEL_TRAIN,
             short_help="The methods: datasets, GPU need, tasks, --params keys")
def methods() -> None:
    """The methods train-all can run: dataset kinds, GPU need, tasks and every --params key with its type
    (allowed values), default and meaning."""
    from ..methods import SPECS

    for name, spec in SPECS.items():
        console.print(f"[bold]{escape(name)}[/bold]: {escape(spec.description)}")
        console.print(f"  applies to: {', '.join(sorted(spec.applies_to))}; tasks: {', '.join(spec.tasks)}; "
                      f"GPU: {spec.gpu}", markup=False)
        for line in config_lines(spec.config_class()):
            console.print(line, markup=False, highlight=False, soft_wrap=True)


def demo_experiments() -> list:
    """The quick forms the demo runs: every declared experiment's, in name order, leaving out one whose cells
    (method x dataset) earlier ones already ran (it would show no method, task or dataset the demo lacks)."""
    from ..experiments import experiment_files, load

    chosen, seen = [], set()
    for name in experiment_files():
        exp = load(name, quick=True)
        cells = exp.all_cells()
        method = {c.name: c.method for c in cells}
        pairs = {(c.method or method[c.evaluate], exp.dataset_name(c.dataset)) for c in cells}
        if pairs <= seen:
            continue
        chosen.append(exp)
        seen |= pairs
    return chosen


def _command_name() -> str:
    """How the user calls this CLI: ``eventatlas`` when that is on the PATH, else the path the user ran
    (`make demo` runs ``.venv/bin/eventatlas`` without activating the environment)."""
    import shutil
    import sys

    ran = sys.argv[0] if sys.argv and Path(sys.argv[0]).name == "eventatlas" else None
    found = shutil.which("eventatlas")
    if ran is None or (found and Path(found).resolve() == Path(ran).resolve()):
        return "eventatlas"
    return _rel(Path(os.path.abspath(ran)))  # symlinks kept: the path as the user sees it


SUMMARY_WIDTH = 100
# the README's first SQL example (tests/cli/test_demo_cli.py holds them equal)
DEMO_SQL = ("SELECT method, task, dataset, metric, round(100 * max(best), 1) AS best FROM leaderboard WHERE metric IN "
            "('ari', 'map', 'hard_sim_acc', 'mcnc_acc', 'recall_at_min') GROUP BY ALL ORDER BY ALL")


def summary_lines(boards: list[dict], width: int = SUMMARY_WIDTH) -> list[str]:
    """The demo's summary: one line per method x task x dataset (:func:`eventatlas.results.leaderboard.headlines`):
    method, task, dataset, headline metric, its value (mean over seeds, x100 for a fraction) for the method's
    best configuration and how many it has there; each line at most ``width`` characters."""
    from eventatlas.metric_specs import scale
    from eventatlas.results.leaderboard import headlines

    heads = headlines(boards)
    if not heads:
        return []
    rows = [(h["method"], h["task"], h["dataset"], h["metric"], f"{h['mean'] * scale(h['metric']):.1f}",
             str(h["n_configs"])) for h in heads]
    head = ("method", "task", "dataset", "metric", "value", "best of")
    w = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    out = []
    for r in [head, *rows]:
        line = "  ".join([*(r[i].ljust(w[i]) for i in range(4)), r[4].rjust(w[4]), r[5].rjust(w[5])])
        out.append(line if len(line) <= width else line[:width - 1] + "…")
    return out


def run_summary(record: str | Path) -> list[str]:
    """A run's own headlines, one line per task x dataset (the leaderboard's rule,
    :func:`eventatlas.results.leaderboard.headlines`, over the run's metric rows alone, read from its metrics
    file) with the configuration that gave it: what ``train`` and ``evaluate`` print after the record's path,
    so a score needs no trip to the leaderboard."""
    import math

    import pyarrow.parquet as pq

    from eventatlas.metric_specs import higher_is_better, scale
    from eventatlas.results.leaderboard import IDENTITY, build, headlines
    from eventatlas.tracking.records import read_record

    path = read_record(record).get("metrics_path")
    if not path or not Path(path).exists():
        return []
    rows = [r for r in pq.read_table(path).to_pylist()
            if isinstance(r.get("value"), (int, float)) and math.isfinite(r["value"])]
    board = [{**{k: r.get(k) for k in IDENTITY}, "metric": r["metric"], "mean": float(r["value"]), "std": None,
              "n_seeds": 1, "best": float(r["value"])} for r in rows]
    out = []
    for h in headlines(build(board, {r["metric"] for r in rows if not higher_is_better(r["metric"])})):
        conf = ", ".join(f"{k} {v}" for k, v in h["config"].items())
        more = f"; the best of {h['n_configs']} configurations" if h["n_configs"] > 1 else ""
        out.append(f"{h['task']} on {h['dataset']}: {h['metric']} {h['mean'] * scale(h['metric']):.1f} ({conf}{more})")
    return out


@app.command(rich_help_panel=PANEL_OPS, short_help="Every method's quick form on the samples, with a report")
def demo(
    root: Optional[Path] = typer.Option(None, "--root", help="the demo's data root (default <data root>/demo, "
                                        f"or ${DEMO_ROOT_ENV}); its warehouse is <root>/eventatlas.duckdb"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON {method: {param: value}} merged over every "
                                         "quick form's (e.g. another model_id)"),
    rerun: bool = typer.Option(False, "--rerun", help="run every cell again (default: a finished cell is reused)"),
) -> None:
    """Run every method family's quick form on the shipped samples (each declared experiment's `quick:`, one
    per method/dataset coverage) in the demo's own data root and warehouse, write the HTML report there and
    print one line per method x task x dataset. Your own datasets and warehouse are not touched; the
    embedding cache is shared (content-keyed)."""
    import time

    from ..methods import ParamError, validate_params
    from .experiment import checked_options, execute

    try:
        p = json.loads(params) if params else None
        validate_params(p, list(p or {}))
    except (ValueError, ParamError) as e:
        _fail(f"bad --params: {e}", code=2)
    root = (root or config.demo_root()).resolve()
    # the demo's own root, warehouse and (shared) cache for this command only
    demo = config.current().with_(data_root=root, warehouse=root / "eventatlas.duckdb", cache=config.cache_dir())
    console.print(f"demo data root: {root} (datasets, runs, report; warehouse {demo.warehouse})",
                  soft_wrap=True, markup=False)
    t_all, c_all = time.perf_counter(), time.process_time()
    run_ids: list[str] = []
    failed: list[str] = []
    with config.use(demo):
        from eventatlas.results.leaderboard import tables
        from eventatlas.results.report import write_report
        from eventatlas.store.warehouse import Warehouse

        for exp in demo_experiments():
            opts, _ = checked_options(exp, json.dumps(p) if p else None)
            t0, c0 = time.perf_counter(), time.process_time()
            out = execute(exp, device="auto", rerun=rerun, params=opts, say=lambda _msg: None)
            run_ids += [c["run_id"] for c in out["cells"] if c["run_id"]]
            failed += [f"{exp.name}: {f}" for f in out["failed"]]
            console.print(f"{exp.name} (quick: {', '.join(exp.methods)}): {out['ran']} ran, {out['reused']} reused, "
                          f"{time.perf_counter() - t0:.0f} s ({time.process_time() - c0:.0f} s CPU)", markup=False, soft_wrap=True,
                          highlight=False)
        wh = Warehouse()
        report = write_report(root / "report.html", wh)
        lines = summary_lines(tables(wh, run_ids=run_ids))
    console.print(f"{len(run_ids)} runs in {time.perf_counter() - t_all:.0f} s ({time.process_time() - c_all:.0f} s "
                  "CPU). The samples are tiny: the scores are a smoke test, not a result. Each method's best "
                  "configuration by the task's headline metric (mean over seeds, fractions x100; `leaderboard` "
                  "shows them all):", markup=False, highlight=False, width=SUMMARY_WIDTH)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for f in failed:
        print_warning(f"cell failed: {f}")
    me = _command_name()
    # the read commands read the demo's root only while the user's has nothing (cli.base.read_root)
    falls_back = root == config.demo_root().resolve() and reads_demo()
    root_opt = "" if falls_back else f" --root {_rel(root)}"
    console.print(f"report: {_rel(report)}", markup=False, soft_wrap=True)
    console.print("next:", markup=False)
    for cmd in (f"{me}{root_opt} leaderboard", f"{me}{root_opt} report --out report.html",
                f"{me}{root_opt} sql \"{DEMO_SQL}\""):
        console.print(f"  {cmd}", markup=False, soft_wrap=True, highlight=False)
    if failed:
        raise typer.Exit(1)


def _rel(path: Path) -> str:
    """``path`` relative to the working directory when it lies under it (what the user types), else as is."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))
    except ValueError:
        return str(path)
