"""PoliteClient against a real local HTTP server (127.0.0.1): etiquette, Retry-After, backoff, cache."""
from __future__ import annotations

import email.utils
import threading
import time

import pytest

from eventatlas.wiki.http import ApiError, HttpError, PoliteClient, cache_key, parse_retry_after
from support.wiki_world.server import WikiWorldServer
from support.wiki_world.world import build_world

pytestmark = pytest.mark.network

WD_Q = {"action": "wbgetentities", "ids": "Q900100|Q900103", "props": "labels|claims", "languages": "en"}


@pytest.fixture(scope="module")
def world():
    return build_world()


# A "timeout" fault keeps its answer far longer than any client timeout used here (the handler is a
# daemon thread: it does not hold up the test), so a timed-out attempt is told apart from a slow one.
TIMEOUT_SLEEP = 30.0


@pytest.fixture
def server(world):
    with WikiWorldServer(world, retry_after=1.0, timeout_sleep=TIMEOUT_SLEEP) as s:
        yield s


def _client(**kw):
    # a generous client timeout: only the "timeout" fault may time out, never a slow answer on a loaded
    # machine (a stray timeout is an extra logged request and breaks the exact request counts below)
    opts = dict(contact="eventatlas-tests@example.org", timeout=10.0, backoff_base=0.02, backoff_cap=0.1, seed=7)
    opts.update(kw)
    return PoliteClient(**opts)


def _wd(server):
    return server.endpoints()["wikidata_api"]


def test_user_agent_maxlag_gzip_on_every_request(server):
    for kind in ("429", "maxlag", "500", "truncate"):
        server.inject(kind)
    with _client() as c:
        server.retry_after = 0.2
        out = c.get_json(_wd(server), WD_Q)
        out2 = c.get_json(server.endpoints()["wikipedia_api"].format(lang="en"),
                          {"action": "query", "prop": "info", "titles": "Aurelian War"})
    assert set(out["entities"]) == {"Q900100", "Q900103"}
    assert out["entities"]["Q900100"]["labels"] == {"en": {"language": "en", "value": "Aurelian War"}}
    assert out2["query"]["pages"][0]["title"] == "Aurelian War"
    assert len(server.log) == 6  # 4 faults + 2 successes
    for rec in server.log:
        assert rec["ua"] == c.user_agent and "eventatlas-tests@example.org" in rec["ua"]
        assert rec["params"]["maxlag"] == "5"
        assert "gzip" in rec["accept_encoding"]
    assert c.stats["requests"] == 6 and c.stats["retries"] == 4


@pytest.mark.parametrize("kind", ["429", "maxlag"])
def test_retry_after_blocks_every_thread(server, kind):
    """Once a Retry-After is known, no request leaves from any thread until it has passed (server timestamps)."""
    server.retry_after = 1.0
    server.inject(kind, match=lambda r: r["params"].get("ids") == "Q900100")
    c = _client(concurrency=4)
    errors = []

    def work(qid, n):
        try:
            for _ in range(n):
                c.get_json(_wd(server), {"action": "wbgetentities", "ids": qid}, use_cache=False)
        except Exception as e:  # reported below
            errors.append(e)

    first = threading.Thread(target=work, args=("Q900100", 1))
    first.start()
    deadline = time.monotonic() + 60
    while c.stats["retries"] + sum(v for k, v in c.stats.items() if k.startswith("retry:")) == 0:
        assert time.monotonic() < deadline
        time.sleep(0.002)  # the fault was received: the client has set its gate
    others = [threading.Thread(target=work, args=(q, 2)) for q in ("Q900101", "Q900102", "Q900103")]
    for t in others:
        t.start()
    for t in [first, *others]:
        t.join()
    c.close()
    assert not errors
    fault, *rest = sorted(server.log, key=lambda r: r["n"])
    assert fault["fault"] == kind and all(r["fault"] is None for r in rest)
    assert len(rest) == 1 + 3 * 2  # bounded: the fault cost exactly one extra request
    waited = [round(r["t"] - fault["t"], 3) for r in rest]
    assert all(w >= 1.0 for w in waited), waited


def test_retry_after_http_date(server):
    server.retry_after = 0.0  # the server sends now+1 s as an HTTP-date
    server.inject("retry-after-date")
    with _client() as c:
        c.get_json(_wd(server), WD_Q)
    first, second = server.log
    assert first["fault"] == "retry-after-date" and second["fault"] is None
    date = email.utils.parsedate_to_datetime(email.utils.formatdate(first["wall"] + 1, usegmt=True)).timestamp()
    assert second["wall"] >= date - 0.01


def test_parse_retry_after():
    now = 1_700_000_000.0
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after(email.utils.formatdate(now + 30, usegmt=True), now=now) == pytest.approx(30.0)
    assert parse_retry_after(email.utils.formatdate(now - 30, usegmt=True), now=now) == 0.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None and parse_retry_after("") is None


@pytest.mark.parametrize("kind", ["500", "503-bare", "timeout", "truncate", "short", "drop"])
def test_transient_faults_are_retried_with_bounded_backoff(server, kind):
    server.inject(kind, times=2)
    sleeps = []

    def sleep(s):
        sleeps.append(s)
        time.sleep(s)

    # the timeout test needs a short attempt timeout (its two stalled attempts cost 2 x 2 s) inside a call
    # deadline that leaves room for the retries
    with _client(sleep=sleep, **({"timeout": 10.0, "attempt_timeout": 2.0} if kind == "timeout" else {})) as c:
        t0 = time.monotonic()
        out = c.get_json(_wd(server), WD_Q)
        took = time.monotonic() - t0
    assert set(out["entities"]) == {"Q900100", "Q900103"}
    assert [r["fault"] for r in server.log] == [kind, kind, None]
    # full jitter: attempt k sleeps uniform(0, min(cap, base * 2**k)) with base 0.02, cap 0.1
    assert len(sleeps) == 2 and 0 <= sleeps[0] <= 0.02 and 0 <= sleeps[1] <= 0.04
    assert c.stats["retries"] == 2
    if kind == "timeout":  # each timed-out attempt costs the client timeout (2 s), not the server's 30 s
        assert 2 * 2.0 <= took < TIMEOUT_SLEEP


def test_503_with_retry_after_is_honoured(server):
    server.retry_after = 1.0
    server.inject("503")
    with _client() as c:
        c.get_json(_wd(server), WD_Q)
    a, b = server.log
    assert a["fault"] == "503" and b["t"] - a["t"] >= 1.0


def test_bounded_retries_then_clear_error(server):
    server.inject("500", times=100)
    with _client(max_attempts=3) as c:
        with pytest.raises(HttpError) as ei:
            c.get_json(_wd(server), WD_Q)
    assert _wd(server) in str(ei.value) and "after 3 attempts" in str(ei.value) and "http 500" in str(ei.value)
    assert len(server.log) == 3


def test_retry_after_above_limit_is_an_error(server):
    server.retry_after = 30.0
    server.inject("429")
    with _client(max_retry_after=5) as c:
        t0 = time.monotonic()
        with pytest.raises(HttpError, match="asks to wait 30s"):
            c.get_json(_wd(server), WD_Q)
    assert time.monotonic() - t0 < 5.0 and len(server.log) == 1  # failed at once instead of sleeping 30 s


def test_api_error_is_not_retried(server):
    with _client() as c:
        with pytest.raises(ApiError) as ei:
            c.get_json(_wd(server), {"action": "nonsense"})
    assert ei.value.code == "badvalue" and len(server.log) == 1


def test_full_jitter_is_seeded_and_bounded(server):
    def run(seed):
        sleeps = []
        server.clear_faults()
        server.inject("500", times=5)
        with _client(seed=seed, backoff_base=0.5, backoff_cap=2.0, sleep=sleeps.append) as c:
            c.get_json(_wd(server), WD_Q, use_cache=False)
        return sleeps

    a, b, other = run(3), run(3), run(4)
    assert a == b and a != other and len(a) == 5
    for k, s in enumerate(a):
        assert 0.0 <= s <= min(2.0, 0.5 * 2 ** k)


def test_cache_hit_makes_no_request(server, tmp_path):
    with _client(cache_dir=tmp_path / "cache") as c:
        a = c.get_json(_wd(server), WD_Q)
        b = c.get_json(_wd(server), dict(reversed(list(WD_Q.items()))))  # same params, other order
        assert len(server.log) == 1 and a == b and c.stats["cache_hits"] == 1
        c.get_json(_wd(server), {**WD_Q, "ids": "Q900101"})
        assert len(server.log) == 2
    with _client(cache_dir=tmp_path / "cache") as c2:  # a new process/build reads the same cache
        assert c2.get_json(_wd(server), WD_Q) == a
    assert len(server.log) == 2
    files = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert len(files) == 2 and not [p for p in files if p.name.endswith(".tmp")]
    assert cache_key("GET", "u", {"a": 1, "maxlag": 5}) == cache_key("get", "u", {"a": "1"})
    assert cache_key("GET", "u", {"a": 1}) != cache_key("POST", "u", {"a": 1})


def test_cache_ttl_expires_entries(server, tmp_path):
    import os

    with _client(cache_dir=tmp_path / "c", cache_ttl=3600) as c:
        c.get_json(_wd(server), WD_Q)
        c.get_json(_wd(server), WD_Q)
        assert len(server.log) == 1
        (entry,) = [p for p in (tmp_path / "c").rglob("*.json")]
        old = time.time() - 7200
        os.utime(entry, (old, old))
        c.get_json(_wd(server), WD_Q)
        assert len(server.log) == 2 and entry.stat().st_mtime > old  # refetched and rewritten


def test_failed_responses_are_not_cached(server, tmp_path):
    server.inject("truncate")
    with _client(cache_dir=tmp_path / "c") as c:
        good = c.get_json(_wd(server), WD_Q)
        assert c.get_json(_wd(server), WD_Q) == good
    assert [r["fault"] for r in server.log] == ["truncate", None]


def test_serial_by_default(world):
    with WikiWorldServer(world, delay=0.2) as s:
        def crawl(c):
            ts = [threading.Thread(target=c.get_json, args=(s.endpoints()["wikidata_api"], {"action": "wbgetentities", "ids": q}))
                  for q in ("Q900100", "Q900101", "Q900102", "Q900103")]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            c.close()

        def overlaps(log):
            iv = sorted((r["t"], r["t_done"]) for r in log)
            return sum(1 for (a0, a1), (b0, b1) in zip(iv, iv[1:]) if b0 < a1)

        crawl(_client())
        assert len(s.log) == 4 and overlaps(s.log) == 0 and s.peak_in_flight == 1
        s.log.clear()
        # a concurrent client's first request is answered only once a second one has arrived, so the
        # overlap does not depend on thread scheduling (a serial client would leave it alone: no overlap)
        s.hold_until_concurrent(2)
        crawl(_client(concurrency=4))
        assert len(s.log) == 4 and overlaps(s.log) >= 1 and s.peak_in_flight >= 2


def test_refuses_wikimedia_without_contact(monkeypatch):
    monkeypatch.delenv("EVENTATLAS_CONTACT", raising=False)
    monkeypatch.delenv("EVENTATLAS_USER_AGENT", raising=False)
    with PoliteClient() as c:
        assert "EVENTATLAS_CONTACT" in c.user_agent
        with pytest.raises(HttpError, match="contact"):
            c.get_json("https://www.wikidata.org/w/api.php", {"action": "wbgetentities", "ids": "Q362"})
    monkeypatch.setenv("EVENTATLAS_CONTACT", "someone@example.org")
    with PoliteClient() as c:
        assert "someone@example.org" in c.user_agent
