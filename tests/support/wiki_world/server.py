"""A real local HTTP server speaking the MediaWiki/Wikibase/SPARQL subset the API backend uses.

It serves one fixture world (``tests/support/wiki_world/world.py``) on ``127.0.0.1`` (ephemeral
port, ``ThreadingHTTPServer``) with hosts mapped to path prefixes::

    {base}/www.wikidata/w/api.php      action=wbgetentities (<=50 ids, props, languages)
    {base}/{lang}.wikipedia/w/api.php  action=query: prop=revisions|info|categories|redirects,
    {base}/{lang}.wikinews/w/api.php                 list=backlinks (blredirect), list=iwbacklinks
    {base}/sparql                      one fixed query shape (see ``eventatlas.wiki.api_backend.events_sparql``)

Lists and props are paginated with small server-side limits so that the client's
``continue`` handling is exercised; ``formatversion=2`` JSON.

Fault injection (per test): ``schedule={n: kind}`` (the n-th request, 1-based) and/or
``inject(kind, times=, match=)``. Kinds: ``429``/``503`` (with ``Retry-After``), ``503-bare``
(no Retry-After), ``500``, ``maxlag`` (200 + ``{"error":{"code":"maxlag"}}`` + Retry-After),
``timeout`` (sleep ``timeout_sleep`` s before answering), ``truncate`` (half the JSON, valid
Content-Length), ``short`` (full Content-Length, half the body, then close), ``drop``
(close the connection without a response), ``retry-after-date`` (429 with an HTTP-date).

``hold_until_concurrent(n, match=)`` makes the matching requests wait (bounded) until ``n`` requests
have been in the server at once: a test of client-side concurrency then sees the overlap whatever
the machine's load, instead of hoping that a fixed ``delay`` is long enough.

Every request is logged (``server.log``: monotonic and wall time, site, params, User-Agent,
Accept-Encoding, fault, status) and, with ``log_path=``, appended to a JSONL file so a test
can watch a crawler in another process.
"""
from __future__ import annotations

import email.utils
import gzip
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit

from eventatlas.wiki.backend import Page, normalize_title

FAULT_KINDS = ("429", "503", "503-bare", "500", "maxlag", "timeout", "truncate", "short", "drop", "retry-after-date")

_LINK_RE = re.compile(r"\[\[\s*([^\[\]|{}]+?)\s*(?:\|[^\[\]]*)?\]\]")
# Wikinews links to Wikipedia: {{w|X}}, {{w|X|label}}, [[w:X]], [[:w:X]], [[wikipedia:X]]
_W_TEMPLATE_RE = re.compile(r"\{\{\s*[wW]\s*\|\s*([^|{}]+?)\s*(?:\|[^{}]*)?\}\}")
_IW_LINK_RE = re.compile(r"\[\[\s*:?\s*(w|wikipedia)\s*:\s*([^\[\]|]+?)\s*(?:\|[^\[\]]*)?\]\]", re.I)
_Q_RE = re.compile(r"^[QPL]\d+$")


def _claim_ids(entity: Mapping[str, Any], prop: str) -> list[str]:
    """Target item ids of a property's claims, current (``id``) or old (``numeric-id``) form."""
    out = []
    for c in (entity.get("claims") or {}).get(prop, []) or []:
        snak = c.get("mainsnak") or {}
        dv = (snak.get("datavalue") or {}).get("value")
        if isinstance(dv, dict):
            if "id" in dv:
                out.append(str(dv["id"]))
            elif "numeric-id" in dv:
                out.append("Q%d" % int(dv["numeric-id"]))
    return out


def _has_claim(entity: Mapping[str, Any], prop: str) -> bool:
    return bool((entity.get("claims") or {}).get(prop))


def coerce_world(world: Any) -> tuple[list[dict], dict[str, list[Page]], dict[str, list[Page]]]:
    """(entities, lang -> Wikipedia pages, lang -> Wikinews pages) from a world object or dict."""
    def get(name: str) -> Any:
        if isinstance(world, Mapping):
            return world.get(name)
        return getattr(world, name, None)

    entities = get("entities") or []
    pages = get("pages") or get("wikipedia") or {}
    news = get("news") or get("wikinews") or {}
    return list(entities), {k: list(v) for k, v in pages.items()}, {k: list(v) for k, v in news.items()}


class _Site:
    """Indexes of one wiki (project, lang)."""

    def __init__(self, pages: Iterable[Page]):
        self.pages = sorted(pages, key=lambda p: p.page_id)
        self.by_title: dict[tuple[int, str], Page] = {(p.ns, p.title): p for p in self.pages}
        self.by_id = {p.page_id: p for p in self.pages}
        self.links: dict[str, list[Page]] = {}  # target title -> linking pages
        self.redirects: dict[str, list[Page]] = {}  # target title -> redirect pages
        self.iwlinks: list[tuple[Page, str, str]] = []  # (page, prefix, title as written)
        for p in self.pages:
            if p.redirect_to is not None:
                self.redirects.setdefault(p.redirect_to, []).append(p)
            targets = set()
            for m in _LINK_RE.finditer(p.wikitext or ""):
                raw = m.group(1)
                if raw.lstrip().startswith(":"):
                    raw = raw.lstrip()[1:]
                t = normalize_title(raw)
                if t:
                    targets.add(t)
            if p.redirect_to is not None:
                targets.add(p.redirect_to)  # a redirect links to its target (as in MediaWiki)
            for t in targets:
                self.links.setdefault(t, []).append(p)
            seen = set()
            for m in _W_TEMPLATE_RE.finditer(p.wikitext or ""):
                seen.add(("w", m.group(1).replace(" ", "_")))
            for m in _IW_LINK_RE.finditer(p.wikitext or ""):
                seen.add((m.group(1).lower(), m.group(2).replace(" ", "_")))
            for prefix, t in sorted(seen):
                self.iwlinks.append((p, prefix, t))


class WikiWorldServer:
    """Serve a world over HTTP on 127.0.0.1. Use as a context manager; ``base_url`` once started."""

    def __init__(
        self,
        world: Any = None,
        *,
        entities: list[dict] | None = None,
        pages: Mapping[str, list[Page]] | None = None,
        news: Mapping[str, list[Page]] | None = None,
        list_limit: int = 3,
        max_content_pages: int = 4,
        max_categories: int = 5,
        timeout_sleep: float = 1.0,
        retry_after: float = 1.0,
        delay: float = 0.0,
        schedule: Mapping[int, str] | None = None,
        log_path: str | Path | None = None,
    ):
        if world is not None:
            entities, pages, news = coerce_world(world)
        self.entities = {e["id"]: e for e in (entities or [])}
        self.sites: dict[str, _Site] = {}
        for lang, ps in (pages or {}).items():
            self.sites[f"{lang}.wikipedia"] = _Site(ps)
        for lang, ps in (news or {}).items():
            self.sites[f"{lang}.wikinews"] = _Site(ps)
        self.list_limit = list_limit
        self.max_content_pages = max_content_pages
        self.max_categories = max_categories
        self.timeout_sleep = timeout_sleep
        self.retry_after = retry_after
        self.delay = delay  # seconds each answer takes (makes overlap and mid-crawl kills observable)
        self.schedule: dict[int, str] = dict(schedule or {})
        self._injected: list[list[Any]] = []  # [kind, remaining, match]
        self.log: list[dict[str, Any]] = []
        self.log_path = Path(log_path) if log_path else None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)  # in-flight changes (hold_until_concurrent)
        self._in_flight = 0
        self._peak = 0  # most requests in the server at once
        self._hold: tuple[int, Callable[[dict], bool] | None, float] | None = None
        self._n = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "WikiWorldServer":
        server = self

        class Handler(_Handler):
            world_server = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        # a short poll interval: shutdown() waits up to one interval
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="wiki-world-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "WikiWorldServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def endpoints(self) -> dict[str, str]:
        """Keyword arguments for ``ApiBackend`` pointing at this server."""
        b = self.base_url
        return {
            "wikidata_api": f"{b}/www.wikidata/w/api.php",
            "sparql_endpoint": f"{b}/sparql",
            "wikipedia_api": b + "/{lang}.wikipedia/w/api.php",
            "wikinews_api": b + "/{lang}.wikinews/w/api.php",
        }

    # -- faults ----------------------------------------------------------------------------
    def inject(self, kind: str, times: int = 1, match: Callable[[dict], bool] | None = None) -> None:
        """The next ``times`` requests for which ``match(record)`` holds get fault ``kind``."""
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {FAULT_KINDS}")
        with self._lock:
            self._injected.append([kind, times, match])

    def hold_until_concurrent(self, n: int, match: Callable[[dict], bool] | None = None,
                              timeout: float = 60.0) -> None:
        """Requests for which ``match(record)`` holds (all when None) are answered only once ``n``
        requests have been in the server at the same time (or after ``timeout`` s, so that a serial
        client shows up as a slow test that then fails its overlap assertion, not as a hang)."""
        with self._lock:
            self._hold = (n, match, timeout)

    @property
    def peak_in_flight(self) -> int:
        """The most requests the server has held at the same time."""
        return self._peak

    def _wait_for_company(self, rec: dict) -> None:
        hold = self._hold
        if hold is None or (hold[1] is not None and not hold[1](rec)):
            return
        with self._cond:
            self._cond.wait_for(lambda: self._peak >= hold[0], timeout=hold[2])

    def _leave(self) -> None:
        with self._cond:
            self._in_flight -= 1

    def clear_faults(self) -> None:
        with self._lock:
            self._injected.clear()
            self.schedule.clear()

    def _pick_fault(self, rec: dict) -> str | None:
        kind = self.schedule.get(rec["n"])
        if kind:
            return kind
        for inj in self._injected:
            if inj[1] > 0 and (inj[2] is None or inj[2](rec)):
                inj[1] -= 1
                return inj[0]
        return None

    def _register(self, rec: dict) -> dict:
        with self._lock:
            self._n += 1
            rec["n"] = self._n
            rec["fault"] = self._pick_fault(rec)
            self._in_flight += 1
            if self._in_flight > self._peak:
                self._peak = self._in_flight
                self._cond.notify_all()
            self.log.append(rec)
            if self.log_path is not None:
                with open(self.log_path, "a", encoding="utf-8") as f:
                    f.write(json.dumps({k: v for k, v in rec.items()}, sort_keys=True) + "\n")
                    f.flush()
        return rec

    # -- API -------------------------------------------------------------------------------
    def answer(self, site: str, params: dict[str, str]) -> tuple[int, Any]:
        """(status, JSON) for one request (no faults)."""
        if site == "sparql":
            return 200, self._sparql(params.get("query", ""))
        if site == "www.wikidata":
            if params.get("action") == "wbgetentities":
                return 200, self._wbgetentities(params)
            return 200, _err("badvalue", f"unsupported action {params.get('action')!r}")
        s = self.sites.get(site)
        if s is None:
            return 404, {"error": {"code": "nosuchsite", "info": site}}
        if params.get("action") != "query":
            return 200, _err("badvalue", f"unsupported action {params.get('action')!r}")
        return 200, self._query(s, params)

    def _wbgetentities(self, params: dict[str, str]) -> dict:
        ids = [i for i in params.get("ids", "").split("|") if i]
        if len(ids) > 50:
            return _err("toomanyvalues", "Too many values supplied for parameter \"ids\". The limit is 50.")
        props = set((params.get("props") or "info|sitelinks|aliases|labels|descriptions|claims|datatype").split("|"))
        langs = set(params["languages"].split("|")) if params.get("languages") else None
        out = {}
        for i in ids:
            e = self.entities.get(i)
            if e is None:
                if not _Q_RE.match(i):
                    return _err("no-such-entity", f"Could not find an entity with the ID \"{i}\".")
                out[i] = {"id": i, "missing": ""}
                continue
            t = {k: v for k, v in e.items() if k in ("id", "type")}
            for key in ("labels", "descriptions", "aliases"):
                if key in props and key in e:
                    v = e[key]
                    t[key] = {l: x for l, x in v.items() if langs is None or l in langs} if isinstance(v, dict) else v
            for key in ("claims", "sitelinks"):
                if key in props and key in e:
                    t[key] = e[key]
            out[i] = t
        return {"entities": out, "success": 1}

    def _sparql(self, query: str) -> dict:
        # Fixed shape: events (a temporal and a spatial statement), optionally under a root
        # through (P361|^P527)*.
        if "wdt:P580" not in query or "wdt:P276" not in query:
            return {"error": "unsupported query shape"}
        m = re.search(r"\(wdt:P361\|\^wdt:P527\)\*\s+wd:(Q\d+)", query)
        root = m.group(1) if m else None
        ids = []
        for qid, e in self.entities.items():
            if not any(_has_claim(e, p) for p in ("P580", "P585", "P2047")):
                continue
            if not any(_has_claim(e, p) for p in ("P276", "P625")):
                continue
            ids.append(qid)
        if root is not None:
            under = self._under(root)
            ids = [i for i in ids if i in under]
        rows = [{"item": {"type": "uri", "value": f"http://www.wikidata.org/entity/{i}"}}
                for i in sorted(ids, key=lambda x: int(x[1:]))]
        return {"head": {"vars": ["item"]}, "results": {"bindings": rows}}

    def _under(self, root: str) -> set[str]:
        """Items x with x (P361|^P527)* root."""
        children: dict[str, set[str]] = {}
        for qid, e in self.entities.items():
            for parent in _claim_ids(e, "P361"):
                children.setdefault(parent, set()).add(qid)
            for child in _claim_ids(e, "P527"):
                children.setdefault(qid, set()).add(child)
        seen, stack = {root}, [root]
        while stack:
            for c in children.get(stack.pop(), ()):
                if c not in seen:
                    seen.add(c)
                    stack.append(c)
        return seen

    def _resolve_titles(self, s: _Site, titles: list[str]) -> tuple[list[dict], list[Page | None], list[str]]:
        normalized, found, shown = [], [], []
        for t in titles:
            n = normalize_title(t)
            if n != t:
                normalized.append({"fromencoded": False, "from": t, "to": n})
            found.append(s.by_title.get((0, n)))
            shown.append(n)
        return normalized, found, shown

    def _query(self, s: _Site, params: dict[str, str]) -> dict:
        props = [p for p in params.get("prop", "").split("|") if p]
        lists = [p for p in params.get("list", "").split("|") if p]
        continuing = "continue" in params and params["continue"] not in ("", None)
        out: dict[str, Any] = {}
        cont: dict[str, str] = {}
        query: dict[str, Any] = {}
        if "titles" in params:
            titles = [t for t in params["titles"].split("|") if t]
            if len(titles) > 50:
                return _err("toomanyvalues", "Too many values supplied for parameter \"titles\". The limit is 50.")
            normalized, found, shown = self._resolve_titles(s, titles)
            if normalized:
                query["normalized"] = normalized
            pages = []
            seen_ids = set()
            for p, n in zip(found, shown):
                if p is None:
                    pages.append({"ns": 0, "title": n, "missing": True})
                elif p.page_id not in seen_ids:
                    seen_ids.add(p.page_id)
                    pages.append({"pageid": p.page_id, "ns": p.ns, "title": p.title, "_page": p})
            real = [x for x in pages if "_page" in x]
            real.sort(key=lambda x: x["pageid"])
            if "info" in props:
                for x in real:
                    if x["_page"].is_redirect:
                        x["redirect"] = True
                    x["contentmodel"] = "wikitext"
            if "revisions" in props and (not continuing or "rvcontinue" in params):
                start = int(params.get("rvcontinue", "0"))
                end = start + self.max_content_pages
                for idx, x in enumerate(real):
                    if start <= idx < end:
                        p: Page = x["_page"]
                        rev: dict[str, Any] = {"slots": {"main": {"contentmodel": "wikitext", "contentformat": "text/x-wiki",
                                                                  "content": p.wikitext}}}
                        if p.revision_id is not None:
                            rev["revid"] = p.revision_id
                        if p.timestamp is not None:
                            rev["timestamp"] = p.timestamp
                        x["revisions"] = [rev]
                if end < len(real):
                    cont["rvcontinue"] = str(end)
            if "categories" in props and (not continuing or "clcontinue" in params):
                pairs = [(x, c) for x in real for c in sorted(x["_page"].categories)]
                start = int(params.get("clcontinue", "0"))
                lim = min(self.max_categories, _limit(params.get("cllimit"), 10))
                for x, c in pairs[start:start + lim]:
                    x.setdefault("categories", []).append({"ns": 14, "title": f"Category:{c}"})
                if start + lim < len(pairs):
                    cont["clcontinue"] = str(start + lim)
            if "redirects" in props and (not continuing or "rdcontinue" in params):
                nsf = _ns_filter(params.get("rdnamespace"))
                pairs = [(x, r) for x in real for r in s.redirects.get(x["title"], []) if nsf is None or r.ns in nsf]
                start = int(params.get("rdcontinue", "0"))
                lim = min(self.list_limit, _limit(params.get("rdlimit"), 10))
                for x, r in pairs[start:start + lim]:
                    x.setdefault("redirects", []).append({"pageid": r.page_id, "ns": r.ns, "title": r.title})
                if start + lim < len(pairs):
                    cont["rdcontinue"] = str(start + lim)
            for x in pages:
                x.pop("_page", None)
            query["pages"] = pages
        if "backlinks" in lists:
            target = normalize_title(params.get("bltitle", ""))
            nsf = _ns_filter(params.get("blnamespace"))
            filt = params.get("blfilterredir", "all")
            entries = []
            for p in sorted(s.links.get(target, []), key=lambda p: p.page_id):
                if nsf is not None and p.ns not in nsf:
                    continue
                if filt == "redirects" and not p.is_redirect:
                    continue
                if filt == "nonredirects" and p.is_redirect:
                    continue
                e: dict[str, Any] = {"pageid": p.page_id, "ns": p.ns, "title": p.title}
                if p.is_redirect:
                    e["redirect"] = True
                    if "blredirect" in params:
                        e["redirlinks"] = [{"pageid": q.page_id, "ns": q.ns, "title": q.title}
                                           for q in sorted(s.links.get(p.title, []), key=lambda q: q.page_id)
                                           if nsf is None or q.ns in nsf]
                entries.append(e)
            start = int(params.get("blcontinue", "0").split("|")[-1])
            lim = min(self.list_limit, _limit(params.get("bllimit"), 10))
            query["backlinks"] = entries[start:start + lim]
            if start + lim < len(entries):
                cont["blcontinue"] = f"0|{start + lim}"
        if "iwbacklinks" in lists:
            prefix = params.get("iwblprefix", "").lower()
            want = params.get("iwbltitle")
            entries = []
            for p, pre, t in s.iwlinks:
                if prefix and pre != prefix:
                    continue
                if want is not None and t != want.replace(" ", "_"):
                    continue
                e = {"pageid": p.page_id, "ns": p.ns, "title": p.title, "iwprefix": pre, "iwtitle": t}
                if p.is_redirect:
                    e["redirect"] = True
                entries.append(e)
            start = int(params.get("iwblcontinue", "0"))
            lim = min(self.list_limit, _limit(params.get("iwbllimit"), 10))
            query["iwbacklinks"] = entries[start:start + lim]
            if start + lim < len(entries):
                cont["iwblcontinue"] = str(start + lim)
        if cont:
            cont["continue"] = "||"
            out["continue"] = cont
        else:
            out["batchcomplete"] = True
        out["query"] = query
        return out


def _err(code: str, info: str) -> dict:
    return {"error": {"code": code, "info": info}}


def _limit(v: str | None, default: int) -> int:
    if v in (None, ""):
        return default
    if v == "max":
        return 500
    return max(1, int(v))


def _ns_filter(v: str | None) -> set[int] | None:
    if v in (None, "", "*"):
        return None
    return {int(x) for x in v.split("|")}


class _Handler(BaseHTTPRequestHandler):
    world_server: WikiWorldServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

    def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the server keeps its own log
        pass

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        self._handle(self.rfile.read(n) if n else b"")

    def _handle(self, body: bytes) -> None:
        try:
            self._serve(body)
        finally:
            if getattr(self, "_rec", None) is not None:
                self._rec = None
                self.world_server._leave()

    def _serve(self, body: bytes) -> None:
        ws = self.world_server
        parts = urlsplit(self.path)
        params = dict(parse_qsl(parts.query, keep_blank_values=True))
        if body:
            params.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        path = parts.path.strip("/")
        site = "sparql" if path == "sparql" else path.split("/", 1)[0]
        rec = ws._register({
            "t": time.monotonic(), "wall": time.time(), "method": self.command, "path": parts.path,
            "site": site, "params": params, "ua": self.headers.get("User-Agent"),
            "accept_encoding": self.headers.get("Accept-Encoding"),
        })
        fault = rec["fault"]
        self._rec = rec
        ws._wait_for_company(rec)
        ra = ws.retry_after
        ra_header = str(int(ra)) if float(ra).is_integer() else str(ra)
        if fault == "drop":
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        if fault == "timeout":
            time.sleep(ws.timeout_sleep)
        if fault in ("429", "503"):
            return self._send(int(fault), {"error": {"code": "ratelimited", "info": "slow down"}}, {"Retry-After": ra_header})
        if fault == "retry-after-date":
            when = email.utils.formatdate(time.time() + ra + 1, usegmt=True)  # +1: HTTP-dates have 1 s resolution
            return self._send(429, {"error": {"code": "ratelimited", "info": "slow down"}}, {"Retry-After": when})
        if fault == "503-bare":
            return self._send(503, {"error": {"code": "unavailable"}})
        if fault == "500":
            return self._send(500, {"error": {"code": "internal_api_error"}})
        if fault == "maxlag":
            return self._send(200, {"error": {"code": "maxlag", "info": "Waiting for db: 7 seconds lagged.",
                                              "host": "db1", "lag": 7}},
                              {"Retry-After": ra_header, "X-Database-Lag": "7"})
        if ws.delay:
            time.sleep(ws.delay)
        status, obj = ws.answer(site, params)
        raw = json.dumps(obj, ensure_ascii=False).encode("utf-8")
        if fault == "truncate":
            raw = raw[: len(raw) // 2]
        if fault == "short":
            return self._send_short(raw)
        self._send_raw(status, raw)

    def _send(self, status: int, obj: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_raw(status, json.dumps(obj).encode("utf-8"), headers)

    def _send_raw(self, status: int, raw: bytes, headers: Mapping[str, str] | None = None) -> None:
        gz = "gzip" in (self.headers.get("Accept-Encoding") or "")
        if gz:
            raw = gzip.compress(raw, mtime=0)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            if gz:
                self.send_header("Content-Encoding", "gzip")
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            # Stamped before the body goes out: once it is written the client may return (and the test read
            # the log) before this thread runs again, so a stamp after the write can be missing.
            self._rec["t_done"] = time.monotonic()
            self.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. after its timeout)

    def _send_short(self, raw: bytes) -> None:
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw[: len(raw) // 2])
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def crawl_protocol(backend: Any, langs: Iterable[str], news_langs: Iterable[str]) -> dict[str, Any]:
    """Drive a backend through the whole protocol the way a build does; canonical, comparable result.

    Entities -> per language the sitelinked titles -> articles -> redirects to them ->
    pages linking to titles or redirects -> Wikinews pages. Pages are kept as dicts.
    """
    from dataclasses import asdict

    ents = {}
    for e in backend.iter_entities():
        ents[e["id"]] = e
    out: dict[str, Any] = {"entities": ents, "articles": {}, "redirects": {}, "linking": {}, "news": {}}
    news_langs = set(news_langs)
    for lang in langs:
        titles = sorted({sl["title"] for e in ents.values() for site, sl in (e.get("sitelinks") or {}).items()
                         if site == f"{lang}wiki"})
        arts = backend.get_articles(lang, titles)
        out["articles"][lang] = {t: asdict(p) for t, p in sorted(arts.items())}
        reds = backend.redirects_to(lang, [p.title for p in arts.values() if not p.is_redirect])
        out["redirects"][lang] = dict(sorted(reds.items()))
        targets = {p.title for p in arts.values()} | set(reds)
        out["linking"][lang] = {p.title: asdict(p) for p in sorted(backend.iter_linking_pages(lang, targets), key=lambda p: p.title)}
        if lang in news_langs:
            out["news"][lang] = {p.title: asdict(p) for p in sorted(backend.iter_wikinews(lang, targets), key=lambda p: p.title)}
    return out
