"""`discover`: type cards from a clustering (checked by hand), and the whole path on the mini world: embedded,
clustered, described, linked to a known inventory, written; its one-line refusals."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from eventatlas.discover.describe import describe_types, marked
from support.mini_events import mini_tiny_bert, write_mini_events


def _m(i, trigger, sentence, label=None):
    a = sentence.index(trigger)
    return {"mention_id": f"m{i}", "trigger": trigger, "sentence": sentence, "trigger_start": a,
            "trigger_end": a + len(trigger), "labels": [label] if label else []}


def test_cards_by_hand():
    mentions = [_m(0, "attack", "They attack at dawn.", "Attack"), _m(1, "Attack", "Attack came late.", "Attack"),
                _m(2, "bomb", "A bomb went off.", "Bombing"), _m(3, "met", "They met.", None),
                _m(4, "meeting", "The meeting ended.", None)]
    X = np.array([[1, 0], [1, 0.2], [1, -0.2], [0, 1], [0, 2]], dtype=np.float32)
    cards = describe_types(mentions, X, [5, 5, 5, 9, 9], n_examples=2)
    big, small = cards
    assert (big["type_id"], big["cluster"], big["size"], small["type_id"], small["size"]) == ("t1", 5, 3, "t2", 2)
    # forms lower-cased and counted: attack x2, bomb x1; the name is the top two
    assert big["triggers"] == ["attack", "bomb"] and big["trigger_counts"] == [2, 1] and big["name"] == "attack / bomb"
    # the mean direction of the unit vectors is (1, 0): cosines 1, 1/sqrt(1.04), 1/sqrt(1.04)
    assert big["cohesion"] == pytest.approx((1 + 2 / np.sqrt(1.04)) / 3, abs=1e-4)
    # medoids: m0 (cosine 1) first, then the tie m1 / m2 by position
    assert big["medoid_ids"] == ["m0", "m1"] and big["examples"] == ["They [attack] at dawn.", "[Attack] came late."]
    assert big["majority_label"] == "Attack" and small["majority_label"] is None
    assert small["cohesion"] == pytest.approx(1.0) and small["name"] == "meeting / met"  # a tie: alphabetical
    assert sorted(big["mention_ids"]) == ["m0", "m1", "m2"]
    assert marked("The rebels stormed it.", 11, 18) == "The rebels [stormed] it."
    with pytest.raises(ValueError, match="aligned"):
        describe_types(mentions, X[:4], [0] * 5)


@pytest.fixture
def world(eventatlas_env):
    from eventatlas import config

    ddir = write_mini_events(config.data_root())
    return ddir, mini_tiny_bert(eventatlas_env)


def test_discover_describes_and_links_the_mini_world(world, tmp_path):
    from eventatlas.discover.run import DiscoverConfig, discover

    ddir, model = world
    lines: list[str] = []
    out = tmp_path / "out"
    s = discover(ddir, out, DiscoverConfig(k=4, encoder=str(model), link_to=["mini_events"], device="cpu"),
                 say=lines.append)
    gold = pq.read_table(ddir / "mentions.parquet").to_pylist()
    types = pq.read_table(out / "types.parquet").to_pylist()
    assign = pq.read_table(out / "assignments.parquet").to_pylist()
    links = pq.read_table(out / "links.parquet").to_pylist()
    assert s["types"] == len(types) == 4 and s["mentions"] == len(assign) == len(gold) and s["how"] == "4 types: given"
    assert sum(t["size"] for t in types) == len(gold) and [t["type_id"] for t in types] == ["t1", "t2", "t3", "t4"]
    assert sorted(t["size"] for t in types) == sorted(Counter(a["type_id"] for a in assign).values())
    for t in types:  # every medoid is a member, shown with its trigger marked
        members = {a["mention_id"] for a in assign if a["type_id"] == t["type_id"]}
        assert set(t["medoid_ids"]) <= members and all("[" in e and "]" in e for e in t["examples"])
    known = {f"mini_events::{g['labels'][0]}" for g in gold}
    assert links and {r["source"].split("::")[0] for r in links} == {"discover:mini_events"}
    assert {r["target"] for r in links} <= known and {r["method"] for r in links} == {"centroid", "mnn", "vote"}
    assert {r["run_id"] for r in links} == {"out"}  # the run's id (its directory's name): the view joins on it
    assert any("linked 4 types to mini_events" in ln for ln in lines)
    assert json.loads((out / "discover.json").read_text())["files"]["links"] == str(out / "links.parquet")
    # without k: the silhouette chooses, and says so
    s2 = discover(ddir, tmp_path / "out2", DiscoverConfig(encoder=str(model), device="cpu"))
    assert s2["how"].startswith(f"{s2['types']} types: the count with the best cosine silhouette")


def test_discover_refuses_what_it_cannot_do(world, tmp_path):
    from eventatlas.discover.run import DiscoverConfig, discover
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.errors import InputError

    ddir, model = world
    with pytest.raises(InputError, match="not an ingested dataset"):
        discover(ddir, tmp_path / "o", DiscoverConfig(encoder=str(model), link_to=["nope"], device="cpu"))
    text = tmp_path / "t.txt"
    text.write_text("Fire crews fought a blaze overnight. The road stayed closed.", encoding="utf-8")
    ingest("text", text, dataset="plain")  # text alone: sentences, no mentions
    with pytest.raises(InputError, match="no mentions to discover types in.*eventatlas detect plain"):
        discover(config.datasets_dir() / "plain", tmp_path / "o", DiscoverConfig(encoder=str(model), device="cpu"))


def test_the_command_prints_its_cards(world):
    from eventatlas.cli import app

    ddir, model = world
    r = CliRunner().invoke(app, ["discover", "mini_events", "--k", "3", "--encoder", str(model), "--device", "cpu",
                                 "--link-to", "mini_events"], terminal_width=200)
    assert r.exit_code == 0, r.output
    assert "mentions of mini_events -> 3 types (given)" in r.output
    assert r.output.count("nearest in mini_events:") == 3 and "written:" in r.output and "e.g. " in r.output
    bad = CliRunner().invoke(app, ["discover", "mini_events", "--link-to", "nope"], terminal_width=300)
    assert bad.exit_code == 2 and "dataset 'nope' is not ingested" in bad.output


def test_discover_detects_first_in_plain_text(world, tmp_path):
    """With a detector, the text's mentions are found first (into <dataset>_detected), then discovered."""
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.pipelines.discover import discover
    from eventatlas.pipelines.local import engine
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record
    from support.mini_events import SENTENCES

    ddir, model = world
    params = {"model_id": str(model), "complete_sentences": True, "heldout_sentences": 0.3, "dev_sentences": 0.3,
              "thresholds": [0.5], "train": {"epochs": 1, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}
    rec = read_record(run_method("event_detection", ddir, seed=0, params=params, device="cpu", flow="test"))
    text = tmp_path / "news.txt"
    text.write_text(" ".join(s for ss in SENTENCES.values() for s in ss[:2]), encoding="utf-8")
    ingest("text", text, dataset="news")
    lines: list[str] = []
    out = discover("news", k=2, detector=f"run:{rec['run']['run_id']}", encoder=str(model), device="cpu",
                   threshold=0.0, engine=engine(say=lines.append))
    assert out["detected"]["dataset"] == "news_detected" and out["dataset"] == "news_detected"
    assert out["mentions"] == out["detected"]["detection"]["mentions"] > 2 and out["types"] == 2
    assert (config.datasets_dir() / "news_detected" / "mentions.parquet").exists()
    assert sum(t["size"] for t in pq.read_table(out["files"]["types"]).to_pylist()) == out["mentions"]
    # the run is recorded and lands in the warehouse: its types and links as views, its run row, and its
    # assignments as an atlas inventory (a clustering run's layout)
    from eventatlas.atlas.inventory import cluster_inventories
    from eventatlas.store.warehouse import Warehouse

    wh = Warehouse()
    _, rows = wh.query_rows("SELECT flow, status, task FROM runs WHERE run_id = ?", [out["run_id"]])
    assert rows == [("discover", "completed", "discover")]
    _, rows = wh.query_rows("SELECT type_id, size FROM discovered_types WHERE run_id = ? ORDER BY type_id",
                            [out["run_id"]])
    cards = pq.read_table(out["files"]["types"]).to_pylist()
    assert rows == [(c["type_id"], c["size"]) for c in cards]
    (inv,) = cluster_inventories(config.runs_dir() / out["run_id"])
    assert inv.dataset == "news_detected" and len(inv.types) == 2
    assert sorted(len(v) for v in inv.mentions.values()) == sorted(c["size"] for c in cards)


def test_the_discovered_views_exist_before_any_discover_run(eventatlas_env):
    from eventatlas.schema import DISCOVERED_TYPES, LINKS
    from eventatlas.store.warehouse import Warehouse

    wh = Warehouse()
    wh.migrate()
    views = wh.refresh_views()
    assert views["discovered_types"] == views["discovered_links"] == "(empty)"
    for view, schema in (("discovered_types", DISCOVERED_TYPES), ("discovered_links", LINKS)):
        cols, rows = wh.query_rows(f"SELECT * FROM {view}")
        assert rows == [] and list(cols) == (schema.names if "run_id" in schema.names else ["run_id", *schema.names])
