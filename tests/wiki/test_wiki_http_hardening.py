"""The crawler off the happy path: the contact rule on every redirect hop, bounded jittered
exponential backoff on 429 without Retry-After, a contact must be a URL or an e-mail address."""
from __future__ import annotations

import json

import httpx
import pytest

from eventatlas.wiki.http import HttpError, PoliteClient, is_contact

API = "https://en.wikipedia.org/w/api.php"


@pytest.fixture(autouse=True)
def _no_env_contact(monkeypatch):
    monkeypatch.delenv("EVENTATLAS_CONTACT", raising=False)
    monkeypatch.delenv("EVENTATLAS_USER_AGENT", raising=False)


def _client(handler, **kw) -> tuple[PoliteClient, list[float]]:
    slept: list[float] = []
    c = PoliteClient(transport=httpx.MockTransport(handler), sleep=slept.append, maxlag=None, **kw)
    return c, slept


def test_redirect_from_loopback_to_public_host_needs_contact():
    seen: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        seen.append(str(req.url))
        if req.url.host == "127.0.0.1":
            return httpx.Response(302, headers={"Location": API + "?action=query"})
        return httpx.Response(200, json={"ok": True})

    c, _ = _client(handler)
    with pytest.raises(HttpError, match=r"^https://en\.wikipedia\.org/w/api\.php\?action=query: refusing to crawl without contact"):
        c.get_json("http://127.0.0.1:9/api.php", mediawiki=False)
    assert seen == ["http://127.0.0.1:9/api.php"]  # the public hop was never sent
    c2, _ = _client(handler, contact="crawler@example.org")
    assert c2.get_json("http://127.0.0.1:9/api.php", mediawiki=False) == {"ok": True}
    assert seen[-1].startswith(API)


def test_429_without_retry_after_backs_off_exponentially_with_jitter():
    calls = {"n": 0}

    def handler(req):
        calls["n"] += 1
        return httpx.Response(429) if calls["n"] <= 3 else httpx.Response(200, json={"ok": 1})

    c, slept = _client(handler, contact="https://example.org/me", backoff_base=1.0, backoff_cap=60.0, seed=3)
    assert c.get_json(API, mediawiki=False) == {"ok": 1}
    assert calls["n"] == 4 and len(slept) == 3
    for k, s in enumerate(slept):  # full jitter: uniform(0, min(cap, base * 2**k))
        assert 0.0 <= s <= min(60.0, 2.0 ** k)
    assert len(set(slept)) == 3  # jittered, not a constant delay


def test_429_forever_is_bounded():
    def handler(req):
        return httpx.Response(429)

    c, slept = _client(handler, contact="me@example.org", max_attempts=6, backoff_base=1.0, backoff_cap=4.0)
    with pytest.raises(HttpError, match=r"giving up: http 429 \(after 6 attempts\)"):
        c.get_json(API, mediawiki=False)
    assert len(slept) == 5 and max(slept) <= 4.0  # capped delay, capped attempts


@pytest.mark.parametrize("contact,ok", [("me@example.org", True), ("https://example.org/~me", True),
                                        ("User:Me (https://meta.wikimedia.org/wiki/User:Me)", True),
                                        ("x", False), ("me", False), ("http://localhost", False), ("@", False)])
def test_contact_must_be_url_or_email(contact, ok):
    assert is_contact(contact) is ok
    if ok:
        PoliteClient(contact=contact).close()
    else:
        with pytest.raises(ValueError, match="neither a URL .* nor an e-mail address"):
            PoliteClient(contact=contact)


def test_user_agent_without_contact_does_not_count(monkeypatch):
    c, _ = _client(lambda req: httpx.Response(200, json={}), user_agent="mybot/1.0")
    with pytest.raises(HttpError, match="refusing to crawl without contact"):
        c.get_json(API, mediawiki=False)
    monkeypatch.setenv("EVENTATLAS_USER_AGENT", "mybot/1.0 (bot@example.org)")
    c2, _ = _client(lambda req: httpx.Response(200, json={"a": 1}))
    assert c2.get_json(API, mediawiki=False) == {"a": 1}


def test_corrupt_cache_entry_is_refetched_not_raised(tmp_path):
    calls = {"n": 0}

    def handler(req):
        calls["n"] += 1
        return httpx.Response(200, json={"n": calls["n"]})

    c, _ = _client(handler, contact="me@example.org", cache_dir=tmp_path / "cache")
    assert c.get_json(API, {"q": 1}, mediawiki=False) == {"n": 1}
    assert c.get_json(API, {"q": 1}, mediawiki=False) == {"n": 1} and calls["n"] == 1  # cached
    entry = next((tmp_path / "cache").rglob("*.json"))
    entry.write_bytes(b'{"n": 1')  # damaged on disk
    assert c.get_json(API, {"q": 1}, mediawiki=False) == {"n": 2} and calls["n"] == 2
    assert json.loads(entry.read_bytes()) == {"n": 2}  # rewritten with the fresh answer
    assert c.get_json(API, {"q": 1}, mediawiki=False) == {"n": 2} and calls["n"] == 2


@pytest.mark.parametrize("fsync", [True, False])
def test_checkpoint_records_are_fsynced(tmp_path, monkeypatch, fsync):
    """A crawl checkpoint record is on disk before record() returns (a power cut keeps it)."""
    import eventatlas.wiki.checkpoint as ck

    synced: list[int] = []
    monkeypatch.setattr(ck.os, "fsync", lambda fd: synced.append(fd))
    with ck.Checkpoint(tmp_path / "ck", {"root": "Q1"}, fsync=fsync) as c:
        c.record("pages", {"A": 1, "B": 2})
        c.record("pages", {"A": 1})  # nothing new: no write, no sync
    assert len(synced) == (1 if fsync else 0)


@pytest.mark.parametrize("via_env", [True, False])
def test_contact_appended_to_a_user_supplied_user_agent(monkeypatch, via_env):
    """A User-Agent of one's own plus --contact: the public host receives both (the contact was dropped)."""
    sent: list[str] = []

    def handler(req: httpx.Request) -> httpx.Response:
        sent.append(req.headers["User-Agent"])
        return httpx.Response(200, json={"ok": 1})

    if via_env:
        monkeypatch.setenv("EVENTATLAS_USER_AGENT", "mybot/1.0")
        c, _ = _client(handler, contact="x@y.org")
    else:
        c, _ = _client(handler, user_agent="mybot/1.0", contact="x@y.org")
    assert c.get_json(API, mediawiki=False) == {"ok": 1}
    assert sent == ["mybot/1.0 (x@y.org)"]
    # a User-Agent that already names the contact is sent unchanged (no doubled contact)
    c2, _ = _client(handler, user_agent="mybot/1.0 (x@y.org)", contact="x@y.org")
    c2.get_json(API, {"q": 2}, mediawiki=False)
    assert sent[-1] == "mybot/1.0 (x@y.org)"
