"""The hierarchical multilingual event-grounding build: backend -> common-schema tables.

``build(backend, out_dir, languages=..., params=..., build_id=...)`` writes
``out_dir/builds/<build_id>/`` (tables via DatasetWriter, then the extra views,
Table-1 statistics and the diff against the previous build), publishes it as the
dataset's current tables (``out_dir/<table>.parquet``, manifest last) and points
``out_dir/latest.json`` at it only when everything landed. Output never depends on
the order or multiplicity of what the backend yields: everything is deduplicated
and sorted here, so the dump and API backends give identical tables.
"""
from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from eventatlas.io import (DatasetWriter, Rejects, atomic_write_json, clean_staging, fault_point, link_file, link_tree,
                          rows_to_table, stable_id, staging_dir, switch_dir, write_parquet)

from . import hierarchy as H
from .backend import WikiBackend, normalize_title
from .descriptions import Description, describe
from .links import harvest
from .mentions import Candidate, filter_mentions
from .prune import prune
from .splits import assign_splits, components
from .wikidata import EventRecord, extract_event
from .wikinews import document_text, news_links, publication_date

XLEL_LANGUAGES = ("af", "ar", "be", "bg", "bn", "ca", "cs", "da", "de", "el", "en", "es", "fa", "fi", "fr", "he", "hi", "hu",
                  "id", "it", "ja", "ko", "ml", "mr", "ms", "nl", "no", "pl", "pt", "ro", "ru", "si", "sk", "sl", "sr", "sv",
                  "sw", "ta", "te", "th", "tr", "uk", "vi", "zh")
DEFAULT_PARAMS: dict[str, Any] = {
    "min_context_chars": 100, "max_context_chars": 2000, "max_contexts_per_mention": 20, "min_mentions": 30,
    "max_title_share": 0.5, "max_height": 3, "seed": 0, "workers": 1,
}
FILTER_KEYS = ("min_context_chars", "max_context_chars", "max_contexts_per_mention", "min_mentions", "max_title_share", "seed")
DESCRIPTIONS = pa.schema([("type_id", pa.string()), ("language", pa.string()), ("title", pa.string()), ("description", pa.string())])
VIEW = pa.schema([("mention_id", pa.string()), ("type_id", pa.string()), ("language", pa.string()), ("split", pa.string()),
                  ("description_language", pa.string()), ("description", pa.string())])
TABLE1 = pa.schema([("split", pa.string()), ("language", pa.string()), ("mentions", pa.int64()), ("events", pa.int64()),
                    ("trees", pa.int64()), ("avg_children", pa.float64()), ("max_depth", pa.int64())])


def _qkey(q: str):
    return (len(q), q)


def _events(backend, languages, rejects, params, executor) -> list[EventRecord]:
    if hasattr(backend, "scan_events"):  # dump fast path: sharded, pre-filtered
        recs = backend.scan_events(languages, rejects, workers=params["workers"], executor=executor)
    else:
        recs = []
        for ent in backend.iter_entities():
            r = extract_event(ent, languages, rejects=rejects, source=backend.name, location=ent.get("id"))
            if r is not None:
                recs.append(r)
    return list({r.qid: r for r in recs}.values())


def _descriptions(backend, events: list[EventRecord], languages, rejects) -> tuple[list[EventRecord], dict, dict]:
    """Fetch each event article; follow one redirect hop; drop events without an English description."""
    desc: dict[tuple[str, str], Description] = {}
    final_title: dict[tuple[str, str], str] = {}
    for lang in languages:
        want = {normalize_title(e.sitelinks[lang]): e.qid for e in events if lang in e.sitelinks}
        if not want:
            continue
        pages = backend.get_articles(lang, sorted(want))
        hop = {t: p.redirect_to for t, p in pages.items() if p.is_redirect}
        targets = backend.get_articles(lang, sorted(set(hop.values()))) if hop else {}
        for t, qid in want.items():
            p = pages.get(t)
            if p is not None and p.is_redirect:
                p = targets.get(p.redirect_to)
            if p is None or p.is_redirect:
                continue
            d = describe(qid, p)
            desc[(qid, lang)] = d
            final_title[(qid, lang)] = p.title
    kept = []
    for e in events:
        d = desc.get((e.qid, "en"))
        if d is None:
            rejects.add("descriptions", e.qid, "no_english_description", f"English article {e.sitelinks.get('en')!r} not found")
        elif not d.text:
            rejects.add("descriptions", e.qid, "no_english_description", f"English article {d.title!r} has no prose paragraph")
        else:
            kept.append(e)
    ok = {e.qid for e in kept}
    return kept, {k: v for k, v in desc.items() if k[0] in ok}, {k: v for k, v in final_title.items() if k[0] in ok}


def _harvest_lang(backend, lang, title2qid: dict[str, str], redirects: dict[str, str], event_titles: set[str], params, executor,
                  rejects) -> list[Candidate]:
    targets = set(title2qid) | set(redirects)
    out: list[Candidate] = []
    seen: set[str] = set()
    if hasattr(backend, "harvest_pages"):  # dump fast path: pages parsed and harvested in worker processes
        stream = backend.harvest_pages(lang, targets, workers=params["workers"], executor=executor)
    else:
        stream = ((p.title, p.page_id, harvest(p.wikitext, targets)) for p in backend.iter_linking_pages(lang, targets)
                  if p.ns == 0 and not p.is_redirect)
    for title, page_id, links in tqdm(stream, desc=f"links {lang}", unit="page", disable=None, leave=False):
        if title in seen or title in event_titles:
            continue  # event articles are never mention sources
        seen.add(title)
        for l in links:
            tgt = redirects.get(l.target, l.target)
            qid = title2qid.get(tgt)
            if qid is None:
                continue
            out.append(Candidate(qid, lang, title, page_id, l.paragraph, l.start, l.end, l.anchor,
                                 extra={"link_target": l.target, "via_redirect": l.target != tgt}))
    return out


def build(backend: WikiBackend, out_dir: str | Path, *, languages: Iterable[str] = XLEL_LANGUAGES, params: dict | None = None,
          build_id: str | None = None, dataset: str = "wikigrounding", wikinews_languages: Iterable[str] | None = None,
          executor=None, publish: bool = True) -> dict:
    """Run the whole pipeline and return the manifest (see module docstring)."""
    p = {**DEFAULT_PARAMS, **(params or {})}
    languages = sorted(set(languages) | {"en"})
    wn_langs = sorted(set(wikinews_languages if wikinews_languages is not None else languages))
    build_id = build_id or time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out_dir = Path(out_dir)
    bdir = out_dir / "builds" / build_id
    rejects = Rejects(dataset)
    t0 = time.time()

    cands = _events(backend, languages, rejects, p, executor)
    pruned = prune(cands, languages, rejects)
    events, desc, titles = _descriptions(backend, pruned, languages, rejects)
    ev_by = {e.qid: e for e in events}

    # mentions from Wikipedia
    all_cands: list[Candidate] = []
    redirects_by_lang: dict[str, dict[str, str]] = {}
    event_titles_by_lang: dict[str, set[str]] = defaultdict(set)
    for e in pruned:  # every kept candidate's own article is an event article
        for lang, t in e.sitelinks.items():
            event_titles_by_lang[lang].add(normalize_title(t))
    for (qid, lang), t in titles.items():
        event_titles_by_lang[lang].add(t)
    for lang in languages:
        title2qid = {t: q for (q, l), t in titles.items() if l == lang}
        if not title2qid:
            continue
        redirects = {normalize_title(r): normalize_title(t) for r, t in backend.redirects_to(lang, sorted(title2qid)).items()}
        redirects = {r: t for r, t in redirects.items() if t in title2qid and r not in title2qid}
        redirects_by_lang[lang] = redirects
        all_cands += _harvest_lang(backend, lang, title2qid, redirects, event_titles_by_lang[lang], p, executor, rejects)
    fkw = {k: p[k] for k in FILTER_KEYS}
    mentions = filter_mentions(all_cands, ev_by, rejects, titles=titles, **fkw)

    parent = H.build_hierarchy(events, rejects, max_height=p["max_height"])
    comps = components(events)
    split_of = assign_splits(comps, p["seed"])
    comp_of = {q: i for i, c in enumerate(comps) for q in c}
    n_mentions = Counter(m.qid for m in mentions)

    # Wikinews (events of the dictionary; length and numeral filters, no per-event thresholds)
    news_cands: list[Candidate] = []
    news_docs: dict[tuple[str, str], dict] = {}
    for lang in wn_langs:
        title2qid = {t: q for (q, l), t in titles.items() if l == lang}
        if not title2qid:
            continue
        redirects = redirects_by_lang.get(lang, {})
        targets = set(title2qid) | set(redirects)
        seen = set()
        for page in backend.iter_wikinews(lang, targets):
            if page.ns != 0 or page.is_redirect or page.title in seen:
                continue
            seen.add(page.title)
            links = news_links(page, targets)
            got = []
            for l in links:
                qid = title2qid.get(redirects.get(l.target, l.target))
                if qid:
                    got.append(Candidate(qid, lang, page.title, page.page_id, l.paragraph, l.start, l.end, l.anchor, project="wikinews",
                                         extra={"link_target": l.target}))
            if got:
                news_cands += got
                news_docs[(lang, page.title)] = {"page": page, "published": publication_date(page)}
    news_mentions = filter_mentions(news_cands, ev_by, rejects, titles=titles, event_level=False, source="wikinews", **fkw)

    manifest = _write(bdir, dataset, events, desc, titles, parent, split_of, comp_of, n_mentions, mentions, news_mentions, news_docs,
                      rejects, languages)
    diff = _diff(out_dir, bdir, build_id)
    atomic_write_json(bdir / "diff.json", diff)
    man = {**manifest, "build_id": build_id, "params": p, "languages": languages, "wikinews_languages": wn_langs,
           "backend": backend.info(), "diff": diff, "seconds": round(time.time() - t0, 2),
           "counts": {"candidates": len(cands), "pruned_events": len(pruned), "events": len(events),
                      "grounded_events": len(n_mentions), "mentions": len(mentions), "wikinews_mentions": len(news_mentions)}}
    atomic_write_json(bdir / "manifest.json", man)
    if publish:
        _publish(bdir, out_dir, man)
    atomic_write_json(out_dir / "latest.json", {"build_id": build_id, "path": str(bdir)})
    return man


PUBLISHED = ("documents", "mentions", "event_types", "type_relations", "rejects", "event_descriptions",
             "view_multilingual", "view_crosslingual", "table1")


def _publish(bdir: Path, out_dir: Path, manifest: dict) -> None:
    """Make the build the dataset's current tables (``<out_dir>/<table>.parquet`` + manifest), where the rest
    of eventatlas (views, embed, cluster) looks for a dataset, in one atomic directory switch: the next version
    is assembled in a staging directory (the build's tables and everything else the dataset directory holds,
    the build history included, hard-linked), so a kill leaves the previous version or this one, never a
    dataset without its manifest or with tables of two builds."""
    out_dir.mkdir(parents=True, exist_ok=True)
    clean_staging(out_dir)
    stage = staging_dir(out_dir)
    for p in out_dir.iterdir():
        if p.name == "manifest.json" or (p.is_file() and p.stem in PUBLISHED and p.suffix == ".parquet"):
            continue
        if p.is_dir():
            link_tree(p, stage / p.name)
        elif p.is_file():
            link_file(p, stage / p.name)
    for name in PUBLISHED:
        link_file(bdir / f"{name}.parquet", stage / f"{name}.parquet")
    atomic_write_json(stage / "manifest.json", manifest)
    fault_point("wiki_publish")
    switch_dir(stage, out_dir)


def _write(bdir: Path, dataset, events, desc, titles, parent, split_of, comp_of, n_mentions, mentions, news_mentions, news_docs,
           rejects: Rejects, languages) -> dict:
    evs = sorted(events, key=lambda e: _qkey(e.qid))
    ev_by = {e.qid: e for e in evs}
    rows_m, docs, ml_rows, xl_rows = [], {}, [], []
    for m in mentions + news_mentions:
        doc_id = f"{m.lang}{m.project}:{m.doc_title}"
        mid = stable_id(dataset, doc_id, m.paragraph, m.start, m.end, m.qid)
        split = split_of[m.qid] if m.project == "wikipedia" else "wikinews"
        extra = {"qid": m.qid, "project": m.project, "page_id": m.page_id, "atomic_split": split_of[m.qid], **m.extra}
        rows_m.append({"mention_id": mid, "dataset": dataset, "doc_id": doc_id, "sent_idx": None, "sentence": m.paragraph,
                       "trigger_start": m.start, "trigger_end": m.end, "trigger": m.anchor, "language": m.lang, "split": split,
                       "labels": H.label_set(m.qid, parent), "arguments": None, "extra": json.dumps(extra, sort_keys=True, ensure_ascii=False)})
        if doc_id not in docs:
            d = {"dataset": dataset, "doc_id": doc_id, "title": m.doc_title, "language": m.lang, "split": split,
                 "source": f"{m.lang}.{m.project}.org/wiki/{m.doc_title.replace(' ', '_')}"}
            if m.project == "wikinews":
                nd = news_docs[(m.lang, m.doc_title)]
                d["text"] = document_text(nd["page"])
                d["extra"] = json.dumps({"page_id": m.page_id, "published": nd["published"], "project": "wikinews"}, sort_keys=True)
            else:
                d["extra"] = json.dumps({"page_id": m.page_id, "project": "wikipedia"}, sort_keys=True)
            docs[doc_id] = d
        own = desc.get((m.qid, m.lang))
        en = desc[(m.qid, "en")]
        ml_rows.append({"mention_id": mid, "type_id": m.qid, "language": m.lang, "split": split,
                        "description_language": m.lang if own else None, "description": own.full if own else None})
        xl_rows.append({"mention_id": mid, "type_id": m.qid, "language": m.lang, "split": split, "description_language": "en",
                        "description": en.full})
    rows_m.sort(key=lambda r: r["mention_id"])
    with DatasetWriter(bdir, dataset, tables=["documents", "mentions", "event_types", "type_relations", "rejects"]) as w:
        for d in sorted(docs.values(), key=lambda d: d["doc_id"]):
            w.write("documents", d)
        for r in rows_m:
            w.write("mentions", r)
        for e in evs:
            en = desc[(e.qid, "en")]
            extra = {"labels": e.labels, "sitelinks": {l: titles[(e.qid, l)] for l in sorted(e.sitelinks) if (e.qid, l) in titles},
                     "split": split_of[e.qid], "component": comp_of[e.qid], "n_mentions": n_mentions.get(e.qid, 0),
                     "grounded": e.qid in n_mentions, "start": e.start, "end": e.end, "point": e.point, "duration": e.duration,
                     "locations": e.locations, "coordinates": e.coordinates, "instance_of": e.instance_of,
                     "ancestors": H.ancestors(e.qid, parent)}
            w.write("event_types", {"dataset": dataset, "type_id": e.qid, "name": e.labels["en"], "definition": en.full,
                                    "parent_id": parent.get(e.qid), "ontology": "Wikidata",
                                    "extra": json.dumps(extra, sort_keys=True, ensure_ascii=False)})
        rels = set()
        for c, par in parent.items():
            rels.add((c, par, "part_of"))
        for e in evs:
            for o in e.follows:
                if o in ev_by:
                    rels.add((e.qid, o, "follows"))
            for o in e.followed_by:
                if o in ev_by:
                    rels.add((e.qid, o, "followed_by"))
        for s, t, r in sorted(rels):
            w.write("type_relations", {"dataset": dataset, "source_id": s, "target_id": t, "relation": r,
                                       "source_ontology": "Wikidata", "target_ontology": "Wikidata"})
        for r in sorted(rejects.rows, key=lambda r: (r["reason"], r["source"] or "", r["location"] or "")):
            w.write("rejects", r)
        # extra artefacts land before the manifest (the manifest marks a complete build)
        write_parquet(rows_to_table([{"type_id": q, "language": l, "title": d.title, "description": d.full}
                                     for (q, l), d in sorted(desc.items())], DESCRIPTIONS), bdir / "event_descriptions.parquet")
        write_parquet(rows_to_table(sorted(ml_rows, key=lambda r: r["mention_id"]), VIEW), bdir / "view_multilingual.parquet")
        write_parquet(rows_to_table(sorted(xl_rows, key=lambda r: r["mention_id"]), VIEW), bdir / "view_crosslingual.parquet")
        t1 = table1(rows_m, evs, parent, split_of)
        write_parquet(rows_to_table(t1, TABLE1), bdir / "table1.parquet")
        man = w.commit({"rejects_by_reason": rejects.counts()})
    return man


def table1(mention_rows: list[dict], events, parent, split_of) -> list[dict]:
    """Statistics as in the paper's Table 1, per split (and per language with split 'all')."""
    out = []
    for split in ("train", "dev", "test", "wikinews"):
        ms = [r for r in mention_rows if r["split"] == split]
        atomic = {json.loads(r["extra"])["qid"] for r in ms}
        nodes = set(atomic) | {a for q in atomic for a in H.ancestors(q, parent)}
        st = H.tree_stats(parent, nodes)
        out.append({"split": split, "language": "all", "mentions": len(ms), "events": len(nodes), "trees": st["trees"],
                    "avg_children": round(st["avg_children"], 4), "max_depth": st["max_depth"]})
    for lang in sorted({r["language"] for r in mention_rows}):
        ms = [r for r in mention_rows if r["language"] == lang and r["split"] != "wikinews"]
        out.append({"split": "all", "language": lang, "mentions": len(ms), "events": len({json.loads(r["extra"])["qid"] for r in ms}),
                    "trees": None, "avg_children": None, "max_depth": None})
    return out


def _diff(out_dir: Path, bdir: Path, build_id: str) -> dict:
    """Events and mentions added/removed (per language) against the build ``latest.json`` pointed to."""
    latest = out_dir / "latest.json"
    prev_id = None
    prev_dir = None
    if latest.exists():
        info = json.loads(latest.read_text())
        if info.get("build_id") != build_id and Path(info["path"]).joinpath("manifest.json").exists():
            prev_id, prev_dir = info["build_id"], Path(info["path"])

    def load(d: Path | None):
        if d is None:
            return set(), {}
        ev = set(pq.read_table(d / "event_types.parquet", columns=["type_id"]).column(0).to_pylist())
        mt = pq.read_table(d / "mentions.parquet", columns=["mention_id", "language"]).to_pylist()
        by = defaultdict(set)
        for r in mt:
            by[r["language"]].add(r["mention_id"])
        return ev, by

    ev0, m0 = load(prev_dir)
    ev1, m1 = load(bdir)
    langs = sorted(set(m0) | set(m1))
    return {"previous_build_id": prev_id, "events_added": sorted(ev1 - ev0, key=_qkey), "events_removed": sorted(ev0 - ev1, key=_qkey),
            "mentions_added": {l: len(m1.get(l, set()) - m0.get(l, set())) for l in langs},
            "mentions_removed": {l: len(m0.get(l, set()) - m1.get(l, set())) for l in langs}}


def record_in_warehouse(con, manifest: dict, build_dir: str | Path) -> None:
    """Insert one build into the warehouse tables of migrations 101-104 (a DuckDB connection)."""
    bid = manifest["build_id"]
    d = manifest["diff"]
    con.execute("DELETE FROM wiki_builds WHERE build_id = ?", [bid])
    con.execute("INSERT INTO wiki_builds VALUES (?, ?, now(), ?, ?, ?, ?, ?)",
                [bid, manifest["dataset"], json.dumps(manifest["backend"], default=str), json.dumps(manifest["params"]),
                 manifest["counts"]["events"], manifest["counts"]["mentions"], d["previous_build_id"]])
    con.execute("DELETE FROM wiki_build_diffs WHERE build_id = ?", [bid])
    for lang in sorted(set(d["mentions_added"]) | {"*"}):
        con.execute("INSERT INTO wiki_build_diffs VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [bid, d["previous_build_id"], lang, len(d["events_added"]) if lang == "*" else None,
                     len(d["events_removed"]) if lang == "*" else None, d["mentions_added"].get(lang), d["mentions_removed"].get(lang)])
    con.execute("DELETE FROM wiki_table1 WHERE build_id = ?", [bid])
    for r in pq.read_table(Path(build_dir) / "table1.parquet").to_pylist():
        con.execute("INSERT INTO wiki_table1 VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [bid, r["split"], r["language"], r["mentions"], r["events"], r["trees"], r["avg_children"], r["max_depth"]])
    con.execute("DELETE FROM wiki_rejects_summary WHERE build_id = ?", [bid])
    for reason, n in sorted(manifest.get("rejects_by_reason", {}).items()):
        con.execute("INSERT INTO wiki_rejects_summary VALUES (?, ?, ?)", [bid, reason, n])
