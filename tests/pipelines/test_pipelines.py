"""The pipelines: each command's body once, its steps through an injected engine (eventatlas.pipelines)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from eventatlas.pipelines.engine import Engine, GridResult, run_grid

ROOT = Path(__file__).resolve().parents[2]


def _rejected(path: str):
    from eventatlas.store.publishing import PublishOutcome, PublishRejected

    return PublishRejected(PublishOutcome(warehouse="wh", rejected=[{"record": path, "reason": "seed out of range"}]))


def test_run_grid_publishes_in_plan_order_and_goes_on_past_a_lost_or_rejected_cell():
    jobs = [{"method": "m", "dataset": f"d{i}", "seed": 0} for i in range(4)]
    published: list[str] = []

    def execute(js):
        yield js[0], "r0"
        yield js[1], RuntimeError("worker died")
        yield js[2], "r2"
        yield js[3], "r3"

    def publish(recs):
        if recs == ["r2"]:
            raise _rejected("r2")
        published.extend(recs)
        return {"warehouse": "wh", "failed": ["r3"] if recs == ["r3"] else [], "skipped": [], "queued": [],
                "from_queue": []}

    warned: list[str] = []
    out = run_grid(jobs, execute, publish, warned.append)
    assert published == ["r0", "r3"]  # in plan order, each as it came
    assert out.by_job == ["r0", None, "r2", "r3"] and out.records == ["r0", "r2", "r3"]
    assert out.failed[0] == "m/d1/seed0: RuntimeError: worker died"
    assert out.failed[1].startswith("m on d2 seed 0: not published: 1 run record(s) not published: r2: seed out")
    assert out.failed[2] == "r3" and len(out.failed) == 3 and out.warehouse == "wh"
    assert any("d1" in w and "lost" in w for w in warned) and any("d2" in w for w in warned)


def test_run_grid_keeps_the_queue_current():
    """A run queued by one publish and landed from the queue by the next is no longer queued."""
    answers = iter([{"warehouse": "w", "queued": ["a"]}, {"warehouse": "w", "queued": ["b"], "from_queue": ["a"]}])
    out = run_grid([{"method": "m", "dataset": "d", "seed": s} for s in (0, 1)],
                   lambda js: ((j, f"r{j['seed']}") for j in js), lambda recs: next(answers))
    assert out.queued == ["b"] and out.failed == []


def _engine(published: list, **steps) -> Engine:
    def publish(recs):
        published.extend(recs)
        return {"warehouse": "w", "queued": []}
    return Engine(grid=lambda jobs: GridResult(), publish=publish, say=lambda m: None, warn=lambda m: None,
                  steps=steps)


def test_ingest_pipeline_records_the_ingest_and_a_failure(eventatlas_env):
    from eventatlas import config
    from eventatlas.errors import InputError
    from eventatlas.pipelines.ingest import ingest
    from eventatlas.tracking.records import read_record

    published: list[str] = []
    out = ingest("maven", str(config.samples_dir() / "maven"), dataset="mv", engine=_engine(published))
    assert out["manifest"]["dataset"] == "mv" and out["published"] == {"warehouse": "w", "queued": []}
    run = read_record(published[0])["run"]
    assert len(published) == 1 and run["status"] == "completed" and run["params"]["dataset"] == "mv"

    def broken(*args):
        raise InputError("mv.jsonl", "line 3", "not JSON")

    published.clear()
    with pytest.raises(InputError, match="line 3"):
        ingest("maven", "mv.jsonl", dataset="mv2", engine=_engine(published, ingest=broken))
    run = read_record(published[0])["run"]
    assert len(published) == 1 and run["status"] == "failed" and "line 3" in run["error"]


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)}


@pytest.mark.parametrize("flow, pipeline, call", [("ingest", "ingest", "ingest"), ("atlas", "atlas", "atlas"),
                                                  ("train_all", "train_grid", "train_all"),
                                                  ("experiment", "experiment", "experiment"),
                                                  ("detect", "detect", "detect"),
                                                  ("discover", "discover", "discover")])
def test_each_flow_only_decorates_its_pipeline(flow, pipeline, call):
    """The command's body is the pipeline's; the flow passes the Prefect engine and calls it."""
    src = (ROOT / "flows" / f"{flow}.py").read_text(encoding="utf-8")
    assert f"from eventatlas.pipelines import {pipeline}" in src and call in _calls(ROOT / "flows" / f"{flow}.py")
    assert "prefect_engine(" in src
    body = [n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == call][0]
    assert len(body.body) <= 3, f"flows/{flow}.py::{call} does more than decorate its pipeline"


def test_the_cli_finds_every_flow_through_entry_points():
    """The core names flows by entry point (pyproject.toml), never by importing flows/."""
    import tomllib
    from importlib.metadata import entry_points

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["eventatlas.prefect"]
    installed = {e.name: e.value for e in entry_points(group="eventatlas.prefect")}
    assert installed == declared, "reinstall (pip install -e .) after changing the entry points"
    for name, target in declared.items():
        module, _, attr = target.partition(":")
        assert (ROOT / (module.replace(".", "/") + ".py")).exists() and attr, name
    used = set()
    for p in (ROOT / "eventatlas" / "cli").glob("*.py"):
        tree = ast.parse(p.read_text(encoding="utf-8"))
        used |= {n.args[0].value for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "")
                 in ("run_flow", "prefect_flow") and n.args and isinstance(n.args[0], ast.Constant)}
    assert used and used <= set(declared), sorted(used - set(declared))
    json.dumps(declared)
