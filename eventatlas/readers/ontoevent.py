"""OntoEvent event-event relations over MAVEN sentences (``event_relation.json``).

Layout: ``{RELATION: [[a, b], ...]}``. Mention-level relations (CAUSE, CAUSEDBY, BEFORE,
AFTER, EQUAL) hold pairs of mention dicts ``{doc_id, doc_title, sent_id, event_mention,
event_mention_tokens, trigger, trigger_pos:[start,end) tokens, event_type}``; type-level
relations (COSUPER, SUBSUPER, SUPERSUB) hold pairs of type ids.

What we keep as the sentence: the original ``event_mention`` text. The tokens are often
lower-cased, so they are aligned to it case-insensitively and the trigger is the
original-cased slice of that text (``trigger`` in the source is compared
case-insensitively). Only when the tokens cannot be aligned do we fall back to the
space-joined tokens (counted as ``sentence_from_tokens``).

Mentions are deduplicated on (doc_id, sent_id, trigger_pos); a key seen with a different
event type is kept once (first type) and the conflict is a reject.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import bump, check_span, dumps, is_label, load_json, mention_id, mention_row, record_guard, require, sentence_and_spans

DEFAULT_DATASET = "ontoevent_maven"
ONTOLOGY = "OntoEvent"
MENTION_RELATIONS = ("CAUSE", "CAUSEDBY", "BEFORE", "AFTER", "EQUAL")
TYPE_RELATIONS = ("COSUPER", "SUBSUPER", "SUPERSUB")
_FIELDS = ("doc_id", "sent_id", "event_mention", "event_mention_tokens", "trigger", "trigger_pos", "event_type")


def _resolve(path: Path) -> Path:
    if path.is_dir():
        p = path / "event_relation.json"
        if not p.exists():
            raise InputError(path, "-", "directory has no event_relation.json")
        return p
    return path


def type_name(type_id: str) -> str:
    return type_id.rsplit(".", 1)[-1].replace("-", " ")


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    src = _resolve(Path(path))
    data = load_json(src)
    if not isinstance(data, dict):
        raise InputError(src, "top level", "expected an object {RELATION: [[a, b], ...]}")
    unknown = set(data) - set(MENTION_RELATIONS) - set(TYPE_RELATIONS)
    for rel in sorted(unknown):
        rejects.add(src, rel, "unknown_relation", f"relation {rel!r} is not one of {MENTION_RELATIONS + TYPE_RELATIONS}")

    key_to_mid: dict[tuple, str | None] = {}
    key_type: dict[tuple, str] = {}
    types: set[str] = set()
    docs: dict[str, dict] = {}

    def mention(m, loc) -> str | None:
        """mention id for a source mention dict; yields its row the first time (via pending)."""
        miss = require(m, _FIELDS)
        if miss:
            rejects.add(src, loc, "missing_field", f"missing {', '.join(miss)}", m)
            return None
        if not is_label(m["event_type"]) or isinstance(m["doc_id"], (list, dict)) or isinstance(m["sent_id"], (list, dict)):
            rejects.add(src, loc, "bad_record", f"event_type {m['event_type']!r}, doc_id, sent_id: a type name and two ids expected", m)
            return None
        tp = m["trigger_pos"]
        if not (isinstance(tp, list) and len(tp) == 2 and all(isinstance(x, int) for x in tp)):
            rejects.add(src, loc, "bad_offsets", f"trigger_pos {tp!r} is not [start, end)", m)
            return None
        key = (m["doc_id"], m["sent_id"], tuple(tp))
        if key in key_to_mid:
            if key_type.get(key) not in (None, m["event_type"]):
                rejects.add(src, loc, "conflicting_type", f"{key} already typed {key_type[key]!r}, here {m['event_type']!r}", m)
            return key_to_mid[key]
        key_to_mid[key] = None  # a failing key is rejected once, not per pair
        toks = m["event_mention_tokens"]
        s, e = tp
        if not (0 <= s < e <= len(toks)):
            rejects.add(src, loc, "bad_offsets", f"trigger_pos {tp} outside {len(toks)} tokens", m)
            return None
        sentence, spans, aligned = sentence_and_spans(m["event_mention"], toks, ignore_case=True)
        if not aligned:
            bump(stats, "sentence_from_tokens")
        cs, ce = spans[s][0], spans[e - 1][1]
        if sentence[cs:ce].lower() != str(m["trigger"]).lower():
            check_span(rejects, src, loc, sentence, cs, ce, m["trigger"], m)
            return None
        label = m["event_type"]
        mid = mention_id(dataset, m["doc_id"], m["sent_id"], cs, ce, label)
        key_to_mid[key] = mid
        key_type[key] = label
        types.add(label)
        d = docs.setdefault(m["doc_id"], {"title": m.get("doc_title"), "sent_ids": set()})
        d["sent_ids"].add(m["sent_id"])
        pending.append(
            mention_row(dataset, m["doc_id"], m["sent_id"], sentence, cs, ce, [label], split="all", mid=mid,
                        extra={"trigger_pos": tp, "doc_title": m.get("doc_title"), "sentence_source": "event_mention" if aligned else "tokens"})
        )
        return mid

    seen_rel: set[tuple] = set()
    for rel in MENTION_RELATIONS + TYPE_RELATIONS:
        if not isinstance(data.get(rel) or [], list):
            rejects.add(src, rel, "bad_record", f"{rel} holds {type(data[rel]).__name__}, expected a list of pairs", str(data[rel])[:300])
            data[rel] = []
    for rel in MENTION_RELATIONS:
        for i, pair in enumerate(data.get(rel) or []):
            loc = f"{rel}[{i}]"
            with record_guard(rejects, src, loc, pair):
                if not (isinstance(pair, list) and len(pair) == 2):
                    rejects.add(src, loc, "bad_pair", "expected [mention, mention]", pair)
                    continue
                pending: list[dict] = []
                a, b = mention(pair[0], loc + "[0]"), mention(pair[1], loc + "[1]")
                for row in pending:
                    yield "mentions", row
                if a is None or b is None:
                    rejects.add(src, loc, "relation_dropped", "a mention of the pair was rejected", None)
                    continue
                t = (a, b, rel)
                if t in seen_rel:
                    bump(stats, "duplicate_relations")
                    continue
                seen_rel.add(t)
                yield "mention_relations", {"dataset": dataset, "source_mention_id": a, "target_mention_id": b, "relation": rel}

    seen_trel: set[tuple] = set()
    for rel in TYPE_RELATIONS:
        for i, pair in enumerate(data.get(rel) or []):
            with record_guard(rejects, src, f"{rel}[{i}]", pair):
                if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) and x for x in pair)):
                    rejects.add(src, f"{rel}[{i}]", "bad_pair", "expected [type, type]", pair)
                    continue
                types.update(pair)
                t = (pair[0], pair[1], rel)
                if t in seen_trel:
                    continue
                seen_trel.add(t)
                yield "type_relations", {"dataset": dataset, "source_id": pair[0], "target_id": pair[1], "relation": rel,
                                         "source_ontology": ONTOLOGY, "target_ontology": ONTOLOGY}

    # supertypes of every subtype exist as types too, so parent_id always resolves
    types |= {t.split(".", 1)[0] for t in types if "." in t}
    for t in sorted(types):
        parent = t.split(".", 1)[0] if "." in t else None
        yield "event_types", {"dataset": dataset, "type_id": t, "name": type_name(t), "definition": None,
                              "parent_id": parent, "ontology": ONTOLOGY, "extra": None}
    for doc_id, d in docs.items():
        yield "documents", {"dataset": dataset, "doc_id": str(doc_id), "title": d["title"], "language": "en",
                            "source": src.name, "split": "all", "extra": dumps({"sent_ids": sorted(d["sent_ids"], key=str)})}
    bump(stats, "distinct_mentions", sum(1 for v in key_to_mid.values() if v))
