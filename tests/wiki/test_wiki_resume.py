"""Crawl checkpoints: durable append-only state; a SIGKILLed crawl resumes without loss, duplicates or refetching."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventatlas.wiki.checkpoint import Checkpoint, CheckpointLocked, CheckpointMismatch
from support.wiki_world.server import WikiWorldServer
from support.wiki_world.world import LANGS, build_world

REPO = Path(__file__).resolve().parents[2]
# a generous client timeout: a stray timeout on a loaded machine is an extra request, and the reference
# build's request count bounds the resumed crawl's below
FAST = {"contact": "eventatlas-tests@example.org", "timeout": 10.0, "backoff_base": 0.01, "backoff_cap": 0.05}


# -- checkpoint unit tests ----------------------------------------------------------------------
def _lines(d: Path, ns: str) -> list[dict]:
    out = []
    for p in sorted((d / ns).glob("part-*.jsonl")):
        out += [json.loads(x) for x in p.read_text().splitlines()]
    return out


def test_records_survive_reopen_and_are_not_duplicated(tmp_path):
    with Checkpoint(tmp_path, {"root": "Q1"}, shard_records=2) as ck:
        assert not ck.resumed
        assert ck.record("wikidata", [("Q1", {"id": "Q1"}), ("Q2", None), ("Q1", {"id": "dup in batch"})]) == 2
        assert ck.record("wikidata", {"Q2": {"id": "again"}, "Q3": {"id": "Q3"}}) == 1
        ck.mark_complete("entities")
        ck.set_meta("sparql_rows", 3)
    assert len(list((tmp_path / "wikidata").glob("part-*.jsonl"))) == 2  # rolled over after 2 records
    with Checkpoint(tmp_path, {"root": "Q1"}, shard_records=2) as ck:
        assert ck.resumed and ck.is_complete("entities") and ck.get_meta("sparql_rows") == 3
        assert ck.done_keys("wikidata") == {"Q1", "Q2", "Q3"}
        assert ck.missing("wikidata", ["Q3", "Q4", "Q1", "Q4", "Q5"]) == ["Q4", "Q5"]
        assert list(ck.items("wikidata")) == [("Q1", {"id": "Q1"}), ("Q2", None), ("Q3", {"id": "Q3"})]
        ck.record("wikidata", [("Q4", 4), ("Q5", 5)])
    keys = [r["k"] for r in _lines(tmp_path, "wikidata")]
    assert keys == ["Q1", "Q2", "Q3", "Q4", "Q5"]
    # a batch is never split (one write per batch); the roll-over happens between batches
    shards = sorted((tmp_path / "wikidata").glob("part-*.jsonl"))
    assert [[json.loads(x)["k"] for x in s.read_text().splitlines()] for s in shards] == [["Q1", "Q2"], ["Q3", "Q4", "Q5"]]


def test_torn_tail_of_a_killed_writer_is_dropped(tmp_path):
    with Checkpoint(tmp_path, {}) as ck:
        ck.record("pages.wikipedia.en", [("A", {"t": "a"}), ("B", {"t": "b"})])
    shard = tmp_path / "pages.wikipedia.en" / "part-000000.jsonl"
    good = shard.read_bytes()
    with open(shard, "ab") as f:
        f.write(b'{"k":"C","v":{"t":"c, cut by SIGK')  # what a kill mid-write leaves
    with Checkpoint(tmp_path, {}) as ck:
        assert ck.done_keys("pages.wikipedia.en") == {"A", "B"}
        assert shard.read_bytes() == good  # truncated back to the last full record
        ck.record("pages.wikipedia.en", [("C", {"t": "c"})])
        assert dict(ck.items("pages.wikipedia.en")) == {"A": {"t": "a"}, "B": {"t": "b"}, "C": {"t": "c"}}


def test_params_mismatch_lock_and_reset(tmp_path):
    ck = Checkpoint(tmp_path, {"languages": ["en"]})
    with pytest.raises(CheckpointLocked):
        Checkpoint(tmp_path, {"languages": ["en"]})
    ck.record("x", [("k", 1)])
    ck.close()
    with pytest.raises(CheckpointMismatch, match="languages"):
        Checkpoint(tmp_path, {"languages": ["de"]})
    with Checkpoint(tmp_path, {"languages": ["de"]}, reset=True) as ck2:
        assert not ck2.resumed and ck2.done_keys("x") == set()
    with pytest.raises(ValueError, match="namespace"):
        with Checkpoint(tmp_path, {"languages": ["de"]}) as ck3:
            ck3.record("../evil", [("k", 1)])


# -- a real build, killed with SIGKILL mid-crawl, then resumed ------------------------------------
BUILDER = r"""
import json, sys
sys.path[:0] = [sys.argv[4], sys.argv[5]]
from eventatlas.wiki.api_backend import ApiBackend
from eventatlas.wiki.build import build
from support.wiki_world.world import LANGS, WORLD_PARAMS
cfg = json.loads(sys.argv[1])
with ApiBackend(LANGS, wikinews_languages=cfg["news"], sparql=True, checkpoint=sys.argv[2],
                client_options=cfg["client"], progress=False, **cfg["endpoints"]) as b:
    man = build(b, sys.argv[3], languages=LANGS, params=WORLD_PARAMS, build_id="b1", wikinews_languages=cfg["news"])
    print(json.dumps({"resumed": b.ck.resumed, "counts": man["counts"]}))
"""


def _snapshot(ckdir: Path) -> dict[str, list[str]]:
    """Complete records per namespace, exactly as a reader sees them on disk."""
    out = {}
    for d in sorted(p for p in ckdir.iterdir() if p.is_dir()):
        keys = []
        for shard in sorted(d.glob("part-*.jsonl")):
            for line in shard.read_bytes().split(b"\n")[:-1]:  # the torn tail (no newline) is not a record
                keys.append(json.loads(line)["k"])
        out[d.name] = keys
    return out


def _requested(rec: dict) -> tuple[str, list[str]] | None:
    """(checkpoint namespace, keys) a request fetches content for."""
    p = rec["params"]
    if rec["site"] == "www.wikidata":
        return "wikidata", p["ids"].split("|")
    if "revisions" in p.get("prop", "") and "rvcontinue" not in p and "clcontinue" not in p:
        lang, project = rec["site"].split(".")
        return f"pages.{project}.{lang}", p["titles"].split("|")
    return None


def _tables(root: Path) -> dict:
    import pyarrow.parquet as pq

    bdir = root / "builds" / "b1"
    return {p.name: pq.read_table(p) for p in sorted(bdir.glob("*.parquet"))}


@pytest.mark.network
def test_sigkill_mid_crawl_then_resume(tmp_path):
    from eventatlas.wiki.api_backend import ApiBackend
    from eventatlas.wiki.build import build
    from support.wiki_world.world import WORLD_PARAMS

    world = build_world()
    news = list(world.news)
    with WikiWorldServer(world) as ref_srv:  # the uninterrupted reference build, in-process
        with ApiBackend(LANGS, wikinews_languages=news, sparql=True, client_options=FAST, progress=False,
                        **ref_srv.endpoints()) as b:
            build(b, tmp_path / "ref", languages=LANGS, params=WORLD_PARAMS, build_id="b1", wikinews_languages=news)
        total = len(ref_srv.log)
    reference = _tables(tmp_path / "ref")

    ckdir, out = tmp_path / "ck", tmp_path / "out"
    with WikiWorldServer(world, delay=0.01) as srv:
        cfg = json.dumps({"news": news, "client": FAST, "endpoints": srv.endpoints()})
        argv = [sys.executable, "-c", BUILDER, cfg, str(ckdir), str(out), str(REPO), str(REPO / "tests")]
        kills = []
        for kill_at in (total // 5, total // 2):  # two kills: early in the crawl and in the middle
            start = len(srv.log)
            proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            deadline = time.monotonic() + 300  # a bound for a hang, not an expected duration (cold start under load)
            while len(srv.log) < start + kill_at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            assert proc.poll() is None, f"build ended before the kill: {proc.communicate()[1].decode()[-2000:]}"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL and not (out / "latest.json").exists()
            time.sleep(0.05)  # let the server finish logging the last in-flight request
            kills.append((len(srv.log), _snapshot(ckdir)))
        res = subprocess.run(argv, cwd=REPO, capture_output=True, timeout=120)
        assert res.returncode == 0, res.stderr.decode()[-3000:]
        log = list(srv.log)

    assert json.loads(res.stdout.decode().strip().splitlines()[-1])["resumed"] is True
    got = _tables(out)
    assert sorted(got) == sorted(reference) and reference["mentions.parquet"].num_rows > 50
    for name, t in reference.items():  # no lost and no duplicated rows
        assert got[name].equals(t), name
    ids = got["mentions.parquet"]["mention_id"].to_pylist()
    assert len(ids) == len(set(ids))
    final = _snapshot(ckdir)
    for ns, keys in final.items():
        assert len(keys) == len(set(keys)), f"duplicated records in {ns}"
    # nothing recorded before a kill was requested again afterwards
    for n_at_kill, snap in kills:
        done = {ns: set(keys) for ns, keys in snap.items()}
        assert sum(len(v) for v in done.values()) > 0
        for rec in log[n_at_kill:]:
            req = _requested(rec)
            if req:
                ns, keys = req
                assert not (set(keys) & done.get(ns, set())), (ns, set(keys) & done.get(ns, set()))
    # in total only the batches in flight at the two kills can have been fetched twice
    fetched = [(req[0], k) for r in log if (req := _requested(r)) for k in req[1]]
    assert len(fetched) - len(set(fetched)) <= 2 * 50
    # the restarts did not redo the crawl: each kill wastes at most the request in flight and the
    # pages of one unfinished listing (without the checkpoint this would be ~1.7 x total)
    assert total <= len(log) <= total + 12, (total, len(log))
