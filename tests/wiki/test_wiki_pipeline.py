"""The wiki build on the fixture world: pruning, mentions, hierarchy, splits, Wikinews, versioned diffs."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from eventatlas.io import Rejects
from eventatlas.wiki.build import build
from eventatlas.wiki.dumps import DumpBackend
from eventatlas.wiki.hierarchy import build_hierarchy, label_set
from eventatlas.wiki.mentions import numeral_consistent
from eventatlas.wiki.splits import assign_splits, components
from eventatlas.wiki.wikinews import parse_date_category
from support.wiki_world.world import EXPECTED, LANGS, WORLD_PARAMS, build_world, write_dumps

TABLES = ["documents", "mentions", "event_types", "type_relations", "rejects", "view_multilingual", "view_crosslingual",
          "table1", "event_descriptions"]


@pytest.fixture(scope="module")
def world_builds(tmp_path_factory):
    d = tmp_path_factory.mktemp("wiki")
    w = build_world()
    paths = write_dumps(w, d / "dumps", wikidata_compression="bz2")
    mem = build(w.backend(), d / "mem", languages=LANGS, params=WORLD_PARAMS, build_id="b1")
    dump = build(DumpBackend(paths), d / "dump", languages=LANGS, params={**WORLD_PARAMS, "workers": 2}, build_id="b1")
    return d, mem, dump


def _t(d, name, sub="mem"):
    return pq.read_table(d / sub / "builds" / "b1" / f"{name}.parquet")


def test_backends_identical(world_builds):
    d, mem, dump = world_builds
    assert mem["counts"] == dump["counts"]
    for t in TABLES:
        assert _t(d, t, "mem").equals(_t(d, t, "dump")), t


def test_pruning_and_mention_rejects(world_builds):
    d, mem, _ = world_builds
    rej = _t(d, "rejects").to_pylist()
    by_q = {}
    for r in rej:
        if r["source"] in ("wikidata", "descriptions"):
            by_q[r["location"]] = r["reason"]
    assert by_q == EXPECTED["pruned"]
    types = {r["type_id"]: r for r in _t(d, "event_types").to_pylist()}
    assert not set(EXPECTED["pruned"]) & set(types)
    assert not set(EXPECTED["non_events"]) & set(types)
    for q, reason in EXPECTED["mention_dropped"].items():
        assert q in types and json.loads(types[q]["extra"])["n_mentions"] == 0  # stays a candidate, ungrounded
        assert any(r["reason"] == reason and r["detail"].startswith(q) for r in rej)
    reasons = mem["rejects_by_reason"]
    for r in ("context_too_short", "context_too_long", "numeral_inconsistent", "mention_cap", "hierarchy_depth_cut"):
        assert reasons.get(r, 0) >= 1, r
    # the cap keeps exactly max_contexts_per_mention of the 4+ "Kessel Ford" contexts in English
    ms = _t(d, "mentions").to_pylist()
    kf = [m for m in ms if m["language"] == "en" and m["trigger"] == "Kessel Ford" and m["labels"][0] == "Q900103"]
    assert len(kf) == WORLD_PARAMS["max_contexts_per_mention"]


def test_mentions_offsets_labels_and_sources(world_builds):
    d, _, _ = world_builds
    ms = _t(d, "mentions").to_pylist()
    types = {r["type_id"]: r for r in _t(d, "event_types").to_pylist()}
    event_titles = {json.loads(t["extra"])["sitelinks"].get("en") for t in types.values()}
    for m in ms:
        assert m["sentence"][m["trigger_start"]:m["trigger_end"]] == m["trigger"]
        assert WORLD_PARAMS["min_context_chars"] <= len(m["sentence"]) <= WORLD_PARAMS["max_context_chars"]
        if m["split"] != "wikinews":
            assert m["doc_id"].split(":", 1)[1] not in event_titles or not m["doc_id"].startswith("enwikipedia")
    # Battle of Kessel Ford: labels = atomic + ancestors up to the root
    kf = next(m for m in ms if m["labels"][0] == "Q900103")
    assert kf["labels"] == ["Q900103", "Q900101", "Q900100"]
    # links through redirects count (XLEL-WD ignored them)
    extras = [json.loads(m["extra"]) for m in ms]
    assert any(x["via_redirect"] and x["link_target"] == "Harlow Marathon 1999" for x in extras if "via_redirect" in x)
    # mentions from event articles never appear
    assert not any(m["doc_id"] == "enwikipedia:Aurelian War" for m in ms)


def test_hierarchy_and_splits(world_builds):
    d, _, _ = world_builds
    types = {r["type_id"]: r for r in _t(d, "event_types").to_pylist()}
    parents = {q: r["parent_id"] for q, r in types.items() if r["parent_id"]}
    assert parents == EXPECTED["parents"]
    splits = {q: json.loads(r["extra"])["split"] for q, r in types.items()}
    for comp in EXPECTED["components"]:
        assert len({splits[q] for q in comp}) == 1, comp  # no tree or sequence crosses splits
    ms = _t(d, "mentions").to_pylist()
    for m in ms:
        if m["split"] != "wikinews":
            assert m["split"] == splits[m["labels"][0]]
    rel = {(r["source_id"], r["target_id"], r["relation"]) for r in _t(d, "type_relations").to_pylist()}
    assert ("Q900104", "Q900103", "follows") in rel and ("Q900103", "Q900101", "part_of") in rel
    assert ("Q900203", "Q900202", "part_of") not in rel  # cut below height 3
    t1 = {(r["split"], r["language"]): r for r in _t(d, "table1").to_pylist()}
    assert sum(t1[(s, "all")]["mentions"] for s in ("train", "dev", "test")) == sum(1 for m in ms if m["split"] != "wikinews")


def test_hierarchy_rules_hand_case():
    from eventatlas.wiki.wikidata import EventRecord

    def ev(q, part_of=(), has_part=()):
        return EventRecord(q, {"en": q}, {}, {}, 0, [], list(part_of), list(has_part), [], [])

    # chain of 5 via P361, one extra P527 parent (multi-parent), height 3
    evs = [ev("Q1"), ev("Q2", ["Q1"]), ev("Q3", ["Q2"]), ev("Q4", ["Q3"]), ev("Q5", ["Q4"]), ev("Q9", has_part=["Q3"])]
    rej = Rejects("t")
    par = build_hierarchy(evs, rej, max_height=3)
    assert par == {"Q2": "Q1", "Q3": "Q2", "Q5": "Q4"}  # Q4 cut (level 4) and starts its own tree
    assert rej.counts() == {"hierarchy_multi_parent": 1, "hierarchy_depth_cut": 1}
    assert label_set("Q3", par) == ["Q3", "Q2", "Q1"]
    comps = components(evs)
    assert comps == [["Q1", "Q2", "Q3", "Q4", "Q5", "Q9"]]
    s1 = assign_splits([["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h"], ["i"], ["j"]], seed=3)
    assert sorted(s1.values()).count("train") == 8 and s1 == assign_splits([[x] for x in "abcdefghij"], seed=3)


def test_numeral_rule_hand_cases():
    assert numeral_consistent("no numbers here at all, just words", "Battle of Rivers", "", 1644)  # label without number
    assert not numeral_consistent("The race was run on a sunny day.", "1999 Harlow Marathon", "1999 edition", 1999)
    assert numeral_consistent("In 2005 they compared the courses.", "1999 Harlow Marathon", "", 1999)  # year within ±10
    assert not numeral_consistent("In 2010 they compared the courses.", "1999 Harlow Marathon", "", 1999)  # 11 years off
    assert numeral_consistent("It drew 1999 runners.", "1999 Harlow Marathon", "", None)  # shared number


def test_wikinews(world_builds):
    d, _, _ = world_builds
    docs = {r["doc_id"]: r for r in _t(d, "documents").to_pylist()}
    n = docs["enwikinews:Earthquake strikes Ostrava Vale"]
    assert json.loads(n["extra"])["published"] == "2011-03-04" and "magnitude 6.1" in n["text"]
    assert json.loads(docs["dewikinews:Erdbeben erschüttert das Ostrava-Tal"]["extra"])["published"] == "2011-03-04"
    ms = [m for m in _t(d, "mentions").to_pylist() if m["split"] == "wikinews"]
    anchors = {(m["doc_id"], m["trigger"]) for m in ms}
    assert ("enwikinews:Historians revisit Treaty of Calder", "Aurelian War") in anchors  # {{w|...}} through a redirect
    assert ("enwikinews:Flood memorial opened", "great flood") in anchors  # [[:w:...]]
    assert parse_date_category("4 de marzo de 2011").isoformat() == "2011-03-04"
    assert parse_date_category("Published") is None


def test_views_and_versioned_diff(world_builds, tmp_path):
    d, _, _ = world_builds
    xl = _t(d, "view_crosslingual").to_pylist()
    ml = _t(d, "view_multilingual").to_pylist()
    assert all(r["description_language"] == "en" for r in xl)
    de = [r for r in ml if r["language"] == "de"]
    assert de and all(r["description_language"] == "de" for r in de)
    # second build with fewer languages: diff names removed mentions per language
    w = build_world()
    m1 = build(w.backend(), tmp_path, languages=LANGS, params=WORLD_PARAMS, build_id="v1")
    m2 = build(w.backend(), tmp_path, languages=("en", "de"), params=WORLD_PARAMS, build_id="v2")
    assert m1["diff"]["previous_build_id"] is None and m2["diff"]["previous_build_id"] == "v1"
    assert m2["diff"]["mentions_removed"]["fr"] > 0 and m2["diff"]["mentions_added"].get("fr", 0) == 0
    assert json.loads((tmp_path / "latest.json").read_text())["build_id"] == "v2"
    # the latest build is also the dataset's current tables (where views/embed/cluster look)
    assert pq.read_table(tmp_path / "mentions.parquet").equals(pq.read_table(tmp_path / "builds" / "v2" / "mentions.parquet"))
    assert json.loads((tmp_path / "manifest.json").read_text())["build_id"] == "v2"
    import duckdb

    from eventatlas.wiki.build import record_in_warehouse
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    from pathlib import Path
    for f in sorted(Path(__file__).resolve().parents[2].joinpath("warehouse", "migrations").glob("1[0-9][0-9]_*.sql")):
        con.execute(f.read_text())
    record_in_warehouse(con, m2, tmp_path / "builds" / "v2")
    assert con.execute("SELECT count(*) FROM wiki_table1 WHERE build_id='v2'").fetchone()[0] > 0
    assert con.execute("SELECT mentions_removed FROM wiki_build_diffs WHERE build_id='v2' AND language='fr'").fetchone()[0] > 0


@pytest.mark.timeout(300)
def test_flow_process_pool_shards_and_warehouse(eventatlas_env, monkeypatch, world_builds):
    """The Prefect flow on the world's dumps: shards run as task runs in worker processes, the
    output equals the in-process build, and the warehouse gets the build, diff, Table 1 and rejects."""
    from prefect.testing.utilities import prefect_test_harness

    from eventatlas.store.warehouse import Warehouse
    from flows.build_wikievents import build_wikievents

    d, mem, _ = world_builds
    monkeypatch.setenv("PREFECT_HOME", str(eventatlas_env / "prefect"))
    paths = write_dumps(build_world(), eventatlas_env / "dumps", wikidata_compression="bz2")
    out = eventatlas_env / "flowout"
    with prefect_test_harness(server_startup_timeout=300):  # Prefect's default 30 s is short on a loaded machine
        man = build_wikievents(dumps=paths, out_dir=str(out), languages=list(LANGS),
                               params={**WORLD_PARAMS, "workers": 2}, build_id="f1")
    assert man["counts"] == mem["counts"]
    for t in TABLES:
        assert pq.read_table(out / "builds" / "f1" / f"{t}.parquet").equals(_t(d, t)), t
    wh = Warehouse()
    assert wh.query("SELECT n_mentions FROM wiki_builds WHERE build_id = 'f1'").iloc[0, 0] == mem["counts"]["mentions"]
    rs = wh.query("SELECT reason, n FROM wiki_rejects_summary WHERE build_id = 'f1'").set_index("reason")["n"].to_dict()
    assert rs == mem["rejects_by_reason"]


@pytest.mark.network
@pytest.mark.timeout(300)
def test_flow_shards_on_a_local_dask_cluster_chosen_at_run_time(eventatlas_env, monkeypatch, world_builds):
    """``runner="dask:2"``: the shards run as task runs on a local Dask cluster of two worker
    processes (a ``wikievents-core`` subflow bound to it) and the output equals the in-process build."""
    from prefect.testing.utilities import prefect_test_harness

    from flows.build_wikievents import build_wikievents

    d, mem, _ = world_builds
    monkeypatch.setenv("PREFECT_HOME", str(eventatlas_env / "prefect"))
    paths = write_dumps(build_world(), eventatlas_env / "dumps", wikidata_compression="bz2")
    out = eventatlas_env / "daskout"
    with prefect_test_harness(server_startup_timeout=300):  # Prefect's default 30 s is short on a loaded machine
        with pytest.raises(ValueError, match="unknown runner 'dusk'"):
            build_wikievents(dumps=paths, out_dir=str(out), runner="dusk", record=False)
        assert not out.exists()
        man = build_wikievents(dumps=paths, out_dir=str(out), languages=list(LANGS), runner="dask:2",
                               params={**WORLD_PARAMS, "workers": 2}, build_id="d1", record=False)
    assert man["counts"] == mem["counts"]
    for t in TABLES:
        assert pq.read_table(out / "builds" / "d1" / f"{t}.parquet").equals(_t(d, t)), t
