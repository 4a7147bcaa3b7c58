"""The atlas keeps what each step owns and reads what the project writes: a build never drops the pairs
`atlas link` added (a re-link replaces its own), and the assignments of every method that clusters
(one clustering per file, or several side by side) join as inventories."""
from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.cli import app

runner = CliRunner()


def _cli(*args):
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return r


def _links(where: str) -> set[tuple]:
    from eventatlas.store.warehouse import Warehouse

    df = Warehouse().query("SELECT source, target, method, coalesce(encoder, ''), rank FROM atlas_links "
                           f"WHERE kind = 'learned' AND {where}")
    return set(df.itertuples(index=False, name=None))


def _declared() -> set[tuple]:
    from eventatlas.store.warehouse import Warehouse

    df = Warehouse().query("SELECT source, target, relation FROM atlas_links WHERE kind = 'declared'")
    return set(df.itertuples(index=False, name=None))


def test_build_keeps_the_pairs_link_added_and_a_relink_replaces_its_own(eventatlas_env, monkeypatch):
    from eventatlas import config
    from eventatlas.atlas.build import atlas_dir
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.atlas.manifest import read_atlas_manifest

    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    ingest_samples(names=["maven_sentences", "framenet", "framenet_grounding"])  # two FrameNet inventories
    _cli("atlas", "build")
    declared = _declared()
    assert {t.split("::")[0] for _, t, r in declared if r == "maps_to"} == {"framenet_sample",
                                                                            "framenet_grounding_sample"}
    # a pair the build does not make (FrameNet -> MAVEN) and the build's own pair with the link's own options
    _cli("atlas", "link", "--from", "framenet_sample", "--to", "maven_subset_sample", "--top", "3")
    _cli("atlas", "link", "--from", "maven_subset_sample", "--to", "framenet_sample", "--top", "4")
    assert _declared() == declared  # a link, which sees its pair's inventories only, leaves the build's parts
    from_fn = "source LIKE 'framenet_sample::%'"
    from_maven = "source LIKE 'maven_subset_sample::%' AND target LIKE 'framenet_sample::%'"
    fn_links, maven_links = _links(from_fn), _links(from_maven)
    assert fn_links and max(r[4] for r in fn_links) == 3 and max(r[4] for r in maven_links) == 4

    # the next build keeps both, as linked
    r = _cli("atlas", "build")
    assert _links(from_fn) == fn_links and _links(from_maven) == maven_links
    assert "0 removed" in r.output
    parts = read_atlas_manifest(atlas_dir())["parts"]
    assert {n for n, p in parts.items() if p.get("owner") == "link"} == {
        "learned/framenet_sample__maven_subset_sample__all-MiniLM-L6-v2",
        "learned/maven_subset_sample__framenet_sample__all-MiniLM-L6-v2"}
    # a build restricted to one dataset keeps them too, with the nodes of the inventories they link
    _cli("atlas", "build", "--dataset", "framenet_sample")
    assert _links(from_fn) == fn_links and _links(from_maven) == maven_links
    assert "nodes/maven_subset_sample" in read_atlas_manifest(atlas_dir())["parts"]

    # a re-link of the same pair replaces its own links
    _cli("atlas", "link", "--from", "framenet_sample", "--to", "maven_subset_sample", "--top", "1")
    again = _links(from_fn)
    assert again and {r[4] for r in again} == {1} and again < fn_links
    _cli("atlas", "build")
    assert _links(from_fn) == again
    # when its inputs change, a build brings a linked pair up to date with the link's own options
    from eventatlas.atlas import build as B

    before = read_atlas_manifest(atlas_dir())["parts"]
    monkeypatch.setitem(B.VERSIONS, "learned", B.VERSIONS["learned"] + 1)
    _cli("atlas", "build")
    after = read_atlas_manifest(atlas_dir())["parts"]
    assert all(after[n]["fingerprint"] != before[n]["fingerprint"] for n in before if n.startswith("learned/"))
    assert _links(from_fn) == again and _links(from_maven) == maven_links

    # an inventory that is gone takes the pairs that link it with it
    shutil.rmtree(config.datasets_dir() / "maven_subset_sample")
    r = _cli("atlas", "build")
    assert _links(from_fn) == set() and _links(from_maven) == set()
    assert not [n for n, p in read_atlas_manifest(atlas_dir())["parts"].items() if p.get("owner") == "link"]


# ----------------------------------------------------------------------------- assignments of the real writers
@pytest.fixture
def two_runs(eventatlas_env, monkeypatch):
    """An untuned run (one clustering per file) and a batch-attention run (its clusterings side by side)
    on a small typed corpus, with a tiny random BERT."""
    from support.mini_events import mini_tiny_bert, write_mini_events

    from eventatlas.data.ingest import ingest_samples
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    monkeypatch.setenv("EVENTATLAS_CACHE", str(eventatlas_env / "cache"))
    ddir = write_mini_events(eventatlas_env / "data")
    ingest_samples(names=["framenet"])
    model = mini_tiny_bert(eventatlas_env)
    untuned = read_record(run_method("untuned", ddir, seed=0, params={
        "model_id": str(model), "representations": ["trigger"], "clusterings": ["agglomerative"], "k_seen": 2,
        "encoder": {"batch_size": 8, "precision": "fp32"}}))
    batch = read_record(run_method("batch_attention", ddir, seed=0, device="cpu", params={
        "model_id": str(model), "k_seen": 2, "linking": False, "stop_window": 2, "umap_plot": False,
        "representations": ["trigger"], "augmentation": "token_perturb",
        "train": {"epochs": 2, "batch_size": 8, "precision": "fp32", "threads": 1}}))
    for rec in (untuned, batch):
        assert rec["run"]["status"] == "completed", rec["run"].get("error")
    return model, untuned, batch


def test_atlas_reads_the_assignments_every_method_writes(two_runs):
    from eventatlas.atlas.build import build, read_part
    from eventatlas.atlas.link import LinkConfig

    model, untuned, batch = two_runs
    ids = {r["run"]["method"]: r["run"]["run_id"] for r in (untuned, batch)}
    wide = next(a["path"] for a in batch["artifacts"] if a["kind"].startswith("assignments"))
    columns = [n for n in pq.read_schema(wide).names if n not in ("mention_id", "label")]
    assert "cluster" not in pq.read_schema(wide).names and len(columns) >= 2  # several clusterings side by side

    rep = build(encoders=[str(model)], cfg=LinkConfig(precision="fp32", top=2))
    nodes = {n.split("/", 1)[1] for n in rep.built if n.startswith("nodes/run:")}
    assert f"run:{ids['untuned']}/trigger/agglomerative" in nodes
    assert {f"run:{ids['batch_attention']}/trigger/{c}" for c in columns} <= nodes
    # every clustering is linked to FrameNet, its clusters named by the majority gold label of their mentions
    key = f"run:{ids['batch_attention']}/trigger/{columns[0]}"
    t = read_part(rep.root, f"nodes/{key}").to_pylist()
    table = pq.read_table(wide).to_pylist()
    assert sum(n["n_mentions"] for n in t) == len(table)
    assert any(n.startswith(f"learned/{key}__framenet_sample__") for n in rep.built)


def test_an_assignments_file_without_a_clustering_is_one_line_exit_2(eventatlas_env, monkeypatch):
    """A run whose assignments artifact holds no clustering column: `atlas build` names the file and the
    columns it found."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.tracking.records import finish_record, new_record, write_record

    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    ingest_samples(names=["framenet"])
    rdir = config.runs_dir() / "run-bad-assignments"
    p = rdir / "assignments.parquet"
    p.parent.mkdir(parents=True)
    pq.write_table(pa.table({"mention_id": ["m1"], "group": ["a"]}), p)
    rec = new_record(rdir.name, flow="test", task="induction", method="external", device="cpu",
                     data_fingerprints={"framenet_sample": "x"})
    rec["artifacts"] = [{"kind": "assignments", "path": str(p)}]
    write_record(rdir, finish_record(rec))
    r = runner.invoke(app, ["atlas", "build"])
    assert r.exit_code == 2, r.output
    (line,) = r.output.strip().splitlines()
    assert line.startswith(f"error: {p}:file: no clustering") and "['mention_id', 'group']" in line


def test_a_linked_pair_whose_encoder_is_gone_stays(eventatlas_env, tmp_path):
    """The encoder a pair was linked with is deleted: the next build keeps the pair's links as they are."""
    from eventatlas.atlas.build import build, read_part
    from eventatlas.atlas.link import LinkConfig
    from eventatlas.data.ingest import ingest_samples
    from support.tiny_models import tiny_bert

    ingest_samples(names=["maven_sentences", "framenet"])
    model = tiny_bert(tmp_path, ["The rebels attacked the fort .", "Troops arrived ."])
    cfg = LinkConfig(precision="fp32")
    pair = ("framenet_sample", "maven_subset_sample")
    name = f"learned/{pair[0]}__{pair[1]}__{model}"
    link = build(pairs=[pair], encoders=[str(model)], cfg=cfg, prune=False)
    assert [n for n in link.built if n.startswith("learned/")] == [name]
    rows = read_part(link.root, name).to_pylist()
    shutil.rmtree(model)
    rep = build(cfg=cfg, runs=[])
    assert name in rep.kept and name not in rep.removed and read_part(rep.root, name).to_pylist() == rows


def test_a_run_whose_assignments_file_is_gone_leaves_that_clustering_out(eventatlas_env):
    from eventatlas import config
    from eventatlas.atlas.build import build
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.tracking.records import finish_record, new_record, write_record

    ingest_samples(names=["maven_sentences"])
    ids = pq.read_table(config.datasets_dir() / "maven_subset_sample" / "mentions.parquet").column("mention_id")
    rdir = config.runs_dir() / "run-half-gone"
    kept = rdir / "assignments" / "trigger__agglomerative.parquet"
    kept.parent.mkdir(parents=True)
    pq.write_table(pa.table({"mention_id": ids, "cluster": [i % 2 for i in range(len(ids))]}), kept)
    rec = new_record(rdir.name, flow="test", task="induction", method="untuned", device="cpu",
                     data_fingerprints={"maven_subset_sample": "x"})
    rec["artifacts"] = [{"kind": "assignments/trigger/agglomerative", "path": str(kept)},
                        {"kind": "assignments/trigger/manifold", "path": str(rdir / "gone.parquet")}]
    write_record(rdir, finish_record(rec))
    rep = build()
    assert [n for n in rep.built if n.startswith("nodes/run:")] == ["nodes/run:run-half-gone/trigger/agglomerative"]


def test_part_file_names_differ_wherever_the_part_names_do():
    """Two learned parts whose names differ only past the readable cut (local encoder paths) or only in
    punctuation get different files: one no longer overwrites the other."""
    from eventatlas.atlas.build import _slug

    base = "run:cluster-x/trigger/agglomerative__framenet_sample__/home/user/models/" + "m" * 60
    a, b = _slug(base + "/seed0"), _slug(base + "/seed1")
    assert a != b and a.startswith("run_cluster-x_trigger_agglomerative") and len(a) <= 113
    assert _slug("run:x/y") != _slug("run_x_y") and _slug("run:x/y") == _slug("run:x/y")
