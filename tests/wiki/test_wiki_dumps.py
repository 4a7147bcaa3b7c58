"""Dump backend: both Wikidata forms, shards, multistream XML, malformed dumps."""
from __future__ import annotations

import bz2
import gzip
import json

import pytest

from eventatlas.errors import InputError
from eventatlas.wiki import wikidata as W
from eventatlas.wiki.build import build
from eventatlas.wiki.dumps import DumpBackend, read_categorylinks
from support.wiki_world.world import LANGS, WORLD_PARAMS, build_world, wikidata_lines, write_dumps, write_wikidata_dump


@pytest.fixture(scope="module")
def world():
    return build_world()


@pytest.mark.parametrize("comp", ["json", "gz", "bz2"])
def test_scan_same_events_any_shards(world, tmp_path, comp):
    p = write_wikidata_dump(tmp_path / f"d.json{'' if comp == 'json' else '.' + comp}", wikidata_lines(world), stream_count=9)
    ref = None
    for n in (1, 2, 3):
        r = W.scan_dump(p, LANGS, workers=n)
        got = sorted(json.dumps(e, sort_keys=True) for e in r.events)
        ref = ref or got
        assert got == ref and len(got) == 28
        assert r.parsed == 28  # the claim-key pre-filter parses exactly the events here
    strict = W.scan_dump(p, LANGS, workers=1, strict=True)
    assert sorted(json.dumps(e, sort_keys=True) for e in strict.events) == ref
    assert strict.lines == len(world.entities) + 2 and not strict.rejects  # + the "[" and "]" lines


def test_old_and_new_form_normalise(world):
    old = next(e for e in world.entities if e["id"] == "Q900103")  # written in the 2014 form
    assert "id" not in old["claims"]["P361"][0]["mainsnak"]["datavalue"]["value"]
    rec = W.extract_event(old, LANGS)
    assert rec.part_of == ["Q900101"] and rec.followed_by == ["Q900104"] and rec.point == "+1931-09-14T00:00:00Z"
    new = next(e for e in world.entities if e["id"] == "Q900104")
    assert W.extract_event(new, LANGS).follows == ["Q900103"]
    assert W.normalize_time("+00000001939-09-01T00:00:00Z") == "+1939-09-01T00:00:00Z"
    assert W.normalize_time("-00000000044-03-15T00:00:00Z") == "-0044-03-15T00:00:00Z"
    assert W.wiki_language("zh_min_nanwiki") == "zh-min-nan" and W.wiki_language("commonswiki") is None


def test_broken_lines_and_unknown_datavalues_are_counted(world, tmp_path):
    lines = wikidata_lines(world)
    ev = json.loads(lines[0])
    ev["claims"]["P276"][0]["mainsnak"]["datavalue"]["type"] = "wikibase-futuretype"
    truncated_event = lines[1][:-40]  # an event line cut short (holds its claim keys, invalid JSON)
    head_only = lines[2][:120]  # a line cut before any claim: cannot be an event
    p = write_wikidata_dump(tmp_path / "bad.json.gz", lines[3:] + [head_only, json.dumps(ev).encode(), truncated_event])
    fast = W.scan_dump(p, LANGS)
    assert sorted(x["reason"] for x in fast.rejects) == ["bad_json", "unknown_datavalue_type"]
    assert all(x["location"].startswith("byte ") for x in fast.rejects)
    strict = W.scan_dump(p, LANGS, strict=True)
    assert sorted(x["reason"] for x in strict.rejects) == ["malformed_line", "malformed_line", "unknown_datavalue_type"]
    n = len(lines) - 3 + 1  # data lines before the head_only line, plus the "[" line
    assert {x["location"] for x in strict.rejects if x["reason"] == "malformed_line"} == {f"line {n + 1}", f"line {n + 3}"}
    # Q900100's only location claim has the unknown type: not an event; the others are unaffected
    for r in (fast, strict):
        got = {e["qid"] for e in r.events}
        assert "Q900100" not in got and "Q900101" not in got and "Q900103" in got


@pytest.mark.parametrize("suffix", [".json.gz", ".json"])
def test_truncated_last_line_is_a_reject_event_or_not(world, tmp_path, suffix):
    """A dump whose last line is cut before any claim (cannot be an event) was dropped silently."""
    lines = wikidata_lines(world)
    cut = lines[2][:120]
    raw = b"[\n" + b",\n".join(lines[3:] + [cut])  # the dump stops mid-line: no closing "]"
    p = tmp_path / f"cut{suffix}"
    p.write_bytes(gzip.compress(raw) if suffix.endswith(".gz") else raw)
    for r in (W.scan_dump(p, LANGS), W.scan_dump(p, LANGS, workers=2)):
        rej = [x for x in r.rejects if x["reason"] == "truncated_line"]
        assert len(rej) == 1 and rej[0]["location"].endswith(f"byte {raw.rindex(cut)}"), r.rejects
    whole = write_wikidata_dump(tmp_path / f"whole{suffix}", lines)
    assert W.scan_dump(whole, LANGS).rejects == []  # a complete dump has no such reject


def test_bad_bz2_tail_is_a_clear_error_and_nothing_lands(world, tmp_path):
    paths = write_dumps(world, tmp_path / "dumps", wikidata_compression="bz2")
    wd = tmp_path / "dumps" / "wikidata"
    f = next(wd.iterdir())
    data = f.read_bytes()
    f.write_bytes(data[:-40])  # cut the end-of-stream marker of the last stream
    with pytest.raises(InputError, match="bz2|stream"):
        W.scan_dump(f, LANGS, workers=2)
    out = tmp_path / "out"
    with pytest.raises(InputError):
        build(DumpBackend(paths), out, languages=LANGS, params=WORLD_PARAMS, build_id="x")
    assert not (out / "latest.json").exists()
    assert not list(out.rglob("*.parquet")) and not list(out.rglob("manifest.json"))


def test_multistream_articles_redirects_and_categorylinks(world, tmp_path):
    paths = write_dumps(world, tmp_path / "dumps")
    b = DumpBackend(paths)
    got = b.get_articles("en", ["battle_of Kessel Ford", "Kessel Ford battle", "No such page"])
    assert set(got) == {"Battle of Kessel Ford", "Kessel Ford battle"}
    assert got["Kessel Ford battle"].redirect_to == "Battle of Kessel Ford"
    assert b.redirects_to("de", ["Aurelischer Krieg"]) == {"Aurelienkrieg": "Aurelischer Krieg"}
    mem = world.backend()
    assert b.redirects_to("en", ["Aurelian War", "Treaty of Calder"]) == mem.redirects_to("en", ["Aurelian War", "Treaty of Calder"])
    cats = read_categorylinks(paths["wikinews"]["en"]["categorylinks"])
    page = next(p for p in world.news["en"] if p.title == "Historians revisit Treaty of Calder")
    assert cats[page.page_id] == list(page.categories)
    # the world's pages and the dump's pages agree exactly
    dump_pages = {(p.title, p.ns): p for p in b.iter_pages("fr")}
    assert {(p.title, p.ns): (p.wikitext, p.redirect_to) for p in world.pages["fr"]} == \
        {k: (p.wikitext, p.redirect_to) for k, p in dump_pages.items()}


def test_xml_entities_refused(tmp_path):
    evil = ('<?xml version="1.0"?><!DOCTYPE m [<!ENTITY x "boom">]><mediawiki><page><title>&x;</title><ns>0</ns><id>1</id>'
            '<revision><id>2</id><text>hi</text></revision></page></mediawiki>')
    p = tmp_path / "evil.xml.bz2"
    p.write_bytes(bz2.compress(evil.encode()))
    b = DumpBackend({"wikidata": [], "wikipedia": {"en": {"xml": str(p)}}})
    # one InputError naming the dump (the CLI prints it as one line, exit 2), not defusedxml's DTDForbidden
    with pytest.raises(InputError, match=rf"^{p}:after the start: refused unsafe XML \(DTDForbidden"):
        list(b.iter_pages("en"))


def test_malformed_page_names_the_dump(tmp_path):
    bad = ('<mediawiki><page><title>A</title><ns>0</ns><id>1</id><revision><id>2</id><text>hi</text></revision></page>'
           '<page><title>B</title><ns>0</ns><id>x</id></page></mediawiki>')
    p = tmp_path / "bad.xml.bz2"
    p.write_bytes(bz2.compress(bad.encode()))
    b = DumpBackend({"wikidata": [], "wikipedia": {"en": {"xml": str(p)}}})
    with pytest.raises(InputError, match=rf"^{p}:after page id 1 'A': malformed <page> \(ValueError: invalid literal"):
        list(b.iter_pages("en"))


@pytest.mark.parametrize("workers", [1, 2])
def test_truncated_wikipedia_dump_is_a_clear_error(world, tmp_path, workers):
    paths = write_dumps(world, tmp_path / "dumps")
    xml = tmp_path / "dumps" / "dewiki" / next(p.name for p in (tmp_path / "dumps" / "dewiki").iterdir() if p.name.endswith(".xml.bz2"))
    data = xml.read_bytes()
    xml.write_bytes(data[: len(data) - 200])  # cut into the last page stream and the footer
    out = tmp_path / "out"
    with pytest.raises(InputError, match="dewiki"):
        build(DumpBackend(paths), out, languages=LANGS, params={**WORLD_PARAMS, "workers": workers}, build_id="x")
    assert not list(out.rglob("*.parquet")) and not (out / "latest.json").exists()
