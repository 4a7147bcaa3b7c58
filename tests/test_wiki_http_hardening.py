"""Issue 16, the crawler off the happy path: the contact rule on every redirect hop, bounded jittered
exponential backoff on 429 without Retry-After, a contact must be a URL or an e-mail address."""
from __future__ import annotations

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
