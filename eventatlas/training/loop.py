"""The training loop every trained method uses.

A method supplies a :class:`TrainTask` (how to batch its examples and compute its loss) and a
``torch.nn.Module``; :class:`Trainer` does the rest, the same way for every method:

* device and precision (``device=auto|cpu|cuda|cuda:N``; bf16 autocast on a bf16-capable GPU, fp32 on CPU) and
  data parallelism through HF Accelerate: under ``accelerate launch`` / ``torchrun`` the model is
  wrapped in DDP and each process takes its shard of every epoch's batches, with no change in the
  method;
* length-bucketed, seeded batches (:mod:`.sampler`) with dynamic padding done by the task;
* optimiser groups (the encoder at ``lr``, every other parameter at ``head_lr``), warm-up and a
  constant / linear / cosine schedule, gradient clipping and accumulation;
* atomic checkpoints every ``checkpoint_every`` optimizer steps and at each epoch end;
  ``fit(resume=True)`` restores model, optimiser, scheduler, the sampler position, the task's RNG,
  the callbacks and every global RNG (python, numpy, torch, CUDA), so the final weights equal those
  of an uninterrupted run;
* per-step loss terms, lr, examples/s, tokens/s and padding share to ``train_steps.parquet``,
  per-epoch callback metrics to ``train_evals.parquet``, a learning-curve PNG, a progress bar and
  log lines (Prefect shows them when the ``eventatlas`` logger is forwarded).
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np
import torch

from ..io import atomic_write_json, fault_point, write_parquet
from .args import TrainingArgs
from .callbacks import Callback
from .sampler import BucketBatchSampler, shard
from .steplog import evals_table, plot_learning_curve, steps_table

log = logging.getLogger(__name__)

LOG_SECONDS = 30.0  # a log line at most this often (the bar shows the rest)


class TrainTask(Protocol):
    """What a method provides to the loop."""

    def lengths(self) -> Sequence[int]:
        """Token length of every training example (for bucketing)."""

    def make_batch(self, indices: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
        """CPU tensors for the examples ``indices``; ``rng`` (checkpointed) drives any sampling."""

    def loss(self, model: torch.nn.Module, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss and its named terms (floats, for the step log)."""


@dataclass
class TrainResult:
    phase: str
    steps: int
    epochs: int
    seconds: float
    device: str
    precision: str
    stopped: str | None
    resumed_from: str | None
    examples_per_s: float
    tokens_per_s: float
    padding_fraction: float
    history: list[dict[str, Any]] = field(default_factory=list)
    steps_path: str | None = None
    evals_path: str | None = None
    plot_path: str | None = None

    def summary(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "history"} | {"history": self.history}


class _TaskModule(torch.nn.Module):
    """The method's model with its task's loss as ``forward``: what Accelerate prepares (and wraps in
    DDP under a distributed launch), so the loss always runs through the wrapper's forward and the
    gradients are all-reduced, while ``task.loss`` keeps receiving the plain model."""

    def __init__(self, inner: torch.nn.Module, task: TrainTask):
        super().__init__()
        self.inner = inner
        self._task = task

    def forward(self, batch: dict[str, Any]):
        return self._task.loss(self.inner, batch)


class _LoopState:
    """Everything about the loop's position that a checkpoint must restore (registered with Accelerate)."""

    def __init__(self):
        self.epoch = 0
        self.batch_in_epoch = 0
        self.step = 0
        self.rng_state: dict | None = None
        self.callbacks: list[dict] = []
        self.history: list[dict] = []
        self.steps: list[dict] = []
        self.evals: list[dict] = []
        self.stopped: str | None = None

    def state_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def load_state_dict(self, d: dict[str, Any]) -> None:
        self.__dict__.update(d)


def default_param_groups(model: torch.nn.Module, args: TrainingArgs) -> list[dict[str, Any]]:
    """The encoder (``model.encoder`` or the model itself when it is a MentionEncoder) at ``lr``,
    everything else at ``head_lr``."""
    from ..modeling.mention_encoder import MentionEncoder

    enc = model if isinstance(model, MentionEncoder) else getattr(model, "encoder", None)
    enc_params = [p for p in enc.parameters() if p.requires_grad] if enc is not None else []
    ids = {id(p) for p in enc_params}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in ids]
    groups = []
    if enc_params:
        groups.append({"params": enc_params, "lr": args.lr, "name": "encoder"})
    if rest:
        groups.append({"params": rest, "lr": args.head_lr or args.lr, "name": "heads"})
    return groups


def lr_lambda(schedule: str, warmup: int, total: int):
    def f(step: int) -> float:
        if warmup and step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        span = max(1, total - warmup)
        prog = min(1.0, (step - warmup) / span)
        return max(0.0, 1.0 - prog) if schedule == "linear" else 0.5 * (1.0 + math.cos(math.pi * prog))
    return f


def encoder_lambda(base, freeze: int = 0, warmup: int = 0):
    """The encoder group's multiplier: 0 for the first ``freeze`` optimizer steps (Adam's update is
    then exactly 0, so the encoder does not move while the heads start), then ``base`` ramped up
    linearly over ``warmup`` steps."""
    def f(step: int) -> float:
        if step < freeze:
            return 0.0
        ramp = min(1.0, (step - freeze + 1) / warmup) if warmup else 1.0
        return base(step) * ramp
    return f


def _probe_shape(model: torch.nn.Module) -> dict[str, int] | None:
    from ..modeling.mention_encoder import MentionEncoder

    for m in model.modules():
        if isinstance(m, MentionEncoder):
            return m.shape()
    return None


def make_accelerator(device: str, precision: str):
    """A fresh Accelerator (its state is a per-process singleton: one run's settings must not leak
    into the next run of the same process, e.g. train-all running several methods)."""
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    if device.startswith("cuda:") and "WORLD_SIZE" not in os.environ:
        torch.cuda.set_device(int(device.split(":", 1)[1]))  # Accelerate places on the current device
    from accelerate.utils import DistributedDataParallelKwargs

    # a task need not use every parameter at every step (e.g. a head only some batches reach)
    ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
    return Accelerator(cpu=(device == "cpu"), mixed_precision="bf16" if precision == "bf16" else "no",
                       kwargs_handlers=[ddp])


class Trainer:
    """See the module docstring. ``out_dir`` receives checkpoints, logs and the plot."""

    def __init__(self, model: torch.nn.Module, task: TrainTask, args: TrainingArgs, out_dir: str | Path, *,
                 seed: int = 0, callbacks: Sequence[Callback] = (), phase: str = "main",
                 param_groups: list[dict[str, Any]] | None = None):
        from ..modeling.device import describe, ensure_device, resolve_precision

        self.args, self.task, self.seed, self.phase = args, task, int(seed), phase
        self.out = Path(out_dir)
        self.callbacks = list(callbacks)
        self.device = ensure_device(args.device)  # a run passes the device its context resolved
        self.precision = resolve_precision(args.precision, self.device, shape=_probe_shape(model), mode="train")
        self.accelerator = make_accelerator(self.device, self.precision)
        self.device_desc = describe(self.device)
        groups = param_groups if param_groups is not None else (
            task.param_groups(model, args) if hasattr(task, "param_groups") else default_param_groups(model, args))
        self.group_names = [g.get("name", f"group{i}") for i, g in enumerate(groups)]
        if args.optimizer == "adamw":
            opt = torch.optim.AdamW(groups, lr=args.lr, betas=args.betas, eps=args.eps, weight_decay=args.weight_decay)
        else:
            opt = torch.optim.Adam(groups, lr=args.lr, betas=args.betas, eps=args.eps, weight_decay=args.weight_decay)
        self.sampler = BucketBatchSampler(task.lengths(), args.batch_size, seed=self.seed, bucket=args.bucket,
                                          chunk_batches=args.bucket_chunk, drop_last=args.drop_last)
        self.lengths = np.asarray(task.lengths())
        acc = self.accelerator
        self.batches_per_epoch = len(shard(self.sampler.batches(0), acc.process_index, acc.num_processes))
        if args.max_steps_per_epoch:
            self.batches_per_epoch = min(self.batches_per_epoch, args.max_steps_per_epoch * args.grad_accum)
        steps_per_epoch = math.ceil(self.batches_per_epoch / args.grad_accum)
        self.total_steps = steps_per_epoch * args.epochs
        if args.max_steps:
            self.total_steps = min(self.total_steps, args.max_steps)
        warmup = args.warmup_steps
        if args.warmup_max_ratio is not None:
            warmup = min(warmup, int(args.warmup_max_ratio * self.total_steps))
        self.warmup = warmup
        self.model, self.optimizer = acc.prepare(_TaskModule(model, task), opt)
        # stepped by hand once per optimizer step (Accelerate's wrapper would step it once per process)
        base = lr_lambda(args.schedule, warmup, self.total_steps)
        lambdas = [encoder_lambda(base, args.encoder_freeze_steps, args.encoder_warmup_steps) if n == "encoder" else base
                   for n in self.group_names]
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambdas)
        self.state = _LoopState()
        acc.register_for_checkpointing(self.scheduler, self.state)
        self.rng = np.random.default_rng([self.seed, 7])
        self.last_evals: dict[str, float] = {}
        self._stop_reason: str | None = None

    # ------------------------------------------------------------------ helpers
    @property
    def unwrapped(self) -> torch.nn.Module:
        """The method's model (without the loss wrapper, DDP or autocast)."""
        return self.accelerator.unwrap_model(self.model).inner

    @property
    def is_main(self) -> bool:
        return self.accelerator.is_main_process

    def request_stop(self, reason: str) -> None:
        self._stop_reason = reason

    def _to_device(self, batch: Any) -> Any:
        if isinstance(batch, torch.Tensor):
            return batch.to(self.accelerator.device, non_blocking=True)
        if isinstance(batch, dict):
            return {k: self._to_device(v) for k, v in batch.items()}
        if isinstance(batch, (list, tuple)):
            return type(batch)(self._to_device(v) for v in batch)
        return batch

    @staticmethod
    def _token_counts(batch: Any) -> tuple[int, int]:
        """(real tokens, padded positions) over every ``attention_mask`` in the batch (all views)."""
        real = padded = 0
        if isinstance(batch, dict):
            for k, v in batch.items():
                if k.endswith("attention_mask") and isinstance(v, torch.Tensor):
                    real += int(v.sum())
                    padded += v.numel()
                elif isinstance(v, dict):
                    r, p = Trainer._token_counts(v)
                    real, padded = real + r, padded + p
        return real, padded

    # ------------------------------------------------------------------ checkpoints
    def _ckpt_root(self) -> Path:
        return self.out / "checkpoints"

    def save_checkpoint(self) -> Path | None:
        acc = self.accelerator
        st = self.state
        st.rng_state = self.rng.bit_generator.state
        st.callbacks = [cb.state_dict() for cb in self.callbacks]
        name = f"step_{st.step:08d}_e{st.epoch:03d}_b{st.batch_in_epoch:06d}"
        final = self._ckpt_root() / name
        tmp = self._ckpt_root() / f".{name}.tmp"
        if self.is_main:  # a killed save's temp directory, of any step (the run directory is locked to us)
            for stale in self._ckpt_root().glob(".step_*.tmp"):
                shutil.rmtree(stale, ignore_errors=True)
        acc.wait_for_everyone()
        acc.save_state(str(tmp), safe_serialization=False)
        acc.wait_for_everyone()
        if self.is_main:
            fault_point("checkpoint_state")
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)  # the directory appears whole or not at all
            fault_point("checkpoint_renamed")  # latest.json (the pointer, replaced by rename) is the switch
            atomic_write_json(self._ckpt_root() / "latest.json", {"checkpoint": name, "step": st.step,
                                                                   "epoch": st.epoch, "batch": st.batch_in_epoch})
            kept = sorted(p for p in self._ckpt_root().glob("step_*") if p.is_dir())
            for old in kept[: -self.args.keep_checkpoints]:
                shutil.rmtree(old, ignore_errors=True)
        acc.wait_for_everyone()
        return final

    def latest_checkpoint(self) -> Path | None:
        p = self._ckpt_root() / "latest.json"
        if not p.exists():
            return None
        d = self._ckpt_root() / json.loads(p.read_text())["checkpoint"]
        return d if d.is_dir() else None

    def _load(self, ckpt: Path) -> None:
        self.accelerator.load_state(str(ckpt))
        st = self.state
        if st.rng_state is not None:
            self.rng.bit_generator.state = st.rng_state
        for cb, s in zip(self.callbacks, st.callbacks):
            cb.load_state_dict(s)
        self._stop_reason = st.stopped

    # ------------------------------------------------------------------ the loop
    def fit(self, resume: bool = False) -> TrainResult:
        """Train (see the module docstring); ``args.threads`` applies while this runs, then the caller's
        thread count is back (a pinned count must not leak into the next run of the process)."""
        from ..modeling.device import set_threads

        from ..modeling.device import describe

        before = torch.get_num_threads()
        set_threads(self.args.threads)
        self.device_desc = describe(self.device)  # recorded with the thread count the run uses
        try:
            return self._fit(resume)
        finally:
            torch.set_num_threads(before)

    def _fit(self, resume: bool) -> TrainResult:
        args, acc, st = self.args, self.accelerator, self.state
        self.out.mkdir(parents=True, exist_ok=True)
        resumed_from = None
        if resume:
            ckpt = self.latest_checkpoint()
            if ckpt is not None:
                self._load(ckpt)
                resumed_from = str(ckpt)
                log.info("%s: resumed from %s (step %d, epoch %d, batch %d)", self.phase, ckpt.name, st.step,
                         st.epoch, st.batch_in_epoch)
        for cb in self.callbacks:
            cb.on_train_begin(self)
        t_start = time.perf_counter()
        log.info("%s: %d examples, %d epochs x %d batches of %d, %d optimizer steps, %s %s, lr %s", self.phase,
                 len(self.lengths), args.epochs, self.batches_per_epoch, args.batch_size, self.total_steps,
                 self.device_desc, self.precision,
                 {n: g["lr"] for n, g in zip(self.group_names, self.optimizer.param_groups)})
        from tqdm.auto import tqdm

        quiet = not self.is_main or args.progress is False
        bar = tqdm(total=self.total_steps, initial=st.step, desc=self.phase, unit="step", mininterval=2,
                   disable=True if quiet else (None if args.progress is None else False))  # None: only on a tty
        last_log = time.perf_counter()
        while st.epoch < args.epochs and st.stopped is None and st.step < self.total_steps:
            epoch = st.epoch
            self.model.train()
            batches = shard(self.sampler.batches(epoch), acc.process_index, acc.num_processes)[: self.batches_per_epoch]
            acc_loss, acc_terms, n_micro = 0.0, {}, 0
            t_win, ex_win, real_win, pad_win = time.perf_counter(), 0, 0, 0
            e_loss, e_steps, t_epoch = 0.0, 0, time.perf_counter()
            while st.batch_in_epoch < len(batches) and st.step < self.total_steps:
                b = st.batch_in_epoch
                idx = batches[b]
                batch = self.task.make_batch(idx, self.rng)
                real, padded = self._token_counts(batch)
                real_win, pad_win, ex_win = real_win + real, pad_win + padded, ex_win + len(idx)
                batch = self._to_device(batch)
                sync = (n_micro + 1) % args.grad_accum == 0 or b == len(batches) - 1
                ctx = acc.no_sync(self.model) if not sync and acc.num_processes > 1 else contextlib.nullcontext()
                with ctx:
                    with acc.autocast():
                        loss, terms = self.model(batch)
                    acc.backward(loss / args.grad_accum if args.grad_accum > 1 else loss)
                acc_loss += float(loss.detach())
                for k, v in terms.items():
                    acc_terms[k] = acc_terms.get(k, 0.0) + float(v)
                n_micro += 1
                st.batch_in_epoch = b + 1
                if not sync:
                    continue
                if args.max_grad_norm:
                    acc.clip_grad_norm_(self.model.parameters(), args.max_grad_norm)
                lrs = [float(g["lr"]) for g in self.optimizer.param_groups]  # the rates this step used
                self.optimizer.step()
                self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                st.step += 1
                dt = max(time.perf_counter() - t_win, 1e-9)
                row_loss = acc_loss / n_micro
                e_loss, e_steps = e_loss + row_loss, e_steps + 1
                if st.step % args.log_every == 0 or st.step == self.total_steps:
                    terms_row = {k: v / n_micro for k, v in acc_terms.items()}
                    for name, lr in zip(self.group_names[1:], lrs[1:]):
                        terms_row[f"lr/{name}"] = lr
                    st.steps.append({"phase": self.phase, "step": st.step, "epoch": epoch, "loss": row_loss,
                                     "lr": lrs[0],
                                     "examples_per_s": ex_win / dt, "tokens_per_s": real_win / dt,
                                     "padding_fraction": 1 - real_win / pad_win if pad_win else 0.0,
                                     "terms": terms_row})
                acc_loss, acc_terms, n_micro = 0.0, {}, 0
                t_win, ex_win, real_win, pad_win = time.perf_counter(), 0, 0, 0
                bar.update(1)
                bar.set_postfix(loss=f"{row_loss:.4f}", refresh=False)
                if time.perf_counter() - last_log > LOG_SECONDS:
                    last_log = time.perf_counter()
                    log.info("%s: step %d/%d epoch %d loss %.4f", self.phase, st.step, self.total_steps, epoch, row_loss)
                if args.checkpoints and args.checkpoint_every and st.step % args.checkpoint_every == 0:
                    self.save_checkpoint()
            # ---- epoch end
            st.epoch = epoch + 1
            st.batch_in_epoch = 0
            self.last_evals = {}
            for cb in self.callbacks:
                m = cb.on_epoch_end(self, epoch)
                if m:
                    self.last_evals.update(m)
                    st.evals += [{"phase": self.phase, "step": st.step, "epoch": epoch, "metric": k, "value": float(v)}
                                 for k, v in m.items()]
            self.model.train()
            rec = {"epoch": epoch, "steps": e_steps, "loss": e_loss / max(e_steps, 1),
                   "seconds": time.perf_counter() - t_epoch, **{f"eval/{k}": v for k, v in self.last_evals.items()}}
            st.history.append(rec)
            log.info("%s: epoch %d done: loss %.4f, %.0fs%s", self.phase, epoch, rec["loss"], rec["seconds"],
                     "".join(f", {k} {v:.4f}" for k, v in self.last_evals.items()))
            if self._stop_reason:
                st.stopped = self._stop_reason
                log.info("%s: %s", self.phase, st.stopped)
            if args.checkpoints:
                self.save_checkpoint()
        bar.close()
        for cb in self.callbacks:
            cb.on_train_end(self)
        return self._finish(time.perf_counter() - t_start, resumed_from)

    def _finish(self, seconds: float, resumed_from: str | None) -> TrainResult:
        st = self.state
        steps = [r for r in st.steps]
        res = TrainResult(
            phase=self.phase, steps=st.step, epochs=st.epoch, seconds=seconds, device=self.device_desc,
            precision=self.precision, stopped=st.stopped, resumed_from=resumed_from,
            examples_per_s=float(np.median([r["examples_per_s"] for r in steps])) if steps else 0.0,
            tokens_per_s=float(np.median([r["tokens_per_s"] for r in steps])) if steps else 0.0,
            padding_fraction=float(np.mean([r["padding_fraction"] for r in steps])) if steps else 0.0,
            history=list(st.history))
        if self.is_main:
            res.steps_path = str(write_parquet(steps_table(steps), self.out / "train_steps.parquet"))
            res.evals_path = str(write_parquet(evals_table(st.evals), self.out / "train_evals.parquet"))
            if steps and self.args.plot:
                res.plot_path = str(plot_learning_curve(steps, st.evals, self.out / "learning_curve.png",
                                                        f"{self.phase}: {st.step} steps, {self.device_desc}, {self.precision}"))
            atomic_write_json(self.out / "train_result.json", res.summary())
        self.accelerator.wait_for_everyone()
        return res
