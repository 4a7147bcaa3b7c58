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
from .base import (_fail, app, check_device, check_method, console, dataset_dir, ingested_datasets, not_ingested,
               prefect_guard, print_rows, print_warning, split, unknown)

DEMO_ROOT_ENV = "EVENTATLAS_DEMO_ROOT"


@app.command()
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
    from flows.embed import embed as embed_flow

    with prefect_guard():
        out = embed_flow(dataset, split(representation), model, {"device": device})
    print_rows(["representation", "embeddings"], sorted(out.items()), title=f"embeddings of {dataset}")


@app.command()
def cluster(
    dataset: str = typer.Argument(..., help="ingested dataset name"),
    representation: str = typer.Option("trigger", "--representation", "-r"),
    algorithm: str = typer.Option("agglomerative", "--algorithm", "-a",
                                  help="agglomerative, manifold, manifold_sym, affinity"),
    n_clusters: Optional[int] = typer.Option(None, "--n-clusters", "-k", help="default: number of gold types"),
    model: Optional[str] = typer.Option(None, "--model"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N (embedding)"),
) -> None:
    """Cluster a dataset's mentions (runs the `cluster` flow); prints the assignments path."""
    dataset_dir(dataset)
    algorithms = ("agglomerative", "manifold", "manifold_sym", "affinity")
    if algorithm not in algorithms:
        unknown("clustering algorithm", algorithm, algorithms)
    check_device(device)
    from flows.cluster import cluster as cluster_flow

    with prefect_guard():
        assignments = cluster_flow(dataset, representation, algorithm, n_clusters, model, seed, device)
    console.print(assignments, markup=False)


@app.command("train-all")
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
    """Run the `train-all` flow and print the leaderboard rows it produced."""
    from ..modeling.device import DeviceUnavailable, resolve_device
    from ..methods import ParamError, validate_params

    # names and values are checked before Prefect is imported (slow, and it binds its log handlers to stdout)
    try:
        p = json.loads(params) if params else None
        s = [int(x) for x in split(seeds)] if seeds else None
    except ValueError as e:
        _fail(f"bad --params/--seeds: {e}", code=2)
    m = split(methods) or ["untuned"]
    for name in m:
        check_method(name)
    ds = split(datasets)
    if ds:
        have = ingested_datasets()
        for name in ds:
            if name not in have:
                not_ingested(name)
    try:
        validate_params(p, m)
        resolve_device(device)
        from ..run.scaleout import parse_runner

        parse_runner(runner)
    except (ParamError, DeviceUnavailable, ValueError) as e:
        _fail(str(e), code=2)
    from flows.train_all import train_all as flow

    with prefect_guard():
        out = flow(datasets=ds, methods=m, seeds=s, params=p, device=device, resume=resume, report=report,
                   runner=runner)
    queued = out.get("queued") or []
    console.print(f"{out['runs'] - len(queued)} runs published to {out['warehouse']}", soft_wrap=True, markup=False)
    if queued:  # trained and kept on disk, not lost: the warehouse was held by another process
        from ..results.publishing import pending_dir

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
    from ..results.records import read_record

    return [read_record(r)["run"]["run_id"] for r in flow_out.get("records") or []]


@app.command()
def train(
    method: str = typer.Argument(..., help="method name (`eventatlas methods` lists them)"),
    dataset: str = typer.Argument(..., help="ingested dataset name (or a dataset directory)"),
    seed: int = typer.Option(0, "--seed"),
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
        get_spec(method).validate(p)
    except ValueError as e:  # bad JSON and ParamError are ValueErrors
        _fail(str(e), code=2)
    check_device(device)
    from ..results.records import read_record
    from ..run.runner import run_method

    path = run_method(method, ddir, seed=seed, params=p, device=device, resume=resume, flow="cli-train")
    if int(os.environ.get("RANK", "0")) == 0:
        run = read_record(path)["run"]
        console.print(f"{run['status']}: {path}" + (f" ({run['error']})" if run.get("error") else ""), markup=False,
                      soft_wrap=True)
        if run["status"] == "failed":
            raise typer.Exit(1)


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


@app.command()
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


def demo_root() -> Path:
    """The demo's own data root (``EVENTATLAS_DEMO_ROOT``, default ``<data root>/demo``)."""
    return Path(os.environ.get(DEMO_ROOT_ENV) or config.data_root() / "demo")


@app.command()
def demo(
    root: Optional[Path] = typer.Option(None, "--root", help="the demo's data root (default <data root>/demo, "
                                        f"or ${DEMO_ROOT_ENV}); its warehouse is <root>/eventatlas.duckdb"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON {method: {param: value}} as for train-all"),
) -> None:
    """Ingest the shipped samples into the demo's own data root, run `train-all` there with its defaults
    and print the leaderboard of those runs. Datasets you ingested elsewhere are not touched or trained on;
    the embedding cache is shared (content-keyed)."""
    from ..methods import ParamError, validate_params

    try:
        p = json.loads(params) if params else None
        validate_params(p, ["untuned"])
    except (ValueError, ParamError) as e:
        _fail(f"bad --params: {e}", code=2)
    root = (root or demo_root()).resolve()
    env = {"EVENTATLAS_DATA": str(root), "EVENTATLAS_WAREHOUSE": str(root / "eventatlas.duckdb"),
           "EVENTATLAS_CACHE": str(config.cache_dir().resolve())}
    console.print(f"demo data root: {root} (datasets, runs; warehouse {env['EVENTATLAS_WAREHOUSE']}); "
                  f"embedding cache {env['EVENTATLAS_CACHE']}", soft_wrap=True, markup=False)
    from unittest import mock

    with mock.patch.dict(os.environ, env):  # the demo's root for this command only
        from flows.train_all import train_all as flow

        from ..data.ingest import ingest_samples as run_samples
        from .results import show_leaderboard

        mans = run_samples()
        mans = list(mans.values()) if isinstance(mans, dict) else list(mans)
        console.print(f"ingested {len(mans)} sample datasets into {config.datasets_dir()}", markup=False)
        with prefect_guard():
            out = flow(params=p)
        console.print(f"train-all: {out['runs']} runs published to {out['warehouse']}", markup=False)
        show_leaderboard(run_ids=_run_ids(out))
        console.print(f"look closer: EVENTATLAS_DATA={root} EVENTATLAS_WAREHOUSE={env['EVENTATLAS_WAREHOUSE']} "
                      "eventatlas sql \"SELECT ...\"", soft_wrap=True, markup=False)
