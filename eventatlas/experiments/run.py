"""Running a declared experiment: its datasets, then its training cells, then its evaluate cells, each cell x
seed once. No Prefect here: the caller passes ``execute(jobs) -> record paths`` (one per job, None for a
job that was lost; :mod:`eventatlas.pipelines.experiment` passes its engine's grid, in this process, on
Dask or as Prefect task runs), and the publish path records everything.

A cell x seed whose run already finished with the same method, config, data fingerprint and code version
(in the warehouse, or as a finished run record on disk) is reused, not run again (``rerun`` forces); a
run killed half-way is taken over by the next attempt (``reuse_unfinished``), so killing an experiment
and starting it again finishes only the missing cells.

Each cell x seed (by its run prefix) and each dataset to ingest is locked (``flock`` on
``<data root>/locks/...``) while it runs: a second run of the same experiment started meanwhile waits for
that cell and then reuses its run instead of training it again. The kernel drops the lock when its
holder dies (SIGKILL included), so a killed run never blocks the next one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .. import config
from ..tracking.runinfo import check_seeds
from .spec import Experiment, ExperimentError, _merge, check_plan, model_refs, why_bad_ref

Execute = Callable[[list[dict[str, Any]]], list["str | None"]]
Publish = Callable[[list[str]], Any]


def dataset_input(exp: Experiment, alias: str) -> Path | None:
    """Where a missing dataset is ingested from: its sample, its ``input``, or the registry's default input."""
    from ..data.registry import dataset_entry

    ref = exp.datasets[alias]
    entry = dataset_entry(ref.reader)
    if ref.sample:  # the reader's sample, or `input` under datasets/samples
        rel = ref.input or entry.get("sample")
        return config.samples_dir() / rel if rel else None
    rel = ref.input or entry.get("path")
    if rel is None:
        return None
    p = Path(rel)
    return p if p.is_absolute() else config.shared_data() / p


def check_datasets(exp: Experiment) -> dict[str, Path]:
    """alias -> dataset directory; a dataset neither ingested nor ingestible is refused in one line."""
    out = {}
    for alias, ref in exp.datasets.items():
        name = exp.dataset_name(alias)
        ddir = config.datasets_dir() / name
        if not (ddir / "manifest.json").exists():
            src = dataset_input(exp, alias)
            if src is None or not src.exists():
                where = f"its input {src} is absent" if src else "it has no default input"
                raise ExperimentError(f"{exp.source}: dataset {alias!r} ({name}) is not ingested and {where}: "
                                      f"`eventatlas ingest {ref.reader} --path PATH --dataset {name}` first")
        out[alias] = ddir
    return out


def check_run(exp: Experiment, seeds: Iterable[int] | None = None,
              params: dict[str, Any] | None = None) -> list[int]:
    """What must hold before any cell runs, so a refused plan writes no run directory or warehouse row: the
    seeds (``seeds`` overrides the declared ones), the plan's size, and every ``run:`` reference in the
    params (the declaration's and ``params``) well-formed and naming a saved model. Returns the seeds."""
    from ..modeling.saved import ModelError, resolve_ref

    try:
        seeds = check_seeds(exp.seeds if seeds is None else seeds, "seeds" if seeds is None else "--seeds")
    except ValueError as e:
        raise ExperimentError(f"{exp.source}: {e}") from None
    check_plan(exp, seeds)
    for where, value in model_refs(exp, params):
        why = why_bad_ref(value)
        if why:
            raise ExperimentError(f"{exp.source}: {where} {value!r}: {why}")
        try:
            resolve_ref(value)
        except ModelError as e:
            raise ExperimentError(f"{exp.source}: {where}: {e}") from None
    return seeds


class Lock:
    """An exclusive ``flock`` on ``<data root>/locks/<kind>/<key>.lock`` (the file stays: removing a lock
    file another process waits on would let a third one lock a new file beside it)."""

    def __init__(self, kind: str, key: str):
        from ..names import check_name

        self.path = config.data_root() / "locks" / kind / f"{check_name(key, f'{kind} lock key')}.lock"
        self._fd: int | None = None

    def acquire(self, wait: bool) -> bool:
        """Take the lock (``wait``: until its holder lets go or dies); False when held and not ``wait``."""
        from ..io import lock_file  # pyarrow with it: not at import, the CLI's name checks stay light

        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = lock_file(self.path, wait=wait)
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def ingest_missing(exp: Experiment, say: Callable[[str], None]) -> list[str]:
    """Ingest each dataset that is not there from its input; returns the ingest run records. A dataset that
    another run is ingesting is waited for, not ingested twice."""
    from ..data.ingest import ingest_dataset
    from ..tracking.records import ingest_record
    from ..tracking.runinfo import utcnow

    recs = []
    for alias, ddir in check_datasets(exp).items():
        if (ddir / "manifest.json").exists():
            continue
        lock = Lock("datasets", ddir.name)
        if not lock.acquire(wait=False):
            say(f"dataset {ddir.name}: another run is ingesting it; waiting for it")
            lock.acquire(wait=True)
        try:
            if (ddir / "manifest.json").exists():  # that other run ingested it
                continue
            ref, src = exp.datasets[alias], dataset_input(exp, alias)
            say(f"dataset {ddir.name}: not ingested, ingesting {src} with reader {ref.reader}")
            started = utcnow().isoformat()
            man = ingest_dataset(ref.reader, str(src), dataset=ddir.name)
            recs.append(str(ingest_record(man, {"name": ref.reader, "path": str(src), "dataset": ddir.name,
                                                "experiment": exp.name}, started)))
        finally:
            lock.release()
    return recs


@dataclass
class CellRun:
    cell: str
    seed: int
    job: dict[str, Any]
    prefix: str
    run_id: str | None = None
    record: str | None = None
    reused: bool = False
    status: str | None = None
    lock: Lock | None = field(default=None, repr=False, compare=False)


def finished_run(prefix: str) -> tuple[str, str | None, bool] | None:
    """The newest completed run of ``prefix`` made by this code version: (run_id, record path or None,
    whether the warehouse has it), from the warehouse first, else a finished run record on disk."""
    from ..store.warehouse import Warehouse, WarehouseError
    from ..tracking.records import RecordError, read_record
    from ..tracking.runinfo import code_version

    version = code_version()
    wh = Warehouse()
    if wh.path.exists():
        try:
            _, rows = wh.query_rows("SELECT run_id FROM runs WHERE starts_with(run_id, ?) AND status = 'completed' "
                                    "AND code_version = ? ORDER BY finished_at DESC NULLS LAST, run_id DESC LIMIT 1",
                                    [prefix + "-", version])
        except WarehouseError:
            rows = []
        if rows:
            rec = config.runs_dir() / rows[0][0] / "run.json"
            return rows[0][0], str(rec) if rec.exists() else None, True
    for d in sorted(config.runs_dir().glob(f"{prefix}-*"), key=lambda p: p.name, reverse=True):
        try:
            run = read_record(d / "run.json")["run"]
        except RecordError:
            continue
        if run.get("status") == "completed" and run.get("code_version") == version:
            return run["run_id"], str(d / "run.json"), False
    return None


@dataclass
class Outcome:
    experiment: str
    mode: str
    cells: list[CellRun] = field(default_factory=list)
    ran: int = 0
    reused: int = 0

    @property
    def failed(self) -> list[str]:
        return [f"{c.cell} seed {c.seed}: {c.status}" for c in self.cells
                if not str(c.status).startswith(("completed", "skipped"))]  # skipped: not applicable, said

    def as_dict(self) -> dict[str, Any]:
        return {"experiment": self.experiment, "mode": self.mode, "ran": self.ran, "reused": self.reused,
                "failed": self.failed, "cells": [{"cell": c.cell, "seed": c.seed, "run_id": c.run_id,
                                                   "status": c.status, "reused": c.reused} for c in self.cells]}


def run_experiment(exp: Experiment, *, execute: Execute, publish: Publish, seeds: Iterable[int] | None = None,
                   device: str = "auto", rerun: bool = False, params: dict[str, dict[str, Any]] | None = None,
                   say: Callable[[str], None] = print, flow: str = "experiment") -> Outcome:
    """Run (or reuse) every cell x seed of ``exp``; publish the runs and the experiment's record
    (:func:`eventatlas.store.publishing.publish_experiment`). ``params``: method -> params merged over the
    experiment's (e.g. another encoder). Cells that fail are recorded; see ``Outcome.failed``."""
    from ..run.runner import evaluation_prefix, training_prefix
    from ..store.publishing import publish_experiment

    seeds = check_run(exp, seeds, params)
    ddirs = check_datasets(exp)
    cells = exp.all_cells()
    say(f"plan: {len(cells)} cell(s) x {len(seeds)} seed(s) = {len(cells) * len(seeds)} cell run(s); "
        + ("--rerun: each runs again" if rerun else "those already finished are reused"))
    ingested = ingest_missing(exp, say)
    if ingested:
        publish(ingested)
    out = Outcome(exp.name, exp.mode)
    by_key: dict[tuple[str, int], CellRun] = {}
    for phase in ("train", "evaluate"):
        todo: list[CellRun] = []
        waiting: list[CellRun] = []
        try:  # the locks of the cell runs taken here are let go whatever happens
            for cell in cells:
                if (cell.method is None) != (phase == "evaluate"):
                    continue
                ddir = ddirs[cell.dataset]
                for seed in seeds:
                    if phase == "train":
                        p = _merge(exp.cell_params(cell), (params or {}).get(cell.method, {}))
                        job = {"method": cell.method, "dataset": ddir.name, "seed": seed, "params": p,
                               "dataset_dir": str(ddir), "device": device, "flow": flow, "reuse_unfinished": True}
                        prefix = training_prefix(cell.method, ddir, seed=seed, params=p, device=device)
                    else:
                        trained = by_key[(cell.evaluate, seed)]
                        if trained.status != "completed":
                            cr = CellRun(cell.name, seed, {}, "", status=f"skipped (cell {cell.evaluate} did not "
                                                                          f"complete: no model to apply)")
                            out.cells.append(cr)
                            continue
                        ref = f"run:{trained.run_id}"
                        job = {"model": ref, "method": trained.job["method"], "dataset": ddir.name, "seed": seed,
                               "params": cell.params, "dataset_dir": str(ddir), "device": device, "flow": flow,
                               "reuse_unfinished": True}
                        prefix = evaluation_prefix(ref, ddir, seed=seed, params=cell.params)
                    cr = CellRun(cell.name, seed, job, prefix, lock=Lock("cells", prefix))
                    if not cr.lock.acquire(wait=False):
                        waiting.append(cr)  # another run (or an identical cell of this one) runs it now
                    else:
                        todo.append(cr)
                        if not rerun and _reuse(cr, say, publish):
                            todo.pop().lock.release()
                    by_key[(cell.name, seed)] = cr
                    out.cells.append(cr)
            _execute(todo, execute, phase, say)
        finally:
            for cr in todo:
                cr.lock.release()
        out.ran += len(todo) + len(_after_others(waiting, execute, phase, rerun, say, publish))
    out.reused = sum(c.reused for c in out.cells)
    links = [{"cell": c.cell, "seed": c.seed, "run_id": c.run_id, "reused": c.reused}
             for c in out.cells if c.run_id]
    publish_experiment(exp, links)
    return out


def _reuse(cr: CellRun, say: Callable[[str], None], publish: Publish) -> bool:
    """Whether a finished run of ``cr``'s prefix exists; if so ``cr`` takes it (published if it is not yet)."""
    found = finished_run(cr.prefix)
    if found is None:
        return False
    cr.run_id, cr.record, in_wh = found
    cr.reused, cr.status = True, "completed"
    say(f"cell {cr.cell} seed {cr.seed}: reused run {cr.run_id} (same method, config, data and code version; "
        "--rerun runs it again)")
    if not in_wh and cr.record:  # finished before a kill, never published: publish it now
        publish([cr.record])
    return True


def _execute(todo: list[CellRun], execute: Execute, phase: str, say: Callable[[str], None]) -> None:
    """Run ``todo``'s jobs and set each cell run's run id, record and status."""
    from ..tracking.records import read_record

    if not todo:
        return
    listed = ", ".join(f"{c.cell} seed {c.seed}" for c in todo[:20])
    more = f", ... ({len(todo) - 20} more)" if len(todo) > 20 else ""
    say(f"{phase}: running {len(todo)} cell(s): {listed}{more}")
    records = execute([c.job for c in todo])
    for cr, rec in zip(todo, records):
        if rec is None:
            cr.status = "lost (no run record)"
            continue
        run = read_record(rec)["run"]
        cr.run_id, cr.record, cr.status = run["run_id"], rec, run["status"]
        if run.get("error"):
            cr.status = f"{run['status']} ({run['error']})"
    for cr in todo[len(records):]:
        cr.status = "lost (no run record)"


def _after_others(waiting: list[CellRun], execute: Execute, phase: str, rerun: bool, say: Callable[[str], None],
                  publish: Publish) -> list[CellRun]:
    """Wait for each cell run another process holds, then reuse its run, or run it here when that process
    died or its run failed; returns those run here. Locks are taken in one order (by prefix) in every
    process, so two runs waiting on each other's cells cannot deadlock."""
    if not waiting:
        return []
    say(f"{phase}: waiting for {len(waiting)} cell run(s) that another run is running: " +
        ", ".join(f"{c.cell} seed {c.seed}" for c in waiting[:20]) + (" ..." if len(waiting) > 20 else ""))
    held: dict[str, Lock] = {}
    todo: list[CellRun] = []
    try:
        for cr in sorted(waiting, key=lambda c: c.prefix):
            if cr.prefix in held:  # an identical cell of this run that is run here: run it beside that one
                todo.append(cr)
                continue
            cr.lock.acquire(wait=True)
            if rerun or not _reuse(cr, say, publish):
                held[cr.prefix] = cr.lock
                todo.append(cr)
            else:
                cr.lock.release()
        _execute(todo, execute, phase, say)
    finally:
        for lock in held.values():
            lock.release()
    return todo


def describe(exp: Experiment) -> str:
    """What ``eventatlas experiment show`` prints: the resolved declaration as YAML."""
    import yaml

    data = json.loads(exp.model_dump_json(exclude={"quick", "source"}))
    data["cells"] = [c.model_dump(exclude_none=True, exclude_defaults=True) | {"name": c.name, "dataset": c.dataset}
                     for c in exp.all_cells()]
    data["datasets"] = {a: {**r.model_dump(exclude_none=True), "name": exp.dataset_name(a)}
                        for a, r in exp.datasets.items()}
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)
