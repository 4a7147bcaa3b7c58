"""train-all on task runners: the runner string, thread pinning, and a REAL Dask cluster.

The cluster tests start ``python -m dask scheduler`` and two ``python -m dask worker`` processes
(no nanny, one thread each) on 127.0.0.1, run a small grid (untuned with a tiny random BERT on three
shipped samples x two seeds) through ``train-all --runner dask:tcp://...`` and compare the warehouse
metric rows with a local run of the same grid. The second kills one worker (SIGKILL) mid-cell.
Every process is torn down by PID in a ``finally`` block, bounded in time.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.run.scaleout import RunnerSpec, parse_runner, pinned_threads

SAMPLES = ["ontoevent_maven_sample", "maven_sample", "framenet_fulltext_sample"]
SEEDS = [0, 1]


@pytest.mark.parametrize("text, spec", [
    (None, RunnerSpec("local")),
    ("local", RunnerSpec("local")),
    ("process", RunnerSpec("process")),
    ("process:3", RunnerSpec("process", 3)),
    ("dask", RunnerSpec("dask")),
    ("dask:2", RunnerSpec("dask", 2)),
    ("dask:tcp://10.0.0.5:8786", RunnerSpec("dask", address="tcp://10.0.0.5:8786")),
    ("dask:tcp://scheduler.lab", RunnerSpec("dask", address="tcp://scheduler.lab:8786")),
])
def test_parse_runner(text, spec):
    assert parse_runner(text) == spec
    assert parse_runner(text).distributed == (spec.kind != "local")


@pytest.mark.parametrize("text, expect", [
    ("spark", "unknown runner 'spark'"),  # ray: tests/pipelines/test_scaleout_ray.py
    ("local:2", "unknown runner 'local:2'"),
    ("process:0", "needs a positive worker count, got '0'"),
    ("dask:-1", "needs a positive worker count, got '-1'"),
    ("process:many", "needs a positive worker count"),
    ("dask:http://h:8786", "looks like tcp://host:8786"),
    ("dask:tcp://h:99999", "looks like tcp://host:8786"),
    ("dask:tcp://", "looks like tcp://host:8786"),
])
def test_parse_runner_refuses_with_the_accepted_forms(text, expect):
    with pytest.raises(ValueError) as e:
        parse_runner(text)
    assert expect in str(e.value) and "local | process[:N] | dask[:N]" in str(e.value)


def test_pinned_threads_limits_torch_and_blas_then_restores():
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    with pinned_threads(1):
        assert torch.get_num_threads() == 1 and os.environ["OMP_NUM_THREADS"] == "1"
        assert all(p["num_threads"] == 1 for p in threadpool_info())
    assert torch.get_num_threads() == before
    with pinned_threads(None):
        assert torch.get_num_threads() == before


def test_cli_refuses_a_bad_runner_before_anything_runs(eventatlas_env, monkeypatch):
    from eventatlas.cli import app

    monkeypatch.delitem(sys.modules, "flows.train_all", raising=False)
    r = CliRunner().invoke(app, ["train-all", "--runner", "dask:udp://x"], terminal_width=300)
    assert r.exit_code == 2 and "bad runner 'dask:udp://x'" in r.output, r.output
    assert "flows.train_all" not in sys.modules and not (eventatlas_env / "data").exists()


def test_train_all_deployments_take_a_runner():
    import yaml

    from flows.train_all import train_all

    doc = yaml.safe_load((Path(__file__).resolve().parents[2] / "prefect.yaml").read_text())
    deps = [d for d in doc["deployments"] if d["entrypoint"] == "flows/train_all.py:train_all"]
    assert deps and all(d["parameters"].get("runner") == "local" for d in deps)
    assert train_all.parameters.properties["runner"]["default"] == "local"


def boom(ctx):
    raise RuntimeError("boom on purpose")


def _boom_spec(gpu: str = "no"):
    from eventatlas.methods import MethodSpec

    return MethodSpec(name="boom", config="eventatlas.methods.spec:MethodConfig", run="test_scaleout:boom",
                      applies_to=frozenset({"typed_mentions"}), tasks=("induction",), gpu=gpu)


def test_run_method_reuse_unfinished_takes_the_dead_attempts_directory(eventatlas_env, monkeypatch):
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.methods import REGISTRY
    from eventatlas.run.runner import run_method

    monkeypatch.setitem(REGISTRY, "boom", _boom_spec())
    ddir = Path(ingest_samples(names=["ace2005"])[0]["path"])
    first = run_method("boom", ddir, seed=3)
    first.unlink()  # the attempt died before writing its record
    again = run_method("boom", ddir, seed=3, reuse_unfinished=True)
    assert again == first and again.exists()
    fresh = run_method("boom", ddir, seed=3, reuse_unfinished=True)  # nothing unfinished left: a new run
    other_seed = run_method("boom", ddir, seed=4, reuse_unfinished=True)
    assert len({fresh.parent, first.parent, other_seed.parent}) == 3
    assert run_method("boom", ddir, seed=3).parent not in {fresh.parent, first.parent}


def hang(ctx):
    """With EVENTATLAS_TEST_HANG set: mark the run directory as started, say so, and block until killed
    (a live run of another train-all); else fail at once like ``boom``."""
    if not os.environ.get("EVENTATLAS_TEST_HANG"):
        raise RuntimeError("quick failure on purpose")
    Path(ctx.run_dir, "started").write_text(str(os.getpid()))
    print("running", ctx.run_dir, flush=True)
    sys.stdin.read()


HANG_HOLDER = """
import sys
sys.path[:0] = [sys.argv[2]]
import test_scaleout as t
from eventatlas.methods import REGISTRY
from eventatlas.run.runner import run_method
REGISTRY["hang"] = t._hang_spec()
run_method("hang", sys.argv[1], seed=3)
"""


def _hang_spec():
    from eventatlas.methods import MethodSpec

    return MethodSpec(name="hang", config="eventatlas.methods.spec:MethodConfig", run="test_scaleout:hang",
                      applies_to=frozenset({"typed_mentions"}), tasks=("induction",))


def test_a_live_run_keeps_its_directory_from_a_concurrent_run_of_the_same_configuration(eventatlas_env, monkeypatch):
    """Two train-all runs with one configuration: the second never writes into the first's unfinished
    directory while the first is alive (its cells reuse unfinished directories), and takes it over once
    the first was SIGKILLed."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.methods import REGISTRY
    from eventatlas.run.runner import LOCK_NAME, run_method
    from eventatlas.tracking.records import read_record

    monkeypatch.setitem(REGISTRY, "hang", _hang_spec())
    ddir = Path(ingest_samples(names=["ace2005"])[0]["path"])
    holder = subprocess.Popen([sys.executable, "-c", HANG_HOLDER, str(ddir), str(Path(__file__).parent)],
                              env={**os.environ, "EVENTATLAS_TEST_HANG": "1"}, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        line = holder.stdout.readline().split()  # blocks until the holder's run has started
        assert line[:1] == ["running"], line
        live = Path(line[1])
        assert live.parent == config.runs_dir() and not (live / "run.json").exists()
        for kw in ({"reuse_unfinished": True}, {"resume": True}):
            rec = run_method("hang", ddir, seed=3, **kw)
            assert rec.parent != live and read_record(rec)["run"]["status"] == "failed"
            assert not (rec.parent / LOCK_NAME).exists()  # a finished run leaves no lock file
        assert sorted(p.name for p in live.iterdir()) == sorted([LOCK_NAME, "started"])  # untouched
        assert (live / "started").read_text() == str(holder.pid)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    # the killed run's lock went with its process: its directory is taken over, not left as an orphan
    rec = run_method("hang", ddir, seed=3, reuse_unfinished=True)
    assert rec.parent == live and read_record(rec)["run"]["status"] == "failed"
    assert not (live / LOCK_NAME).exists()


def test_gpu_cells_carry_the_dask_gpu_resource_only_on_dask():
    import dask

    from tasks.runners import gpu_placement

    with gpu_placement(parse_runner("dask:tcp://h:1"), True):
        assert dask.get_annotations() == {"resources": {"GPU": 1}}
    for spec, gpu in [(parse_runner("dask"), False), (parse_runner("process:2"), True)]:
        with gpu_placement(spec, gpu):
            assert dask.get_annotations() == {}


# ---- a real cluster ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def grid_env(tmp_path_factory):
    from prefect.testing.utilities import prefect_test_harness

    from test_flows import build_tiny_bert

    root = tmp_path_factory.mktemp("scaleout")
    with pytest.MonkeyPatch.context() as mp:
        for k, v in {"EVENTATLAS_DATA": root / "data", "EVENTATLAS_WAREHOUSE": root / "wh.duckdb",
                     "PREFECT_HOME": root / "prefect"}.items():
            mp.setenv(k, str(v))
        from eventatlas.data.ingest import ingest_samples

        manifests = [m for m in ingest_samples() if m["dataset"] in SAMPLES]
        assert {m["dataset"] for m in manifests} == set(SAMPLES)
        texts = [s for m in manifests for s in
                 pq.read_table(Path(m["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()]
        model = build_tiny_bert(root / "tiny-bert", texts)
        params = {"untuned": {"model_id": str(model), "encoder": {"batch_size": 8, "precision": "fp32"}}}
        with prefect_test_harness(server_startup_timeout=120):
            yield {"root": root, "params": params}


def _scheduler_address(path: Path) -> str | None:
    """The address a dask scheduler wrote to its --scheduler-file (None until it is complete)."""
    try:
        return json.loads(path.read_text())["address"]
    except (FileNotFoundError, ValueError, KeyError):
        return None


def _stop(procs: list[subprocess.Popen]) -> None:
    """Terminate by PID, then kill what is still alive: bounded to ~15 s in all."""
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)


@pytest.fixture
def cluster(grid_env, tmp_path):
    """A scheduler and two single-threaded worker processes (no nanny: a killed worker stays dead)."""
    from distributed import Client

    # the scheduler binds a free port itself and writes its address to a file the workers read (a port
    # picked here and released could be taken by another process before the scheduler binds it)
    sched_file = tmp_path / "scheduler.json"
    procs: list[subprocess.Popen] = []
    logs = []

    def start(*args: str, name: str) -> subprocess.Popen:
        log = open(tmp_path / f"{name}.log", "w")
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", "dask", *args], stdout=log, stderr=subprocess.STDOUT,
                                      env=dict(os.environ)))
        return procs[-1]

    try:
        sched = start("scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file", str(sched_file),
                      "--no-dashboard", "--no-show", name="scheduler")
        deadline = time.monotonic() + 120  # a bound for a hang, not an expected duration
        while not _scheduler_address(sched_file):
            assert sched.poll() is None, (tmp_path / "scheduler.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the dask scheduler did not start in 120 s"
            time.sleep(0.1)
        address = _scheduler_address(sched_file)
        workers = [start("worker", "--scheduler-file", str(sched_file), "--nthreads", "1", "--no-nanny",
                         "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}", "--death-timeout", "60",
                         name=f"worker{i}") for i in range(2)]
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=90)
            yield {"address": address, "workers": workers, "logs": tmp_path}
    finally:
        _stop(procs)
        for log in logs:
            log.close()


def _metric_rows(run_ids: list[str]) -> list[tuple]:
    """The grid's metric rows without run ids, in a canonical order."""
    from eventatlas.store.warehouse import Warehouse

    ids = ",".join(f"'{r}'" for r in run_ids)
    df = Warehouse().query(f"SELECT task, dataset, split, setting, method, representation, clustering, variant, "
                           f"metric, value, seed FROM metrics WHERE run_id IN ({ids})")
    return sorted(tuple(None if v != v else v for v in row) for row in df.itertuples(index=False))


def _run_ids(out: dict) -> list[str]:
    return [Path(r).parent.name for r in out["records"]]


def _cells() -> list[tuple]:
    return sorted((d, s) for d in SAMPLES for s in SEEDS)


@pytest.fixture(scope="module")
def local_rows(grid_env):
    from flows.train_all import train_all

    out = train_all(datasets=SAMPLES, seeds=SEEDS, params=grid_env["params"])
    assert out["runs"] == len(SAMPLES) * len(SEEDS) and not out["failed"]
    rows = _metric_rows(_run_ids(out))
    assert rows and {r[1] for r in rows} == set(SAMPLES) and {r[-1] for r in rows} == set(SEEDS)
    return rows


def _runs_of(run_ids: list[str]):
    from eventatlas.store.warehouse import Warehouse

    ids = ",".join(f"'{r}'" for r in run_ids)
    return Warehouse().query(f"SELECT run_id, status, seed, params->>'dataset' AS dataset FROM runs "
                             f"WHERE run_id IN ({ids})")


@pytest.mark.network
@pytest.mark.timeout(900)
def test_train_all_on_a_real_dask_cluster_equals_a_local_run(grid_env, local_rows, cluster):
    from distributed import Client, get_task_stream

    from flows.train_all import train_all

    with Client(cluster["address"], timeout=30) as client, get_task_stream(client=client) as stream:
        out = train_all(datasets=SAMPLES, seeds=SEEDS, params=grid_env["params"],
                        runner=f"dask:{cluster['address']}")
    assert out["runner"] == f"dask:{cluster['address']}" and not out["failed"]
    runs = _runs_of(_run_ids(out))
    assert len(runs) == len(set(runs.run_id)) == len(SAMPLES) * len(SEEDS) and set(runs.status) == {"completed"}
    assert sorted(zip(runs.dataset, runs.seed)) == _cells()
    assert _metric_rows(_run_ids(out)) == local_rows
    # the cells ran on the cluster, spread over both workers
    ran = [t for t in stream.data if str(t["key"]).startswith("train")]
    assert len(ran) == len(SAMPLES) * len(SEEDS) and len({t["worker"] for t in ran}) == 2, stream.data


@pytest.mark.network
@pytest.mark.timeout(300)
def test_gpu_cells_are_refused_on_a_cluster_without_gpu_workers(grid_env, cluster, monkeypatch):
    from eventatlas.methods import REGISTRY
    from flows.train_all import train_all

    monkeypatch.setitem(REGISTRY, "boom", _boom_spec(gpu="required"))
    with pytest.raises(RuntimeError, match=r"2 cells need a GPU but no worker .* --resources GPU=1"):
        train_all(datasets=SAMPLES[:1], methods=["boom"], seeds=SEEDS, runner=f"dask:{cluster['address']}")


@pytest.mark.network
@pytest.mark.timeout(900)
def test_a_worker_killed_mid_cell_still_gives_identical_complete_results(grid_env, local_rows, cluster):
    from distributed import Client

    from eventatlas import config
    from flows.train_all import train_all

    runs_dir = config.runs_dir()
    before = {p.name for p in runs_dir.iterdir()} if runs_dir.exists() else set()
    by_pid = {w.pid: w for w in cluster["workers"]}
    killed: list[dict] = []
    stop = threading.Event()

    def kill_one_mid_cell() -> None:
        """SIGKILL the worker that is running a cell whose run directory exists but has no record yet."""
        with Client(cluster["address"], timeout=30) as client:
            pids = client.run(os.getpid)  # worker address -> PID
            assert set(pids.values()) == set(by_pid)
            while not stop.is_set() and not killed:
                busy = {a for a, keys in client.processing().items() if keys}
                started = [p for p in runs_dir.glob("untuned-*") if p.name not in before and p.is_dir()
                           and not (p / "run.json").exists()]
                if busy and started:
                    pid = pids[sorted(busy)[0]]
                    by_pid[pid].send_signal(signal.SIGKILL)
                    killed.append({"pid": pid, "unfinished": [p.name for p in started]})
                time.sleep(0.02)

    watcher = threading.Thread(target=kill_one_mid_cell, daemon=True)
    watcher.start()
    try:
        out = train_all(datasets=SAMPLES, seeds=SEEDS, params=grid_env["params"],
                        runner=f"dask:{cluster['address']}")
    finally:
        stop.set()
        watcher.join(timeout=30)
    assert killed, "no worker was killed: the grid finished before a cell was seen running"
    assert by_pid[killed[0]["pid"]].wait(timeout=10) == -signal.SIGKILL
    assert not out["failed"]
    ids = _run_ids(out)
    runs = _runs_of(ids)
    # complete and not duplicated: one completed run per cell, metric rows identical to the local run
    assert len(runs) == len(set(runs.run_id)) == len(SAMPLES) * len(SEEDS) and set(runs.status) == {"completed"}
    assert sorted(zip(runs.dataset, runs.seed)) == _cells()
    assert _metric_rows(ids) == local_rows
    # the retried cell wrote into the run directory its killed attempt had started: no orphan left
    new = {p.name for p in runs_dir.iterdir()} - before
    assert new == set(ids), (sorted(new), sorted(ids))
    assert set(killed[0]["unfinished"]) <= set(ids)


@pytest.mark.network
@pytest.mark.timeout(600)
@pytest.mark.parametrize("runner", ["process:2", "dask:2"])
def test_train_all_on_a_process_pool_and_a_local_dask_cluster(grid_env, local_rows, runner):
    from flows.train_all import train_all

    out = train_all(datasets=SAMPLES[:1], seeds=SEEDS, params=grid_env["params"], runner=runner)
    assert out["runs"] == len(SEEDS) and not out["failed"]
    assert _metric_rows(_run_ids(out)) == [r for r in local_rows if r[1] == SAMPLES[0]]


@pytest.mark.network
@pytest.mark.timeout(900)
def test_the_prefect_free_dask_engine_equals_a_local_run(grid_env, local_rows, cluster):
    """The CLI's road without Prefect (``train-all --runner dask:...`` with no Prefect API): the same pipeline
    on Dask itself gives the rows the Prefect flow gave locally."""
    from eventatlas.pipelines.local import engine
    from eventatlas.pipelines.train_grid import train_all

    runner = f"dask:{cluster['address']}"
    said: list[str] = []
    out = train_all(datasets=SAMPLES, seeds=SEEDS, params=grid_env["params"], runner=runner,
                    engine=engine(runner, say=said.append))
    assert out["runner"] == runner and not out["failed"] and out["runs"] == len(SAMPLES) * len(SEEDS)
    assert _metric_rows(_run_ids(out)) == local_rows
    assert sum(": done" in m for m in said) == len(SAMPLES) * len(SEEDS)
