"""Declared experiments: ``eventatlas experiment list | show NAME | run NAME`` (experiments/*.yaml)."""
from __future__ import annotations

import json
from typing import List, Optional

import typer

from .base import (_fail, app, check_device, console, local_engine, PANEL_RESULTS, print_warning, run_flow,
                   split_seeds, wants_prefect)
from .tables import print_rows

exp_app = typer.Typer(no_args_is_help=True, help="Declared experiments (experiments/*.yaml): one YAML per headline "
                      "result, run by one command; results pages from the warehouse (`eventatlas report --markdown`).")
app.add_typer(exp_app, name="experiment", rich_help_panel=PANEL_RESULTS,
              short_help="Declared experiments: list, show, run (experiments/*.yaml)")


def _load(name: str, quick: bool = False):
    from ..experiments import ExperimentError, load

    try:
        return load(name, quick=quick)
    except ExperimentError as e:
        _fail(str(e), code=2)


@exp_app.command("list")
def list_() -> None:
    """Every declared experiment: name, status (from the warehouse: the goal's verdict, met / not met / not
    judged, and how many of its cells have a finished run; else not run), title, cells, methods, datasets,
    seeds and whether it has a quick form. Fits the terminal: titles are cut with …, the columns that do not
    fit are named."""
    from ..experiments import ExperimentError, experiment_files, load

    status = _statuses()
    rows = []
    for name in experiment_files():
        try:
            e = load(name)
            q = load(name, quick=True) if e.quick else None
        except ExperimentError as err:
            _fail(str(err), code=2)
        rows.append((name, _status(status, name, e.n_cells(), q.n_cells() if q else None), e.title,
                     len(e.all_cells()), ", ".join(e.methods), ", ".join(e.dataset_name(a) for a in e.datasets),
                     ",".join(map(str, e.seeds)), "yes" if e.quick else "no"))
    print_rows(["experiment", "status", "title", "cells", "methods", "datasets", "seeds", "quick"], rows,
               title="declared experiments (experiments/*.yaml)", fit=True, key=["experiment"],
               priority=["experiment", "status", "title", "cells", "seeds", "quick", "methods", "datasets"],
               fold=["cells", "methods", "datasets", "seeds", "quick"], no_wrap=["experiment", "status"],
               ellipsis=["title"], hint="`eventatlas experiment show NAME` shows one whole")


def _statuses() -> dict[tuple[str, str], tuple[str, int]]:
    """(experiment, mode) -> (the goal's verdict, how many cells have a completed run), from the warehouse's
    experiments tables; nothing when there is no warehouse (or it cannot be read: a warning)."""
    from .. import config

    path = config.warehouse_path()
    if not path.exists():
        return {}
    import duckdb

    from eventatlas.results.experiments import load
    from eventatlas.store.warehouse import Warehouse, WarehouseError

    try:
        found = load(Warehouse(path))
    except (duckdb.Error, WarehouseError, OSError) as err:
        print_warning(f"{path}: {err}; the experiments' status is left out")
        return {}
    return {(e["experiment"], e["mode"]): (e["verdict"][0], len({r["cell"] for r in e["runs"]
                                                                  if r.get("status") == "completed"}))
            for e in found}


def _status(found: dict[tuple[str, str], tuple[str, int]], name: str, cells: int, quick_cells: int | None) -> str:
    """``met, 3/4 cells`` (the full form's verdict and cells with a finished run), ``quick: ...`` when only the
    quick form ran, else ``not run``."""
    if (name, "full") in found:
        verdict, ran = found[(name, "full")]
        return f"{verdict}, {ran}/{cells} cells"
    if (name, "quick") in found and quick_cells is not None:
        verdict, ran = found[(name, "quick")]
        return f"quick: {verdict}, {ran}/{quick_cells}"
    return "not run"


@exp_app.command()
def show(name: str = typer.Argument(..., help="experiment name (`eventatlas experiment list`)"),
         quick: bool = typer.Option(False, "--quick", help="show the quick (shipped samples) form")) -> None:
    """The resolved declaration: datasets, params, cells, table, references, goal."""
    from ..experiments.run import describe

    console.print(describe(_load(name, quick)), markup=False, highlight=False, soft_wrap=True)


@exp_app.command()
def run(
    name: str = typer.Argument(..., help="experiment name (`eventatlas experiment list`)"),
    quick: bool = typer.Option(False, "--quick", help="its quick form: the shipped samples, in seconds"),
    runner: str = typer.Option("local", "--runner", help="local | process[:N] | dask[:N] | dask:tcp://host:8786 | "
                               "ray[:N] | ray:ADDRESS (as train-all; README 'Scale out')"),
    seeds: Optional[List[str]] = typer.Option(None, "--seeds", help="override the declared seeds"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    rerun: bool = typer.Option(False, "--rerun", help="run every cell again, even those whose runs finished"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON {method: {param: value}} merged over the "
                                         "experiment's (e.g. another model_id)"),
) -> None:
    """Run an experiment's cells (finished ones are reused), publish them and print its table."""
    exp = _load(name, quick)
    p, s = checked_options(exp, params, seeds, runner)
    check_device(device)
    out = execute(exp, runner=runner, seeds=s, device=device, rerun=rerun, params=p, say=_say)
    for c in out["cells"]:
        console.print(f"  {c['cell']} seed {c['seed']}: {'reused' if c['reused'] else 'ran'} {c['run_id'] or '-'} "
                      f"({c['status']})", markup=False, soft_wrap=True)
    console.print(f"experiment {name} ({exp.mode}): {out['ran']} cell run(s) ran, {out['reused']} reused",
                  markup=False, soft_wrap=True)
    show_table(name, exp.mode)
    if out["failed"]:
        _fail(f"experiment {name}: {len(out['failed'])} cell(s) failed: {'; '.join(out['failed'])}")


def checked_options(exp, params: Optional[str], seeds: Optional[List[str]] = None,
                    runner: str = "local") -> tuple[dict, Optional[list[int]]]:
    """``--params`` (JSON, validated against every training cell's method) and ``--seeds`` of an experiment
    run, the plan's size, its ``run:`` model references (well-formed, naming a saved model), its datasets
    (ingested or ingestible) and the runner, checked before anything runs (exit 2)."""
    from ..experiments import ExperimentError
    from ..experiments.run import check_datasets, check_run
    from ..experiments.spec import _merge
    from ..methods import ParamError, get_spec
    from eventatlas.run.scaleout import parse_runner

    try:
        p = json.loads(params) if params else {}
        s = split_seeds(seeds)
        for cell in exp.all_cells():
            if cell.method:
                get_spec(cell.method).validate(_merge(exp.cell_params(cell), p.get(cell.method, {})))
        check_run(exp, s, p)
        check_datasets(exp)
        parse_runner(runner)
    except (ValueError, ParamError, ExperimentError) as e:
        msg = f"{exp.source}: {e}" if isinstance(e, ParamError) else str(e)
        _fail(msg if not isinstance(e, json.JSONDecodeError) else f"bad --params: {e}", code=2)
    return p, s


def execute(exp, *, runner: str = "local", seeds: Optional[list[int]] = None, device: str = "auto",
            rerun: bool = False, params: Optional[dict] = None, say=None) -> dict:
    """Run (or reuse) ``exp``'s cells and publish them: in this process (``local``, or ``dask`` through Dask
    itself) unless Prefect is in use or the runner is one of Prefect's, then through the `experiment` flow."""
    from eventatlas.modeling.device import DeviceUnavailable

    say = say or _say
    try:
        if not wants_prefect(runner):
            from ..pipelines.experiment import experiment

            return experiment(exp, seeds, device, rerun, params or {}, engine=local_engine(runner, say),
                              raise_on_failure=False)
        return run_flow("experiment", name=exp.name, quick=exp.mode == "quick", runner=runner, seeds=seeds,
                        device=device, rerun=rerun, params=params or {})
    except DeviceUnavailable as e:
        _fail(str(e), code=2)
    except RuntimeError as e:
        _fail(str(e))


def _say(msg: str) -> None:
    console.print(msg, markup=False, soft_wrap=True, highlight=False)


def show_table(name: str, mode: str) -> None:
    """The experiment's table from the warehouse (``experiment_results``), with the goal's verdict."""
    from eventatlas.results.experiments import TEST_CHOSEN_NOTE, _any_chosen_on_test, _cell, _grid, _value, load
    from eventatlas.store.warehouse import Warehouse

    e = next((x for x in load(Warehouse(), mode) if x["experiment"] == name), None)
    if e is None:
        return
    rows, cols = _grid(e)
    print_rows(["", *cols], [(r, *[_value(_cell(e, r, c)) + (f" ({_cell(e, r, c)['reference']:.1f})"
                                                              if _cell(e, r, c)["reference"] is not None else "")
                                   for c in cols]) for r in rows],
               title=f"{e['title']} ({mode}; mean ± std (n) over seeds, fractions x100; the reference in parentheses)")
    if _any_chosen_on_test(e):
        console.print(TEST_CHOSEN_NOTE, markup=False, soft_wrap=True)
    verdict, reasons = e["verdict"]
    console.print(f"goal: {' '.join(e['goal'].split())} -> {verdict}", markup=False, soft_wrap=True)
    for x in reasons:
        console.print(f"  {x}", markup=False, soft_wrap=True)
