"""Live-API acquisition backend: Wikidata + Wikipedia/Wikinews APIs.

Implements :class:`eventatlas.wiki.backend.WikiBackend` over HTTP, politely
(:class:`~eventatlas.wiki.http.PoliteClient`: User-Agent with contact, ``maxlag=5``,
serial, Retry-After, jittered backoff, gzip, on-disk cache) and resumably
(:class:`~eventatlas.wiki.checkpoint.Checkpoint`: every fetched entity/page/listing is
recorded durably before it is used, so a killed build restarts without refetching or
duplicating anything).

Requests used
-------------
* Wikidata ``action=wbgetentities`` with 50 ids a request, ``props=labels|descriptions|
  claims|sitelinks`` and ``languages=`` the build languages (sitelinks are not trimmed:
  pruning counts them).
* Seeds: explicit ids, a ``root`` item, and/or SPARQL (:func:`events_sparql`, endpoint
  configurable). From the seeds the closure over P361/P527/P155/P156 is expanded
  (``expand=True``), bounded by ``max_entities``.
* Wikipedia/Wikinews ``action=query``: ``prop=revisions|info`` (``rvprop=content|ids|
  timestamp``, ``rvslots=main``) on <=50 titles, without ``redirects`` so that redirect
  pages come back as such; ``prop=redirects`` (``rdnamespace=0``); ``list=backlinks``
  (``blnamespace=0``, ``blredirect``: pages that link through a redirect arrive in
  ``redirlinks``, so the redirect title need not be queried again); Wikinews
  ``list=iwbacklinks`` (prefixes ``w`` and ``wikipedia``: ``{{w|..}}`` expands to an
  interwiki link) and ``prop=categories`` (all, hidden date categories included).
  Every query follows ``continue`` until done.

Protocol notes (nothing in ``backend.py`` blocked this backend):

* ``iter_wikinews`` keeps only pages whose interwiki target (normalised) is among
  ``targets``; that is exact for the four link forms the build harvests, since MediaWiki
  records each of them in ``iwlinks`` (``{{w|X}}`` expands to ``[[w:X|..]]``).
* ``iter_linking_pages`` yields exactly the pages the backlinks tables list (no superset).
* ``redirects_to`` lists redirects to *existing* pages only (``prop=redirects`` skips missing
  titles); the build only asks for existing event articles, so this never matters.
* ``get_articles`` and ``iter_linking_pages`` share one page store per wiki: an article
  fetched as an event article is not fetched again as a linking page.
"""
from __future__ import annotations

import logging
import re
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from tqdm import tqdm

from .backend import Page, normalize_title, parse_redirect
from .checkpoint import Checkpoint
from .http import PoliteClient

log = logging.getLogger(__name__)

__all__ = ["ApiBackend", "events_sparql", "entity_relation_ids", "WIKIDATA_API", "SPARQL_ENDPOINT"]

WIKIDATA_API = "https://www.wikidata.org/w/api.php"
SPARQL_ENDPOINT = "https://query.wikidata.org/sparql"
WIKIPEDIA_API = "https://{lang}.wikipedia.org/w/api.php"
WIKINEWS_API = "https://{lang}.wikinews.org/w/api.php"

BATCH = 50  # MediaWiki's limit of ids/titles per request for ordinary clients
EXPAND_PROPS = ("P361", "P527", "P155", "P156")
WIKIDATA_PROPS = "labels|descriptions|claims|sitelinks"
IW_PREFIXES = ("w", "wikipedia")
_QID = re.compile(r"^Q[1-9][0-9]*$")


def events_sparql(root: str | None = None, limit: int | None = None) -> str:
    """SPARQL for event candidates (a temporal and a spatial statement), optionally under ``root``.

    Candidates are a superset of events (start time alone counts); the build filters.
    """
    under = f"  ?item (wdt:P361|^wdt:P527)* wd:{root} .\n" if root else ""
    q = ("SELECT DISTINCT ?item WHERE {\n"
         f"{under}"
         "  { ?item wdt:P580 [] } UNION { ?item wdt:P585 [] } UNION { ?item wdt:P2047 [] }\n"
         "  { ?item wdt:P276 [] } UNION { ?item wdt:P625 [] }\n"
         "}")
    return q + (f"\nLIMIT {int(limit)}" if limit else "")


def entity_relation_ids(entity: Mapping[str, Any], props: Sequence[str] = EXPAND_PROPS) -> list[str]:
    """Item ids an entity's claims point to (current ``id`` or old ``numeric-id`` form)."""
    out = []
    for prop in props:
        for c in (entity.get("claims") or {}).get(prop, []) or []:
            dv = ((c.get("mainsnak") or {}).get("datavalue") or {}).get("value")
            if isinstance(dv, dict):
                if dv.get("id"):
                    out.append(str(dv["id"]))
                elif "numeric-id" in dv:
                    out.append("Q%d" % int(dv["numeric-id"]))
    return out


def _qid_key(q: str) -> tuple[int, str]:
    return (int(q[1:]) if q[1:].isdigit() else 1 << 62, q)


def _chunks(xs: Sequence[str], n: int) -> Iterator[list[str]]:
    for i in range(0, len(xs), n):
        yield list(xs[i:i + n])


def _page_to_record(p: Page) -> dict[str, Any]:
    return {"lang": p.lang, "title": p.title, "page_id": p.page_id, "wikitext": p.wikitext, "ns": p.ns,
            "redirect_to": p.redirect_to, "categories": list(p.categories), "project": p.project,
            "revision_id": p.revision_id, "timestamp": p.timestamp}


def _record_to_page(r: Mapping[str, Any]) -> Page:
    return Page(**{**r, "categories": tuple(r.get("categories") or ())})


class ApiBackend:
    """Acquisition over the live APIs (or any server speaking the same subset).

    Parameters: ``languages`` (Wikipedia languages of the build; labels/descriptions are
    trimmed to them), ``wikinews_languages`` (default: same), seeding by ``seed_ids``,
    ``root`` and/or ``sparql`` (True = :func:`events_sparql` of ``root``; a string = that
    query); ``expand`` the P361/P527/P155/P156 closure; endpoints; ``client`` (or
    ``client_options`` for a new :class:`PoliteClient`); ``checkpoint`` (a
    :class:`Checkpoint` or a directory; None = a temporary one).
    """

    name = "api"

    def __init__(
        self,
        languages: Iterable[str],
        *,
        wikinews_languages: Iterable[str] | None = None,
        seed_ids: Iterable[str] = (),
        root: str | None = None,
        sparql: bool | str = False,
        expand: bool = True,
        expand_props: Sequence[str] = EXPAND_PROPS,
        max_entities: int = 200_000,
        batch_size: int = BATCH,
        wikidata_api: str = WIKIDATA_API,
        sparql_endpoint: str = SPARQL_ENDPOINT,
        wikipedia_api: str = WIKIPEDIA_API,
        wikinews_api: str = WIKINEWS_API,
        client: PoliteClient | None = None,
        client_options: Mapping[str, Any] | None = None,
        checkpoint: Checkpoint | str | Path | None = None,
        progress: bool | None = None,
    ):
        # the build always needs English labels/descriptions (pruning), whatever the languages
        self.languages = sorted(set(languages) | {"en"})
        self.wikinews_languages = sorted(set(wikinews_languages)) if wikinews_languages is not None else list(self.languages)
        self.seed_ids = sorted(dict.fromkeys(seed_ids), key=_qid_key)
        self.root = root
        bad = [q for q in self.seed_ids + ([root] if root else []) if not _QID.match(str(q))]
        if bad:
            raise ValueError(f"not Wikidata item ids: {bad[:5]}")
        if sparql is True:
            self.sparql_query: str | None = events_sparql(root)
        elif isinstance(sparql, str) and sparql:
            self.sparql_query = sparql
        else:
            self.sparql_query = None
        if not (self.seed_ids or root or self.sparql_query):
            raise ValueError("ApiBackend needs seeds: seed_ids=, root= and/or sparql=")
        self.expand = expand
        self.expand_props = tuple(expand_props)
        self.max_entities = max_entities
        if not 1 <= batch_size <= BATCH:
            raise ValueError(f"batch_size must be in 1..{BATCH} (the API's limit for ordinary clients)")
        self.batch_size = batch_size
        self.wikidata_api = wikidata_api
        self.sparql_endpoint = sparql_endpoint
        self.wikipedia_api = wikipedia_api
        self.wikinews_api = wikinews_api
        self._own_client = client is None
        self.client = client or PoliteClient(**dict(client_options or {}))
        self.progress = sys.stderr.isatty() if progress is None else progress
        self._tmpdir: str | None = None
        if isinstance(checkpoint, Checkpoint):
            self.ck, self._own_ck = checkpoint, False
        else:
            if checkpoint is None:  # no resume wanted: a throw-away checkpoint, no fsync needed
                self._tmpdir = tempfile.mkdtemp(prefix="eventatlas-crawl-")
            self.ck = Checkpoint(checkpoint or self._tmpdir, self.params(), fsync=self._tmpdir is None)
            self._own_ck = True
        self.truncated = False

    # -- provenance ------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """What identifies this crawl (a checkpoint is only resumed with equal params)."""
        return {
            "backend": self.name, "languages": self.languages, "wikinews_languages": self.wikinews_languages,
            "seed_ids": self.seed_ids, "root": self.root, "sparql": self.sparql_query, "expand": self.expand,
            "expand_props": list(self.expand_props), "max_entities": self.max_entities,
            "wikidata_api": self.wikidata_api, "sparql_endpoint": self.sparql_endpoint,
            "wikipedia_api": self.wikipedia_api, "wikinews_api": self.wikinews_api,
        }

    def info(self) -> dict[str, Any]:
        return {
            **self.params(),
            "user_agent": self.client.user_agent,
            "maxlag": self.client.maxlag,
            "concurrency": self.client.concurrency,
            "http": dict(self.client.stats),
            "checkpoint": None if self._tmpdir else str(self.ck.dir),
            "resumed": self.ck.resumed,
            "fetched": self.ck.stats(),
            "truncated": self.truncated,
        }

    def close(self) -> None:
        if self._own_ck:
            self.ck.close()
        if self._own_client:
            self.client.close()
        if self._tmpdir:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> "ApiBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _bar(self, total: int | None, desc: str) -> tqdm:
        return tqdm(total=total, desc=desc, unit="req", disable=not self.progress, leave=False)

    # -- MediaWiki query with continuation -------------------------------------------------
    def _query(self, url: str, params: Mapping[str, Any]) -> Iterator[dict]:
        """Yield the ``query`` part of each response, following ``continue``."""
        base = {"action": "query", **params}
        cont: dict[str, Any] = {}
        for _ in range(100_000):  # a server that never stops continuing is a bug: bounded
            resp = self.client.get_json(url, {**base, **cont})
            if resp.get("warnings"):
                log.warning("%s: API warnings %s", url, resp["warnings"])
            yield resp.get("query") or {}
            if "continue" not in resp:
                return
            cont = dict(resp["continue"])
        raise RuntimeError(f"{url}: continuation did not end")

    # -- Wikidata --------------------------------------------------------------------------
    def _sparql_seeds(self) -> list[str]:
        if self.sparql_query is None:
            return []
        if self.ck.is_done("seeds", "sparql"):
            return self.ck.load("seeds")["sparql"]
        resp = self.client.get_json(self.sparql_endpoint, {"query": self.sparql_query, "format": "json"}, mediawiki=False)
        ids = []
        for b in (resp.get("results") or {}).get("bindings", []):
            v = (b.get("item") or {}).get("value", "")
            q = v.rsplit("/", 1)[-1]
            if q[:1] == "Q" and q[1:].isdigit():
                ids.append(q)
        ids = sorted(dict.fromkeys(ids), key=_qid_key)
        self.ck.record("seeds", [("sparql", ids)])
        return ids

    def _fetch_entities(self, ids: list[str]) -> dict[str, dict | None]:
        resp = self.client.get_json(self.wikidata_api, {
            "action": "wbgetentities", "ids": "|".join(ids), "props": WIKIDATA_PROPS,
            "languages": "|".join(self.languages),
        })
        ents = resp.get("entities") or {}
        by_from = {}
        for e in ents.values():
            r = e.get("redirects") if isinstance(e, dict) else None
            if isinstance(r, dict) and r.get("from"):
                by_from[r["from"]] = e
        out: dict[str, dict | None] = {}
        for q in ids:
            e = ents.get(q) or by_from.get(q)
            out[q] = None if (e is None or "missing" in e) else e
        return out

    def iter_entities(self) -> Iterator[dict]:
        """Seeds, then the relation closure; each entity once (resumed ones from the checkpoint)."""
        ns = "wikidata"
        seeds = list(self.seed_ids) + ([self.root] if self.root else []) + self._sparql_seeds()
        seen: set[str] = set()
        yielded: set[str] = set()
        frontier: list[str] = []

        def discover(ids: Iterable[str]) -> None:
            for q in ids:
                if q not in seen:
                    seen.add(q)
                    frontier.append(q)

        discover(seeds)
        for q, ent in self.ck.items(ns):  # resume: what was fetched before is not fetched again
            seen.add(q)
            if ent is not None:
                if self.expand:
                    discover(entity_relation_ids(ent, self.expand_props))
                if ent["id"] not in yielded:
                    yielded.add(ent["id"])
                    yield ent
        bar = self._bar(None, "wbgetentities")
        try:
            while True:
                todo = sorted(self.ck.missing(ns, frontier), key=_qid_key)
                frontier.clear()
                if not todo:
                    break
                for batch in _chunks(todo, self.batch_size):
                    if len(self.ck.ns(ns).keys) >= self.max_entities:
                        self.truncated = True
                        log.warning("entity crawl stopped at max_entities=%d", self.max_entities)
                        return
                    got = self._fetch_entities(batch)
                    self.ck.record(ns, [(q, got[q]) for q in batch])
                    bar.update(1)
                    for q in batch:
                        ent = got[q]
                        if ent is None:
                            continue
                        if self.expand:
                            discover(entity_relation_ids(ent, self.expand_props))
                        if ent["id"] not in yielded:
                            yielded.add(ent["id"])
                            yield ent
        finally:
            bar.close()

    # -- pages -----------------------------------------------------------------------------
    def _api(self, project: str, lang: str) -> str:
        tpl = self.wikipedia_api if project == "wikipedia" else self.wikinews_api
        return tpl.format(lang=lang)

    def _fetch_pages(self, project: str, lang: str, titles: list[str]) -> dict[str, dict | None]:
        """Content (+ categories for Wikinews) of <=50 titles; key = requested title."""
        url = self._api(project, lang)
        params: dict[str, Any] = {"prop": "revisions|info", "rvprop": "content|ids|timestamp", "rvslots": "main",
                                  "titles": "|".join(titles)}
        if project == "wikinews":
            params["prop"] += "|categories"
            params["cllimit"] = "max"
        norm: dict[str, str] = {}
        merged: dict[Any, dict] = {}
        for q in self._query(url, params):
            for n in q.get("normalized", []) or []:
                norm[n["from"]] = n["to"]
            for p in q.get("pages", []) or []:
                key = p.get("pageid") or ("missing", p.get("title"))
                m = merged.setdefault(key, {})
                cats = m.get("categories", [])
                m.update({k: v for k, v in p.items() if k != "categories"})
                for c in p.get("categories", []) or []:
                    if c not in cats:
                        cats.append(c)
                if cats:
                    m["categories"] = cats
        by_title = {p["title"]: p for p in merged.values() if "title" in p}
        out: dict[str, dict | None] = {}
        for t in titles:
            p = by_title.get(norm.get(t, t))
            if p is None or p.get("missing") or p.get("invalid") or "pageid" not in p:
                out[t] = None
                continue
            revs = p.get("revisions") or []
            if not revs:
                raise RuntimeError(f"{url}: page {p.get('title')!r} came back without a revision")
            rev = revs[0]
            slot = (rev.get("slots") or {}).get("main") or {}
            text = slot.get("content", rev.get("content", ""))
            redirect_to = None
            if p.get("redirect"):
                redirect_to = parse_redirect(text) or self._redirect_target(url, p["title"])
            cats = tuple(c["title"].split(":", 1)[1] if ":" in c["title"] else c["title"] for c in p.get("categories", []) or [])
            page = Page(lang=lang, title=normalize_title(p["title"]) if p.get("ns", 0) == 0 else p["title"],
                        page_id=int(p["pageid"]), wikitext=text, ns=int(p.get("ns", 0)), redirect_to=redirect_to,
                        categories=cats, project=project, revision_id=rev.get("revid"), timestamp=rev.get("timestamp"))
            out[t] = _page_to_record(page)
        return out

    def _redirect_target(self, url: str, title: str) -> str | None:
        """A redirect whose wikitext we cannot parse: let the API resolve it."""
        for q in self._query(url, {"titles": title, "redirects": 1}):
            for r in q.get("redirects", []) or []:
                if r.get("from") == title:
                    return normalize_title(r["to"])
        return None

    def _pages(self, project: str, lang: str, titles: Iterable[str], desc: str) -> Iterator[tuple[str, dict | None]]:
        """(requested normalised title, page record or None) for each title: stored ones first, then fetched."""
        ns = f"pages.{project}.{lang}"
        want = list(dict.fromkeys(normalize_title(t) for t in titles if t and normalize_title(t)))
        todo = self.ck.missing(ns, want)
        todo_set = set(todo)
        want_set = set(want)
        if len(todo) < len(want):
            for k, v in self.ck.items(ns):
                if k in want_set and k not in todo_set:
                    yield k, v
        bar = self._bar((len(todo) + self.batch_size - 1) // self.batch_size, desc)
        batches = list(_chunks(todo, self.batch_size))
        pool = ThreadPoolExecutor(self.client.concurrency) if self.client.concurrency > 1 and len(batches) > 1 else None
        try:
            # with concurrency > 1 batches are fetched in parallel (the client's semaphore bounds
            # them) but recorded here, in order, one durable write per batch
            results = (pool.map(lambda b: self._fetch_pages(project, lang, b), batches) if pool
                       else (self._fetch_pages(project, lang, b) for b in batches))
            for batch, got in zip(batches, results):
                self.ck.record(ns, [(t, got[t]) for t in batch])
                bar.update(1)
                for t in batch:
                    yield t, got[t]
        finally:
            bar.close()
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)

    def get_articles(self, lang: str, titles: Iterable[str]) -> dict[str, Page]:
        out = {}
        for t, rec in self._pages("wikipedia", lang, titles, f"articles {lang}"):
            if rec is not None and rec["ns"] == 0:
                out[t] = _record_to_page(rec)
        return out

    def redirects_to(self, lang: str, titles: Iterable[str]) -> dict[str, str]:
        ns = f"redirects.wikipedia.{lang}"
        url = self._api("wikipedia", lang)
        want = list(dict.fromkeys(normalize_title(t) for t in titles if t and normalize_title(t)))
        todo = self.ck.missing(ns, want)
        for batch in _chunks(todo, self.batch_size):
            norm: dict[str, str] = {}
            found: dict[str, list[str]] = {}
            for q in self._query(url, {"prop": "redirects", "rdprop": "pageid|title", "rdnamespace": 0,
                                       "rdlimit": "max", "titles": "|".join(batch)}):
                for n in q.get("normalized", []) or []:
                    norm[n["from"]] = n["to"]
                for p in q.get("pages", []) or []:
                    lst = found.setdefault(p.get("title"), [])
                    for r in p.get("redirects", []) or []:
                        if r.get("ns", 0) == 0 and r["title"] not in lst:
                            lst.append(r["title"])
            self.ck.record(ns, [(t, found.get(norm.get(t, t), [])) for t in batch])
        want_set = set(want)
        out: dict[str, str] = {}
        for t, reds in self.ck.items(ns):
            if t in want_set:
                for r in reds:
                    out[normalize_title(r)] = t
        return out

    def _backlinks(self, lang: str, target: str) -> dict[str, list[str]]:
        """Non-redirect ns-0 pages linking to ``target`` directly or through a redirect."""
        url = self._api("wikipedia", lang)
        pages: list[str] = []
        redirects: list[str] = []
        for q in self._query(url, {"list": "backlinks", "bltitle": target, "blnamespace": 0, "blfilterredir": "all",
                                   "blredirect": 1, "bllimit": "max"}):
            for b in q.get("backlinks", []) or []:
                if b.get("redirect"):
                    redirects.append(b["title"])
                    pages.extend(r["title"] for r in b.get("redirlinks", []) or [] if r.get("ns", 0) == 0)
                elif b.get("ns", 0) == 0:
                    pages.append(b["title"])
        return {"pages": sorted(set(pages)), "redirects": sorted(set(redirects))}

    def iter_linking_pages(self, lang: str, targets: set[str]) -> Iterator[Page]:
        ns = f"backlinks.wikipedia.{lang}"
        targets_n = sorted({normalize_title(t) for t in targets if t})
        done = self.ck.load(ns) if self.ck.done_keys(ns) else {}
        covered = {normalize_title(r) for v in done.values() for r in v["redirects"]}
        bar = self._bar(len(targets_n), f"backlinks {lang}")
        try:
            for t in targets_n:
                bar.update(1)
                if t in done or t in covered:  # a redirect already expanded through blredirect
                    continue
                rec = self._backlinks(lang, t)
                self.ck.record(ns, [(t, rec)])
                done[t] = rec
                covered.update(normalize_title(r) for r in rec["redirects"])
        finally:
            bar.close()
        linking = sorted({normalize_title(p) for v in done.values() for p in v["pages"]})
        for _, rec in self._pages("wikipedia", lang, linking, f"linking pages {lang}"):
            if rec is not None and rec["ns"] == 0 and rec["redirect_to"] is None:
                yield _record_to_page(rec)

    def iter_wikinews(self, lang: str, targets: set[str]) -> Iterator[Page]:
        if lang not in self.wikinews_languages:
            return
        ns = f"iwbacklinks.wikinews.{lang}"
        url = self._api("wikinews", lang)
        for prefix in IW_PREFIXES:
            if self.ck.is_done(ns, prefix):
                continue
            rows = []
            for q in self._query(url, {"list": "iwbacklinks", "iwblprefix": prefix, "iwblprop": "iwprefix|iwtitle",
                                       "iwbllimit": "max"}):
                for b in q.get("iwbacklinks", []) or []:
                    rows.append([b["title"], int(b.get("ns", 0)), b.get("iwtitle", "")])
            self.ck.record(ns, [(prefix, rows)])
        want = {normalize_title(t) for t in targets if t}
        titles = set()
        for _, rows in self.ck.items(ns):
            for title, pns, iwtitle in rows:
                if pns == 0 and normalize_title(iwtitle) in want:
                    titles.add(title)
        for _, rec in self._pages("wikinews", lang, sorted(titles), f"wikinews {lang}"):
            if rec is not None and rec["ns"] == 0 and rec["redirect_to"] is None:
                yield _record_to_page(rec)
