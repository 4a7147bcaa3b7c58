"""A polite, resilient JSON client for the MediaWiki / Wikibase / SPARQL APIs.

Wikimedia's API etiquette (https://www.mediawiki.org/wiki/API:Etiquette) is enforced
here rather than left to callers:

* a descriptive User-Agent with contact information (``user_agent=`` / ``contact=`` or
  ``EVENTATLAS_USER_AGENT`` / ``EVENTATLAS_CONTACT``); requests to a non-loopback host
  are refused without a contact, so nobody crawls Wikimedia anonymously by accident; a
  contact given beside a User-Agent of one's own is appended to it (``mybot/1.0 (me@x.org)``);
* ``maxlag=5`` on every MediaWiki/Wikibase request (``maxlag=None`` per call for SPARQL);
* serial requests by default: one client-wide semaphore (``concurrency=1``);
* ``429``/``503`` ``Retry-After`` (delta seconds or HTTP-date) and ``maxlag`` errors set a
  client-wide "not before" instant: no request of any thread leaves before it;
* exponential backoff with full jitter (seeded RNG) on timeouts, dropped connections,
  5xx and truncated/invalid JSON; bounded attempts, then :class:`HttpError` naming the URL;
* gzip (``Accept-Encoding: gzip``);
* limits a server cannot stretch: a size cap on the body (``max_response_bytes``, on the bytes received
  and on the bytes after gzip, reading stops as soon as either passes it), a wall-clock deadline per call
  (``timeout``: connect, headers and every byte of every attempt), and redirects followed by the client
  only to the requested host or a Wikimedia host over http(s), at most ``max_redirects``, loops refused;
* an on-disk cache keyed by method + URL + params (+ body), written atomically, so a
  repeated build does not refetch.
"""
from __future__ import annotations

import email.utils
import hashlib
import ipaddress
import logging
import os
import random
import re
import threading
import time
import zlib
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urljoin, urlsplit

import httpcore
import httpx
import orjson

from ..io import atomic_path

log = logging.getLogger(__name__)

__all__ = ["PoliteClient", "HttpError", "ApiError", "default_user_agent", "user_agent_with_contact", "parse_retry_after", "cache_key", "is_contact"]

VERSION = "0.1.0"
DEFAULT_MAXLAG = 5
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504, 520, 521, 522, 524})
DEFAULT_MAX_RESPONSE_BYTES = 128 * 2**20  # a 50-entity wbgetentities batch is a few MB; far above any real answer
DEFAULT_MAX_REDIRECTS = 5
# a redirect may lead to the requested host itself or to one of these domains (and their subdomains)
WIKIMEDIA_DOMAINS = ("wikipedia.org", "wikidata.org", "wikimedia.org", "wikinews.org", "mediawiki.org",
                     "wiktionary.org", "wikiquote.org", "wikisource.org", "wikibooks.org", "wikiversity.org",
                     "wikivoyage.org")


class HttpError(RuntimeError):
    """A request that could not be completed; names the URL and the last cause."""

    def __init__(self, url: str, message: str, *, attempts: int = 0, status: int | None = None):
        self.url, self.attempts, self.status = url, attempts, status
        super().__init__(f"{url}: {message}" + (f" (after {attempts} attempts)" if attempts else ""))


class ApiError(HttpError):
    """A well-formed MediaWiki error response other than maxlag (not retried)."""

    def __init__(self, url: str, code: str, info: str):
        self.code, self.info = code, info
        super().__init__(url, f"API error {code}: {info}")


def default_user_agent(contact: str | None = None, tool: str = "eventatlas") -> str:
    """``eventatlas/<ver> (<contact>) httpx/<ver>`` as the Wikimedia User-Agent policy asks."""
    contact = contact or os.environ.get("EVENTATLAS_CONTACT")
    who = contact if contact else "no contact configured; set EVENTATLAS_CONTACT"
    return f"{tool}/{VERSION} ({who}; event-grounding dataset builder) httpx/{httpx.__version__}"


def user_agent_with_contact(user_agent: str | None, contact: str | None) -> str:
    """The User-Agent sent: the default one (with ``contact``), or a user-supplied one with ``contact``
    appended when it does not already hold it; a supplied one without any contact stays as it is (and
    requests to public hosts are then refused)."""
    if not user_agent:
        return default_user_agent(contact)
    if contact and contact not in user_agent:
        return f"{user_agent} ({contact})"
    return user_agent


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP-date); None if absent/bad."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def cache_key(method: str, url: str, params: Mapping[str, Any] | None = None, data: Mapping[str, Any] | None = None) -> str:
    """Stable key of a request. ``maxlag`` is left out: it changes when a request may run, not its answer."""
    def norm(m: Mapping[str, Any] | None) -> list[tuple[str, str]]:
        return sorted((str(k), str(v)) for k, v in (m or {}).items() if k != "maxlag")

    blob = orjson.dumps([method.upper(), url, norm(params), norm(data)])
    return hashlib.sha256(blob).hexdigest()


_EMAIL = re.compile(r"[^@\s()<>;,]+@[^@\s()<>;,]+\.[A-Za-z]{2,}")
_URL = re.compile(r"https?://[^\s/()<>;,]+\.[^\s()<>;,]+")


def is_contact(text: str | None) -> bool:
    """True when ``text`` holds a URL (http(s)://host.tld...) or an e-mail address, as the Wikimedia
    User-Agent policy asks; a bare name ("me", "test") is not a way to reach anyone."""
    return bool(text) and bool(_EMAIL.search(text) or _URL.search(text))


def _is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_in(host: str, domains: tuple[str, ...]) -> bool:
    return any(host == d or host.endswith("." + d) for d in domains)


class _DeadlineStream(httpcore.NetworkStream):
    """A socket stream whose every connect/read/write waits at most until the calling thread's deadline:
    a server trickling headers or body a byte at a time cannot stretch a request past it."""

    def __init__(self, inner: httpcore.NetworkStream, deadline_of: Callable[[], float | None]):
        self._inner, self._deadline_of = inner, deadline_of

    def _left(self, timeout: float | None, exc: type[Exception]) -> float | None:
        return _time_left(self._deadline_of(), timeout, exc)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, self._left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(tls, self._deadline_of)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend with :class:`_DeadlineStream` connections."""

    def __init__(self, inner: httpcore.NetworkBackend, deadline_of: Callable[[], float | None]):
        self._inner, self._deadline_of = inner, deadline_of

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        timeout = _time_left(self._deadline_of(), timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options), self._deadline_of)

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> httpcore.NetworkStream:
        timeout = _time_left(self._deadline_of(), timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options), self._deadline_of)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _time_left(deadline: float | None, timeout: float | None, exc: type[Exception]) -> float | None:
    """``timeout`` shortened to what is left before ``deadline``; ``exc`` once nothing is left."""
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise exc("request deadline passed")
    return left if timeout is None else min(timeout, left)


def _install_deadline(client: httpx.Client, deadline_of: Callable[[], float | None]) -> None:
    """The deadline on every socket operation of the client's own transports (the default one and any
    proxy ones httpx made from the environment). httpx offers no public hook for the network backend,
    so it is swapped in on each connection pool; should a future httpcore rename it, the deadline is
    still checked between body chunks (headers are then bounded per read only)."""
    for transport in [getattr(client, "_transport", None), *getattr(client, "_mounts", {}).values()]:
        pool = getattr(transport, "_pool", None)
        if isinstance(getattr(pool, "_network_backend", None), httpcore.NetworkBackend):
            pool._network_backend = _DeadlineBackend(pool._network_backend, deadline_of)


class _Retry(Exception):
    """Internal: this attempt failed in a way worth retrying."""

    def __init__(self, reason: str, wait: float | None = None, status: int | None = None):
        self.reason, self.wait, self.status = reason, wait, status
        super().__init__(reason)


class PoliteClient:
    """Thread-safe JSON GET/POST client following the Wikimedia API etiquette.

    ``get_json(url, params)`` returns the decoded JSON object. Parameters:

    - ``timeout``: the deadline of one call, seconds of talking to the server: connecting, sending and
      receiving headers and the whole body, summed over its attempts (a trickling server cannot stretch it).
      Not counted: the backoff sleeps between attempts, a Retry-After/maxlag wait the server asks for and
      waiting for a free slot: those are politeness, bounded by ``backoff_cap``/``max_retry_after``; a
      polite slowdown must not turn into a failure. A retry is made only while time is left, then
      :class:`HttpError` "deadline of Ns passed".
    - ``attempt_timeout``: optional cap on one attempt (None: the rest of ``timeout``), so that a stalled
      attempt leaves time for a retry.
    - ``max_response_bytes``: size cap on a body, both as received and after gzip (default 128 MiB);
      reading stops as soon as either passes it; an error naming the URL and the cap, not retried.
    - ``max_redirects`` (default 5) and ``redirect_hosts``: redirects are followed by the client only over
      http(s) to the requested host or a host under ``redirect_hosts`` (default: the Wikimedia domains);
      any other Location (another host, a link-local address, ``file://``), a loop, or more redirects
      than that is an :class:`HttpError` naming the Location, not retried.
    - ``max_attempts``: total tries per request before :class:`HttpError`.
    - ``backoff_base``/``backoff_cap``: full-jitter backoff ``uniform(0, min(cap, base*2**k))``.
    - ``max_retry_after``: a server's Retry-After above this is an error rather than a sleep.
    - ``concurrency``: simultaneous requests (1 = serial).
    - ``min_interval``: optional gap between request starts (seconds).
    - ``cache_dir``: on-disk response cache (None = off); ``cache_ttl`` seconds an entry stays
      valid (None = until deleted: a rebuild of the same crawl is then free).
    - ``seed``: seeds the jitter RNG (recorded in ``stats``).
    """

    def __init__(
        self,
        *,
        user_agent: str | None = None,
        contact: str | None = None,
        timeout: float = 30.0,
        attempt_timeout: float | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        redirect_hosts: tuple[str, ...] = WIKIMEDIA_DOMAINS,
        max_attempts: int = 8,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        max_retry_after: float = 900.0,
        default_retry_after: float = 5.0,
        concurrency: int = 1,
        min_interval: float = 0.0,
        cache_dir: str | os.PathLike | None = None,
        cache_ttl: float | None = None,
        maxlag: int | None = DEFAULT_MAXLAG,
        seed: int = 0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be >= 1")
        if not timeout > 0 or (attempt_timeout is not None and not attempt_timeout > 0):
            raise ValueError("timeout and attempt_timeout must be > 0 seconds")
        if max_response_bytes < 1 or max_redirects < 0:
            raise ValueError("max_response_bytes must be >= 1 and max_redirects >= 0")
        env_ua = os.environ.get("EVENTATLAS_USER_AGENT")
        self.contact = contact or os.environ.get("EVENTATLAS_CONTACT")
        if self.contact and not is_contact(self.contact):
            raise ValueError(f"contact {self.contact!r} is neither a URL (https://...) nor an e-mail address; "
                             "the Wikimedia User-Agent policy asks for a way to reach you")
        self.user_agent = user_agent_with_contact(user_agent or env_ua, self.contact)
        # what counts is what the hosts receive: a User-Agent with a URL or an e-mail address in it
        self._has_contact = is_contact(self.user_agent)
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self.max_response_bytes = max_response_bytes
        self.max_redirects = max_redirects
        self.redirect_hosts = tuple(h.lower().lstrip(".") for h in redirect_hosts)
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.max_retry_after = max_retry_after
        self.default_retry_after = default_retry_after
        self.concurrency = concurrency
        self.min_interval = min_interval
        self.maxlag = maxlag
        self.seed = seed
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.cache_ttl = cache_ttl
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._sem = threading.BoundedSemaphore(concurrency)
        self._gate = threading.Lock()  # guards _not_before / _last_start
        self._not_before = 0.0  # monotonic instant before which no request may start
        self._last_start = -1e18
        self._sleep, self._clock = sleep, clock
        self.stats: Counter[str] = Counter()
        self._local = threading.local()  # the calling thread's request: its deadline and original URL
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            headers={"User-Agent": self.user_agent, "Accept-Encoding": "gzip", "Accept": "application/json"},
            transport=transport,
            follow_redirects=False,  # followed in _send, hop by hop, within the redirect policy
            # both run for every hop of a redirect chain
            event_hooks={"request": [self._check_hop], "response": [self._check_redirect]},
        )
        if transport is None:
            _install_deadline(self._client, lambda: getattr(self._local, "deadline", None))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "PoliteClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- public ----------------------------------------------------------------------------
    def get_json(
        self,
        url: str,
        params: Mapping[str, Any] | None = None,
        *,
        method: str = "GET",
        data: Mapping[str, Any] | None = None,
        mediawiki: bool = True,
        use_cache: bool = True,
    ) -> Any:
        """Fetch ``url`` and decode JSON. ``mediawiki=True`` adds ``maxlag`` and ``format=json``
        and treats ``{"error": ...}`` bodies as API errors (maxlag ones are retried)."""
        params = dict(params or {})
        if mediawiki:
            params.setdefault("format", "json")
            params.setdefault("formatversion", "2")
            if self.maxlag is not None:
                params["maxlag"] = self.maxlag
        if not self._has_contact and not _is_loopback(url):
            raise HttpError(url, "refusing to crawl without contact information in the User-Agent: "
                                 "pass contact=... or set EVENTATLAS_CONTACT (Wikimedia User-Agent policy)")
        key = cache_key(method, url, params, data)
        if use_cache and self.cache_dir is not None:
            hit = self._cache_get(key)
            if hit is not None:
                self.stats["cache_hits"] += 1
                return hit
        body = self._fetch(url, params, method=method, data=data, mediawiki=mediawiki)
        if use_cache and self.cache_dir is not None:
            self._cache_put(key, body)
        return orjson.loads(body)

    def _check_hop(self, request: httpx.Request) -> None:
        """The contact rule on every request sent, redirects included: a loopback URL may redirect
        to a public host, which must not be crawled anonymously."""
        url = str(request.url)
        if not self._has_contact and not _is_loopback(url):
            raise HttpError(url, "refusing to crawl without contact information in the User-Agent (reached by a "
                                 "redirect or request): pass contact=... or set EVENTATLAS_CONTACT (Wikimedia User-Agent policy)")

    def _check_redirect(self, response: httpx.Response) -> None:
        """The redirect policy, before httpx builds the next hop: http(s) only, to the requested host or
        a ``redirect_hosts`` domain; anything else (another host, 169.254.169.254, ``file://``) is refused."""
        if not response.has_redirect_location:
            return
        origin = getattr(self._local, "origin", None) or str(response.request.url)
        location = response.headers["Location"]
        try:
            httpx.URL(location)  # what httpx would fail on when building the next request
            target = urlsplit(urljoin(str(response.request.url), location.strip()))
            host = (target.hostname or "").lower()
        except (httpx.InvalidURL, ValueError):
            target, host = None, ""
        home = (urlsplit(origin).hostname or "").lower()
        if target is None or target.scheme.lower() not in ("http", "https") or not host \
                or not (host == home or _host_in(host, self.redirect_hosts)):
            raise HttpError(origin, f"redirect to {location!r} refused: only http(s) redirects to {home} or to "
                                    "an allowed host (redirect_hosts; by default the Wikimedia domains) are followed",
                            status=response.status_code)

    # -- cache -----------------------------------------------------------------------------
    def _cache_path(self, key: str) -> Path:
        assert self.cache_dir is not None
        return self.cache_dir / key[:2] / f"{key}.json"

    def _cache_get(self, key: str) -> Any | None:
        p = self._cache_path(key)
        try:
            if self.cache_ttl is not None and time.time() - p.stat().st_mtime > self.cache_ttl:
                return None  # stale: refetched and overwritten
            raw = p.read_bytes()
        except FileNotFoundError:
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            # Writes are atomic, so this is outside damage: drop the entry and refetch.
            log.warning("corrupt cache entry %s removed", p)
            p.unlink(missing_ok=True)
            return None

    def _cache_put(self, key: str, body: bytes) -> None:
        p = self._cache_path(key)
        with atomic_path(p) as tmp:
            tmp.write_bytes(body)

    # -- core ------------------------------------------------------------------------------
    def _jitter(self, attempt: int) -> float:
        with self._rng_lock:
            return self._rng.uniform(0.0, min(self.backoff_cap, self.backoff_base * (2 ** attempt)))

    def _push_not_before(self, seconds: float) -> None:
        with self._gate:
            self._not_before = max(self._not_before, self._clock() + seconds)

    def _wait_turn(self) -> None:
        """Sleep until no Retry-After is pending and ``min_interval`` has passed, then claim the slot."""
        while True:
            with self._gate:
                now = self._clock()
                ready = max(self._not_before, self._last_start + self.min_interval)
                if now >= ready:
                    self._last_start = now
                    return
                wait = ready - now
            self._sleep(wait)

    def _fetch(self, url: str, params: dict[str, Any], *, method: str, data: Mapping[str, Any] | None, mediawiki: bool) -> bytes:
        last: _Retry | None = None
        spent = 0.0  # seconds of this call's attempts so far: the deadline (``timeout``) bounds their sum
        for attempt in range(self.max_attempts):
            if attempt:
                self.stats["retries"] += 1
                assert last is not None
                if last.wait is None:
                    self._sleep(self._jitter(attempt - 1))
                # else: the Retry-After was already pushed to the shared gate; _wait_turn sleeps it
            try:
                with self._sem:
                    self._wait_turn()
                    self.stats["requests"] += 1
                    limit = self.timeout - spent
                    if self.attempt_timeout is not None:
                        limit = min(limit, self.attempt_timeout)
                    t0 = time.monotonic()
                    try:
                        return self._attempt(url, params, method=method, data=data, mediawiki=mediawiki,
                                             deadline=t0 + limit)
                    except _Retry as r:
                        if r.wait is not None:
                            if r.wait > self.max_retry_after:
                                raise HttpError(url, f"server asks to wait {r.wait:.0f}s (> max_retry_after "
                                                     f"{self.max_retry_after:.0f}s) after {r.reason}",
                                                attempts=attempt + 1, status=r.status) from r
                            # pushed before the slot is released: no queued thread can slip through
                            self._push_not_before(r.wait)
                        raise
                    finally:
                        spent += time.monotonic() - t0
            except _Retry as r:
                if spent >= self.timeout:
                    raise HttpError(url, f"deadline of {self.timeout:g}s passed: {r.reason}", attempts=attempt + 1,
                                    status=r.status) from r
                self.stats[f"retry:{r.reason.split(' ')[0]}"] += 1
                log.info("retrying %s: %s", url, r.reason)
                last = r
        assert last is not None
        raise HttpError(url, f"giving up: {last.reason}", attempts=self.max_attempts, status=last.status)

    def _attempt(self, url: str, params: dict[str, Any], *, method: str, data: Mapping[str, Any] | None, mediawiki: bool,
                 deadline: float) -> bytes:
        self._local.deadline, self._local.origin = deadline, url
        try:
            resp, body = self._send(self._client.build_request(method, url, params=params, data=data), url, deadline)
        except httpx.TimeoutException as e:
            raise _Retry(f"timeout ({type(e).__name__})") from e
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError, httpx.ConnectError,
                httpx.DecodingError) as e:  # a short body raises RemoteProtocolError
            raise _Retry(f"connection ({type(e).__name__}: {e})") from e
        finally:
            self._local.deadline = self._local.origin = None
        status = resp.status_code
        retry_after = parse_retry_after(resp.headers.get("Retry-After"))
        if status in (429, 503):
            # 503 without Retry-After is an ordinary 5xx: back off with jitter.
            raise _Retry(f"http {status}", wait=retry_after, status=status)
        if status in RETRYABLE_STATUS or 500 <= status < 600:
            raise _Retry(f"http {status}", wait=retry_after if status in (429, 503) else None, status=status)
        if status >= 400:
            raise HttpError(url, f"HTTP {status}: {body[:200]!r}", status=status)
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            raise _Retry(f"invalid JSON ({e}; {len(body)} bytes)") from e
        if mediawiki and isinstance(obj, dict) and isinstance(obj.get("error"), dict):
            err = obj["error"]
            code = str(err.get("code", ""))
            if code == "maxlag":
                wait = retry_after if retry_after is not None else self.default_retry_after
                raise _Retry(f"maxlag ({err.get('info', '')})", wait=wait, status=status)
            raise ApiError(url, code, str(err.get("info", "")))
        return body

    def _send(self, request: httpx.Request, url: str, deadline: float) -> tuple[httpx.Response, bytes]:
        """Send ``request`` and follow its redirects (each hop checked by :meth:`_check_redirect`); the
        final response with its body, read within the size cap."""
        seen = {str(request.url)}
        for _ in range(self.max_redirects + 1):
            resp = self._client.send(request, stream=True)
            try:
                if resp.next_request is None:
                    return resp, self._read_capped(resp, url, deadline)
            finally:
                resp.close()
            request, location = resp.next_request, resp.headers["Location"]
            if str(request.url) in seen:
                raise HttpError(url, f"redirect loop: Location {location!r} leads back to {request.url}", status=resp.status_code)
            seen.add(str(request.url))
        raise HttpError(url, f"more than {self.max_redirects} redirects (max_redirects); the last Location was {location!r}",
                        status=resp.status_code)

    def _read_capped(self, resp: httpx.Response, url: str, deadline: float) -> bytes:
        """The body, decompressed, read chunk by chunk: at most ``max_response_bytes`` received and as
        many after gzip (the decompressor is never asked for more than is left), and the deadline is
        checked between chunks too (the socket check does not cover every transport)."""
        cap = self.max_response_bytes

        def too_big(what: str) -> HttpError:
            return HttpError(url, f"response over the size cap of {cap} bytes (max_response_bytes) {what}", status=resp.status_code)

        declared = resp.headers.get("Content-Length", "").strip()
        if declared.isdigit() and int(declared) > cap:
            raise too_big(f"by its Content-Length {declared}")
        encoding = resp.headers.get("Content-Encoding", "").strip().lower()
        if encoding in ("gzip", "x-gzip", "deflate"):
            dec = zlib.decompressobj(zlib.MAX_WBITS | 16 if "gzip" in encoding else zlib.MAX_WBITS)
        elif encoding in ("", "identity"):
            dec = None
        else:
            raise HttpError(url, f"unsupported Content-Encoding {encoding!r} (gzip was asked for)", status=resp.status_code)
        out, received = bytearray(), 0
        try:
            # the raw (still encoded) stream; iter_raw() refuses a mocked response that holds its body already
            for chunk in resp.stream:  # type: ignore[union-attr]
                received += len(chunk)
                if received > cap:
                    raise too_big("as received")
                while chunk:
                    if dec is None:
                        out += chunk
                        break
                    out += dec.decompress(chunk, cap - len(out) + 1)
                    chunk = dec.unconsumed_tail
                    if len(out) > cap:
                        raise too_big(f"after {encoding} decompression")
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("request deadline passed while reading the body")
            if dec is not None:
                out += dec.flush()
        except zlib.error as e:
            raise httpx.DecodingError(f"bad {encoding} data: {e}") from e
        if len(out) > cap:
            raise too_big(f"after {encoding} decompression")
        return bytes(out)
