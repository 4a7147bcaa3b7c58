"""The acquisition-backend protocol of the wiki event-grounding build.

Two backends feed one build (``eventatlas.wiki.build.build``): the dump backend
(``eventatlas.wiki.dumps.DumpBackend``, part A) and the live-API backend (part B).
For the same world they must make the build write identical tables, so the build
never depends on the order or the multiplicity in which a backend yields things:
it deduplicates and sorts everything itself.

NOTE FOR PART B (live API backend) — what you must implement
------------------------------------------------------------
A class satisfying :class:`WikiBackend`:

* ``name`` (str) and ``info() -> dict``: provenance recorded in the build manifest
  (endpoints, user agent, fetch time / revision ids; the dump backend records file
  names, dump dates and fingerprints). Must be JSON-serialisable.
* ``iter_entities()``: every Wikidata entity of the world that *may* be an event, as
  the entity JSON the dump has (``wbgetentities`` returns the same shape). Either the
  current form or the old one (entity ids only as ``numeric-id``; 11-digit years) is
  accepted. Yielding non-events too is fine (they are filtered); yielding an entity
  twice is fine (deduplicated, last wins). Trimming ``props``/``languages`` is fine as
  long as ``labels``, ``descriptions``, ``sitelinks`` (for the build languages) and the
  claims P31 P361 P527 P155 P156 P580 P582 P585 P2047 P276 P625 are kept.
* ``get_articles(lang, titles)``: the Wikipedia ns-0 pages with those titles in that
  language, keyed by the *normalised* requested title (:func:`normalize_title`);
  missing pages are simply absent. A redirect page is returned as such
  (``redirect_to`` set, do not follow it): the build follows it.
* ``redirects_to(lang, titles)``: ``{redirect_title: target_title}`` for every ns-0
  redirect page whose target is one of ``titles`` (API: ``prop=redirects``;
  dump: scan of redirect pages). Titles normalised; fragments dropped.
* ``iter_linking_pages(lang, targets)``: every ns-0, non-redirect Wikipedia page that
  contains a wikilink to one of ``targets`` (``targets`` already contains the redirect
  titles). Supersets are fine (the dump yields every article; API: ``list=backlinks``
  on each target, ``blfilterredir=nonredirects``). Each page once or more, any order.
* ``iter_wikinews(lang, targets)``: every ns-0 non-redirect Wikinews page that may
  link to a Wikipedia title in ``targets`` (through ``{{w|...}}``, ``[[w:...]]``,
  ``[[:w:...]]`` or ``[[wikipedia:...]]``), with ``categories`` filled (all of them,
  hidden date categories included, without the ``Category:`` prefix). Supersets fine.

All ``wikitext`` is the raw current revision text. Titles in :class:`Page` are
normalised with :func:`normalize_title`. The fixture world both backends serve is
``tests/support/wiki_world/world.py`` (``build_world()``; ``write_dumps(world, dir)`` writes
it as dump files).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Protocol, runtime_checkable

# Event-relevant Wikidata properties; a backend may trim claims to these.
TEMPORAL_PROPS = ("P580", "P582", "P585", "P2047")
SPATIAL_PROPS = ("P276", "P625")
RELATION_PROPS = ("P361", "P527", "P155", "P156")
KEPT_PROPS = ("P31",) + RELATION_PROPS + TEMPORAL_PROPS + SPATIAL_PROPS


@dataclass(frozen=True)
class Page:
    """One wiki page as a backend delivers it (Wikipedia article or Wikinews page)."""

    lang: str
    title: str  # normalised (see normalize_title)
    page_id: int
    wikitext: str
    ns: int = 0
    redirect_to: str | None = None  # normalised target title when this page is a redirect
    categories: tuple[str, ...] = ()  # without the "Category:" prefix; filled for Wikinews
    project: str = "wikipedia"  # "wikipedia" | "wikinews"
    revision_id: int | None = None
    timestamp: str | None = None  # ISO 8601 of the revision, when known

    @property
    def is_redirect(self) -> bool:
        return self.redirect_to is not None


@runtime_checkable
class WikiBackend(Protocol):
    """What the build needs from an acquisition backend (see the module docstring)."""

    name: str

    def info(self) -> dict[str, Any]: ...

    def iter_entities(self) -> Iterator[dict]: ...

    def get_articles(self, lang: str, titles: Iterable[str]) -> dict[str, Page]: ...

    def redirects_to(self, lang: str, titles: Iterable[str]) -> dict[str, str]: ...

    def iter_linking_pages(self, lang: str, targets: set[str]) -> Iterator[Page]: ...

    def iter_wikinews(self, lang: str, targets: set[str]) -> Iterator[Page]: ...


_WS = re.compile(r"[\s_]+")


def normalize_title(title: str) -> str:
    """MediaWiki title normalisation for ns-0 titles of first-letter-case wikis.

    Underscores and runs of whitespace become one space, ends are stripped, a
    ``#fragment`` is dropped and the first character is upper-cased (all XLEL-WD
    languages use ``$wgCapitalLinks``). ``"battle_of  Kessel Ford#Aftermath"`` ->
    ``"Battle of Kessel Ford"``.
    """
    title = title.split("#", 1)[0]
    title = _WS.sub(" ", title).strip()
    if title.startswith(":"):
        title = title[1:].lstrip()
    return title[:1].upper() + title[1:]


REDIRECT_RE = re.compile(r"^\s*#\s*(?:REDIRECT|WEITERLEITUNG|REDIRECTION|REDIRECCI[OÓ]N)\s*:?\s*\[\[([^\]|]+)", re.I)


def parse_redirect(wikitext: str) -> str | None:
    """Target of a ``#REDIRECT [[...]]`` page (normalised), or None."""
    m = REDIRECT_RE.match(wikitext or "")
    return normalize_title(m.group(1)) if m else None


@dataclass
class MemoryBackend:
    """A backend over in-memory entities and pages (the world, or a test's own data).

    It is the reference semantics of the protocol: exactly the pages that link,
    exact redirects, nothing fetched twice.
    """

    entities: list[dict]
    pages: Mapping[str, list[Page]]  # lang -> Wikipedia pages (articles and redirects)
    news: Mapping[str, list[Page]] = field(default_factory=dict)  # lang -> Wikinews pages
    name: str = "memory"

    def info(self) -> dict[str, Any]:
        return {"backend": self.name, "entities": len(self.entities)}

    def iter_entities(self) -> Iterator[dict]:
        yield from self.entities

    def _by_title(self, lang: str) -> dict[str, Page]:
        return {p.title: p for p in self.pages.get(lang, []) if p.ns == 0}

    def get_articles(self, lang: str, titles: Iterable[str]) -> dict[str, Page]:
        by = self._by_title(lang)
        out = {}
        for t in titles:
            n = normalize_title(t)
            if n in by:
                out[n] = by[n]
        return out

    def redirects_to(self, lang: str, titles: Iterable[str]) -> dict[str, str]:
        want = {normalize_title(t) for t in titles}
        return {p.title: p.redirect_to for p in self.pages.get(lang, []) if p.ns == 0 and p.redirect_to in want}

    def iter_linking_pages(self, lang: str, targets: set[str]) -> Iterator[Page]:
        for p in self.pages.get(lang, []):
            if p.ns == 0 and not p.is_redirect and "[[" in p.wikitext:
                yield p

    def iter_wikinews(self, lang: str, targets: set[str]) -> Iterator[Page]:
        for p in self.news.get(lang, []):
            if p.ns == 0 and not p.is_redirect:
                yield p
