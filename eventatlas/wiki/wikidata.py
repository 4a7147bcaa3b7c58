"""Wikidata event scan: both dump forms, normalised ids and times, fast pre-filtered parsing.

An item is an event when it has a temporal property ((P580 and P582) or P585 or
P2047) AND a spatial one (P276 or P625). The dump scan never looks at most lines:
one regex pass over each block of decompressed JSON finds spatial *claim* keys
(``"P625":[{`` not followed by ``"snaktype"``, so qualifier and reference snaks do not
count), and only those lines are checked for a temporal claim key and parsed with
orjson. The check is conservative (it can only let too much through), so the
events found equal those of parsing every entity (benchmarks/bench_wiki.py checks).

Dumps: ``.json``, ``.json.gz`` or ``.json.bz2`` with one entity per line inside
``[`` ... ``]`` (trailing commas). Old (2014) form: entity ids only as ``numeric-id``
and 11-digit years; both normalise to ``Q123`` and ``+1939-09-01T00:00:00Z``.
Multi-stream bz2 and plain JSON can be split into shards (:func:`eventatlas.wiki.dumpfile.plan_shards`),
each scanned independently (:func:`scan_shard`) in its own process.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import orjson

from eventatlas.io import Rejects

from .backend import SPATIAL_PROPS, TEMPORAL_PROPS
from .dumpfile import DumpError, Shard, plan_shards, shard_blocks

NON_WIKIPEDIA_SITES = {"commonswiki", "specieswiki", "metawiki", "wikidatawiki", "mediawikiwiki", "sourceswiki",
                       "wikimaniawiki", "outreachwiki", "incubatorwiki", "foundationwiki", "testwiki", "test2wiki",
                       "testwikidatawiki", "simplewiki_placeholder"}
KNOWN_VALUE_TYPES = {"wikibase-entityid", "time", "globecoordinate", "quantity", "string", "monolingualtext"}

# substring pre-filter (bytes): spatial AND temporal keys as they appear in "claims"
_SPATIAL_KEYS = tuple(f'"{p}"'.encode() for p in SPATIAL_PROPS)
_TEMPORAL_KEYS = tuple(f'"{p}"'.encode() for p in TEMPORAL_PROPS)
_SPATIAL_SEARCH = tuple(f'"{p}'.encode() for p in SPATIAL_PROPS)  # no closing quote: see _block_is_regular
_TIME_RE = re.compile(r"^([+-])0*(\d+)(-\d\d-\d\dT\d\d:\d\d:\d\dZ)$")


@dataclass
class EventRecord:
    """The normalised slice of a Wikidata item the build keeps."""

    qid: str
    labels: dict[str, str]
    descriptions: dict[str, str]
    sitelinks: dict[str, str]  # language -> Wikipedia title (build languages only)
    n_wikipedia_sitelinks: int  # Wikipedia sitelinks in any language
    instance_of: list[str]
    part_of: list[str]
    has_part: list[str]
    follows: list[str]
    followed_by: list[str]
    start: str | None = None
    end: str | None = None
    point: str | None = None
    duration: str | None = None
    locations: list[str] = field(default_factory=list)
    coordinates: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)  # shallow: fields are plain lists/dicts/str (asdict deep-copies, slowly)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "EventRecord":
        return cls(**d)

    def year(self) -> int | None:
        t = self.point or self.start
        if not t:
            return None
        m = _TIME_RE.match(t)
        return (int(m.group(2)) * (-1 if m.group(1) == "-" else 1)) if m else None


def normalize_entity_id(value: dict) -> str | None:
    """``{"id": "Q5"}`` or the old ``{"entity-type": "item", "numeric-id": 5}`` -> ``"Q5"``."""
    if "id" in value:
        return str(value["id"])
    nid = value.get("numeric-id")
    if nid is None:
        return None
    prefix = {"item": "Q", "property": "P", "lexeme": "L"}.get(value.get("entity-type", "item"), "Q")
    return f"{prefix}{int(nid)}"


def normalize_time(t: str) -> str:
    """``+00000001939-09-01T00:00:00Z`` -> ``+1939-09-01T00:00:00Z`` (at least 4 year digits)."""
    m = _TIME_RE.match(t)
    if not m:
        raise ValueError(f"unparseable time {t!r}")
    return f"{m.group(1)}{int(m.group(2)):04d}{m.group(3)}"


def wiki_language(site: str) -> str | None:
    """``enwiki`` -> ``en``, ``zh_min_nanwiki`` -> ``zh-min-nan``; None for non-Wikipedia sites."""
    if not site.endswith("wiki") or site in NON_WIKIPEDIA_SITES:
        return None
    return site[:-4].replace("_", "-")


def _values(claims: dict, prop: str, source, location, rejects: Rejects | None, qid: str) -> list[tuple[str, Any]]:
    out = []
    for c in claims.get(prop, ()) or ():
        snak = c.get("mainsnak", {})
        if snak.get("snaktype") != "value" or c.get("rank") == "deprecated":
            continue
        dv = snak.get("datavalue") or {}
        vtype = dv.get("type")
        if vtype not in KNOWN_VALUE_TYPES:
            if rejects is not None:
                rejects.add(source, location, "unknown_datavalue_type", f"{qid} {prop}: datavalue type {vtype!r}", dv)
            continue
        out.append((vtype, dv.get("value")))
    return out


def extract_event(ent: dict, languages: Iterable[str] | None = None, *, rejects: Rejects | None = None,
                  source: Any = None, location: Any = None) -> EventRecord | None:
    """The event record of an entity, or None when it is not an event (or not an item)."""
    if ent.get("type") != "item":
        return None
    qid = ent.get("id")
    if not qid:
        raise DumpError(source or "<entity>", location, "entity without id")
    claims = ent.get("claims") or {}
    if isinstance(claims, list):  # empty claims serialise as [] in dumps
        claims = {}

    def ids(prop):
        vals = []
        for vt, v in _values(claims, prop, source, location, rejects, qid):
            if vt == "wikibase-entityid" and isinstance(v, dict):
                e = normalize_entity_id(v)
                if e:
                    vals.append(e)
        return vals

    def times(prop):
        vals = []
        for vt, v in _values(claims, prop, source, location, rejects, qid):
            if vt == "time" and isinstance(v, dict) and v.get("time"):
                try:
                    vals.append(normalize_time(v["time"]))
                except ValueError as e:
                    if rejects is not None:
                        rejects.add(source, location, "bad_time", f"{qid} {prop}: {e}", v)
        return vals

    start, end, point = times("P580"), times("P582"), times("P585")
    durations = [f"{v.get('amount')} {str(v.get('unit', '')).rsplit('/', 1)[-1]}"
                 for vt, v in _values(claims, "P2047", source, location, rejects, qid) if vt == "quantity" and isinstance(v, dict)]
    temporal = (start and end) or point or durations
    locs = ids("P276")
    coords = [v for vt, v in _values(claims, "P625", source, location, rejects, qid) if vt == "globecoordinate" and isinstance(v, dict)]
    if not temporal or not (locs or coords):
        return None
    langs = None if languages is None else set(languages)

    def lang_map(key):
        m = ent.get(key) or {}
        if isinstance(m, list):
            return {}
        return {k: v["value"] for k, v in m.items() if isinstance(v, dict) and "value" in v and (langs is None or k in langs)}

    sitelinks, n_wp = {}, 0
    sl = ent.get("sitelinks") or {}
    if isinstance(sl, list):
        sl = {}
    for site, v in sl.items():
        lang = wiki_language(site)
        if lang is None:
            continue
        n_wp += 1
        if langs is None or lang in langs:
            sitelinks[lang] = v["title"]
    c0 = coords[0] if coords else None
    return EventRecord(
        qid=qid, labels=lang_map("labels"), descriptions=lang_map("descriptions"), sitelinks=sitelinks,
        n_wikipedia_sitelinks=n_wp, instance_of=ids("P31"), part_of=ids("P361"), has_part=ids("P527"),
        follows=ids("P155"), followed_by=ids("P156"),
        start=min(start) if start else None, end=max(end) if end else None, point=min(point) if point else None,
        duration=durations[0] if durations else None, locations=locs,
        coordinates=[c0.get("latitude"), c0.get("longitude")] if c0 else None,
    )


# After a property key: ':' then a list; a list of snaks (qualifiers, references) starts with
# {"snaktype" while a claim's statement list never does (statements have no "snaktype").
_SNAK_LIST = re.compile(rb'\s*:\s*\[\s*\{\s*"snaktype"')
_KEY_FOLLOW = re.compile(rb"\s*:")


def _has_statement(line: bytes, key: bytes) -> bool:
    """Whether ``key`` (e.g. b'"P585"') occurs as a claims key, not only in qualifiers/references or as a value.

    Conservative: anything not provably a snak list counts, so it never drops an event.
    """
    i = line.find(key)
    while i >= 0:
        j = i + len(key)
        if _KEY_FOLLOW.match(line, j) and not _SNAK_LIST.match(line, j):
            return True
        i = line.find(key, j)
    return False


def prefilter(line: bytes) -> bool:
    """Cheap necessary condition for an event line: a spatial and a temporal claim key."""
    return any(_has_statement(line, k) for k in _SPATIAL_KEYS) and any(_has_statement(line, k) for k in _TEMPORAL_KEYS)


@dataclass
class ScanResult:
    events: list[dict]  # EventRecord dicts
    rejects: list[dict]
    lines: int = 0
    bytes: int = 0
    parsed: int = 0

    def merge(self, other: "ScanResult") -> "ScanResult":
        return ScanResult(self.events + other.events, self.rejects + other.rejects, self.lines + other.lines,
                          self.bytes + other.bytes, self.parsed + other.parsed)


def scan_lines(lines: Iterable[bytes], *, source: str, languages: Iterable[str] | None, first_line: int = 1,
               dataset: str = "wikigrounding") -> ScanResult:
    """Scan dump lines (bytes, one entity each) for events."""
    rej = Rejects(dataset)
    langs = None if languages is None else tuple(languages)
    events, n, nbytes, parsed = [], 0, 0, 0
    lineno = first_line - 1
    for lineno, line in enumerate(lines, first_line):
        n += 1
        nbytes += len(line)
        s = line.strip()
        if not s or s in (b"[", b"]"):
            continue
        if s[-1:] == b",":
            s = s[:-1]
        if s[:1] != b"{" or s[-1:] != b"}":
            rej.add(source, f"line {lineno}", "malformed_line", "not one JSON object per line", s[:200].decode("utf-8", "replace"))
            continue
        if not prefilter(s):
            continue
        parsed += 1
        try:
            ent = orjson.loads(s)
        except orjson.JSONDecodeError as e:
            rej.add(source, f"line {lineno}", "bad_json", str(e), s[:200].decode("utf-8", "replace"))
            continue
        rec = extract_event(ent, langs, rejects=rej, source=source, location=f"line {lineno}")
        if rec is not None:
            events.append(rec.to_dict())
    return ScanResult(events, rej.rows, n, nbytes, parsed)


def _statement_rx(keys) -> re.Pattern:
    """A property key used as a claims key: followed by a list whose first object is not a snak."""
    alt = b"|".join(re.escape(k) for k in keys)
    return re.compile(b"(?:" + alt + rb')\s*:\s*\[\s*\{\s*"(?!snaktype")')


_SPATIAL_RX = _statement_rx(_SPATIAL_KEYS)
_TEMPORAL_RX = _statement_rx(_TEMPORAL_KEYS)


def _fast_prefilter(line: bytes) -> bool:
    """Temporal claim key present (the caller found a spatial one with ``_SPATIAL_RX``)."""
    return _TEMPORAL_RX.search(line) is not None


def _scan_buffer(buf, start: int, end: int, base: int, out: "ScanResult", rej: Rejects, langs, source: str) -> None:
    """Scan the whole lines in ``buf[start:end]`` (bytes or mmap); ``base`` maps positions to stream offsets."""
    search = _SPATIAL_RX.search
    m = search(buf, start, end)
    while m:
        st = buf.rfind(b"\n", start, m.start()) + 1
        st = max(st, start)
        en = buf.find(b"\n", m.end(), end)
        if en < 0:
            en = end
        line = buf[st:en].rstrip()
        if line.endswith(b","):
            line = line[:-1]
        if _fast_prefilter(line):
            out.parsed += 1
            loc = f"byte {base + st}"
            try:
                ent = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                rej.add(source, loc, "bad_json", str(e), line[:200].decode("utf-8", "replace"))
                ent = None
            if ent is not None:
                if not isinstance(ent, dict):
                    rej.add(source, loc, "malformed_line", "not a JSON object", line[:200].decode("utf-8", "replace"))
                else:
                    rec = extract_event(ent, langs, rejects=rej, source=source, location=loc)
                    if rec is not None:
                        out.events.append(rec.to_dict())
        m = search(buf, en, end)
    out.bytes += end - start


def _check_last_line(buf, start: int, end: int, base: int, rej: Rejects, source: str) -> None:
    """The last line of a stream, event or not: one cut short (a truncated dump) is a ``truncated_line``
    reject with its byte offset. The fast scan looks only at lines that could be events, so without this
    a cut non-event line would vanish silently; one line is parsed, so the cost is nil."""
    e = end
    while e > start and buf[e - 1:e] in (b"\n", b"\r", b" ", b"\t"):
        e -= 1
    if e <= start:
        return
    st = max(buf.rfind(b"\n", start, e) + 1, start)
    line = bytes(buf[st:e]).strip()
    if line in (b"[", b"]"):
        return
    try:
        orjson.loads(line[:-1] if line.endswith(b",") else line)
        return
    except orjson.JSONDecodeError:
        pass
    loc = f"byte {base + st}"
    if not any(r["location"] == loc for r in rej.rows):  # the fast scan may have rejected it already
        rej.add(source, loc, "truncated_line", "the last line is not a whole JSON entity (a truncated dump?); "
                "re-download the dump", line[:200].decode("utf-8", "replace"))


def scan_blocks(blocks: Iterable[bytes], *, source: str, languages: Iterable[str] | None, dataset: str = "wikigrounding",
                strict: bool = False) -> ScanResult:
    """Scan blocks of whole dump lines.

    Fast mode: one regex pass over the block finds spatial claim keys at C speed (a literal
    prefix scan); only the lines around a hit are examined and parsed, so a broken line is
    rejected (``bad_json``, located by decompressed byte offset) exactly when it could hold
    an event, and lines that cannot be events are never looked at. ``strict=True`` checks
    every line instead (``malformed_line`` for anything that is not one JSON object per line,
    located by line number) at per-line speed.
    """
    langs = None if languages is None else tuple(languages)
    out = ScanResult([], [])
    rej = Rejects(dataset)
    line0 = 1
    base = 0
    last = (b"", 0)
    for block in blocks:
        if not block:
            continue
        last = (block, base)
        if strict:
            if block.endswith(b"\n"):
                block = block[:-1]
            r = scan_lines(block.split(b"\n"), source=source, languages=langs, first_line=line0, dataset=dataset)
            out = out.merge(r)
            line0 += r.lines
            continue
        _scan_buffer(block, 0, len(block), base, out, rej, langs, source)
        base += len(block)
    if not strict and last[0]:
        _check_last_line(last[0], 0, len(last[0]), last[1], rej, source)
    out.rejects.extend(rej.rows)
    return out


def scan_shard(shard: Shard, languages: Iterable[str] | None = None, dataset: str = "wikigrounding", strict: bool = False) -> ScanResult:
    """Scan one shard; run in a worker process (pure function of its arguments)."""
    path = Path(shard.path)
    if shard.kind == "plain" and not strict:
        return _scan_plain_mmap(shard, languages, dataset)

    def gen():
        try:
            yield from shard_blocks(shard)
        except (EOFError, OSError) as e:
            raise DumpError(path, f"shard {shard.index} (bytes {shard.start}-{shard.end})",
                            f"corrupt or truncated compressed stream ({type(e).__name__}: {e})") from e

    res = scan_blocks(gen(), source=path.name, languages=languages, dataset=dataset, strict=strict)
    if shard.kind != "whole":  # line numbers restart per shard: make locations unambiguous
        for r in res.rejects:
            r["location"] = f"shard {shard.index} {r['location']}"
    return res


def _map(f, whole: bool):
    """Read-only map of the file; pre-faulted where the OS allows when one shard reads it all
    (bulk faults beat one per page; with several shards each would fault the whole file)."""
    import mmap

    populate = getattr(mmap, "MAP_POPULATE", 0) if whole else 0
    if populate:
        try:
            return mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | populate, prot=mmap.PROT_READ)
        except (OSError, ValueError):
            pass
    return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def _scan_plain_mmap(shard: Shard, languages, dataset: str) -> ScanResult:
    """Uncompressed shard: scan the memory-mapped file in place (no reads, no copies)."""
    path = Path(shard.path)
    out = ScanResult([], [])
    rej = Rejects(dataset)
    with open(path, "rb") as f, _map(f, shard.start == 0 and shard.end >= path.stat().st_size) as mm:
        size = len(mm)
        # own the lines that start in [start, end): same rule as the streaming reader
        s0 = 0 if shard.start == 0 else (mm.find(b"\n", shard.start - 1) + 1 or size)
        e0 = size if shard.end >= size else (mm.find(b"\n", shard.end - 1) + 1 or size)
        if s0 < e0:
            _scan_buffer(mm, s0, e0, 0, out, rej, None if languages is None else tuple(languages), path.name)
            _check_last_line(mm, s0, e0, 0, rej, path.name)
    out.rejects.extend(rej.rows)
    return out


def scan_dump(path: str | os.PathLike, languages: Iterable[str] | None = None, *, workers: int = 1,
              executor=None, dataset: str = "wikigrounding", strict: bool = False) -> ScanResult:
    """Scan a whole dump, sharded across ``workers`` processes (or a given executor's ``map``)."""
    shards = plan_shards(path, workers)
    langs = None if languages is None else list(languages)
    if len(shards) == 1:
        return scan_shard(shards[0], langs, dataset, strict)
    if executor is None:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as ex:
            parts = list(ex.map(scan_shard, shards, [langs] * len(shards), [dataset] * len(shards), [strict] * len(shards)))
    else:
        parts = list(executor.map(scan_shard, shards, [langs] * len(shards), [dataset] * len(shards), [strict] * len(shards)))
    out = ScanResult([], [])
    for p in parts:
        out = out.merge(p)
    return out
