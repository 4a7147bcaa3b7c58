"""The method contract: the runner builds one MethodContext per run (config, protocol, device resolved once,
precision fixed by the device, never by a timing probe), and a method is run(ctx)."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eventatlas.methods import ParamError, get_spec
from eventatlas.run.runner import run_method
from eventatlas.tracking.records import load_metrics, read_record


@pytest.fixture(scope="module")
def onto(tmp_path_factory):
    """The shipped OntoEvent sample and a tiny BERT over its sentences."""
    from eventatlas.data.ingest import ingest_samples
    from support.tiny_models import tiny_bert

    root = tmp_path_factory.mktemp("ctx")
    ingest_samples(root / "ds", names=["ontoevent"])
    ds = next((root / "ds").iterdir())
    sents = pq.read_table(ds / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()
    return ds, tiny_bert(root, sents)


def _params(model, **extra):
    return {"model_id": str(model), "representations": ["trigger"], "clusterings": ["agglomerative"], "k_seen": 2,
            "projection": "none", **extra}


def _probe_says(monkeypatch, faster: bool):
    """A 'machine' whose CPU timing probe (measured and cached, as ``python -m eventatlas.modeling.device`` does)
    found bf16 faster (or slower) than fp32."""
    from eventatlas.modeling import device as dev

    def fake(s, mode, reps=3):
        return {"fp32_ms": 10.0, "bf16_ms": 4.0 if faster else 12.0, "bf16_faster": faster}

    monkeypatch.setattr(dev, "_probe", fake)
    monkeypatch.setattr(dev, "_PROBES", {})
    monkeypatch.setattr(dev, "_ADVISED", set())
    assert dev.cpu_bf16_faster({}, "inference") is faster


def test_precision_is_the_same_on_two_machines_and_recorded(onto, eventatlas_env, monkeypatch, caplog):
    ds, model = onto
    rows, recs = {}, {}
    for machine, faster in (("amx", True), ("avx2", False)):
        monkeypatch.setenv("EVENTATLAS_CACHE", str(eventatlas_env / f"cache_{machine}"))
        _probe_says(monkeypatch, faster)
        with caplog.at_level("INFO", logger="eventatlas.modeling.device"):
            rec = read_record(run_method("untuned", ds, seed=0, params=_params(model), device="cpu"))
        assert rec["run"]["status"] == "completed", rec["run"].get("error")
        recs[machine] = rec
        rows[machine] = sorted((r["representation"], r["clustering"], r["metric"], r["value"]) for r in load_metrics(rec))
    # the probe advised bf16 on the first machine (logged once), and changed nothing
    advice = [r.message for r in caplog.records if "precision advice" in r.message]
    assert len(advice) == 1 and "fp32 10.0 ms, bf16 4.0 ms" in advice[0]
    assert rows["amx"] == rows["avx2"] and any(m == "ari" for _, _, m, _ in rows["amx"])
    for rec in recs.values():
        cfg = rec["run"]["params"]["config"]
        assert rec["run"]["precision"] == "fp32" and cfg["precision"] == "fp32" and cfg["device"] == "cpu"
        assert cfg["encoder"]["precision"] == "fp32"  # the nested auto took the run's precision
    # the same configuration: the same run-id prefix on both machines
    assert recs["amx"]["run"]["run_id"].rsplit("-", 2)[0] == recs["avx2"]["run"]["run_id"].rsplit("-", 2)[0]


def test_precision_is_part_of_the_configuration_identity(onto, eventatlas_env):
    ds, model = onto
    a = read_record(run_method("untuned", ds, seed=0, params=_params(model), device="cpu"))
    b = read_record(run_method("untuned", ds, seed=0, params=_params(model, precision="bf16"), device="cpu"))
    assert b["run"]["status"] == "completed", b["run"].get("error")
    assert a["run"]["run_id"].rsplit("-", 2)[0] != b["run"]["run_id"].rsplit("-", 2)[0]
    # the user's precision is honoured: the encoder ran in bf16 and says so
    assert b["run"]["precision"] == "bf16" and b["run"]["params"]["embeddings"]["trigger"]["precision"] == "bf16"
    assert a["run"]["params"]["embeddings"]["trigger"]["precision"] == "fp32"


def test_device_is_resolved_once_per_run(onto, eventatlas_env, monkeypatch):
    from eventatlas.modeling import device as dev

    ds, model = onto
    calls = []
    real = dev.resolve_device
    monkeypatch.setattr(dev, "resolve_device", lambda d="auto": calls.append(d) or real(d))
    rec = read_record(run_method("untuned", ds, seed=0, params=_params(model), device="auto"))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    assert calls == ["auto"] and rec["run"]["params"]["config"]["device"] == "cpu"


def test_a_params_device_is_honoured_or_refused_in_one_line(onto, eventatlas_env, monkeypatch):
    import torch

    ds, model = onto
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    # the method's own device wins over the flow's --device: cuda here is refused before any work
    rec = read_record(run_method("untuned", ds, seed=0, params=_params(model, device="cuda"), device="cpu"))
    run = rec["run"]
    assert run["status"] == "failed" and run["error"].startswith("DeviceUnavailable: device 'cuda' requested but no "
                                                                 "CUDA GPU is visible")
    assert rec["metrics_path"] is None
    # a second device inside a training block is refused, in one line, when params are validated
    spec = get_spec("frame_dml")
    from eventatlas.methods.context import resolve_config

    with pytest.raises(ParamError, match=r"^--params: frame_dml: train\.device 'cuda': a run has one device, set by "
                                         r"the method's 'device' key \(here 'auto'\)$"):
        spec.validate({"train": {"device": "cuda"}})
    # the same device twice is no conflict (a recorded config, re-validated, has both)
    assert spec.validate({"device": "cpu", "train": {"device": "cpu"}}).train.device == "cpu"
    cfg = resolve_config(spec, {"precision": "bf16", "train": {"epochs": 2, "precision": "fp32"}}, device="cpu")
    # the run's device lands in the training block; an explicit nested precision is kept, the eval one is the run's
    assert (cfg.device, cfg.precision, cfg.train.device, cfg.train.precision) == ("cpu", "bf16", "cpu", "fp32")
    assert (cfg.train.epochs, cfg.train.lr, cfg.train.schedule) == (2, 1e-5, "constant")  # the method's defaults


def test_training_defaults_are_data_per_method():
    # one TrainingArgs, each method's defaults as data; the user's keys over them; minimums kept
    swcc, grounding = get_spec("swcc").validate({"train": {"lr": 1e-3}}), get_spec("grounding").validate({})
    assert type(swcc.train) is type(grounding.train) is type(grounding.hp)
    assert (swcc.train.lr, swcc.train.optimizer, swcc.train.betas, swcc.train.drop_last) == (1e-3, "adam", (0.9, 0.997), True)
    assert (grounding.train.schedule, grounding.hp.schedule, grounding.hp.epochs, grounding.cross.batch_size) == \
        ("linear", "constant", 3, 4)
    with pytest.raises(ParamError, match=r"^--params: swcc\.train: Value error, batch_size must be >= 2 for this method"):
        get_spec("swcc").validate({"train": {"batch_size": 1}})
    with pytest.raises(ParamError, match="unknown key 'train.epoch' \\(did you mean 'epochs'\\?\\)"):
        get_spec("frame_dml").validate({"train": {"epoch": 1}})


def test_context_checks_kinds_and_gives_the_model_dir(onto, eventatlas_env):
    from eventatlas.data import Manifest, NotApplicable
    from eventatlas.methods.context import build_context, resolve_config

    ds, model = onto
    man = Manifest.read(ds)
    spec = get_spec("swcc")  # trains on event co-occurrence, which the OntoEvent sample is not
    with pytest.raises(NotApplicable, match=r"swcc applies to event_cooccurrence \(events with .*\) datasets; kinds here: .*typed_mentions"):
        build_context(spec, resolve_config(spec, {}, device="cpu"), man, eventatlas_env / "run")
    spec = get_spec("untuned")
    ctx = build_context(spec, resolve_config(spec, _params(model), device="cpu", manifest=man), man,
                        eventatlas_env / "run", seed=3)
    assert ctx.model_dir == eventatlas_env / "run" / "model" and ctx.run_dir.is_dir()
    assert (ctx.device, ctx.precision, ctx.seed, ctx.dataset) == ("cpu", "fp32", 3, man.dataset)
    assert ctx.table("mentions").num_rows == man.rows["mentions"]
    with pytest.raises(FileNotFoundError, match="has no entities table"):
        ctx.table("entities")
    base = ctx.base_params()
    assert json.dumps(base) and base["precision"] == "fp32" and base["config"]["k_seen"] == 2
