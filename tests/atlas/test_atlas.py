"""The atlas: each scorer and the gold metrics on hand-computed cases, declared/learned separation, the
export round trip, the incremental build flow on the shipped samples, the CLI."""
from __future__ import annotations

import json
import math
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.atlas import gold as G
from eventatlas.atlas.calibrate import IsotonicMap, rank_normalise
from eventatlas.atlas.links import LINKS, link_row
from eventatlas.atlas.scorers import score
from eventatlas.atlas.scorers.base import TypeSet, pair_evidence


def _ts(types, rows, owner, names=None):
    X = np.asarray(rows, dtype=np.float32)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    return TypeSet(types=types, names=names or types, X=X, owner=np.asarray(owner),
                   mention_ids=[f"{types[o]}#{k}" for k, o in enumerate(owner)])


# A: a0 = two mentions along x, a1 = one along y; B: b0 along x, b1 = (0.6, 0.8)
A = _ts(["a0", "a1"], [[1, 0], [1, 0], [0, 1]], [0, 0, 1])
B = _ts(["b0", "b1"], [[1, 0], [0.6, 0.8]], [0, 1])


def test_centroid_is_the_cosine_of_mean_vectors():
    S = score("centroid", A, B).matrix
    np.testing.assert_allclose(S, [[1.0, 0.6], [0.0, 0.8]], atol=1e-6)
    # a type without mentions has no evidence: nan, not 0
    C = _ts(["c0", "c1"], [[1, 0]], [0])
    assert np.isnan(score("centroid", C, B).matrix[1]).all()


def test_mnn_scores_one_for_mutual_nearest_pairs():
    # rows: a0 -> b0 (1) b1 (2); a1 -> b1 (1) b0 (2); columns: b0 -> a0 (1); b1 -> a1 (0.8 > 0.6)
    np.testing.assert_allclose(score("mnn", A, B).matrix, [[1.0, 0.5], [0.5, 1.0]])
    # a hub target every source ranks first is mutual with one source only
    H = _ts(["x", "y"], [[1, 0], [0.9, 0.1]], [0, 1])
    T = _ts(["hub", "far"], [[1, 0.05], [0, 1]], [0, 1])
    S = score("mnn", H, T).matrix
    assert S[0, 0] == 1.0 and S[1, 0] == 0.5  # y's nearest is the hub, but the hub's nearest is x


def test_vote_is_the_share_of_retrieved_mentions_per_target_type():
    a = _ts(["a0", "a1"], [[1, 0], [0, 1]], [0, 1])
    b = _ts(["b0", "b1"], [[1, 0], [0.9, 0.1], [0, 1]], [0, 0, 1])
    res = score("vote", a, b, k=2)
    # a0's mention retrieves both b0 mentions; a1's retrieves b1 and then the (0.9, 0.1) b0 mention
    np.testing.assert_allclose(res.matrix, [[1.0, 0.0], [0.5, 0.5]])
    assert res.evidence[(0, 0)][:2] == ["a0#0", "b0#0"]  # the most similar retrieved pair first
    assert score("vote", a, b, k=50).matrix.sum(axis=1).tolist() == [1.0, 1.0]  # k capped at |B|
    with pytest.raises(ValueError):
        score("vote", a, b, k=0)


def test_name_match_reads_names_only():
    src = TypeSet(["Conflict.Attack", "Come_together", "Riot"], ["Attack", "Come together", "Riot"],
                  np.zeros((0, 2)), np.zeros(0), [])
    tgt = TypeSet(["Attack", "Come_together", "Protest"], ["Attack", "Come together", "Protest"],
                  np.zeros((0, 2)), np.zeros(0), [])
    S = score("name", src, tgt).matrix
    assert S[0, 0] == 1.0 and S[1, 1] == 1.0
    assert 0 < S[2].max() < 0.9  # no exact match: a string similarity, always below a match
    with pytest.raises(ValueError, match="unknown atlas scorer"):
        score("nope", src, tgt)


def test_pair_evidence_takes_the_nearest_mentions_of_both_sides():
    a = _ts(["a0"], [[1, 0], [0.5, 0.5], [0, 1]], [0, 0, 0])
    b = _ts(["b0"], [[1, 0.1]], [0])
    assert pair_evidence(a, b, 0, 0, n=1) == ["a0#0", "b0#0"]


def test_rank_normalise_and_isotonic_map():
    R = rank_normalise(np.array([[0.2, 0.9, 0.5], [1.0, np.nan, 1.0]]))
    np.testing.assert_allclose(R[0], [0.0, 1.0, 0.5])
    assert R[1, 0] == R[1, 2] == 1.0 and np.isnan(R[1, 1])  # ties share the best rank
    # raw 0.1, 0.2 never gold; 0.8 gold once of twice; 0.9 always gold -> P = 0, 0, 0.5, 1
    iso = IsotonicMap([0.1, 0.2, 0.8, 0.8, 0.9], [False, False, True, False, True])
    np.testing.assert_allclose(iso(np.array([0.1, 0.2, 0.8, 0.9, 2.0])), [0, 0, 0.5, 1, 1])
    with pytest.raises(ValueError):
        IsotonicMap([0.1, 0.2], [False, False])


def test_gold_ranks_hits_mrr_by_hand():
    S = np.array([[0.9, 0.5, 0.1], [0.2, 0.2, 0.7], [np.nan, 0.3, 0.3]])
    gold = {0: {0}, 1: {1}, 2: {2}}
    assert G.rank_of_gold(S[0], {0}) == 1
    assert G.rank_of_gold(S[1], {1}) == 3  # tied with a non-gold target: the pessimistic rank
    assert G.rank_of_gold(S[2], {2}) == 2
    m = G.link_metrics(S, gold, [0, 1, 2])
    assert m["hits@1"] == pytest.approx(1 / 3) and m["hits@5"] == 1.0
    assert m["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 2) / 3) and m["n_queries"] == 3


def test_gold_matching_split_and_renamed_types():
    mapping = {"Attack": ["Attack"], "Come_together": ["Come_together"], "Achieve": ["Accomplishment"],
               "Cause-Effect.Causation": ["Causation"]}
    types = ["Conflict.Attack", "Come_together", "Achieve", "Cause-Effect.Causation", "Other"]
    gold = G.gold_for(types, mapping)
    assert gold == {0: {"Attack"}, 1: {"Come_together"}, 2: {"Accomplishment"}, 3: {"Causation"}}
    assert G.renamed(types, types, gold) == {2}
    cols = G.gold_columns(gold, ["Attack", "Accomplishment", "Causation"], np.array([True, True, False]))
    assert cols == {0: {0}, 2: {1}}  # Come_together absent, Causation has no mentions: not queries
    dev, test = G.split_queries(range(10), seed=3, dev_fraction=0.3)
    assert len(dev) == 3 and sorted(dev + test) == list(range(10))
    assert (dev, test) == G.split_queries(range(10), seed=3, dev_fraction=0.3)


def test_combined_weight_is_chosen_on_dev():
    name = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # names wrong for query 1
    ev = np.array([[0.6, 0.4], [0.0, 1.0], [0.4, 0.6]])     # evidence right everywhere, weakly
    cols = {0: {0}, 1: {1}, 2: {1}}
    w, nm, which, dev_mrr = G.choose_weight({"name": name}, {"centroid": rank_normalise(ev)}, cols, [0, 1, 2])
    assert which == "centroid" and dev_mrr == 1.0 and w < 0.5  # names cannot outvote the evidence on query 1
    w_names, _, _, _ = G.choose_weight({"name": name}, {"centroid": rank_normalise(ev)}, cols, [0, 2])
    assert w_names == 0.0  # ties go to the smaller weight
    # a near name (0.8) pulls query 0 off its evidence; its exact-only variant does not
    near = np.array([[0.0, 0.8], [0.0, 1.0], [0.0, 1.0]])
    evid = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])  # evidence wrong on query 2 only
    cols2 = {0: {0}, 1: {1}, 2: {1}}
    np.testing.assert_array_equal(G.exact_only(near), [[0, 0], [0, 1], [0, 1]])
    w, nm, _, dev_mrr = G.choose_weight({"name": near, "name_exact": G.exact_only(near)}, {"vote": evid}, cols2, [0, 1, 2])
    assert (nm, dev_mrr) == ("name_exact", 1.0) and 0.5 < w < 1.0


def test_cluster_frame_share_by_hand():
    S = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    share, n = G.cluster_frame_share(S, ["Attack", "Attack", None], ["Attack", "Arriving"], {"Attack": ["Attack"]})
    assert (share, n) == (0.5, 2)  # cluster 1's top frame is wrong; cluster 2 has no majority type


def test_declared_and_learned_links_never_mix():
    with pytest.raises(ValueError, match="no score"):
        link_row("a::x", "b::y", "Inheritance", kind="declared", method="declared", score=0.5)
    with pytest.raises(ValueError, match="learned:"):
        link_row("a::x", "b::y", "Inheritance", kind="learned", method="centroid", score=0.5)
    with pytest.raises(ValueError):
        link_row("a::x", "b::y", "learned:centroid_similarity", kind="declared", method="declared")


def test_warehouse_refuses_a_scored_declared_link(tmp_path):
    import duckdb

    from eventatlas.store.warehouse import Warehouse

    wh = Warehouse(tmp_path / "w.duckdb")
    wh.migrate()
    with wh.connect() as con:
        with pytest.raises(duckdb.ConstraintException):
            con.execute("INSERT INTO atlas_links (part, source, target, relation, kind, score) "
                        "VALUES ('p', 'a', 'b', 'Inheritance', 'declared', 0.4)")


def test_skos_export_round_trips_through_rdflib(tmp_path):
    rdflib = pytest.importorskip("rdflib")
    from rdflib.namespace import RDF, SKOS

    from eventatlas.atlas.export import EA, export

    nodes = [{"node_id": "maven::Attack", "inventory": "maven", "kind": "type", "type_id": "Attack",
              "name": 'Attack "armed"', "definition": "line one\nline two \\ end", "ontology": "MAVEN",
              "n_mentions": 3, "evidence_mention_ids": ["m1"]},
             {"node_id": "fn::Attack", "inventory": "fn", "kind": "type", "type_id": "Attack", "name": "Attack",
              "definition": None, "ontology": "FrameNet", "n_mentions": 2, "evidence_mention_ids": []},
             {"node_id": "run:r1/trigger/agglomerative::c0", "inventory": "run:r1/trigger/agglomerative",
              "kind": "cluster", "type_id": "c0", "name": "cluster 0", "n_mentions": 1}]
    links = [link_row("maven::Attack", "fn::Attack", "maps_to", kind="declared", method="hand mapping",
                      provenance="datasets/mappings/maven_framenet.tsv"),
             link_row("maven::Attack", "fn::Attack", "learned:mention_vote", kind="learned", method="vote",
                      score=0.75, raw_score=0.5, rank=1, calibration="rank", encoder="all-MiniLM-L6-v2",
                      evidence=["m1", "m2"]),
             link_row("run:r1/trigger/agglomerative::c0", "fn::Attack", "learned:centroid_similarity",
                      kind="learned", method="centroid", score=1.0, raw_score=0.9, rank=1, run_id="r1")]
    (path,) = export(nodes, links, "skos", tmp_path)
    g = rdflib.Graph().parse(path, format="turtle")
    assert len(set(g.subjects(RDF.type, SKOS.Concept))) == 3
    assert len(set(g.subjects(RDF.type, SKOS.ConceptScheme))) == 3
    ea = rdflib.Namespace(EA + "vocab#")
    got = {}
    for link in g.subjects(RDF.type, ea.Link):
        got[str(g.value(link, ea.relation))] = {p: g.value(link, ea[p]) for p in ("score", "raw_score", "rank", "kind")}
        got[str(g.value(link, ea.relation))]["evidence"] = sorted(str(o) for o in g.objects(link, ea.evidence))
    assert got["learned:mention_vote"]["score"].toPython() == 0.75
    assert got["learned:mention_vote"]["rank"].toPython() == 1
    assert got["learned:mention_vote"]["evidence"] == ["m1", "m2"]
    assert got["maps_to"]["score"] is None and str(got["maps_to"]["kind"]) == "declared"
    labels = {str(o) for o in g.objects(None, SKOS.prefLabel)}
    assert 'Attack "armed"' in labels
    assert "line one\nline two \\ end" in {str(o) for o in g.objects(None, SKOS.definition)}
    assert len(list(g.triples((None, SKOS.closeMatch, None)))) == 1
    # csv and jsonl carry every row
    csv_nodes, csv_links = export(nodes, links, "csv", tmp_path)
    assert len(csv_links.read_text().splitlines()) == 1 + len(links)
    _, jl = export(nodes, links, "jsonl", tmp_path)
    rows = [json.loads(line) for line in jl.read_text().splitlines()]
    assert [r["score"] for r in rows] == [None, 0.75, 1.0]


# ----------------------------------------------------------------------------- the build on the samples
def _ingest(names):
    from eventatlas.data.ingest import ingest_samples

    ingest_samples(names=names)


def _fake_run(run_id: str, dataset: str):
    """A finished run with one clustering of the dataset's labelled mentions (two clusters)."""
    from eventatlas import config
    from eventatlas.tracking.records import finish_record, new_record, write_record

    m = pq.read_table(config.datasets_dir() / dataset / "mentions.parquet", columns=["mention_id", "labels"]).to_pylist()
    labels = [r["labels"][0] for r in m]
    clusters = [0 if lab == "Attack" else 1 for lab in labels]
    rdir = config.runs_dir() / run_id
    p = rdir / "assignments" / "trigger__agglomerative.parquet"
    p.parent.mkdir(parents=True)
    pq.write_table(pa.table({"mention_id": [r["mention_id"] for r in m], "label": labels, "cluster": clusters}), p)
    rec = new_record(run_id, flow="test", task="induction", method="untuned", device="cpu",
                     data_fingerprints={dataset: "x"})
    rec["artifacts"] = [{"kind": "assignments/trigger/agglomerative", "path": str(p)}]
    write_record(rdir, finish_record(rec))


def test_build_flow_on_the_samples_is_incremental(eventatlas_env):
    from eventatlas.store.warehouse import Warehouse
    from flows.atlas import atlas

    _ingest(["maven_sentences", "framenet", "ontoevent"])
    fast = {"precision": "fp32"}  # no precision probe in a fresh cache: the samples are tiny
    t0 = time.perf_counter()
    out = atlas(config=fast)
    t_full = time.perf_counter() - t0
    b = out["build"]
    assert not b["kept"] and "learned/maven_subset_sample__framenet_sample__all-MiniLM-L6-v2" in b["built"]
    wh = Warehouse()
    n_nodes = wh.query("SELECT count(*) AS n FROM atlas_nodes").n[0]
    # every type of every inventory is a node
    n_types = sum(pq.read_metadata(p).num_rows for p in (eventatlas_env / "data" / "datasets").glob("*/event_types.parquet"))
    assert n_nodes == n_types
    links = wh.query("SELECT kind, relation, score, method FROM atlas_links")
    declared, learned = links[links.kind == "declared"], links[links.kind == "learned"]
    assert declared.score.isna().all() and not declared.relation.str.startswith("learned:").any()
    assert {"Inheritance", "maps_to", "SUBSUPER"} <= set(declared.relation)
    assert learned.relation.str.startswith("learned:").all() and learned.score.notna().all()
    assert {"centroid", "mnn", "vote", "name"} <= set(learned.method)
    # the gold scores landed under task atlas
    m = wh.query("SELECT * FROM metrics WHERE task = 'atlas' AND dataset = 'maven_subset_sample' AND split = 'all'")
    name_h1 = m[(m.variant == "name") & (m.metric == "hits@1")].value.tolist()
    assert name_h1 == [1.0]  # the one reachable query (Attack) matches by name

    # incremental: nothing changed -> nothing rebuilt, nothing landed
    again = atlas(config=fast)
    assert again["build"]["built"] == [] and again["landed"]["landed"] == [] and again["build"]["record"] is None
    # a new dataset and a new run add their parts only
    _ingest(["ace2005"])
    _fake_run("run-fake-1", "maven_subset_sample")
    t0 = time.perf_counter()
    inc = atlas(config=fast)
    t_inc = time.perf_counter() - t0
    built = set(inc["build"]["built"])
    assert built == {"nodes/ace2005_sample", "declared/ace2005_sample",
                     "learned/ace2005_sample__framenet_sample__all-MiniLM-L6-v2",
                     "nodes/run:run-fake-1/trigger/agglomerative",
                     "learned/run:run-fake-1/trigger/agglomerative__framenet_sample__all-MiniLM-L6-v2"}
    assert set(inc["landed"]["landed"]) == built and inc["landed"]["unchanged"] == len(b["built"])
    c = wh.query("SELECT value FROM metrics WHERE task = 'atlas' AND metric = 'cluster_frame_share' "
                 "AND variant = 'clusters:centroid:all-MiniLM-L6-v2'")
    assert len(c) == 1 and 0.0 <= c.value[0] <= 1.0
    nodes = wh.query("SELECT run_id, kind FROM atlas_nodes WHERE inventory LIKE 'run:%'")
    assert set(nodes.run_id) == {"run-fake-1"} and set(nodes.kind) == {"cluster"}
    print(f"atlas flow on the samples: full {t_full:.1f}s, incremental (1 dataset + 1 run) {t_inc:.1f}s")
    # a dataset that goes away takes its parts with it
    import shutil

    from eventatlas import config

    shutil.rmtree(config.datasets_dir() / "ace2005_sample")
    gone = atlas(config=fast)
    assert "nodes/ace2005_sample" in gone["build"]["removed"] and "nodes/ace2005_sample" in gone["landed"]["dropped"]
    assert wh.query("SELECT count(*) AS n FROM atlas_nodes WHERE inventory = 'ace2005_sample'").n[0] == 0


def test_cli_link_show_export(eventatlas_env, monkeypatch):
    rdflib = pytest.importorskip("rdflib")
    from typer.testing import CliRunner

    from eventatlas.cli import app

    monkeypatch.setenv("EVENTATLAS_PREFECT", "never")
    _ingest(["maven_sentences", "framenet"])
    r = CliRunner().invoke(app, ["atlas", "link", "--from", "maven_subset_sample", "--to", "framenet_sample"])
    assert r.exit_code == 0, r.output
    assert "best target per source type" in r.output and "hits@1" in r.output
    r = CliRunner().invoke(app, ["atlas", "show", "maven_subset_sample::Attack"])
    assert r.exit_code == 0, r.output
    assert "framenet_sample::Attack" in r.output and "maps_to" in r.output and "[attacked]" in r.output
    r = CliRunner().invoke(app, ["atlas", "show", "No_such_type"])
    assert r.exit_code == 2 and "no atlas node" in r.output
    r = CliRunner().invoke(app, ["atlas", "export", "--format", "skos", "-o", str(eventatlas_env / "out")])
    assert r.exit_code == 0, r.output
    g = rdflib.Graph().parse(eventatlas_env / "out" / "atlas.ttl", format="turtle")
    assert len(g) > 50
    r = CliRunner().invoke(app, ["atlas", "export", "--format", "html", "-o", str(eventatlas_env / "out")])
    assert r.exit_code == 0, r.output
    assert "[attacked]" in (eventatlas_env / "out" / "atlas.html").read_text()  # evidence sentences inside
    r = CliRunner().invoke(app, ["atlas", "export", "--format", "xml"])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["atlas", "link", "--from", "nope", "--to", "framenet_sample"])
    assert r.exit_code == 2 and "not ingested" in r.output


def test_each_given_encoder_gets_its_own_links_and_scores(eventatlas_env, tmp_path):
    """A trained encoder (run:<id>) is scored beside the frozen one, in its own parts and metric rows."""
    import torch

    from eventatlas import config
    from eventatlas.atlas.build import build, write_record
    from eventatlas.atlas.link import LinkConfig
    from eventatlas.modeling.mention_encoder import MentionEncoder
    from eventatlas.modeling.saved import ModelWriter, finalize
    from eventatlas.tracking.records import load_metrics, read_record
    from support.tiny_models import tiny_bert

    _ingest(["maven_sentences", "framenet"])
    enc = MentionEncoder(tiny_bert(tmp_path, ["The rebels attacked the fort .", "Troops arrived ."]), max_length=32)
    with torch.no_grad():
        enc.model.embeddings.word_embeddings.weight.mul_(1.5)
    run_dir = config.runs_dir() / "frame_dml-fnsample-s0-abcd1234-20261125T000000"
    w = ModelWriter(run_dir, method="frame_dml")
    w.encoder(enc, base_model="tiny")
    w.close(representation="trigger", epoch=1)
    finalize(run_dir, {"run_id": run_dir.name, "method": "frame_dml", "params": {"config": {}},
                       "data_fingerprints": {"fnsample": "fp"}, "seed": 0}, [])
    ref = f"run:{run_dir.name}"
    cfg = LinkConfig(precision="fp32")
    rep = build(encoders=[None, ref], cfg=cfg, runs=[])
    learned = [p for p in rep.built if p.startswith("learned/maven_subset_sample__")]
    assert sorted(learned) == sorted([f"learned/maven_subset_sample__framenet_sample__all-MiniLM-L6-v2",
                                      f"learned/maven_subset_sample__framenet_sample__{ref}"])
    rows = load_metrics(read_record(write_record(rep, encoders=[None, ref], cfg=cfg)))
    variants = {r["variant"] for r in rows if r["dataset"] == "maven_subset_sample" and r["metric"] == "mrr"}
    assert {"name", "centroid:all-MiniLM-L6-v2", f"centroid:{ref}", f"vote:{ref}"} <= variants
    # the name scorer does not depend on the encoder: one set of rows, not one per encoder
    assert sum(r["variant"] == "name" and r["metric"] == "mrr" and r["split"] == "all" and
               r["dataset"] == "maven_subset_sample" for r in rows) == 1


def test_a_wikidata_inventory_declares_its_own_relations(eventatlas_env):
    """A wiki build's dataset (Wikidata event classes, subclass_of / part_of) joins like any inventory:
    its relations are declared links under their own names, it links to FrameNet from its mentions."""
    from eventatlas import config
    from eventatlas.atlas.build import build, read_part
    from eventatlas.atlas.link import LinkConfig
    from eventatlas.io import DatasetWriter

    _ingest(["framenet"])
    with DatasetWriter(config.datasets_dir() / "wikimini", "wikimini",
                       tables=["mentions", "event_types", "type_relations"]) as w:
        for q, name, parent in (("Q198", "war", None), ("Q362", "World War II", "Q198"),
                                ("Q178561", "battle", None)):
            w.write("event_types", {"dataset": "wikimini", "type_id": q, "name": name, "parent_id": parent,
                                    "ontology": "Wikidata"})
        w.write("type_relations", {"dataset": "wikimini", "source_id": "Q362", "target_id": "Q198",
                                   "relation": "subclass_of", "source_ontology": "Wikidata", "target_ontology": "Wikidata"})
        w.write("type_relations", {"dataset": "wikimini", "source_id": "Q178561", "target_id": "Q198",
                                   "relation": "part_of", "source_ontology": "Wikidata", "target_ontology": "Wikidata"})
        for i, (s, a, b, lab) in enumerate([("Troops attacked the city in 1941 .", 7, 15, "Q362"),
                                            ("The battle raged for days .", 4, 10, "Q178561")]):
            w.write("mentions", {"mention_id": f"w{i}", "dataset": "wikimini", "doc_id": "d", "sentence": s,
                                 "trigger_start": a, "trigger_end": b, "trigger": s[a:b], "labels": [lab]})
        w.commit()
    rep = build(cfg=LinkConfig(precision="fp32"), runs=[])
    assert "learned/wikimini__framenet_sample__all-MiniLM-L6-v2" in rep.built
    declared = read_part(rep.root, "declared/wikimini").to_pylist()
    assert {(d["source"], d["relation"], d["target"]) for d in declared} == {
        ("wikimini::Q362", "subclass_of", "wikimini::Q198"), ("wikimini::Q178561", "part_of", "wikimini::Q198")}
    assert all(d["score"] is None and d["kind"] == "declared" for d in declared)
    # Q198 has no mentions: a node without learned links
    learned = read_part(rep.root, "learned/wikimini__framenet_sample__all-MiniLM-L6-v2").to_pylist()
    assert {r["source"] for r in learned if r["method"] != "name"} == {"wikimini::Q362", "wikimini::Q178561"}


def test_html_page_carries_the_graph_data_safely(tmp_path):
    import re

    from eventatlas.atlas.export import export

    nodes = [{"node_id": "a::x", "inventory": "a", "kind": "type", "type_id": "x", "name": "x </script><b>",
              "n_mentions": 2},
             {"node_id": "fn::y", "inventory": "fn", "kind": "type", "type_id": "y", "name": "y", "n_mentions": 1}]
    links = [link_row("a::x", "fn::y", "learned:centroid_similarity", kind="learned", method="centroid",
                      score=float("nan"), raw_score=0.5, rank=1, evidence=["m1"])]
    (path,) = export(nodes, links, "html", tmp_path, sentences={"m1": "They [met] ."})
    page = path.read_text()
    assert page.count("</script>") == 2  # the data cannot end its own script element
    data = json.loads(re.search(r'<script id="data" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert [n["name"] for n in data["nodes"]] == ["x </script><b>", "y"]
    assert data["links"][0]["score"] is None and data["sentences"] == {"m1": "They [met] ."}
    assert "http" not in page.replace("http://www.w3.org/2000/svg", "")  # offline: nothing fetched


def test_ace_mapping_is_keyed_by_the_type_ids_the_ace_labels_use():
    """The ACE hand mapping names `Justice.Appeal`, as the ace2005 / textee_ace05 labels do: an exact
    lookup (the cluster-linking evaluation's) finds the gold frame of every ACE subtype."""
    from eventatlas.evaluation.naming import framenet_linking, read_mapping, valid_frames
    from eventatlas.readers.ace2005 import TYPES

    ace = read_mapping(G.mapping_path("ACE"))
    assert set(ace) == {t for t in TYPES if "." in t}
    assert ace["Justice.Appeal"] == ["Appeal"] and ace["Conflict.Attack"] == ["Attack"]
    # two clusters of ACE-labelled mentions; the Appeal cluster's centroid is nearest the Appeal frame
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    m, rows = framenet_linking(x, ["Justice.Appeal", "Justice.Appeal", "Conflict.Attack"], [0, 0, 1],
                               ["Appeal", "Attack"], np.array([[1.0, 0.0], [0.0, 1.0]]), valid_frames(ace, {}))
    assert m["linking_unmapped_clusters"] == 0 and [r["rank"] for r in rows] == [1, 1]


def test_code_only_changes_rebuild_nothing_and_a_version_bump_rebuilds_its_kind(eventatlas_env, monkeypatch):
    """Fingerprints hold the inputs and the part kind's version, not the code version."""
    from eventatlas.atlas import build as B
    from eventatlas.atlas.link import LinkConfig

    _ingest(["maven_sentences", "framenet"])
    cfg = LinkConfig(precision="fp32")
    first = B.build(cfg=cfg, runs=[])
    assert first.built and not first.kept
    monkeypatch.setattr("eventatlas.tracking.runinfo.code_version", lambda: "another-commit")
    monkeypatch.setattr("eventatlas.tracking.records.code_version", lambda: "another-commit")
    monkeypatch.setattr("eventatlas.__version__", "99.0", raising=False)
    same = B.build(cfg=cfg, runs=[])
    assert same.built == [] and sorted(same.kept) == sorted(first.built)
    monkeypatch.setitem(B.VERSIONS, "learned", B.VERSIONS["learned"] + 1)
    bumped = B.build(cfg=cfg, runs=[])
    assert bumped.built == [p for p in first.built if p.startswith("learned/")] and bumped.built
    assert all(not p.startswith("learned/") for p in bumped.kept)


def test_repeated_full_builds_keep_one_set_of_metric_rows(eventatlas_env):
    """A rebuild replaces the atlas's scores in the warehouse: one row per (setting, scorer, metric)."""
    from eventatlas.atlas.build import build, record_id, write_record
    from eventatlas.atlas.link import LinkConfig
    from eventatlas.store.publishing import publish_atlas, publish_records
    from eventatlas.store.warehouse import Warehouse

    _ingest(["maven_sentences", "framenet", "ontoevent"])
    cfg = LinkConfig(precision="fp32")
    counts = []
    for _ in range(2):
        rep = build(cfg=cfg, runs=[], full=True)
        rec = write_record(rep, encoders=[None], cfg=cfg)
        assert rec.parent.name == record_id(rep.root)
        publish_atlas(rep.root)
        publish_records([rec])
        m = Warehouse().query("SELECT run_id, dataset, split, variant, metric, count(*) AS n FROM metrics "
                              "WHERE task = 'atlas' GROUP BY ALL")
        assert set(m.run_id) == {record_id(rep.root)} and (m.n == 1).all()
        counts.append(len(m))
    assert counts[0] == counts[1] > 0
    # an incremental build that scores one pair again still publishes every pair's rows
    rep = build(cfg=cfg, runs=[], pairs=[("maven_subset_sample", "framenet_sample")], prune=False, full=True)
    publish_records([write_record(rep, encoders=[None], cfg=cfg)])
    assert Warehouse().query("SELECT count(*) AS n FROM metrics WHERE task = 'atlas'").n[0] == counts[0]
    assert {"maven_subset_sample", "ontoevent_maven_sample"} <= set(
        Warehouse().query("SELECT DISTINCT dataset FROM metrics WHERE task = 'atlas'").dataset)
