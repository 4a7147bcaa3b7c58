"""Saved models: list them, apply one to another dataset (`evaluate`)."""
from __future__ import annotations

import json
from typing import Optional

import typer

from .base import (_fail, app, check_device, console, dataset_dir, PANEL_TRAIN, read_root)
from .tables import print_rows


@app.command(rich_help_panel=PANEL_TRAIN,
             short_help="The saved models, newest first (run:<id> names one)")
def models(
    method: Optional[str] = typer.Option(None, "--method", help="only this method's models"),
    trained_on: Optional[str] = typer.Option(None, "--trained-on", help="only models trained on this dataset"),
) -> None:
    """The saved models (runs/<run_id>/model), newest first: name one as run:<run id> wherever an
    encoder is accepted, or apply it to a dataset with `eventatlas evaluate`. Each run:<id> is printed whole on a
    line of its own."""
    from .. import config
    from ..modeling.saved import saved_models

    read_root(warehouse=False)
    found = [m for m in saved_models() if (method is None or m.card.method == method)
             and (trained_on is None or m.card.trained_on == trained_on)]
    if not found:
        console.print(f"no saved models under {config.runs_dir()}"
                      + (" matching the filter" if method or trained_on else " (train a method to make one)"),
                      markup=False, soft_wrap=True)
        return
    rows = [(m.ref, m.card.method, m.card.trained_on, ", ".join(sorted(m.card.encoders) + sorted(m.card.heads)),
             f"{m.card.size_bytes / 1e6:.1f}", m.card.precision, m.card.created_at) for m in found]
    # fits the terminal: each run:<id> whole on its own line under its row (copy it from there); a method,
    # dataset, parts or precision every model shares is the heading line
    print_rows(["model", "method", "trained_on", "parts", "MB", "precision", "created"], rows, fit=True,
               priority=["method", "trained_on", "created", "parts", "precision", "MB"], key=["model"],
               fold=["method", "trained_on", "parts", "precision"], under=["model"], no_wrap=["model"])


@app.command(rich_help_panel=PANEL_TRAIN,
             short_help="Apply a saved model to another dataset and score it")
def evaluate(
    run: str = typer.Argument(..., help="a saved model: run id, unique prefix, or method:dataset:latest "
                              "(optionally @encoder), with or without the run: prefix"),
    on: str = typer.Option(..., "--on", help="ingested dataset to evaluate on"),
    params: Optional[str] = typer.Option(None, "--params", help="JSON config of the apply step (the method's "
                                         "selection / clustering keys; default: the training run's)"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device", help="auto | cpu | cuda | cuda:N"),
    publish: bool = typer.Option(True, "--publish/--no-publish", help="land the run in the warehouse"),
) -> None:
    """Apply a trained model to a dataset and score it with that dataset's evaluator: the rows keep the
    model's method and say where it was trained (trained_on), beside the runs trained on that dataset."""
    from ..modeling.saved import ModelError, resolve_ref

    read_root(warehouse=False)
    ref = run if run.startswith("run:") else f"run:{run}"
    try:
        resolve_ref(ref)  # a missing or ambiguous model: one line, before the dataset loads
    except ModelError as e:
        _fail(str(e), code=2)
    ddir = dataset_dir(on)
    try:
        p = json.loads(params) if params else {}
        if not isinstance(p, dict):
            raise ValueError("--params must be a JSON object")
    except ValueError as e:
        _fail(f"--params: {e}", code=2)
    check_device(device)
    from ..methods.spec import ParamError
    from ..run.runner import evaluate_model
    from ..tracking.records import read_record

    try:
        path = evaluate_model(ref, ddir, seed=seed, params=p, device=device, flow="cli-evaluate")
    except (ParamError, ModelError) as e:
        _fail(str(e), code=2)
    rec = read_record(path)["run"]
    console.print(f"{rec['status']}: {path}" + (f" ({rec['error']})" if rec.get("error") else ""), markup=False,
                  soft_wrap=True)
    if rec["status"] == "failed":
        raise typer.Exit(1)
    from .train import run_summary

    for line in run_summary(path):
        console.print(line, markup=False, soft_wrap=True, highlight=False)
    if publish:
        from .results import publish_paths

        publish_paths([path])
