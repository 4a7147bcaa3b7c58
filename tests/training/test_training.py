"""Training core: bucketed sampler, the loop (groups, schedule, logs), kill -9 + resume equality,
the token-id cache, device resolution."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from eventatlas.training import BucketBatchSampler, TrainingArgs, padding_fraction, shard
from eventatlas.training.loop import lr_lambda

HERE = Path(__file__).resolve().parent
from support.tiny_models import tiny_bert  # noqa: E402
from support.train_worker import SENTS, build  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return tiny_bert(tmp_path_factory.mktemp("m"), [s for s, _, _ in SENTS] + ["reelected", "stormed"])


# ----------------------------------------------------------------------------- sampler
@pytest.mark.parametrize("bucket", [True, False])
@pytest.mark.parametrize("drop_last", [False, True])
def test_sampler_yields_every_example_once_per_epoch(bucket, drop_last):
    rng = np.random.default_rng(0)
    lengths = rng.integers(3, 120, size=1003)
    s = BucketBatchSampler(lengths, 16, seed=5, bucket=bucket, chunk_batches=8, drop_last=drop_last)
    for epoch in range(3):
        batches = s.batches(epoch)
        flat = np.concatenate(batches)
        assert len(batches) == len(s)
        if drop_last:
            assert len(flat) == 1003 // 16 * 16 and len(set(flat.tolist())) == len(flat)
        else:
            assert sorted(flat.tolist()) == list(range(1003))  # exactly once
    # deterministic in (seed, epoch), different across epochs and seeds
    assert all(np.array_equal(a, b) for a, b in zip(s.batches(1), s.batches(1)))
    assert not all(np.array_equal(a, b) for a, b in zip(s.batches(0), s.batches(1)))
    other = BucketBatchSampler(lengths, 16, seed=6, bucket=bucket, chunk_batches=8, drop_last=drop_last)
    assert not all(np.array_equal(a, b) for a, b in zip(s.batches(0), other.batches(0)))


def test_bucketing_cuts_padding_and_shards_are_even():
    rng = np.random.default_rng(1)
    lengths = rng.integers(5, 200, size=4000)
    plain = BucketBatchSampler(lengths, 32, seed=0, bucket=False).padding_fraction()
    bucketed = BucketBatchSampler(lengths, 32, seed=0, bucket=True, chunk_batches=50).padding_fraction()
    assert plain > 0.3 and bucketed < 0.05, (plain, bucketed)
    # hand-computed padding share: batches [0,1] (5, 3) and [2] (4): padded 2*5 + 4 = 14, real 12
    assert padding_fraction(np.array([5, 3, 4]), [np.array([0, 1]), np.array([2])]) == pytest.approx(2 / 14)
    b = BucketBatchSampler(lengths, 32, seed=0).batches(0)
    parts = [shard(b, r, 3) for r in range(3)]
    assert len({len(p) for p in parts}) == 1 and len(parts[0]) == len(b) // 3
    flat = np.concatenate([x for p in parts for x in p])
    assert len(set(flat.tolist())) == len(flat)  # no example on two processes


def test_lr_schedules_by_hand():
    f = lr_lambda("linear", warmup=2, total=6)
    assert [round(f(s), 4) for s in range(6)] == [0.5, 1.0, 1.0, 0.75, 0.5, 0.25]
    c = lr_lambda("cosine", warmup=0, total=4)
    assert [round(c(s), 4) for s in range(5)] == [1.0, 0.8536, 0.5, 0.1464, 0.0]
    assert lr_lambda("constant", warmup=3, total=10)(7) == 1.0


# ----------------------------------------------------------------------------- the loop
def test_loop_trains_logs_and_uses_parameter_groups(tiny, tmp_path):
    model, tr = build(str(tiny), str(tmp_path / "out"), epochs=4, sleep=0)
    assert [g["lr"] for g in tr.optimizer.param_groups] == [pytest.approx(1e-3 * 0.5), pytest.approx(5e-3 * 0.5)]
    assert tr.group_names == ["encoder", "heads"]
    res = tr.fit()
    steps = pq.read_table(res.steps_path).to_pylist()
    assert res.steps == len(steps) == 4 * 7 and [r["step"] for r in steps] == list(range(1, 29))
    assert steps[0]["lr"] == pytest.approx(0.5e-3) and steps[1]["lr"] == pytest.approx(1e-3)  # warm-up 2
    assert steps[-1]["lr"] == pytest.approx(1e-3 * 1 / 26)  # linear decay to the last step
    assert dict(steps[0]["terms"])["lr/heads"] == pytest.approx(2.5e-3)
    assert all(r["examples_per_s"] > 0 and r["tokens_per_s"] > 0 for r in steps)
    losses = [h["loss"] for h in res.history]
    assert losses[-1] < losses[0]  # it learns the three trigger classes
    assert Path(res.plot_path).read_bytes()[:4] == b"\x89PNG"
    assert res.device.startswith("cpu") and res.precision == "fp32"


def _run_worker(model_dir, out, *extra, wait=True):
    cmd = [sys.executable, str(HERE.parent / "support" / "train_worker.py"), str(model_dir), str(out), *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    if wait:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.timeout(600)
def test_resume_after_kill_minus_9_equals_uninterrupted_run(tiny, tmp_path):
    ref = _run_worker(tiny, tmp_path / "ref")
    assert ref.returncode == 0, ref.stderr[-2000:]
    out = tmp_path / "killed"
    # kill mid-epoch, mid-step: the worker blocks inside step 11 (the 4th of the second epoch; 7 batches
    # per epoch), after the step-10 checkpoint. A poll for that window of a running job could miss it
    # on a loaded machine (the job then finished and the test failed).
    hang = tmp_path / "hanging"
    proc = _run_worker(tiny, out, "--hang-at", "11", "--hang-file", str(hang), wait=False)
    try:
        deadline = time.monotonic() + 240  # a bound for a hang, not an expected duration
        while not hang.exists():
            assert proc.poll() is None, proc.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "the worker did not reach step 11 in 240 s"
            time.sleep(0.02)
        latest = json.loads((out / "checkpoints" / "latest.json").read_text())
        assert (latest["step"], latest["epoch"], latest["batch"]) == (10, 1, 3)
    finally:
        proc.kill()  # SIGKILL, also when an assertion failed (the worker would block for an hour)
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "final.pt").exists()
    res = _run_worker(tiny, out, "--resume")
    assert res.returncode == 0, res.stderr[-2000:]
    a = torch.load(tmp_path / "ref" / "final.pt", weights_only=True)
    b = torch.load(out / "final.pt", weights_only=True)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the step log of the resumed run is the uninterrupted one's (same losses at every step)
    la = pq.read_table(tmp_path / "ref" / "train_steps.parquet", columns=["step", "loss"]).to_pylist()
    lb = pq.read_table(out / "train_steps.parquet", columns=["step", "loss"]).to_pylist()
    assert [r["step"] for r in la] == [r["step"] for r in lb]
    assert np.allclose([r["loss"] for r in la], [r["loss"] for r in lb], rtol=0, atol=0)


@pytest.mark.timeout(600)
def test_data_parallel_two_processes_under_torchrun(tiny, tmp_path):
    # the same worker, unchanged, under torchrun with 2 CPU processes (gloo): Accelerate wraps the
    # model in DDP, each process takes every other batch of the epoch, the replicas stay identical
    # --standalone: the launcher's own rendezvous store binds a free port itself (no port picked here,
    # released, and possibly taken by another process before torchrun binds it)
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(HERE.parent / "support" / "train_worker.py"), str(tiny), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-3000:]
    a, b = (torch.load(out / f"final_rank{r}.pt", weights_only=True) for r in (0, 1))
    assert all(torch.equal(a[k], b[k]) for k in a)  # gradients are all-reduced: one model
    seen = [json.loads((out / f"batches_rank{r}.json").read_text()) for r in (0, 1)]
    assert len(seen[0]) == len(seen[1]) == 3 * 3  # 7 batches an epoch -> 3 per process, 3 epochs
    for e in range(3):
        ep = [i for r in (0, 1) for bb in seen[r][3 * e:3 * e + 3] for i in bb]
        assert len(ep) == len(set(ep))  # no example on both processes in an epoch
    steps = pq.read_table(out / "train_steps.parquet").to_pylist()
    assert [s["step"] for s in steps] == list(range(1, 10))  # written once, by the main process


# ----------------------------------------------------------------------------- token cache
def test_token_cache_hits_and_invalidates(tiny, tmp_path):
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.tokens import tokenize_cached

    enc = MentionEncoder(str(tiny), max_length=32)
    s = [x[0] for x in SENTS[:9]]
    a = [x[0].index(x[1]) for x in SENTS[:9]]
    b = [i + len(x[1]) for i, x in zip(a, SENTS[:9])]
    calls = []
    real = enc.prepare
    enc.prepare = lambda *aa, **kw: calls.append(1) or real(*aa, **kw)
    first, hit = tokenize_cached(enc, s, a, b, "trigger", cache_dir=tmp_path)
    assert not hit and len(calls) == 1
    again, hit = tokenize_cached(enc, s, a, b, "trigger", cache_dir=tmp_path)
    assert hit and len(calls) == 1 and [x.ids for x in again] == [x.ids for x in first]
    assert [x.target for x in again] == [x.target for x in first]
    # data change -> miss
    s2 = list(s)
    s2[0] = s2[0].replace("town", "city")
    _, hit = tokenize_cached(enc, s2, a, b, "trigger", cache_dir=tmp_path)
    assert not hit
    # representation / max_length / model change -> miss
    _, hit = tokenize_cached(enc, s, a, b, "mask", cache_dir=tmp_path)
    assert not hit
    short = MentionEncoder(str(tiny), max_length=16)
    _, hit = tokenize_cached(short, s, a, b, "trigger", cache_dir=tmp_path)
    assert not hit
    other = MentionEncoder(str(tiny_bert(tmp_path, s + ["extra", "words"], name="other")), max_length=32)
    _, hit = tokenize_cached(other, s, a, b, "trigger", cache_dir=tmp_path)
    assert not hit


# ----------------------------------------------------------------------------- devices
def test_device_auto_falls_back_without_cuda(monkeypatch):
    from eventatlas.modeling import device as dev

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert dev.resolve_device("auto") == "cpu" and dev.resolve_device(None) == "cpu"
    for bad in ("cuda", "cuda:0"):
        with pytest.raises(dev.DeviceUnavailable, match="no CUDA GPU"):
            dev.resolve_device(bad)
    with pytest.raises(dev.DeviceUnavailable, match="unknown device"):
        dev.resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert dev.resolve_device("auto") == "cuda" and dev.resolve_device("cuda:1") == "cuda:1"
    with pytest.raises(dev.DeviceUnavailable, match="cuda:0..cuda:1"):
        dev.resolve_device("cuda:2")


def test_training_args_refuse_unknown_keys():
    with pytest.raises(Exception, match="lr_encoder"):
        TrainingArgs(lr_encoder=1e-5)


def test_early_stopping_stops_and_restores_the_best_epoch(tiny, tmp_path):
    from eventatlas.training import EarlyStopping, EvalCallback

    scores = iter([0.50, 0.70, 0.65, 0.60, 0.55, 0.9])  # best at epoch 1, then 2 epochs without improvement
    snap = {}

    def dev(trainer):
        v = next(scores)
        snap[len(snap)] = {k: t.detach().clone() for k, t in trainer.unwrapped.state_dict().items()}
        return {"dev_score": v}

    model, tr = build(str(tiny), str(tmp_path / "es"), epochs=6, sleep=0)
    tr.callbacks = [EvalCallback(dev), EarlyStopping("dev_score", mode="max", patience=2)]
    res = tr.fit()
    assert res.epochs == 4 and res.stopped.startswith("early stopping: dev_score did not improve for 2 epochs")
    assert [h["eval/dev_score"] for h in res.history] == [0.5, 0.7, 0.65, 0.6]
    final = model.state_dict()
    assert all(torch.equal(final[k], snap[1][k]) for k in final)  # the weights of epoch 1, not of the last epoch
    assert not all(torch.equal(final[k], snap[3][k]) for k in final)
    evals = pq.read_table(res.evals_path).to_pylist()
    assert [(e["epoch"], e["metric"], e["value"]) for e in evals] == [
        (0, "dev_score", 0.5), (1, "dev_score", 0.7), (2, "dev_score", 0.65), (3, "dev_score", 0.6)]


def test_gradient_accumulation_steps_once_per_accumulated_batches(tiny, tmp_path):
    model, tr = build(str(tiny), str(tmp_path / "acc"), epochs=2, sleep=0)
    tr2 = type(tr)(model, tr.task, tr.args.model_copy(update={"grad_accum": 2}), tmp_path / "acc2", seed=3)
    assert tr2.total_steps == 2 * 4  # 7 batches an epoch -> 4 optimizer steps (the last one on 1 batch)
    res = tr2.fit()
    steps = pq.read_table(res.steps_path).to_pylist()
    assert [s["epoch"] for s in steps] == [0] * 4 + [1] * 4
    # each logged step averages the loss of the micro-batches it accumulated
    assert all(s["loss"] > 0 for s in steps)
