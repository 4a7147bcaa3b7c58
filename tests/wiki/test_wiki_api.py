"""The live-API backend against the fixture world served over real HTTP on 127.0.0.1."""
from __future__ import annotations

import importlib
import json
from dataclasses import asdict

import pytest

from eventatlas.wiki.api_backend import ApiBackend, entity_relation_ids, events_sparql
from eventatlas.wiki.backend import WikiBackend, normalize_title
from eventatlas.wiki.links import harvest_full
from support.wiki_world.server import WikiWorldServer, crawl_protocol
from support.wiki_world.world import LANGS, build_world

pytestmark = pytest.mark.network

API_KEYS = ("id", "type", "labels", "descriptions", "claims", "sitelinks")
# A generous client timeout: a slow answer on a loaded machine must not time out, or it costs an extra
# request and the exact request counts below no longer match. Only the runs whose server injects a
# "timeout" fault use a short attempt timeout (FAULTY), against a server that keeps that answer for much
# longer; the call's deadline (timeout) leaves room for the retry.
FAST = {"contact": "eventatlas-tests@example.org", "timeout": 10.0, "backoff_base": 0.01, "backoff_cap": 0.05}
FAULTY = {**FAST, "attempt_timeout": 2.0}
TIMEOUT_SLEEP = 30.0


@pytest.fixture(scope="module")
def world():
    return build_world()


@pytest.fixture(scope="module")
def reference(world):
    """The fault-free API crawl of the whole world (SPARQL-seeded)."""
    with WikiWorldServer(world) as srv:
        with _backend(srv, world) as b:
            out = crawl_protocol(b, LANGS, world.news)
        n = len(srv.log)
        log = list(srv.log)
    return {"crawl": out, "requests": n, "log": log}


def _backend(srv, world, **kw):
    opts = dict(wikinews_languages=list(world.news), sparql=True, client_options=FAST, progress=False)
    opts.update(kw)
    return ApiBackend(LANGS, **srv.endpoints(), **opts)


def _canon(x):
    return json.loads(json.dumps(x, sort_keys=True, default=list))


def test_protocol_and_requests(world, reference):
    with WikiWorldServer(world) as srv, _backend(srv, world) as b:
        assert isinstance(b, WikiBackend)
    log = reference["log"]
    wd = [r for r in log if r["site"] == "www.wikidata"]
    assert wd and all(len(r["params"]["ids"].split("|")) <= 50 for r in wd)
    assert all(r["params"]["props"] == "labels|descriptions|claims|sitelinks" for r in wd)
    assert all(r["params"]["languages"] == "de|en|es|fr" for r in wd)
    sparql = [r for r in log if r["site"] == "sparql"]
    assert len(sparql) == 1 and "maxlag" not in sparql[0]["params"]
    assert sparql[0]["params"]["query"] == events_sparql(None)
    revs = [r for r in log if "revisions" in r["params"].get("prop", "")]
    assert revs and all(len(r["params"]["titles"].split("|")) <= 50 and r["params"]["rvslots"] == "main" for r in revs)
    assert all("redirects" not in r["params"] for r in revs)  # redirect pages must come back as such
    # continuation of every kind was exercised (the server pages with small limits) ...
    used = {k for r in log for k in r["params"] if k.endswith("continue") and k != "continue"}
    assert used >= {"rvcontinue", "clcontinue", "rdcontinue", "blcontinue", "iwblcontinue"}
    bl = [r for r in log if r["params"].get("list") == "backlinks"]
    assert bl and all(r["params"]["blredirect"] == "1" and r["params"]["blnamespace"] == "0" for r in bl)
    # ... and nothing was fetched twice: each (site, title) in exactly one content request
    fetched = [(r["site"], t) for r in revs if "rvcontinue" not in r["params"] and "clcontinue" not in r["params"]
               for t in r["params"]["titles"].split("|")]
    assert len(fetched) == len(set(fetched))
    ids = [i for r in wd for i in r["params"]["ids"].split("|")]
    assert len(ids) == len(set(ids))


def test_api_crawl_matches_the_world(world, reference):
    """Against the world itself (MemoryBackend is the protocol's reference semantics)."""
    crawl = reference["crawl"]
    mem = world.backend()
    by_id = {e["id"]: e for e in world.entities}
    # SPARQL seeding finds exactly the items with a temporal and a spatial statement (hand list:
    # all 28 Ev items of the world; Q900903 has a date but no place; places have no date).
    assert sorted(crawl["entities"]) == sorted(e["id"] for e in world.entities if e["id"] < "Q900900")
    assert len(crawl["entities"]) == 28
    for q, e in crawl["entities"].items():
        assert e == {k: by_id[q][k] for k in API_KEYS if k in by_id[q]}  # old-form entities pass unchanged
    for lang in LANGS:
        titles = sorted(crawl["articles"][lang])
        assert _canon(crawl["articles"][lang]) == _canon({t: asdict(p) for t, p in mem.get_articles(lang, titles).items()})
        expect_red = {r: t for r, t in mem.redirects_to(lang, titles).items() if t in crawl["articles"][lang]}
        assert crawl["redirects"][lang] == expect_red
        targets = set(titles) | set(expect_red)
        # linking pages: every page where the build's own harvester finds a link to a target, no other
        truly = {p.title for p in mem.iter_linking_pages(lang, targets) if harvest_full(p.wikitext, targets)}
        got = set(crawl["linking"][lang])
        assert truly <= got, truly - got
        assert all(any(normalize_title(t) in targets for t in _raw_links(crawl["linking"][lang][g]["wikitext"])) for g in got)
        if lang in world.news:
            truly_news = {p.title for p in mem.iter_wikinews(lang, targets) if harvest_full(p.wikitext, targets, wikinews=True)}
            assert truly_news and truly_news == set(crawl["news"][lang])
            world_news = {p.title: p for p in world.news[lang]}
            for t, p in crawl["news"][lang].items():  # all categories, the date ones included
                assert sorted(p["categories"]) == sorted(world_news[t].categories) and len(p["categories"]) >= 2
                assert {**p, "categories": None} == {**asdict(world_news[t]), "categories": None}
    assert crawl["redirects"]["en"]["Kessel Ford battle"] == "Battle of Kessel Ford"
    assert crawl["articles"]["en"]["Aurelian War"]["revision_id"] is not None


def _raw_links(text):
    import re
    return [m.group(1) for m in re.finditer(r"\[\[\s*:?([^\[\]|#]+)", text)]


def test_root_seeding_closure_and_sparql(world):
    with WikiWorldServer(world) as srv:
        # forward closure over P361/P527/P155/P156 claims from the root (hand-computed):
        # Q900100 -P527-> 101, 102; 101 -P527-> 103, 104; 103/104 point back or to each other;
        # 105 (P361 102) and 403 (P155 100) are only reachable through reverse edges.
        with _backend(srv, world, sparql=False, root="Q900100") as b:
            got = sorted(e["id"] for e in b.iter_entities())
        assert got == ["Q900100", "Q900101", "Q900102", "Q900103", "Q900104"]
        # SPARQL (P361|^P527)* under the root finds the reverse P361 edge to Q900105
        with _backend(srv, world, sparql=True, root="Q900100", expand=False) as b:
            got = sorted(e["id"] for e in b.iter_entities())
        assert got == ["Q900100", "Q900101", "Q900102", "Q900103", "Q900104", "Q900105"]
        assert "wd:Q900100" in srv.log[-2]["params"]["query"] or "wd:Q900100" in srv.log[-3]["params"]["query"]
        # closure across everything from one seed: P155 of Q900403 leads into tree A
        with _backend(srv, world, sparql=False, seed_ids=["Q900403"]) as b:
            got = sorted(e["id"] for e in b.iter_entities())
        assert got == ["Q900100", "Q900101", "Q900102", "Q900103", "Q900104", "Q900403"]


def test_wbgetentities_batches_of_50(world):
    ids = [f"Q{800000 + i}" for i in range(120)] + ["Q900100"]
    with WikiWorldServer(world) as srv, _backend(srv, world, sparql=False, seed_ids=ids, expand=False) as b:
        got = [e["id"] for e in b.iter_entities()]
        sizes = [len(r["params"]["ids"].split("|")) for r in srv.log]
    assert got == ["Q900100"]  # the other 120 ids are missing items
    assert sizes == [50, 50, 21]


def test_entity_relation_ids_both_forms():
    cur = {"claims": {"P361": [{"mainsnak": {"datavalue": {"value": {"id": "Q5", "numeric-id": 5}}}}]}}
    old = {"claims": {"P527": [{"mainsnak": {"datavalue": {"value": {"entity-type": "item", "numeric-id": 7}}}}],
                      "P155": [{"mainsnak": {"snaktype": "novalue"}}]}}
    assert entity_relation_ids(cur) == ["Q5"] and entity_relation_ids(old) == ["Q7"]


FAULTS = {2: "429", 5: "maxlag", 9: "503", 14: "timeout", 20: "truncate", 27: "drop", 33: "short", 41: "500",
          50: "503-bare", 61: "429", 77: "truncate", 90: "drop", 120: "maxlag"}


def test_fault_injected_run_equals_fault_free_run(world, reference):
    with WikiWorldServer(world, schedule=FAULTS, retry_after=0.2, timeout_sleep=TIMEOUT_SLEEP) as srv:
        with _backend(srv, world, client_options=FAULTY) as b:
            out = crawl_protocol(b, LANGS, world.news)
            stats = dict(b.client.stats)
        log = list(srv.log)
    assert _canon(out) == _canon(reference["crawl"])
    assert sum(1 for r in log if r["fault"]) == len(FAULTS)
    assert len(log) == reference["requests"] + len(FAULTS)  # bounded: one extra request per fault
    assert stats["retries"] == len(FAULTS)
    for r in log:  # Retry-After (0.2 s) honoured after 429/503/maxlag
        if r["fault"] in ("429", "503", "maxlag"):
            nxt = min((x for x in log if x["n"] > r["n"]), key=lambda x: x["n"])
            assert nxt["t"] - r["t"] >= 0.2


def test_http_cache_makes_a_repeated_build_free(world, reference, tmp_path):
    with WikiWorldServer(world) as srv:
        with _backend(srv, world, client_options={**FAST, "cache_dir": tmp_path / "http"}) as b:
            first = crawl_protocol(b, LANGS, world.news)
        n = len(srv.log)
        with _backend(srv, world, client_options={**FAST, "cache_dir": tmp_path / "http"}) as b:  # fresh checkpoint
            second = crawl_protocol(b, LANGS, world.news)
        assert len(srv.log) == n == reference["requests"]
    assert _canon(first) == _canon(second) == _canon(reference["crawl"])


def _content_fetch(r):
    p = r["params"]
    return "revisions" in p.get("prop", "") and "rvcontinue" not in p and "clcontinue" not in p


def test_concurrent_page_fetching_equals_serial(world, reference):
    # The first batch of the first page listing that takes more than one batch of 8 (found by a serial
    # crawl: same batches, same order). The concurrent crawl sends it with the listing's next batches;
    # the server holds it until a second request is in, so the overlap is there whatever the load.
    with WikiWorldServer(world) as srv, _backend(srv, world, batch_size=8) as b:
        crawl_protocol(b, LANGS, world.news)
        serial = sorted(srv.log, key=lambda r: r["n"])
    fetches = [r for r in serial if _content_fetch(r)]

    def same_listing(a, nxt):  # nothing but a's own continuations in between
        between = serial[a["n"]:nxt["n"] - 1]
        return a["site"] == nxt["site"] and all(r["params"].get("titles") == a["params"]["titles"] for r in between)

    first = next(a for a, nxt in zip(fetches, fetches[1:]) if same_listing(a, nxt))
    with WikiWorldServer(world, delay=0.01) as srv:
        srv.hold_until_concurrent(2, match=lambda r: r["site"] == first["site"]
                                  and r["params"].get("titles") == first["params"]["titles"] and _content_fetch(r))
        with _backend(srv, world, batch_size=8, client_options={**FAST, "concurrency": 3}) as b:
            out = crawl_protocol(b, LANGS, world.news)
        log = list(srv.log)
    assert _canon(out) == _canon(reference["crawl"])
    revs = [r for r in log if _content_fetch(r)]
    assert max(len(r["params"]["titles"].split("|")) for r in revs) == 8
    iv = sorted((r["t"], r["t_done"]) for r in log)
    in_flight = max(sum(1 for a, b in iv if a <= t < b) for t, _ in iv)
    assert 2 <= in_flight <= 3  # parallel, but never more than the client's semaphore allows


def _build_module():
    try:
        return importlib.import_module("eventatlas.wiki.build")
    except ModuleNotFoundError:
        pytest.skip("eventatlas.wiki.build (part A's pipeline) is not available yet")


def _read_build(root):
    import pyarrow.parquet as pq

    (bdir,) = [p for p in (root / "builds").iterdir() if p.is_dir()]
    return {p.name: pq.read_table(p) for p in sorted(bdir.glob("*.parquet"))}


def _sorted(t):
    keys = [(c, "ascending") for c in t.column_names
            if not (str(t.schema.field(c).type).startswith(("list", "struct", "large_list")))]
    return t.sort_by(keys) if keys and t.num_rows else t


def test_api_build_equals_dump_build(world, tmp_path):
    """Full build of the world with the dump backend vs the API backend: identical tables."""
    build = _build_module()
    from eventatlas.wiki.dumps import DumpBackend
    from support.wiki_world.world import WORLD_PARAMS, write_dumps

    layout = write_dumps(world, tmp_path / "dumps")
    kw = dict(languages=LANGS, params=WORLD_PARAMS, build_id="b1", wikinews_languages=list(world.news))
    man_d = build.build(DumpBackend(layout), tmp_path / "dump_build", **kw)
    with WikiWorldServer(world) as srv, _backend(srv, world) as b:
        man_a = build.build(b, tmp_path / "api_build", **kw)
        assert man_a["backend"]["backend"] == "api" and man_a["backend"]["http"]["requests"] == len(srv.log)
    # and once more through a server injecting every kind of fault
    with (WikiWorldServer(world, schedule=FAULTS, retry_after=0.2, timeout_sleep=TIMEOUT_SLEEP) as srv,
          _backend(srv, world, client_options=FAULTY) as b):
        man_f = build.build(b, tmp_path / "faulty_build", **kw)
        assert sum(1 for r in srv.log if r["fault"]) == len(FAULTS)
    dump_t = _read_build(tmp_path / "dump_build")
    assert "mentions.parquet" in dump_t
    assert dump_t["mentions.parquet"].num_rows > 50 and dump_t["event_types.parquet"].num_rows >= 15
    for other in ("api_build", "faulty_build"):
        api_t = _read_build(tmp_path / other)
        assert sorted(dump_t) == sorted(api_t)
        for name in dump_t:
            a, d = api_t[name], dump_t[name]  # rejects included: same reasons, same records
            assert a.schema == d.schema, name
            assert _sorted(a).equals(_sorted(d)), (other, name)
    assert man_a["counts"] == man_d["counts"] == man_f["counts"]
