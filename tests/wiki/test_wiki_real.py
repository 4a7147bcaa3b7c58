"""Real data (../shared/data): the 2014 Wikidata excerpt, real pages-articles XML and real wikitext."""
from __future__ import annotations

import re

import orjson
import pytest

from conftest import shared_path
from eventatlas.wiki import dumpfile
from eventatlas.wiki import wikidata as W
from eventatlas.wiki.dumps import DumpBackend
from eventatlas.wiki.links import all_article_links, candidate_targets, classify_target, harvest, harvest_full, link_key

pytestmark = pytest.mark.shared_data


def test_real_wikidata_dump_parses():
    p = shared_path("wikidata", "testDump.json.bz2")
    r = W.scan_dump(p, None, strict=True)
    assert r.lines == 1707 and not r.rejects and r.events == []
    fast = W.scan_dump(p, None)
    # only items with a spatial and some temporal claim key are parsed (58 of 1,705 entities here,
    # e.g. places with a start time but no end time); none is an event by the rule
    assert not fast.rejects and fast.events == [] and 0 < fast.parsed < 100 and fast.bytes > 10_000_000
    ents = {e["id"]: e for e in dumpfile.iter_entities(p) if e["id"] in ("Q362", "Q1")}
    wwii = ents["Q362"]
    assert wwii["labels"]["en"]["value"] == "World War II"
    snak = wwii["claims"]["P580"][0]["mainsnak"]["datavalue"]["value"]
    assert W.normalize_time(snak["time"]) == "+1939-09-01T00:00:00Z"
    p31 = wwii["claims"]["P31"][0]["mainsnak"]["datavalue"]["value"]
    assert "id" not in p31 and W.normalize_entity_id(p31) == "Q103495"
    # give WWII a location: then it is an event with normalised times and sitelinks
    wwii["claims"]["P276"] = [{"mainsnak": {"snaktype": "value", "property": "P276", "datatype": "wikibase-item",
                                            "datavalue": {"value": {"entity-type": "item", "numeric-id": 2}, "type": "wikibase-entityid"}},
                               "type": "statement", "rank": "normal"}]
    rec = W.extract_event(orjson.loads(orjson.dumps(wwii)), ["en", "de"])
    assert rec.start == "+1939-09-01T00:00:00Z" and rec.end == "+1945-09-02T00:00:00Z" and rec.locations == ["Q2"]
    assert rec.sitelinks["en"] == "World War II" and rec.n_wikipedia_sitelinks > 100


def test_real_pages_articles_xml_parses():
    p = shared_path("wikipedia", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2")
    b = DumpBackend({"wikidata": [], "wikipedia": {"en": {"xml": str(p)}}})
    pages = list(b.iter_pages("en"))
    assert len(pages) == 206
    titles = {pg.title for pg in pages}
    assert {"Apollo 11", "Apollo 8", "American Revolutionary War"} <= titles
    arw = next(pg for pg in pages if pg.title == "American Revolutionary War")
    targets = {"Treaty of Paris (1783)", "Battles of Lexington and Concord", "Siege of Yorktown"}
    assert link_key(harvest(arw.wikitext, targets)) == link_key(harvest_full(arw.wikitext, targets))
    assert len(harvest(arw.wikitext, targets)) >= 3
    # every article, an event-like target set (titles with a year or a number): fast path == full parse
    arts = [pg for pg in pages if pg.ns == 0 and not pg.is_redirect]
    targets = {t for pg in arts for t in candidate_targets(pg.wikitext) if re.search(r"\d", t)}
    n = 0
    for pg in arts:
        fast = harvest(pg.wikitext, targets)
        assert link_key(fast) == link_key(harvest_full(pg.wikitext, targets)), pg.title
        n += len(fast)
    assert n > 300
    reds = [pg for pg in pages if pg.is_redirect]
    assert reds and all(pg.redirect_to for pg in reds)


def _reference_count(text: str) -> int:
    """Regex reference: every ``[[target`` opener minus files, categories, interwiki and other namespaces."""
    n = 0
    for m in re.finditer(r"\[\[([^\[\]|\n]*)", text):
        if classify_target(m.group(1)) is not None:
            n += 1
    return n


def test_real_wikitext_links_match_reference_count():
    d = shared_path("wikipedia", "wikitext", "cache")
    files = sorted(d.glob("*.txt"))
    assert len(files) == 71
    ref = every = fast_prose = 0
    for f in files:
        t = f.read_text(encoding="utf-8")
        ref += _reference_count(t)
        every += len(all_article_links(t))
        fast = harvest(t, None)
        assert link_key(fast) == link_key(harvest_full(t, None)), f.name  # fast path = full parse
        fast_prose += len(fast)
        for l in fast:
            assert l.paragraph[l.start:l.end] == l.anchor
    assert sum(len(re.findall(r"\[\[", f.read_text(encoding="utf-8"))) for f in files) >= 9424
    # Every article link mwparserfromhell finds (templates, refs, captions included) is one the regex
    # reference counts; the regex sees a few more where "[[" opens no valid link (e.g. "[[]]", broken
    # markup, links inside <nowiki>/comments), bounded at 1 %.
    assert every <= ref <= every * 1.01
    # Prose links are the subset outside templates, refs, captions, lists and tables.
    assert 0.5 * every < fast_prose < every
