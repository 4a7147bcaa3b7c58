"""WikiEvents (Li et al. 2021) gen-arg JSONL: ``doc_id, tokens, text, sentences, entity_mentions,
event_mentions[{id, event_type, trigger{start, end, text, sent_idx}, arguments[{entity_id, role, text}]}]``.

Trigger offsets are document-level token indices (end-exclusive). ``sentences`` is a list of
``[[[token, char_start, char_end], ...], sentence_text]`` with char offsets into the document
text; we keep ``sentence_text`` and convert token offsets into it (first token's char start
is the sentence's origin). KAIROS types ``A.B.C`` get parent ``A`` (the first segment, a root
type of its own); ``A.B`` is kept in ``extra.subtype``.

Optional coreference (``coref=`` path, or ``coref/<split>.jsonlines`` beside the file):
``{doc_key, clusters: [[id, ...], ...]}``. Clusters of event mention ids become
``mention_relations`` ``coref`` (each member -> the cluster's first member); clusters of entity
ids (the usual WikiEvents file) annotate arguments: their ``entity_id`` is kept and the cluster
index goes into the mention's ``extra.arg_coref``. A ``meta.json`` beside the file (the release's
``[[type, [roles]], ...]``) adds all its types, with roles in ``extra.roles``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import (DocumentIds, MentionDedup, bump, check_span, dumps, is_label, iter_jsonl, jsonl_items, load_json, mention_row,
                      missing_trigger_fields, record_guard, records)

DEFAULT_DATASET = "wikievents"
ONTOLOGY = "KAIROS"


def _files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.glob("*.jsonl"))
        if not files:
            raise InputError(path, "-", "no *.jsonl files in directory")
        return files
    return [path]


def _split_of(p: Path) -> str:
    stem = p.stem.lower()
    for s in ("train", "dev", "test", "valid"):
        if s in stem:
            return "dev" if s == "valid" else s
    return "all"


def _load_coref(p: Path) -> dict[str, list[list[str]]]:
    out = {}
    for n, obj in iter_jsonl(p):
        if not isinstance(obj, dict) or "doc_key" not in obj or not isinstance(obj.get("clusters"), list):
            raise InputError(p, f"line {n}", "expected {doc_key, clusters: [[id, ...], ...]}")
        out[str(obj["doc_key"])] = obj["clusters"]
    return out


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, coref=None, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    path = Path(path)
    dedup = MentionDedup()
    types: set[str] = set()
    doc_ids = DocumentIds()
    for f in _files(path):
        split = _split_of(f)
        cpath = Path(coref) if coref else f.parent / "coref" / f"{f.stem}.jsonlines"
        clusters = _load_coref(cpath) if cpath.exists() else {}
        for loc, doc in records(rejects, f, jsonl_items(f), "document", ("doc_id", "tokens", "sentences", "event_mentions")):
            with record_guard(rejects, f, loc, doc):
                doc_id = str(doc["doc_id"])
                if doc_ids.repeated(rejects, f, loc, doc_id, doc):
                    continue
                sents: list[tuple[str, list[tuple[int, int]], int]] = []  # text, token char spans, first global token
                g = 0
                bad_doc = False
                for si, sent in enumerate(doc["sentences"]):
                    try:
                        toks, text = sent
                        base = toks[0][1]
                        spans = [(int(a) - base, int(b) - base) for _, a, b in toks]
                    except (TypeError, ValueError, IndexError):
                        rejects.add(f, f"{loc} sentence {si}", "bad_sentence", "expected [[[tok, start, end], ...], text]", str(sent)[:300])
                        bad_doc = True
                        break
                    sents.append((text, spans, g))
                    g += len(spans)
                if bad_doc:
                    continue
                if g != len(doc["tokens"]):
                    rejects.add(f, loc, "token_count_mismatch", f"sentences hold {g} tokens, document {len(doc['tokens'])}", doc_id)
                    continue
                starts = [s[2] for s in sents]
                ents = {e["id"]: (e["start"], e["end"]) for e in doc.get("entity_mentions") or []
                        if isinstance(e, dict) and isinstance(e.get("start"), int) and isinstance(e.get("end"), int) and "id" in e}
                ent_cluster: dict[str, int] = {}
                ev_ids = {e.get("id") for e in doc["event_mentions"] if isinstance(e, dict)}
                mid_of: dict[str, str] = {}
                for ci, cl in enumerate(clusters.get(doc_id, [])):
                    for x in cl:
                        ent_cluster[str(x)] = ci
                doc_ids.add(f, loc, doc_id)
                yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": None, "language": "en", "text": doc.get("text"),
                                    "sentences": [s[0] for s in sents], "source": f.name, "split": split, "extra": None}
                for ei, ev in enumerate(doc["event_mentions"]):
                    eloc = f"{loc} event_mentions[{ei}]"
                    miss = missing_trigger_fields(ev)
                    if miss:
                        rejects.add(f, eloc, "missing_field", f"missing {', '.join(miss)}", ev)
                        continue
                    trig = ev["trigger"]
                    if not is_label(ev["event_type"]):
                        rejects.add(f, eloc, "bad_record", f"event_type {ev['event_type']!r} is not a type name", ev)
                        continue
                    ts, te = trig["start"], trig["end"]
                    if not (isinstance(ts, int) and isinstance(te, int) and 0 <= ts < te <= g):
                        rejects.add(f, eloc, "bad_offsets", f"token span [{ts}, {te}) outside 0..{g}", ev)
                        continue
                    si = max(i for i, s0 in enumerate(starts) if s0 <= ts)
                    text, spans, s0 = sents[si]
                    if te - s0 > len(spans):
                        rejects.add(f, eloc, "crosses_sentence", f"trigger tokens [{ts}, {te}) cross sentence {si}", ev)
                        continue
                    cs, ce = spans[ts - s0][0], spans[te - 1 - s0][1]
                    if not check_span(rejects, f, eloc, text, cs, ce, trig["text"], ev):
                        continue
                    etype = ev["event_type"]
                    types.add(etype)
                    args, arg_coref = [], {}
                    for a in ev.get("arguments") or []:
                        if not isinstance(a, dict):
                            continue
                        eid = a.get("entity_id")
                        astart = aend = None
                        ent = ents.get(eid)
                        if ent and s0 <= ent[0] < ent[1] <= s0 + len(spans):  # offsets only when inside this sentence
                            astart, aend = spans[ent[0] - s0][0], spans[ent[1] - 1 - s0][1]
                            if text[astart:aend] != a.get("text"):
                                astart = aend = None
                        args.append({"role": a.get("role"), "text": a.get("text"), "start": astart, "end": aend, "entity_id": eid})
                        if eid in ent_cluster:
                            arg_coref[eid] = ent_cluster[eid]
                    row = mention_row(dataset, doc_id, si, text, cs, ce, [etype], split=split, arguments=args,
                                      extra={"event_id": ev.get("id"), "token_span": [ts, te], **({"arg_coref": arg_coref} if arg_coref else {})})
                    if ev.get("id") is not None:
                        mid_of[ev["id"]] = row["mention_id"]
                    if dedup.first(row["mention_id"]):
                        yield "mentions", row
                for cl in clusters.get(doc_id, []):
                    evs = [mid_of[x] for x in cl if x in ev_ids and x in mid_of]
                    for m in evs[1:]:
                        yield "mention_relations", {"dataset": dataset, "source_mention_id": m, "target_mention_id": evs[0], "relation": "coref"}
        # coreference of a document this file does not hold (a mistyped doc_key or doc_id) would be lost unseen
        for key in sorted(set(clusters) - {d for d, w in doc_ids.where.items() if w.startswith(f"{f.name} ")}):
            rejects.add(cpath, f"doc_key {key!r}", "orphan_coref", f"no document {key!r} in {f.name}; its clusters are unused", None)
    bump(stats, "duplicate_mentions", dedup.duplicates)
    # KAIROS hierarchy as the task asks: parent = first segment (the root); the middle level is kept in extra
    roles: dict[str, list] = {}
    meta = path / "meta.json" if path.is_dir() else path.parent / "meta.json"
    if meta.exists():  # ontology file of the release: [[type, [roles...]], ...]
        items = load_json(meta)
        if not isinstance(items, list):  # a side file: its types are missing, the documents are still read
            rejects.add(meta, "top level", "bad_type_entry", f"expected [[type, [roles]], ...], got {type(items).__name__}",
                        str(items)[:300])
            items = []
        for i, item in enumerate(items):
            if isinstance(item, list) and len(item) == 2 and is_label(item[0]):
                roles[item[0]] = item[1]
            else:
                rejects.add(meta, f"[{i}]", "bad_type_entry", "expected [type, [roles]]", item)
        bump(stats, "ontology_types", len(roles))
        types |= set(roles)
    roots = {t.split(".", 1)[0] for t in types}
    for t in sorted(types | roots):
        parts = t.split(".")
        yield "event_types", {"dataset": dataset, "type_id": t, "name": parts[-1] if parts[-1] != "Unspecified" else ".".join(parts[:-1]),
                              "definition": None, "parent_id": parts[0] if len(parts) > 1 else None, "ontology": ONTOLOGY,
                              "extra": dumps({**({"subtype": ".".join(parts[:2])} if len(parts) > 2 else {}), **({"roles": roles[t]} if t in roles else {})})}
