"""What a learned pair records, exactly: the encoder request, the gold split and its counts, the metric rows,
each link row's calibration and evidence; what the atlas build keeps and its run record says (mutation-testing
survivors of the `atlas` group, docs/testing.md "Mutation testing"). The pair tests use hand-made vectors in
place of an encoder (``type_set`` is replaced), so they take a second; the build tests use the shipped samples,
``test_atlas``'s fake clustering run and a tiny random BERT."""
from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from eventatlas.atlas import link as L
from eventatlas.atlas.calibrate import rank_normalise
from eventatlas.atlas.inventory import Inventory
from eventatlas.atlas.link import LinkConfig, link_pair
from eventatlas.atlas.scorers import score
from eventatlas.atlas.scorers.base import TypeSet, pair_evidence
from test_atlas import _fake_run  # a finished run with one clustering (trigger/agglomerative) of a dataset

# MAVEN types and the FrameNet frames the shipped mapping gives them (datasets/mappings/maven_framenet.tsv):
# Achieve -> Accomplishment and Action -> Intentionally_act are renamed (their names cannot find the frame);
# Aiming -> Aiming, but that frame has no mentions in B: it is counted as unreachable, not as a query
A_TYPES = ["Achieve", "Action", "Attack", "Arrest", "Arriving", "Aiming"]
B_TYPES = ["Accomplishment", "Intentionally_act", "Attack", "Arrest", "Arriving", "Aiming"]
ENC = "enc"
ISO = "isotonic:dev(seed=0,fraction=0.3)"


def _inv(key: str, types: list[str], ontology: str, kind: str = "type") -> Inventory:
    return Inventory(key=key, kind=kind, dataset=key, dataset_dir=Path("/nonexistent") / key, ontology=ontology,
                     fingerprint="f", types=list(types), names=list(types), definitions=[None] * len(types),
                     parents=[None] * len(types), mentions={t: [f"{key}#{t}"] for t in types},
                     run_id="run-x" if kind == "cluster" else None,
                     majority=list(A_TYPES) if kind == "cluster" else [])


def _sets() -> tuple[TypeSet, TypeSet]:
    """Two mentions per type along a direction of its own (A's type i and B's type i share one), with noise;
    B's last type (Aiming) has no mentions."""
    rng = np.random.default_rng(0)
    base = rng.normal(size=(len(A_TYPES), 16))
    a_owner, b_owner = [i for i in range(6) for _ in range(2)], [j for j in range(5) for _ in range(2)]
    XA = base[a_owner] + 0.4 * rng.normal(size=(len(a_owner), 16))
    XB = base[b_owner] + 0.4 * rng.normal(size=(len(b_owner), 16))
    XA, XB = (X / np.linalg.norm(X, axis=1, keepdims=True) for X in (XA, XB))
    TA = TypeSet(types=A_TYPES, names=A_TYPES, X=XA, owner=a_owner,
                 mention_ids=[f"a{r}:{A_TYPES[o]}" for r, o in enumerate(a_owner)])
    TB = TypeSet(types=B_TYPES, names=B_TYPES, X=XB, owner=b_owner,
                 mention_ids=[f"b{r}:{B_TYPES[o]}" for r, o in enumerate(b_owner)])
    return TA, TB


@pytest.fixture
def pair(monkeypatch):
    """link_pair on MAVEN-like -> FrameNet-like inventories, the hand-made sets in place of the encoder;
    returns (run(cfg, kind) -> PairResult, the type_set calls, the sets)."""
    TA, TB = _sets()
    calls: list[tuple[str, dict]] = []

    def fake_type_set(inv, **kw):
        calls.append((inv.key, kw))
        return TA if inv.key == "maven" else TB

    monkeypatch.setattr(L, "type_set", fake_type_set)

    def run(cfg: LinkConfig, kind: str = "type"):
        A, B = _inv("maven", A_TYPES, "MAVEN", kind), _inv("fn", B_TYPES, "FrameNet")
        if kind == "cluster":  # a run's clusters: the gold comes from its dataset's ontology (MAVEN's mapping)
            from eventatlas.evaluation.naming import read_mapping

            mapping = read_mapping(Path(L.G.mapping_path("MAVEN")))
            monkeypatch.setattr(L, "gold_mapping", lambda a, b: mapping)
        return link_pair(A, B, cfg, encoder=ENC, work_dir="/w")

    return run, calls, (TA, TB)


def test_the_encoder_is_asked_for_the_configured_mentions_device_and_precision(pair):
    run, calls, _ = pair
    run(LinkConfig(representation="sentence", max_per_type=3, seed=4, device="cpu", precision="bf16"))
    kw = {"encoder": ENC, "representation": "sentence", "max_per_type": 3, "seed": 4, "work_dir": "/w",
          "device": "cpu", "precision": "bf16"}
    assert calls == [("maven", kw), ("fn", kw)]


def test_a_pair_records_its_gold_split_counts_and_timings(pair, monkeypatch):
    run, _, (TA, TB) = pair
    ticks = itertools.chain([100.0, 101.23456, 102.5], itertools.repeat(109.87654))  # t0, embedded, scored, end
    monkeypatch.setattr(L, "time", type("FakeTime", (), {"perf_counter": staticmethod(lambda: next(ticks))}))
    info = run(LinkConfig()).info
    combined = info.pop("combined")
    assert info == {"source": "maven", "target": "fn", "encoder": ENC, "source_mentions": 12, "target_mentions": 10,
                    "seconds_embed": 1.23, "seconds_score": 1.27, "queries": 5, "dev": 2, "test": 3, "renamed": 2,
                    "unreachable": 1, "split_seed": 0, "dev_fraction": 0.3, "seconds": 9.88}
    assert set(combined) == {"weight_name", "name", "evidence", "dev_mrr"}
    assert combined["name"] in ("name", "name_exact") and combined["evidence"] in ("centroid", "mnn", "vote")
    assert 0.0 <= combined["weight_name"] <= 1.0 and combined["dev_mrr"] == round(combined["dev_mrr"], 4) > 0


def test_a_pairs_metric_rows_are_the_atlas_tasks_with_the_combined_scorer_on_test_only(pair):
    run, _, _ = pair
    rows = run(LinkConfig()).metrics
    assert {(r["task"], r["method"], r["dataset"], r["setting"]) for r in rows} == {("atlas", "atlas", "maven",
                                                                                    "maven -> fn")}
    variants = {(r["variant"], r["split"], r["representation"]) for r in rows}
    assert variants == {*((f"{m}:{ENC}", s, "trigger") for m in ("centroid", "mnn", "vote") for s in ("test", "all")),
                        ("name", "test", None), ("name", "all", None), (f"combined:{ENC}", "test", "trigger")}
    n = {(r["variant"], r["split"]): r["value"] for r in rows if r["metric"] == "n_queries"}
    n_renamed = {(r["variant"], r["split"]): r["value"] for r in rows if r["metric"] == "n_queries_renamed"}
    assert n[("name", "all")] == 5 and n[("name", "test")] == 3
    assert n_renamed[("name", "all")] == 2  # Achieve and Action: the renamed queries only
    # names find the three exact ones, not the renamed two: the combined scorer sees both kinds on test
    h1 = {r["split"]: r["value"] for r in rows if r["variant"] == "name" and r["metric"] == "hits@1"}
    assert h1["all"] == pytest.approx(3 / 5)


def test_each_link_row_says_how_it_was_calibrated_and_what_supports_it(pair):
    run, _, (TA, TB) = pair
    res = run(LinkConfig(top=2))
    rows = res.links.to_pylist()
    how = {r["method"]: {x["calibration"] for x in rows if x["method"] == r["method"]} for r in rows}
    # each scorer fitted on the dev part of the gold; the combined score is already a weighted sum
    assert how == {"centroid": {ISO}, "mnn": {ISO}, "vote": {ISO}, "name": {ISO}, "combined": {"weighted"}}
    assert {r["relation"] for r in rows if r["method"] == "combined"} == {"learned:combined"}
    vote = score("vote", TA, TB, k=10)
    for r in rows:
        i, j = A_TYPES.index(r["source"].split("::")[1]), B_TYPES.index(r["target"].split("::")[1])
        if r["method"] == "vote":  # the vote's own witnesses: the retrieved pairs
            assert r["evidence_mention_ids"] == vote.evidence[(i, j)]
        elif r["method"] in ("centroid", "mnn"):
            assert r["evidence_mention_ids"] == pair_evidence(TA, TB, i, j)
    assert any(r["evidence_mention_ids"] != pair_evidence(TA, TB, A_TYPES.index(r["source"].split("::")[1]),
                                                          B_TYPES.index(r["target"].split("::")[1]))
               for r in rows if r["method"] == "vote")


def test_the_vote_retrieves_the_configured_number_of_neighbours(pair):
    run, _, (TA, TB) = pair
    rows = run(LinkConfig(k=1, methods=("vote",))).links.to_pylist()
    one, ten = score("vote", TA, TB, k=1).matrix, score("vote", TA, TB, k=10).matrix
    got = {(r["source"].split("::")[1], r["target"].split("::")[1]): r["raw_score"] for r in rows}
    assert got and all(v == one[A_TYPES.index(a), B_TYPES.index(b)] for (a, b), v in got.items())
    assert any(v != ten[A_TYPES.index(a), B_TYPES.index(b)] for (a, b), v in got.items())
    assert {r["provenance"] for r in rows} == {"atlas vote (trigger, k=1)"}


def test_a_clusterings_pair_is_scored_by_the_share_of_clusters_on_their_frame(pair):
    run, _, _ = pair
    res = run(LinkConfig(representation="sentence"), kind="cluster")
    rows = {(r["variant"], r["metric"]): r for r in res.metrics}
    assert set(rows) == {(f"clusters:{m}:{ENC}", k) for m in ("centroid", "mnn", "vote")
                         for k in ("cluster_frame_share", "n_clusters")}  # no name scorer for clusters
    assert {(r["task"], r["split"], r["representation"], r["method"]) for r in rows.values()} == {
        ("atlas", "all", "sentence", "atlas")}
    assert rows[(f"clusters:centroid:{ENC}", "n_clusters")]["value"] == 6.0
    links = res.links.to_pylist()
    assert {r["calibration"] for r in links} == {"rank"}  # no dev part: rank-normalised
    assert links and {r["run_id"] for r in links} == {"run-x"}  # the clustering run of the cluster nodes


# ----------------------------------------------------------------------------- the build, its record, its inputs
def _run_key(run_id: str) -> str:
    """The inventory key of ``_fake_run``'s clustering."""
    return f"run:{run_id}/trigger/agglomerative"


def test_a_build_without_the_runs_keeps_a_pair_linked_from_a_runs_clustering(eventatlas_env, tmp_path):
    """`atlas link` from a run's clustering, then a build that names no runs: the linked pair's run is found
    afresh (runs/<run id>, the part of the key before the first '/'), so the pair and its nodes stay."""
    from eventatlas.atlas.build import build
    from eventatlas.atlas.manifest import read_atlas_manifest
    from eventatlas.data.ingest import ingest_samples
    from support.tiny_models import tiny_bert

    ingest_samples(names=["maven_sentences", "framenet"])
    _fake_run("run-linked", "maven_subset_sample")
    key = _run_key("run-linked")
    model = str(tiny_bert(tmp_path, ["The rebels attacked the fort .", "Troops arrived ."]))
    cfg = LinkConfig(precision="fp32", methods=("centroid",), max_per_type=2)
    name = f"learned/{key}__framenet_sample__{model}"
    link = build(pairs=[(key, "framenet_sample")], encoders=[model], cfg=cfg, runs=["run-linked"], prune=False)
    assert name in link.built
    rep = build(encoders=[model], cfg=cfg, runs=[])
    assert name in rep.kept and name not in rep.removed
    parts = read_atlas_manifest(rep.root)["parts"]
    assert parts[name]["owner"] == "link" and f"nodes/{key}" in parts


def test_the_atlas_record_names_its_flow_encoders_and_pairs(eventatlas_env):
    from eventatlas import config
    from eventatlas.atlas.build import BuildReport, record_id, write_record
    from eventatlas.io import atomic_write_json
    from eventatlas.tracking.records import load_metrics, read_record

    root = config.data_root() / "atlas"
    info = {"source": "a", "target": "b", "encoder": "all-MiniLM-L6-v2", "queries": 1}
    row = {"task": "atlas", "dataset": "a", "split": "all", "setting": "a -> b", "method": "atlas",
           "representation": None, "clustering": None, "variant": "name", "metric": "mrr", "value": 0.5, "seed": 0}
    atomic_write_json(root / "manifest.json", {"format": 1, "parts": {
        "nodes/a": {"kind": "nodes", "path": "nodes/a.parquet"},
        "learned/a__b__all-MiniLM-L6-v2": {"kind": "learned", "path": "learned/x.parquet", "info": info,
                                           "metrics": [row]}}})
    rep = BuildReport(root=str(root), built=["learned/a__b__all-MiniLM-L6-v2"])
    rec = read_record(write_record(rep, encoders=[None], cfg=LinkConfig()))
    run = rec["run"]
    assert (run["run_id"], run["flow"], run["task"], run["method"], run["status"]) == (
        record_id(root), "atlas", "atlas", "atlas", "completed")
    assert run["params"]["encoders"] == ["all-MiniLM-L6-v2"] and run["params"]["pairs"] == [info]
    assert run["params"]["atlas"] == str(root) and run["params"]["link_config"] == LinkConfig().as_dict()
    assert [(r["variant"], r["metric"], r["value"]) for r in load_metrics(rec)] == [("name", "mrr", 0.5)]


def test_an_assignments_file_that_is_no_parquet_is_named_with_its_location(tmp_path):
    from eventatlas.atlas.inventory import read_assignments
    from eventatlas.errors import InputError

    p = tmp_path / "assignments.parquet"
    p.write_text("mention_id,cluster\nm1,0\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        read_assignments(p)
    assert e.value.location == "file" and str(e.value).startswith(f"{p}:file: not a readable Parquet table (")


def test_a_build_reads_the_named_runs_only_and_keeps_each_clusterings_nodes_apart(eventatlas_env):
    from eventatlas.atlas.build import build, read_part
    from eventatlas.atlas.manifest import read_atlas_manifest
    from eventatlas.data.ingest import ingest_samples

    ingest_samples(names=["maven_sentences"])  # no FrameNet inventory: no pair to embed
    _fake_run("run-a", "maven_subset_sample")  # the same clustering name in two runs
    _fake_run("run-b", "maven_subset_sample")
    a, b = _run_key("run-a"), _run_key("run-b")
    rep = build(runs=["run-a"])
    assert sorted(n for n in rep.built if n.startswith("nodes/")) == ["nodes/maven_subset_sample", f"nodes/{a}"]
    parts = read_atlas_manifest(rep.root)["parts"]
    assert {p["owner"] for p in parts.values()} == {"build"}
    assert read_atlas_manifest(rep.root)["link_config"] == LinkConfig().as_dict()
    rep = build()
    assert f"nodes/{b}" in rep.built and f"nodes/{a}" in rep.kept
    for key, run_id in ((a, "run-a"), (b, "run-b")):
        nodes = read_part(rep.root, f"nodes/{key}").to_pylist()
        assert nodes and {(n["inventory"], n["run_id"]) for n in nodes} == {(key, run_id)}


def test_a_learned_part_caches_under_work_records_its_hash_and_rebuilds_when_the_gold_changes(
        eventatlas_env, tmp_path, monkeypatch):
    import shutil

    from eventatlas.atlas import gold as G
    from eventatlas.atlas.build import build
    from eventatlas.atlas.manifest import read_atlas_manifest
    from eventatlas.data.ingest import ingest_samples
    from eventatlas.io import sha256_file
    from support.tiny_models import tiny_bert

    ingest_samples(names=["maven_sentences", "framenet"])
    model = str(tiny_bert(tmp_path, ["The rebels attacked the fort .", "Troops arrived ."]))
    cfg = LinkConfig(precision="fp32", methods=("centroid", "name"), max_per_type=2)
    name = f"learned/maven_subset_sample__framenet_sample__{model}"
    rep = build(encoders=[model], cfg=cfg, runs=[])
    root = Path(rep.root)
    assert name in rep.built
    assert any((root / "work").rglob("mentions.parquet")) and not (root / "WORK").exists()  # the embedding cache
    parts = read_atlas_manifest(root)["parts"]
    assert all(p["sha256"] == sha256_file(root / p["path"]) for p in parts.values())
    assert name in build(encoders=[model], cfg=cfg, runs=[]).kept
    # the hand mapping scores the pair: an edit to it rebuilds the pair's links (and the declared links it maps)
    edited = tmp_path / "mappings"
    shutil.copytree(G.mappings_dir(), edited)
    p = edited / "maven_framenet.tsv"
    p.write_text(p.read_text(encoding="utf-8").replace("Attack\tAttack\t", "Attack\tAttack|Invading\t"),
                 encoding="utf-8")
    monkeypatch.setattr(G, "mappings_dir", lambda: edited)
    assert {name, "declared/maven_subset_sample"} <= set(build(encoders=[model], cfg=cfg, runs=[]).built)


def test_a_pair_naming_an_unknown_inventory_is_refused_naming_it(eventatlas_env):
    from eventatlas.atlas.build import build
    from eventatlas.data.ingest import ingest_samples

    ingest_samples(names=["maven_sentences"])
    for pair, missing in ((("nope", "maven_subset_sample"), "nope"), (("maven_subset_sample", "gone"), "gone")):
        with pytest.raises(FileNotFoundError) as e:
            build(pairs=[pair], encoders=[], prune=False)
        assert str(e.value) == f"atlas link: no inventory {missing!r} (known: maven_subset_sample)"


def test_a_build_brings_a_pair_linked_with_another_encoder_up_to_date_on_its_own_options(
        eventatlas_env, tmp_path, monkeypatch):
    """A pair `atlas link` made with an encoder this build does not use: when its inputs change the build
    re-links it with the link's options (top, methods, encoder) and this build's device and precision."""
    from eventatlas.atlas import build as B
    from eventatlas.data.ingest import ingest_samples
    from support.tiny_models import tiny_bert

    ingest_samples(names=["maven_sentences", "framenet"])
    model = str(tiny_bert(tmp_path, ["The rebels attacked the fort .", "Troops arrived ."]))
    pair = ("maven_subset_sample", "framenet_sample")
    name = f"learned/{pair[0]}__{pair[1]}__{model}"
    link_cfg = LinkConfig(precision="fp32", methods=("centroid",), top=3, max_per_type=2)
    assert name in B.build(pairs=[pair], encoders=[model], cfg=link_cfg, prune=False).built
    seen: list[tuple] = []
    real = B.link_pair

    def spy(A, Bi, cfg, **kw):
        seen.append((A.key, Bi.key, kw["encoder"], cfg.methods, cfg.top, cfg.device, cfg.precision))
        return real(A, Bi, cfg, **kw)

    monkeypatch.setattr(B, "link_pair", spy)
    monkeypatch.setitem(B.VERSIONS, "learned", B.VERSIONS["learned"] + 1)  # its inputs changed
    rep = B.build(encoders=[], cfg=LinkConfig(device="cpu", precision="fp32"), runs=[])
    assert name in rep.built and name not in rep.kept
    assert seen == [(pair[0], pair[1], model, ("centroid",), 3, "cpu", "fp32")]
