"""Prefect flows end to end on the shipped samples, with a tiny random BERT so it is fast.

One Prefect test harness (temporary API + database) and one PREFECT_HOME for the module.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eventatlas.io import sha256_file
from eventatlas.methods import REGISTRY
from eventatlas.store.warehouse import Warehouse


def build_tiny_bert(out: Path, texts: list[str]) -> Path:
    """A 4-layer, 32-wide random BERT + WordPiece vocab over the given texts (window4 needs 4 layers)."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    words = sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]", t.lower())})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(out / "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=512)
    BertModel(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def boom(ctx):
    """A method that crashes: its run must land as 'failed' and the flow must fail."""
    raise RuntimeError("boom on purpose")


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    from prefect.testing.utilities import prefect_test_harness

    root = tmp_path_factory.mktemp("flows")
    saved = {k: os.environ.get(k) for k in ("EVENTATLAS_DATA", "EVENTATLAS_WAREHOUSE", "PREFECT_HOME")}
    os.environ.update(EVENTATLAS_DATA=str(root / "data"), EVENTATLAS_WAREHOUSE=str(root / "wh.duckdb"),
                      PREFECT_HOME=str(root / "prefect"))
    from eventatlas.data.ingest import ingest_samples

    manifests = ingest_samples()
    texts = [s for m in manifests if (Path(m["path"]) / "mentions.parquet").exists()
             for s in pq.read_table(Path(m["path"]) / "mentions.parquet", columns=["sentence"])["sentence"].to_pylist()]
    # the event-pair samples' words too, so the tiny model tells their events apart
    texts += [" ".join(str(v) for e in pair.values() if isinstance(e, dict) for v in e.values() if v)
              for m in manifests if (Path(m["path"]) / "event_pairs.parquet").exists()
              for pair in pq.read_table(Path(m["path"]) / "event_pairs.parquet", columns=["event_a", "event_b"]).to_pylist()]
    model = build_tiny_bert(root / "tiny-bert", texts)
    try:
        with prefect_test_harness(server_startup_timeout=120):
            yield {"root": root, "model": str(model), "manifests": {m["dataset"]: m for m in manifests}}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _untuned(env):
    return {"untuned": {"model_id": env["model"], "encoder": {"batch_size": 8, "precision": "fp32"}}}


def test_train_all_end_to_end_on_samples(env):
    from eventatlas.evaluation.metrics import clustering_scores
    from flows.train_all import train_all
    from tasks.common import labelled_datasets

    labelled = labelled_datasets()
    assert {"ontoevent_maven_sample", "maven_sample", "framenet_fulltext_sample"} <= set(labelled)
    assert "hard_similarity_sample" not in labelled  # event pairs, no mention labels
    pairs = {"hard_similarity_sample", "transitive_similarity_sample", "mcnc_sample", "nyt_cloze_dev_sample"}

    out = train_all(params=_untuned(env))
    # untuned applies to typed mentions (induction) and to event pairs (similarity): its spec's kinds
    assert out["runs"] == len(labelled) + len(pairs) and not out["failed"]
    wh = Warehouse()
    runs = wh.query("SELECT * FROM runs WHERE flow = 'train-all' ORDER BY run_id")
    assert len(runs) == len(labelled) + len(pairs)
    assert set(runs.status) <= {"completed", "skipped"}
    done = runs[runs.status == "completed"]
    induced = done[~done.params.str.contains('"event_pairs"')]
    # (the tiny random model gives every transitive pair the same cosine: Spearman undefined -> skipped)
    assert len(induced) >= 3 and len(done) - len(induced) >= 2
    for _, r in done.iterrows():
        params = json.loads(r["params"])
        ds = params["dataset"]
        assert json.loads(r["data_fingerprints"]) == {ds: env["manifests"][ds]["fingerprint"]}
        assert r["code_version"] and r["device"].startswith(("cpu", "cuda")) and r["seed"] == 0
        assert params["model_id"] == env["model"]
    for _, r in induced.iterrows():
        params = json.loads(r["params"])
        assert params["n_clusters"] == params["selection"]["n_types_clustered"]
    for _, r in runs[runs.status == "skipped"].iterrows():
        assert r["error"].startswith("not applicable")

    # every representation x clustering landed for each completed induction run
    grid = wh.query("SELECT run_id, count(DISTINCT representation || '/' || clustering) AS n FROM metrics "
                    "WHERE metric = 'ari' GROUP BY run_id")
    assert set(grid.n) == {5 * 4} and set(grid.run_id) == set(induced.run_id)
    # the baseline scores clusterings (task induction, the protocol as setting, no variant) and pairs
    got = wh.query("SELECT DISTINCT m.task, m.variant, m.setting, r.params->>'setting' AS s FROM metrics m "
                   "JOIN runs r USING (run_id) WHERE m.method = 'untuned' AND m.task = 'induction'")
    assert set(got.variant.isna()) == {True} and (got.setting == got.s).all()
    sim = wh.query("SELECT dataset, metric, value FROM metrics WHERE task = 'similarity'")
    assert {"hard_sim_acc", "mcnc_acc", "mcnc_random"} <= set(sim.metric)
    assert set(sim.dataset) <= pairs and sim.value.between(-1, 1).all() and len(set(sim.dataset)) >= 2

    # the warehouse value equals a recomputation from the run's own assignments artifact
    art = wh.query("SELECT a.run_id, a.path, a.sha256, a.\"rows\" FROM artifacts a "
                   "WHERE kind = 'assignments/trigger/agglomerative'")
    assert len(art) == len(induced)
    for _, a in art.iterrows():
        assert sha256_file(a["path"]) == a["sha256"]
        t = pq.read_table(a["path"]).to_pydict()
        assert len(t["mention_id"]) == a["rows"]
        want = clustering_scores(t["label"], t["cluster"])
        got = wh.query("SELECT metric, value FROM metrics WHERE run_id = ? AND representation = 'trigger' "
                       "AND clustering = 'agglomerative'", [a["run_id"]])
        got = dict(zip(got.metric, got.value))
        for m in ("ari", "nmi", "bcubed_f", "purity_f"):
            assert got[m] == pytest.approx(want[m], abs=1e-12)

    # FrameNet sample: the registry's protocol, verbs only, every frame a cluster
    fn = done[done.params.str.contains('"framenet_fulltext_sample"')]
    if len(fn):
        p = json.loads(fn.iloc[0]["params"])
        assert p["selection"]["lu_pos"] == "v" and p["selection"]["k_seen"] == 0 and p["setting"].endswith(", verbs")

    lb = wh.query("SELECT * FROM leaderboard WHERE metric = 'ari'")
    assert len(lb) == 20 * len(induced) and set(lb.n_seeds) == {1}
    assert lb.best.between(-1, 1).all()
    # views over the ingested Parquet are live in the same file
    n = wh.query("SELECT count(*) AS n FROM mentions WHERE dataset = 'ontoevent_maven_sample'").n[0]
    assert n == env["manifests"]["ontoevent_maven_sample"]["rows"]["mentions"]


def test_train_all_records_prefect_artifacts_and_seeds(env):
    from prefect.client.orchestration import get_client

    from flows.train_all import train_all

    params = {"untuned": {**_untuned(env)["untuned"], "representations": ["trigger"],
                          "clusterings": ["agglomerative"]}}
    out = train_all(datasets=["ontoevent_maven_sample"], seeds=[1, 2], params=params)
    assert out["runs"] == 2
    lb = Warehouse().query("SELECT * FROM leaderboard WHERE dataset = 'ontoevent_maven_sample' AND "
                           "representation = 'trigger' AND clustering = 'agglomerative' AND metric = 'ari'")
    # seed 0 from the previous test plus seeds 1 and 2
    assert lb.n_seeds.tolist() == [3]

    async def artifacts():
        async with get_client() as c:
            return await c.read_artifacts()

    import asyncio

    arts = asyncio.run(artifacts())
    kinds = {(a.key, a.type) for a in arts}
    assert ("train-all-summary", "markdown") in kinds
    assert any(k.startswith("metrics-untuned-ontoevent-maven-sample") and t == "table" for k, t in kinds)


def test_failed_run_is_published_then_flow_fails(env, monkeypatch):
    from flows.train_all import train_all

    from eventatlas.methods import MethodSpec

    monkeypatch.setitem(REGISTRY, "boom", MethodSpec(name="boom", config="eventatlas.methods.spec:MethodConfig",
                                                     run="test_flows:boom", applies_to=frozenset({"typed_mentions"}),
                                                     tasks=("induction",)))
    with pytest.raises(RuntimeError, match="1 of 1 runs failed"):
        train_all(datasets=["ace2005_sample"], methods=["boom"])
    r = Warehouse().query("SELECT status, error FROM runs WHERE method = 'boom'")
    assert r.status.tolist() == ["failed"] and "boom on purpose" in r.error[0]
    # one line in the warehouse; the traceback is the run's error.txt artifact
    assert "\n" not in r.error[0] and "error.txt" in r.error[0]
    tb = Warehouse().query("SELECT a.path FROM artifacts a JOIN runs r USING (run_id) "
                           "WHERE r.method = 'boom' AND a.kind = 'traceback'").path[0]
    assert "Traceback" in Path(tb).read_text() and "boom on purpose" in Path(tb).read_text()


def test_train_all_rejects_unknown_dataset(env):
    from flows.train_all import train_all

    with pytest.raises(ValueError, match="not ingested: \\['nope'\\]"):
        train_all(datasets=["nope"])


def test_ingest_embed_cluster_evaluate_flows(env):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

    from flows.cluster import cluster
    from flows.embed import embed
    from flows.evaluate import evaluate
    from flows.ingest import ingest

    from eventatlas import config

    man = ingest("ontoevent", str(config.samples_dir() / "ontoevent"), dataset="onto_flow")
    assert man["rows"]["mentions"] == env["manifests"]["ontoevent_maven_sample"]["rows"]["mentions"]
    wh = Warehouse()
    arts = wh.query("SELECT kind, \"rows\" FROM artifacts JOIN runs USING (run_id) WHERE runs.flow = 'ingest'")
    assert ("table/mentions", man["rows"]["mentions"]) in set(zip(arts.kind, arts.rows))

    paths = embed("onto_flow", ["trigger"], env["model"])
    again = embed("onto_flow", ["trigger"], env["model"])
    assert paths == again and Path(paths["trigger"]).exists()

    async def embed_states():
        async with get_client() as c:
            trs = await c.read_task_runs(task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="embed-trigger")))
            return [tr.state.name for tr in trs]

    import asyncio

    assert "Cached" in asyncio.run(embed_states())  # second call hit the task cache

    assign = cluster("onto_flow", "trigger", algorithm="agglomerative", model_id=env["model"])
    t = pq.read_table(assign).to_pydict()
    n_types = len({lab[0] for lab in pq.read_table(Path(man["path"]) / "mentions.parquet")["labels"].to_pylist()})
    assert len(set(t["cluster"])) == n_types
    rows = evaluate(assign, "onto_flow", method="manual", representation="trigger", clustering="agglomerative")
    assert {r["metric"] for r in rows} >= {"ari", "bcubed_f"}
    got = wh.query("SELECT task, value FROM metrics WHERE method = 'manual' AND metric = 'ari'")
    assert got.value.tolist() == [pytest.approx(next(r["value"] for r in rows if r["metric"] == "ari"))]
    assert got.task.tolist() == ["induction"]


def test_prefect_yaml_deployments():
    import importlib

    import yaml

    from eventatlas import config
    from eventatlas.data.registry import load_registry
    from eventatlas.experiments.deploy import prefect_file

    spec = yaml.safe_load((config.REPO_ROOT / "prefect.yaml").read_text())
    assert spec["pull"] == [{"prefect.deployments.steps.set_working_directory":
                             {"directory": "{{ $EVENTATLAS_REPO }}"}}]
    generated = prefect_file()  # experiment/<name> and ingest/<name>, registered by scripts/serve.sh
    assert generated["pull"] == spec["pull"]
    names = set()
    for d in spec["deployments"] + generated["deployments"]:
        path, fn = d["entrypoint"].split(":")
        assert (config.REPO_ROOT / path).exists(), path
        flow_obj = getattr(importlib.import_module(path[:-3].replace("/", ".")), fn)
        names.add(f"{flow_obj.name}/{d['name']}")
        assert d["work_pool"]["name"] == "eventatlas-process"
        assert d["schedules"] and all(s["cron"] and s["active"] is False for s in d["schedules"])
        if flow_obj.name == "ingest":
            assert d["parameters"]["name"] == d["name"]
    assert "train-all/default" in names
    assert "train-all/emr" in names
    assert "train-all/grounding" in names
    assert {f"ingest/{n}" for n, e in load_registry().items() if e.get("deployment")} <= names
    # the dataset deployments are generated, never hand-copied into prefect.yaml
    assert not [d for d in spec["deployments"] if d["entrypoint"] == "flows/ingest.py:ingest"]


def test_not_applicable_dataset_is_skipped_not_failed(env):
    from eventatlas import config
    from eventatlas.io import DatasetWriter
    from flows.train_all import train_all

    # one event type only: nothing unseen to cluster
    with DatasetWriter(config.datasets_dir() / "mono", "mono", tables=["mentions"]) as w:
        for i in range(3):
            s = f"They met on day {i}."
            w.write("mentions", {"mention_id": f"m{i}", "dataset": "mono", "doc_id": "d", "sentence": s,
                                 "trigger_start": 5, "trigger_end": 8, "trigger": "met", "labels": ["Meet"]})
        w.commit()
    out = train_all(datasets=["mono"], params=_untuned(env))
    assert out["skipped"] and not out["failed"]
    r = Warehouse().query("SELECT status, error FROM runs WHERE run_id = ?", [out["skipped"][0]])
    assert r.status.tolist() == ["skipped"] and "1 unseen types" in r.error[0]
    assert Warehouse().query("SELECT count(*) AS n FROM metrics WHERE dataset = 'mono'").n[0] == 0


def test_experiment_flow_runs_its_cells_on_a_runner_and_reuses_them(env):
    """`experiment` (flows/experiment.py): the quick form's cells through train-all's runners, published; a
    second run reuses every cell; --rerun on the process pool runs them again there."""
    from flows.experiment import experiment

    params = _untuned(env)
    out = experiment(name="untuned_similarity", quick=True, params=params)
    # train-all above may have run the same configurations already: those runs count as the cells' runs
    assert out["failed"] == [] and out["ran"] + out["reused"] == 2
    again = experiment(name="untuned_similarity", quick=True, params=params)
    assert again["ran"] == 0 and again["reused"] == 2
    assert [c["run_id"] for c in again["cells"]] == [c["run_id"] for c in out["cells"]]
    pooled = experiment(name="untuned_similarity", quick=True, params=params, runner="process:2", rerun=True)
    assert pooled["ran"] == 2 and pooled["failed"] == []
    assert not {c["run_id"] for c in pooled["cells"]} & {c["run_id"] for c in out["cells"]}
    _, rows = Warehouse().query_rows("SELECT count(*) FROM experiment_runs WHERE experiment = 'untuned_similarity' "
                                     "AND mode = 'quick' AND run_id IN (SELECT run_id FROM runs)")
    assert rows[0][0] == 2
    # the flow run's artifact: the experiment's table and goal verdict, as its page says them
    import asyncio

    from prefect.client.orchestration import get_client

    async def page():
        async with get_client() as c:
            return [a for a in await c.read_artifacts() if a.key == "experiment-untuned-similarity"]

    arts = asyncio.run(page())
    assert arts and arts[-1].type == "markdown" and "| |" in arts[-1].data
    # a quick form's page is a smoke test: no verdict drawn from sample numbers
    assert "A smoke test" in arts[-1].data and "**Status:" not in arts[-1].data


@pytest.mark.timeout(600)
def test_detect_flow_runs_its_shards_on_a_process_pool(env):
    """The `detect` flow on Prefect's process pool: each shard a task run in a worker process, the dataset
    written once from the parts, equal to the one-process result."""
    import asyncio

    from prefect.client.orchestration import get_client
    from support.mini_events import mini_tiny_bert, write_mini_events

    from eventatlas import config
    from eventatlas.pipelines.detect import detect as here
    from eventatlas.pipelines.local import engine
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record
    from flows.detect import detect

    ddir = write_mini_events(config.data_root())
    params = {"model_id": str(mini_tiny_bert(env["root"] / "mini")), "complete_sentences": True,
              "heldout_sentences": 0.3, "dev_sentences": 0.3, "thresholds": [0.5],
              "train": {"epochs": 1, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}
    rec = read_record(run_method("event_detection", ddir, seed=0, params=params, device="cpu", flow="test"))
    ref = f"run:{rec['run']['run_id']}"
    man = detect("mini_events", ref, "pooled", threshold=0.3, device="cpu", shards=2, runner="process:2")
    one = here("mini_events", ref, "unpooled", threshold=0.3, device="cpu", engine=engine())["manifest"]
    assert man["detection"]["shards"] == 2 and man["rows"]["mentions"] == one["rows"]["mentions"] > 0
    spans = [sorted((r["doc_id"], r["sent_idx"], r["trigger_start"], r["trigger_end"])
                    for r in pq.read_table(Path(m["dataset_dir"]) / "mentions.parquet").to_pylist()) for m in (man, one)]
    assert spans[0] == spans[1]

    async def _names() -> list[str]:
        async with get_client() as client:
            return [t.name for t in await client.read_task_runs()]

    names = asyncio.run(_names())
    assert {"shard_job-0", "shard_job-1"} <= set(names), names
    # the detected mentions have no labels: `cluster` chooses the count itself and says how
    from flows.cluster import cluster

    out = pq.read_table(cluster("pooled", model_id=env["model"]))
    how = out.schema.metadata[b"n_clusters"].decode()
    assert how.startswith(f"{len(set(out['cluster'].to_pylist()))} clusters: no labels"), how
    assert out.num_rows == man["rows"]["mentions"]
