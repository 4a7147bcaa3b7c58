"""Wiki build benchmarks: Wikidata event scan vs an ijson streaming parse; link harvesting vs full parsing.

    python benchmarks/bench_wiki.py [--mb 250] [--out FILE.json] [--smoke] [--no-publish]

Recorded as a benchmark run (``eventatlas.store.benchmarking``: run record, published to the warehouse);
the synthetic dump is written under the data root's scratch directory and removed afterwards.

1. Event scan. A synthetic dump of entities shaped like real ones (multilingual labels,
   aliases and descriptions, claims with qualifiers and references, sitelinks; ~40 % people,
   ~25 % places with population claims qualified by P585, ~25 % scholarly articles, ~2 %
   events, the rest misc) is written once as plain JSON lines. In the same run we time
   (a) ``eventatlas.wiki.wikidata.scan_dump`` (substring pre-filter + orjson), 1 and 2
   processes, and (b) the baseline: ``ijson.items(f, "item")`` (C backend when installed)
   feeding every entity to the same ``extract_event``. Both must find the same events.
   Throughput is MB/s of decompressed JSON; per-core = MB/s / processes.
2. Link harvesting on the real Wikipedia pages of ../shared/data (XML excerpt + wikitext
   cache) against an event-like target set: ``links.harvest`` (pre-scan, parse only blocks
   with a candidate) vs ``links.harvest_full`` (mwparserfromhell on every whole page).
   Both must return the same links.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eventatlas.config import shared_data  # noqa: E402
from eventatlas.wiki import links as L  # noqa: E402
from eventatlas.wiki import wikidata as W  # noqa: E402

LANGS = ["en", "de", "fr", "es", "it", "nl", "pl", "ru", "ja", "zh", "pt", "sv", "uk", "ca", "cs", "fi", "hu", "ko", "ar", "fa"]


def _snak(prop, dt, value, vtype):
    return {"snaktype": "value", "property": prop, "hash": "%040x" % random.getrandbits(160),
            "datavalue": {"value": value, "type": vtype}, "datatype": dt}


def _item(q):
    return {"entity-type": "item", "numeric-id": q, "id": f"Q{q}"}


def _time(y, m=1, d=1):
    return {"time": f"+{y:04d}-{m:02d}-{d:02d}T00:00:00Z", "timezone": 0, "before": 0, "after": 0, "precision": 11,
            "calendarmodel": "http://www.wikidata.org/entity/Q1985727"}


def _claim(qid, snak, qualifiers=None, refs=True):
    c = {"mainsnak": snak, "type": "statement", "id": f"Q{qid}$%032x" % random.getrandbits(128), "rank": "normal"}
    if qualifiers:
        c["qualifiers"] = {s["property"]: [s] for s in qualifiers}
        c["qualifiers-order"] = [s["property"] for s in qualifiers]
    if refs:
        c["references"] = [{"hash": "%040x" % random.getrandbits(160),
                            "snaks": {"P248": [_snak("P248", "wikibase-item", _item(random.randint(1, 10**7)), "wikibase-entityid")],
                                      "P813": [_snak("P813", "time", _time(2020 + random.randint(0, 5)), "time")]},
                            "snaks-order": ["P248", "P813"]}]
    return c


def synthetic_entity(i: int, rng: random.Random) -> tuple[dict, bool]:
    qid = 10_000_000 + i
    kind = rng.random()
    nl = rng.randint(2, len(LANGS))
    langs = LANGS[:nl]
    name = f"Entity {i} " + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8))
    claims: dict[str, list] = {}

    def add(prop, dt, value, vtype, quals=None):
        claims.setdefault(prop, []).append(_claim(qid, _snak(prop, dt, value, vtype), quals))

    is_event = False
    if kind < 0.40:  # person
        add("P31", "wikibase-item", _item(5), "wikibase-entityid")
        add("P569", "time", _time(rng.randint(1700, 2000)), "time")
        add("P570", "time", _time(rng.randint(1750, 2020)), "time")
        add("P27", "wikibase-item", _item(rng.randint(1, 300)), "wikibase-entityid")
        add("P106", "wikibase-item", _item(rng.randint(1, 10**5)), "wikibase-entityid")
        add("P735", "wikibase-item", _item(rng.randint(1, 10**5)), "wikibase-entityid")
    elif kind < 0.65:  # place: coordinates + population with P585 qualifiers (passes the pre-filter, no event)
        add("P31", "wikibase-item", _item(515), "wikibase-entityid")
        add("P625", "globe-coordinate", {"latitude": rng.uniform(-80, 80), "longitude": rng.uniform(-180, 180), "altitude": None,
                                          "precision": 0.0001, "globe": "http://www.wikidata.org/entity/Q2"}, "globecoordinate")
        for y in range(rng.randint(1, 4)):
            add("P1082", "quantity", {"amount": f"+{rng.randint(100, 10**6)}", "unit": "1"}, "quantity",
                [_snak("P585", "time", _time(1990 + 10 * y), "time")])
        add("P17", "wikibase-item", _item(rng.randint(1, 300)), "wikibase-entityid")
    elif kind < 0.90:  # scholarly article
        add("P31", "wikibase-item", _item(13442814), "wikibase-entityid")
        add("P577", "time", _time(rng.randint(1950, 2024)), "time")
        add("P1476", "monolingualtext", {"text": name * 3, "language": "en"}, "monolingualtext")
        for _ in range(rng.randint(2, 8)):
            add("P50", "wikibase-item", _item(rng.randint(1, 10**7)), "wikibase-entityid")
        add("P356", "external-id", f"10.{rng.randint(1000, 9999)}/{rng.getrandbits(40):x}", "string")
    elif kind < 0.92:  # event
        is_event = True
        add("P31", "wikibase-item", _item(178561), "wikibase-entityid")
        add("P585", "time", _time(rng.randint(1500, 2020)), "time")
        add("P276", "wikibase-item", _item(rng.randint(1, 10**6)), "wikibase-entityid")
        add("P361", "wikibase-item", _item(rng.randint(1, 10**6)), "wikibase-entityid")
    else:  # misc (taxa, works)
        add("P31", "wikibase-item", _item(rng.randint(1, 10**6)), "wikibase-entityid")
        add("P18", "commonsMedia", f"{name}.jpg", "string")
        add("P373", "string", name, "string")
    ent = {
        "type": "item", "id": f"Q{qid}",
        "labels": {l: {"language": l, "value": f"{name} ({l})"} for l in langs},
        "descriptions": {l: {"language": l, "value": f"description of {name} in {l}, a thing"} for l in langs},
        "aliases": {l: [{"language": l, "value": f"{name} alias {k}"} for k in range(rng.randint(0, 2))] for l in langs[:4]},
        "claims": claims,
        "sitelinks": {f"{l}wiki": {"site": f"{l}wiki", "title": f"{name} {l}", "badges": []} for l in langs[: rng.randint(0, nl)]},
        "pageid": qid, "ns": 0, "title": f"Q{qid}", "lastrevid": 2_000_000_000 + i, "modified": "2026-10-30T12:00:00Z",
    }
    return ent, is_event


def write_synthetic(path: Path, mb: float, seed: int = 0) -> tuple[int, int]:
    rng = random.Random(seed)
    random.seed(seed)
    n = n_ev = 0
    size = 0
    with open(path, "wb") as f:
        f.write(b"[\n")
        while size < mb * 1e6:
            ent, ev = synthetic_entity(n, rng)
            line = orjson.dumps(ent) + b",\n"
            f.write(line)
            size += len(line)
            n += 1
            n_ev += ev
        ent, ev = synthetic_entity(n, rng)
        f.write(orjson.dumps(ent) + b"\n]\n")
        n += 1
        n_ev += ev
    return n, n_ev


def _warm(_):
    import eventatlas.wiki.wikidata  # noqa: F401

    return os.getpid()


def bench_scan(mb: float, seed: int, tmp: Path | None = None) -> dict:
    import ijson

    tmp = Path(tmp) if tmp is not None else Path(tempfile.mkdtemp(prefix="bench_wiki_"))
    path = tmp / "synthetic-all.json"
    n, n_ev = write_synthetic(path, mb, seed)
    size_mb = path.stat().st_size / 1e6
    res: dict = {"entities": n, "events_generated": n_ev, "size_mb": round(size_mb, 1), "ijson_backend": ijson.backend}
    found = {}
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=2)
    list(pool.map(_warm, range(2)))  # worker start-up and imports are paid once per build, not per shard
    for workers in (1, 2):
        t = time.perf_counter()
        r = W.scan_dump(path, LANGS, workers=workers, executor=pool if workers > 1 else None)
        dt = time.perf_counter() - t
        found[workers] = sorted(e["qid"] for e in r.events)
        res[f"scan_{workers}proc_s"] = round(dt, 3)
        res[f"scan_{workers}proc_mb_s"] = round(size_mb / dt, 1)
        res[f"scan_{workers}proc_mb_s_per_core"] = round(size_mb / dt / workers, 1)
        res["parsed_fraction"] = round(r.parsed / n, 4)  # entities parsed by orjson / all entities
    pool.shutdown()
    t = time.perf_counter()
    base = []
    with open(path, "rb") as f:
        for ent in ijson.items(f, "item", use_float=True):
            rec = W.extract_event(ent, LANGS)
            if rec is not None:
                base.append(rec.qid)
    dt = time.perf_counter() - t
    res["ijson_s"] = round(dt, 3)
    res["ijson_mb_s"] = round(size_mb / dt, 1)
    res["same_events"] = found[1] == found[2] == sorted(base) and len(base) == n_ev
    res["speedup_1proc_vs_ijson"] = round(res["scan_1proc_mb_s"] / res["ijson_mb_s"], 1)
    res["scaling_2proc_vs_1proc"] = round(res["scan_2proc_mb_s"] / res["scan_1proc_mb_s"], 2)
    # compressed input (first ~40 MB): decompression dominates; shown for context (stdlib bz2)
    import bz2
    bzp = tmp / "synthetic-all.json.bz2"
    with open(path, "rb") as src, bz2.open(bzp, "wb", compresslevel=6) as dst:
        part = src.read(40_000_000)
        part = part[: part.rfind(b"\n") + 1]
        dst.write(part)
    t = time.perf_counter()
    W.scan_dump(bzp, LANGS, workers=1)
    res["scan_bz2_1proc_mb_s"] = round(len(part) / 1e6 / (time.perf_counter() - t), 1)
    for p in (path, bzp):
        p.unlink()
    tmp.rmdir()
    return res


# Event-like article titles, the kind an event dictionary holds ("Battle of ...", "2011 ... earthquake",
# "Apollo 11"): keywords, or a year plus other words. Bare years and dates ("1999", "12 September")
# are not events (no location), so they are not targets.
EVENTISH_KW = re.compile(r"\b(War|Battle|Siege|Revolution|Olympics|Election|Prix|Championship|Cup|Treaty|Massacre|Crisis|"
                         r"Mission|Apollo \d+|Expedition|Uprising|Rebellion|Campaign|Conference|Festival|Earthquake|Disaster|"
                         r"Protests?|Riots?|Summit|Games|Invasion|Coup)\b")
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_DATE = re.compile(r"^(\d{1,2} )?(January|February|March|April|May|June|July|August|September|October|November|December)( \d{1,2})?$|^\d+s?( BC| AD)?$")


def eventish(title: str) -> bool:
    if _DATE.match(title):
        return False
    if EVENTISH_KW.search(title):
        return True
    return bool(_YEAR.search(title)) and len(re.findall(r"[A-Za-z]{3,}", title)) >= 1 and not re.fullmatch(r"[\d\s]+(in \w+)?", title)


def bench_links(repeat: int = 3) -> dict:
    from eventatlas.wiki.dumps import DumpBackend

    texts = []
    xml = shared_data() / "wikipedia" / "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    cache = shared_data() / "wikipedia" / "wikitext" / "cache"
    if xml.exists():
        texts += [p.wikitext for p in DumpBackend({"wikidata": [], "wikipedia": {"en": {"xml": str(xml)}}}).iter_pages("en")
                  if p.ns == 0 and not p.is_redirect]
    if cache.exists():
        texts += [f.read_text(encoding="utf-8") for f in sorted(cache.glob("*.txt"))]
    if not texts:
        return {"skipped": "../shared/data/wikipedia absent"}
    all_targets = {t for x in texts for t in L.candidate_targets(x)}
    targets = {t for t in all_targets if eventish(t)}
    res = {"pages": len(texts), "mb": round(sum(len(t.encode()) for t in texts) / 1e6, 2), "targets": len(targets),
           "distinct_link_targets": len(all_targets)}
    for name, fn in (("fast", L.harvest), ("full", L.harvest_full)):
        best = None
        for _ in range(repeat):
            t = time.perf_counter()
            out = [fn(x, targets) for x in texts]
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        res[f"{name}_pages_s"] = round(len(texts) / best, 1)
        res[f"{name}_links"] = sum(len(o) for o in out)
        res[f"{name}_key"] = [L.link_key(o) for o in out]
    res["same_links"] = res.pop("fast_key") == res.pop("full_key")
    res["speedup"] = round(res["fast_pages_s"] / res["full_pages_s"], 1)
    # worst case for the pre-scan: every link is a candidate (no pages or blocks can be skipped)
    t = time.perf_counter()
    a = [L.harvest(x, all_targets) for x in texts]
    fa = time.perf_counter() - t
    t = time.perf_counter()
    b = [L.harvest_full(x, all_targets) for x in texts]
    fb = time.perf_counter() - t
    res["all_targets_speedup"] = round(fb / fa, 2)
    res["all_targets_same_links"] = [L.link_key(o) for o in a] == [L.link_key(o) for o in b]
    return res


def main(argv: list[str] | None = None) -> None:
    import shutil

    from eventatlas.store import benchmarking

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=250)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="also write the full result here (JSON)")
    a = benchmarking.parse_args(ap, argv, smoke={"mb": 0.5})
    bench = benchmarking.Benchmark("wiki", a, libraries=("mwparserfromhell",))
    tmp = benchmarking.scratch_dir(a, bench.run_id)
    try:
        scan = bench_scan(a.mb, a.seed, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    # the link benchmark reads the real Wikipedia excerpt (absent: skipped); a smoke run checks the scan only
    links = {"skipped": "smoke run"} if a.smoke else bench_links()
    res = {"cpu_count": os.cpu_count(), "seed": a.seed, "scan": scan, "links": links}
    print(json.dumps(res, indent=2))
    if not scan["same_events"]:
        raise SystemExit("scan_dump and the ijson baseline found different events: the timing compares different work")
    cases = [benchmarking.case("MB/s", scan["scan_1proc_mb_s"], scan["ijson_mb_s"], higher_is_better=True,
                               setting=f"scan {a.mb:g} MB, 1 process", ours_label="scan_dump (pre-filter + orjson)",
                               baseline_label="ijson + extract_event")]
    if "speedup" in links:
        cases.append(benchmarking.case("pages/s", links["fast_pages_s"], links["full_pages_s"], higher_is_better=True,
                                       setting="link harvest", ours_label="links.harvest (pre-scan)",
                                       baseline_label="links.harvest_full (mwparserfromhell)"))
    bench.finish(cases, res, out=a.out)


if __name__ == "__main__":
    main()
