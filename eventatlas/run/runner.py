"""Run one method on one dataset and write its run record: the asset a ``train`` task computes.

``run_method(method, dataset_dir, seed=..., params=..., device=..., resume=...)`` builds the method's
context once (config, device, precision, manifest: :mod:`eventatlas.methods.context`), runs the method
into ``runs/<run_id>/`` and writes ``run.json`` (run row, metrics
Parquet, training logs, artifacts) for the publish step: it never touches the warehouse. The Prefect
task (``tasks/train.py``) and the Prefect-free ``eventatlas train`` command both call it; the latter
also runs under ``accelerate launch`` / ``torchrun`` (data-parallel training), where every process
agrees on the run id and only the main process writes the record.

A failed run still gets a record (status ``failed``, a one-line reason, the traceback in the run's
``error.txt``); a run the method declares not applicable gets ``skipped`` with the reason.
``resume=True`` continues the newest unfinished run directory of the same (method, dataset, seed,
config, data) from its last checkpoint.

A running run holds an exclusive lock on ``runs/<run_id>/.running`` (``flock``; the kernel drops it when
the process ends, SIGKILL included) until its record is written. ``resume`` and a retried cell
(``reuse_unfinished``) only take over an unfinished directory whose lock they can get, i.e. one whose
run died; a new run directory is created already locked. So two concurrent runs of one configuration
(two ``train-all`` with the same config) never share a directory.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any

from .. import config
from ..io import lock_file, write_parquet
from ..tracking.records import fail_record, finish_record, new_record, write_metrics, write_record

log = logging.getLogger(__name__)


def run_prefix(method: str, dataset: str, seed: int, cfg_json: dict[str, Any], fingerprint: str) -> str:
    """Runs of the same configuration on the same data share this prefix (what ``resume`` looks for)."""
    key = hashlib.sha256(json.dumps([cfg_json, fingerprint], sort_keys=True).encode()).hexdigest()[:8]
    return f"{method}-{dataset}-s{seed}-{key}"


LOCK_NAME = ".running"


def _unfinished(prefix: str) -> list[Path]:
    """Run directories with ``prefix`` that have no run record yet, newest first."""
    return sorted((p for p in config.runs_dir().glob(f"{prefix}-*") if p.is_dir() and not (p / "run.json").exists()),
                  key=lambda p: p.name, reverse=True)


def _try_lock(run_dir: Path) -> int | None:
    """An fd holding the exclusive lock on ``run_dir``'s lock file, or None while a live run holds it."""
    return lock_file(run_dir / LOCK_NAME, wait=False)


class RunClaim:
    """The run directory this process runs in, locked against every other process until ``release()``."""

    def __init__(self, run_id: str, fd: int | None):
        self.run_id, self._fd = run_id, fd

    def release(self) -> None:
        if self._fd is not None:
            d = config.runs_dir() / self.run_id
            # a finished run leaves no lock file (whoever locks a new one sees run.json and lets go); an
            # unfinished one keeps it, so that every later taker locks the same file
            if (d / "run.json").exists():
                (d / LOCK_NAME).unlink(missing_ok=True)
            os.close(self._fd)
            self._fd = None


def claim_run(prefix: str, *, reuse_unfinished: bool) -> RunClaim:
    """Lock the newest dead unfinished run directory of ``prefix`` (when ``reuse_unfinished``), else a new
    one. Two processes never get the same directory: taking over needs the directory's lock (a live run
    holds it), and a new directory whose lock another process got first (in the instant between its
    mkdir and our lock) is left to that process."""
    from ..tracking.runinfo import new_run_id

    from ..names import check_name

    check_name(prefix, "run prefix")  # method and dataset names become a directory under runs/
    runs = config.runs_dir()
    runs.mkdir(parents=True, exist_ok=True)
    if reuse_unfinished:
        for d in _unfinished(prefix):
            fd = _try_lock(d)
            if fd is None:
                continue  # a live run (e.g. the same configuration in another train-all) works there
            if (d / "run.json").exists():  # finished between the listing and the lock
                RunClaim(d.name, fd).release()
                continue
            return RunClaim(d.name, fd)
    while True:
        run_id = new_run_id(prefix)
        try:
            (runs / run_id).mkdir()
        except FileExistsError:
            continue
        fd = _try_lock(runs / run_id)
        if fd is not None:
            return RunClaim(run_id, fd)
        # another process's takeover locked the fresh, empty directory first: it is theirs; make another


def evaluate_model(ref: str, dataset_dir: str | Path, *, seed: int = 0, params: dict[str, Any] | None = None,
                   device: str = "auto", flow: str = "evaluate", reuse_unfinished: bool = False) -> Path:
    """Apply a saved model (``run:<ref>``, see :mod:`eventatlas.modeling.saved`) to a dataset and score it
    with that dataset's evaluator (the model's method's ``apply``); returns the run record's path.

    The run is of task ``evaluate`` and of the model's method; its metric rows carry the model's
    method and ``trained_on`` (the dataset the model was trained on), their ``dataset`` being the
    one evaluated on, so the leaderboard shows a cross-dataset cell as such. ``params`` configure the
    apply step, in the config of the method it runs with (``spec.apply_with``: the selection of
    mentions, clusterings, ...); a model applied with its own method's protocol starts from the training
    run's config (device and precision left to this run)."""
    from ..methods.context import build_context
    from ..methods.spec import json_params

    model, with_spec, apply_fn, cfg, man, fingerprint, prefix = _evaluation(ref, dataset_dir, seed, params, device)
    card = model.card
    claim = claim_run(prefix, reuse_unfinished=reuse_unfinished)
    try:
        run_dir = config.runs_dir() / claim.run_id
        record = new_record(claim.run_id, flow=flow, task="evaluate", method=card.method, device=cfg.device,
                            params={"model": model.ref, "trained_on": card.trained_on, "evaluated_on": man.dataset,
                                    "trained_on_fingerprint": card.data_fingerprint, "config": json_params(cfg)},
                            data_fingerprints={man.dataset: fingerprint}, seed=seed)
        record["run"]["precision"] = cfg.precision
        try:
            ctx = build_context(with_spec, cfg, man, run_dir, seed=seed, record=record)
            record["run"]["device"] = ctx.device_desc
            result = apply_fn(model, ctx)
            for r in result.metrics:  # the model's rows, wherever the protocol's code came from
                r["method"], r["trained_on"] = card.method, card.trained_on
            record["artifacts"] = list(result.artifacts)
            table = write_metrics(record, result.metrics, run_dir)
            record["artifacts"] += _metric_bars(result.metrics, run_dir,
                                                f"{card.method} trained on {card.trained_on}, on {man.dataset}")
            record["run"]["params"].update(applied=result.params)
            finish_record(record, "completed")
            log.info("%s (trained on %s) on %s: %d metric rows", model.ref, card.trained_on, man.dataset,
                     table.num_rows)
        except Exception as e:  # recorded like a training run's failure
            _record_failure(record, e, run_dir, f"{model.ref} on {man.dataset} (seed {seed})")
        return write_record(run_dir, record)
    finally:
        claim.release()


def _evaluation(ref: str, dataset_dir: str | Path, seed: int, params: dict[str, Any] | None, device: str) -> tuple:
    """(model, the spec it is applied with, apply function, resolved config, manifest, data fingerprint, run
    prefix) of applying saved model ``ref`` to a dataset: what :func:`evaluate_model` runs and what
    identifies its run."""
    from ..data import Manifest
    from ..methods import get_spec
    from ..methods.context import resolve_config
    from ..modeling.saved import resolve_ref

    model = resolve_ref(ref)
    card = model.card
    spec = get_spec(card.method)
    apply_fn = spec.applier()
    with_spec = get_spec(spec.apply_with)
    man = Manifest.read(Path(dataset_dir))
    base = _without_device(card.config) if with_spec is spec else {}
    if base and man.dataset != card.trained_on and with_spec.protocol:
        # the training dataset's protocol (FrameNet's verbs-only selection, its k_seen) is not this dataset's:
        # those keys come from this dataset's registry protocol, or from --params
        from ..data.protocol import protocol_keys

        dropped = protocol_keys(with_spec.name, with_spec.protocol)
        base = {k: v for k, v in base.items() if k not in dropped}
    cfg = resolve_config(with_spec, {**base, **(params or {})}, device=device, manifest=man)
    fingerprint = man.data_fingerprint()
    prefix = run_prefix(f"eval-{card.method}", man.dataset, seed,
                        {"model": model.ref, "config": cfg.model_dump(mode="json")}, fingerprint)
    return model, with_spec, apply_fn, cfg, man, fingerprint, prefix


def evaluation_prefix(ref: str, dataset_dir: str | Path, *, seed: int = 0, params: dict[str, Any] | None = None,
                      device: str = "auto") -> str:
    """The run prefix :func:`evaluate_model` gives this (model, dataset, seed, config): runs of it share it."""
    return _evaluation(ref, dataset_dir, seed, params, device)[-1]


def _training(method: str, dataset_dir: str | Path, seed: int, params: dict[str, Any] | None, device: str) -> tuple:
    """(spec, resolved config, a refused device or None, manifest, data fingerprint, run prefix) of a
    :func:`run_method` call."""
    from ..data import Manifest
    from ..modeling.device import DeviceUnavailable
    from ..methods import get_spec
    from ..methods.context import resolve_config

    man = Manifest.read(Path(dataset_dir))
    spec = get_spec(method)
    refused: DeviceUnavailable | None = None
    try:
        cfg = resolve_config(spec, params, device=device, manifest=man)
    except DeviceUnavailable as e:  # recorded as the run's failure, before any work
        refused, cfg = e, spec.validate(params)
    fingerprint = man.data_fingerprint()
    return spec, cfg, refused, man, fingerprint, run_prefix(method, man.dataset, seed, cfg.model_dump(mode="json"),
                                                             fingerprint)


def training_prefix(method: str, dataset_dir: str | Path, *, seed: int = 0, params: dict[str, Any] | None = None,
                    device: str = "auto") -> str:
    """The run prefix :func:`run_method` gives this (method, dataset, seed, config, data): the identity a
    finished run is found by (``eventatlas experiment`` reuses it instead of running it again)."""
    return _training(method, dataset_dir, seed, params, device)[-1]


def _without_device(cfg: Any) -> Any:
    """A training run's config without its resolved device / precision (at any depth) and without what
    only training reads, so the apply step resolves its own."""
    if isinstance(cfg, dict):
        return {k: _without_device(v) for k, v in cfg.items() if k not in ("device", "precision", "save_model")}
    return cfg


def _save_model(run_dir: Path, record: dict[str, Any], metrics: list[dict[str, Any]]) -> None:
    """Complete and move into place the model the method collected (``model.partial``), and point
    the record at it (publish lands it in the ``models`` table)."""
    from ..modeling.saved import finalize

    entry = finalize(run_dir, record["run"], metrics)
    if entry is not None:
        record["model"] = entry
        record["artifacts"].append({"kind": "model", "path": entry["path"], "rows": None, "sha256": None})
        log.info("saved model run:%s (%.1f MB) in %s", record["run"]["run_id"], entry["size_bytes"] / 1e6,
                 entry["path"])


def _concat(paths: list[str], target: Path) -> str | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not paths:
        return None
    return str(write_parquet(pa.concat_tables([pq.read_table(p) for p in paths]), target))


def _distributed() -> bool:
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def _agree(value: str) -> str:
    """Under a distributed launch every process takes the main process's value.

    The process group is joined here from the launcher's environment (torchrun / accelerate launch
    set MASTER_ADDR, RANK, WORLD_SIZE); Accelerate later finds it initialised and reuses it."""
    if not _distributed():
        return value
    import torch
    import torch.distributed as dist

    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    obj = [value]
    dist.broadcast_object_list(obj, src=0)
    return obj[0]


def _is_main() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _metric_bars(rows: list[dict[str, Any]], run_dir: Path, title: str) -> list[dict[str, Any]]:
    """The run's headline metrics as a PNG (artifact ``plot/metric_bars``); a plot that cannot be drawn
    is logged and left out: it never fails a run whose metrics are written."""
    from ..io import sha256_file
    from ..tracking.plots import metric_bars_png

    try:
        path = metric_bars_png(rows, run_dir / "metric_bars.png", title)
    except Exception as e:  # noqa: BLE001 - a plot is a convenience, the metrics are the result
        log.warning("%s: metric bars not drawn: %s: %s", title, type(e).__name__, e)
        return []
    return [] if path is None else [{"kind": "plot/metric_bars", "path": str(path), "rows": len(rows),
                                     "sha256": sha256_file(path)}]


def run_method(method: str, dataset_dir: str | Path, *, seed: int = 0, params: dict[str, Any] | None = None,
               device: str = "auto", resume: bool = False, flow: str = "train-all",
               reuse_unfinished: bool = False) -> Path:
    """Run ``method`` on the dataset and return the path of its run record (see the module doc).

    The method's context is built once (:mod:`eventatlas.methods.context`): the config validated and
    protocol-merged, the device resolved once (the method's own ``device`` param wins over ``device``, the
    flow's) and the precision fixed, both written into the config, which is the run's configuration
    identity. A device this machine lacks fails the run with that one line (nothing else runs).

    ``reuse_unfinished`` takes the run id (directory) of the newest unfinished run of this configuration
    without resuming its checkpoints: a cell retried on another worker after its first attempt died
    writes into the same directory instead of leaving an orphan beside it."""
    spec, cfg, refused, man, fingerprint, prefix = _training(method, dataset_dir, seed, params, device)
    # only the main process of a distributed launch claims the directory; the others take its run id
    claim = claim_run(prefix, reuse_unfinished=resume or reuse_unfinished) if _is_main() else RunClaim("", None)
    try:
        run_id = _agree(claim.run_id)
        return _run_in(run_id, spec, man, seed, cfg, fingerprint, resume, flow, refused)
    finally:
        claim.release()


def _record_failure(record: dict[str, Any], e: Exception, run_dir: Path, what: str) -> None:
    """Finish ``record`` for a run that raised: ``skipped`` when the method declared itself not applicable,
    else ``failed`` with the traceback beside it (:func:`eventatlas.tracking.records.fail_record`)."""
    from ..methods.base import NotApplicable

    if isinstance(e, NotApplicable):
        finish_record(record, "skipped", f"not applicable: {e}")
        log.warning("%s skipped: %s", what, e)
    else:
        fail_record(record, e, run_dir)
        log.error("%s failed: %s", what, record["run"]["error"])


def _run_in(run_id: str, spec: Any, man: Any, seed: int, cfg: Any, fingerprint: str, resume: bool, flow: str,
            refused: Exception | None = None) -> Path:
    """The run itself, in the claimed ``runs/<run_id>``; its record is written before the claim ends."""
    from ..methods.context import build_context
    from ..methods.spec import json_params

    method, dataset = spec.name, man.dataset
    run_dir = config.runs_dir() / run_id
    record = new_record(run_id, flow=flow, task="train", method=method, params={"config": json_params(cfg)},
                        data_fingerprints={dataset: fingerprint}, seed=seed)
    record["run"]["device"] = cfg.device
    record["run"]["precision"] = cfg.precision
    try:
        if refused is not None:
            raise refused
        ctx = build_context(spec, cfg, man, run_dir, seed=seed, resume=resume, record=record)
        result = spec.run_function()(ctx)
        record["artifacts"] = list(result.artifacts)
        if spec.trains:  # rows of a trained model scored on its own data
            for r in result.metrics:
                r.setdefault("trained_on", dataset)
        table = write_metrics(record, result.metrics, run_dir)
        record["artifacts"] += _metric_bars(result.metrics, run_dir, f"{method} on {dataset}, seed {seed}")
        record["train_steps_path"] = _concat(result.train_steps, run_dir / "train_steps.parquet")
        record["train_evals_path"] = _concat(result.train_evals, run_dir / "train_evals.parquet")
        record["run"]["params"] = {**record["run"]["params"], **result.params}
        record["run"]["device"] = result.device or ctx.device_desc
        finish_record(record, "completed")
        if _is_main():
            _save_model(run_dir, record, result.metrics)
        log.info("%s on %s (seed %d): %d metric rows", method, dataset, seed, table.num_rows)
    except Exception as e:  # recorded; the flow publishes it and fails at the end
        _record_failure(record, e, run_dir, f"{method} on {dataset} (seed {seed})")
    if _is_main():
        return write_record(run_dir, record)
    return run_dir / "run.json"
