"""ACE 2005 (LDC2006T06) English: ``*.apf.xml`` annotation files beside their ``*.sgm`` sources,
e.g. ``data/English/<genre>/timex2norm/*.apf.xml``.

apf offsets are *inclusive* character offsets (``END`` is the last character). The task spec
says they index the raw ``.sgm`` text including its SGML tags; the LDC documentation counts
characters with the tags removed. We do not guess: with ``offsets="auto"`` (default) every
``<charseq START END>text</charseq>`` of a document is checked against both bases and the one
that matches (raw first) is used; ``offsets="raw"`` / ``"stripped"`` force one. The basis is
recorded in ``documents.extra.offset_basis``; charseqs that do not match their text are
rejects (``offset_mismatch``), never kept.

Mentions: one per ``event_mention``. ``sentence`` = the ``ldc_scope`` text (the annotators'
sentence-like scope), trigger = ``anchor`` with offsets relative to the scope, ``scope_start``/
``scope_end`` = the mention ``extent`` relative to the scope (when inside it), labels =
["Type.Subtype"] (e.g. "Conflict.Attack"), arguments = ``event_mention_argument`` (role, text,
offsets relative to the scope when inside, entity id = REFID). Splits: ``splits=`` a directory
with ``train*``, ``dev*``, ``test*`` doc-list files (one doc per line, path or id; the common
Li et al. 529/30/40 lists) or a JSON ``{split: [doc ids]}``; otherwise "all".

XML goes through defusedxml: the apf DOCTYPE (an external DTD name, never fetched) is
allowed, entity declarations (billion laughs, external entities) are refused with an error.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io import Rejects
from ._common import MentionDedup, bump, check_span, dumps, load_json, mention_row, parse_offset, read_bytes, read_text, record_guard
from ._xml import child, children, parse_bytes

DEFAULT_DATASET = "ace2005"
ONTOLOGY = "ACE"
_TAG = re.compile(r"<[^>]*>")
_WS = re.compile(r"\s+")

# ACE 2005 event inventory with one-line definitions paraphrased from the LDC ACE (English)
# Events Annotation Guidelines v5.4.3.
TYPES: dict[str, str] = {
    "Life": "Events in the life of a person: birth, marriage, divorce, injury, death.",
    "Life.Be-Born": "A person is given birth to.",
    "Life.Marry": "Two people are married under the legal definition.",
    "Life.Divorce": "Two people are officially divorced.",
    "Life.Injure": "A person gets/got injured, whether by accident, intentionally or self-inflicted.",
    "Life.Die": "The life of a person ends, by accident, intentionally or naturally.",
    "Movement": "Movement of people or things from one place to another.",
    "Movement.Transport": "An artifact or a person is moved from one place to another.",
    "Transaction": "Transfer of ownership of things or money.",
    "Transaction.Transfer-Ownership": "Buying, selling, loaning, borrowing, giving or receiving of artifacts or organizations.",
    "Transaction.Transfer-Money": "Giving, receiving, borrowing or lending money when it is not in the context of purchasing something.",
    "Business": "Events concerning organizations as businesses.",
    "Business.Start-Org": "A new organization is created.",
    "Business.Merge-Org": "Two or more organizations come together to form a new organization.",
    "Business.Declare-Bankruptcy": "An organization requests legal protection from debt collection.",
    "Business.End-Org": "An organization ceases to exist ('goes out of business').",
    "Conflict": "Violent or non-violent confrontation between agents.",
    "Conflict.Attack": "A violent physical act causing harm or damage.",
    "Conflict.Demonstrate": "A large number of people come together in a public area to protest or demand official action.",
    "Contact": "Communication between agents.",
    "Contact.Meet": "Two or more entities come together at a single location and interact face to face.",
    "Contact.Phone-Write": "Two or more people communicate without meeting face to face (phone, letter, e-mail, ...).",
    "Personnel": "Changes in employment or elected positions.",
    "Personnel.Start-Position": "A person begins working for an organization or hiring manager.",
    "Personnel.End-Position": "A person stops working for an organization or hiring manager.",
    "Personnel.Nominate": "A person is proposed for a position through official channels.",
    "Personnel.Elect": "A candidate wins an election designed to determine the person who holds a position.",
    "Justice": "Events of the legal and judicial system.",
    "Justice.Arrest-Jail": "The movement of a person is constrained by a state actor (arrest, jailing, detention).",
    "Justice.Release-Parole": "A person is released from the custody of a state actor.",
    "Justice.Trial-Hearing": "A court proceeding is initiated to determine the legal status of a person or organization.",
    "Justice.Charge-Indict": "A person or organization is accused of a crime by a state actor.",
    "Justice.Sue": "A court proceeding is initiated by a person or organization against another.",
    "Justice.Convict": "A person or organization is found guilty of a crime by a court.",
    "Justice.Sentence": "The punishment for the defendant is issued by a state actor.",
    "Justice.Fine": "A state actor issues a financial punishment to a person or organization.",
    "Justice.Execute": "The life of a person is taken by a state actor as punishment.",
    "Justice.Extradite": "A person is sent by a state actor from one place to another where they face justice.",
    "Justice.Acquit": "A trial ends but the court fails to produce a conviction.",
    "Justice.Appeal": "A court decision is taken to a higher court for review.",
    "Justice.Pardon": "A head of state or appointed official lifts a sentence imposed by the judiciary.",
}


def _split_map(splits) -> dict[str, str]:
    if not splits:
        return {}
    p = Path(splits)
    out: dict[str, str] = {}
    if p.is_file() and p.suffix == ".json":
        for s, docs in load_json(p).items():
            for d in docs:
                out[Path(str(d)).name.replace(".apf.xml", "").replace(".sgm", "")] = s
        return out
    files = sorted(p.iterdir()) if p.is_dir() else [p]
    for f in files:
        name = f.name.lower()
        split = next((s for s in ("train", "dev", "test") if name.startswith(s)), None)
        if split is None or not f.is_file():
            continue
        for _, line in enumerate(read_text(f).splitlines()):
            if line.strip():
                out[Path(line.strip()).name.replace(".apf.xml", "").replace(".sgm", "")] = split
    return out


def _stripped(raw: str) -> str:
    return _TAG.sub("", raw)


def _charseq(el):
    """(start, end_exclusive, text) of the charseq under ``el`` (extent/anchor/ldc_scope)."""
    cs = child(el, "charseq") if el is not None else None
    if cs is None or cs.get("START") is None or cs.get("END") is None:
        return None
    st, en = parse_offset(cs.get("START")), parse_offset(cs.get("END"))
    if st is None or en is None:
        raise ValueError(f"<{el.tag}> charseq START={cs.get('START')[:20]!r} END={cs.get('END')[:20]!r}: "
                         "offsets must be non-negative integers")
    return st, en + 1, cs.text or ""


def _charseq_or_none(el):
    try:
        return _charseq(el)
    except ValueError:
        return None  # reported where its event_mention is read


def _same(a: str, b: str) -> bool:
    # apf charseq text may render a source newline as a space; compare modulo whitespace runs
    return a == b or _WS.sub(" ", a).strip() == _WS.sub(" ", b).strip()


def read(path, *, dataset: str = DEFAULT_DATASET, rejects: Rejects, splits=None, offsets: str = "auto",
         stats: dict | None = None, **opts) -> Iterator[tuple[str, dict]]:
    if offsets not in ("auto", "raw", "stripped"):
        raise ValueError(f"offsets must be auto, raw or stripped, not {offsets!r}")
    path = Path(path)
    apfs = sorted(path.rglob("*.apf.xml")) if path.is_dir() else [path]
    if not path.is_dir() and not path.name.endswith(".apf.xml"):
        raise InputError(path, "-", "this does not look like ace2005 input: expected an *.apf.xml annotation file "
                         "(its .sgm source beside it) or a directory holding them")
    if not apfs:
        raise InputError(path, "-", "no *.apf.xml files found")
    split_of = _split_map(splits)
    dedup = MentionDedup()
    seen_types: set[str] = set()
    for apf in apfs:
        sgm = apf.with_name(apf.name[: -len(".apf.xml")] + ".sgm")
        if not sgm.exists():
            rejects.add(apf, "-", "missing_source", f"no {sgm.name} beside the apf file", None)
            continue
        root = parse_bytes(read_bytes(apf), apf, allow_doctype=True)
        doc = child(root, "document")
        if doc is None or not doc.get("DOCID"):
            raise InputError(apf, "root", "no <document DOCID=...> element")
        doc_id = doc.get("DOCID")
        raw = read_text(sgm)
        bases = {"raw": raw, "stripped": _stripped(raw)}
        charseqs = [(parse_offset(cs.get("START")), parse_offset(cs.get("END")), cs.text or "") for cs in doc.iter() if cs.tag == "charseq"]
        charseqs = [c for c in charseqs if c[0] is not None and c[1] is not None]

        def matches(text):
            return sum(1 for st, en, t in charseqs if _same(text[st : en + 1], t))

        if offsets == "auto":
            scores = {b: matches(t) for b, t in bases.items()}
            basis = max(scores, key=lambda b: (scores[b], b == "raw"))
        else:
            basis = offsets
        text = bases[basis]
        bump(stats, f"offset_basis_{basis}")
        split = split_of.get(doc_id, "all" if not split_of else None)
        if split is None:
            bump(stats, "docs_not_in_split_lists")
            split = "unassigned"
        genre = apf.parent.parent.name if apf.parent.name == "timex2norm" else apf.parent.name
        yield "documents", {"dataset": dataset, "doc_id": doc_id, "title": None, "language": "en", "text": text,
                            "source": str(apf.relative_to(path) if path.is_dir() else apf.name), "split": split,
                            "extra": dumps({"offset_basis": basis, "genre": genre, "source_type": root.get("SOURCE")})}
        # sent_idx = rank of the mention's ldc_scope among the document's scopes (ACE has no sentence
        # split); it keeps mention ids apart when two scopes hold the same relative trigger span
        scopes = sorted({(c[0], c[1]) for em in doc.iter() if em.tag == "event_mention"
                         for c in [_charseq_or_none(child(em, "ldc_scope")) or _charseq_or_none(child(em, "extent")) or _charseq_or_none(child(em, "anchor"))] if c})
        scope_idx = {sp: i for i, sp in enumerate(scopes)}
        for ev in children(doc, "event"):
            etype = f"{ev.get('TYPE')}.{ev.get('SUBTYPE')}"
            seen_types.add(etype)
            for em in children(ev, "event_mention"):
                loc = f"event_mention {em.get('ID')}"
                with record_guard(rejects, apf, loc, None):  # e.g. START="abc": a reject naming file and event_mention
                    anchor, scope, extent = _charseq(child(em, "anchor")), _charseq(child(em, "ldc_scope")), _charseq(child(em, "extent"))
                    if anchor is None:
                        rejects.add(apf, loc, "missing_field", "event_mention has no anchor charseq", None)
                        continue
                    if scope is None:
                        scope = extent or anchor
                    bad = [n for n, cs in (("anchor", anchor), ("ldc_scope", scope)) if not _same(text[cs[0] : cs[1]], cs[2])]
                    if bad:
                        for n in bad:
                            cs = anchor if n == "anchor" else scope
                            rejects.add(apf, loc, "offset_mismatch", f"{n} [{cs[0]}, {cs[1] - 1}] in {basis} {sgm.name} is {text[cs[0]:cs[1]]!r}, apf says {cs[2]!r}", cs[2])
                        continue
                    sentence = text[scope[0] : scope[1]]
                    ts, te = anchor[0] - scope[0], anchor[1] - scope[0]
                    if not (0 <= ts < te <= len(sentence)):
                        rejects.add(apf, loc, "anchor_outside_scope", f"anchor [{anchor[0]}, {anchor[1]}) not inside ldc_scope [{scope[0]}, {scope[1]})", anchor[2])
                        continue
                    if not check_span(rejects, apf, loc, sentence, ts, te, text[anchor[0] : anchor[1]]):
                        continue
                    sc = None
                    if extent and scope[0] <= extent[0] and extent[1] <= scope[1]:
                        sc = (extent[0] - scope[0], extent[1] - scope[0])
                    args = []
                    for arg in children(em, "event_mention_argument"):
                        a = _charseq(child(arg, "extent"))
                        st = en = None
                        if a and scope[0] <= a[0] and a[1] <= scope[1] and _same(text[a[0] : a[1]], a[2]):
                            st, en = a[0] - scope[0], a[1] - scope[0]
                        args.append({"role": arg.get("ROLE"), "text": text[a[0] : a[1]] if st is not None else (a[2] if a else None),
                                     "start": st, "end": en, "entity_id": arg.get("REFID")})
                    row = mention_row(dataset, doc_id, scope_idx.get((scope[0], scope[1])), sentence, ts, te, [etype], split=split, scope=sc, arguments=args,
                                      extra={"event_id": ev.get("ID"), "mention_id": em.get("ID"), "doc_offset": anchor[0],
                                             **{k.lower(): ev.get(k) for k in ("MODALITY", "POLARITY", "GENERICITY", "TENSE") if ev.get(k)}})
                    if dedup.first(row["mention_id"]):
                        yield "mentions", row
    bump(stats, "duplicate_mentions", dedup.duplicates)
    for t in sorted(seen_types - set(TYPES)):
        rejects.add(None, t, "unknown_type", f"{t} is not an ACE 2005 event subtype (kept, without definition)", None)
    for t in sorted(set(TYPES) | seen_types):
        yield "event_types", {"dataset": dataset, "type_id": t, "name": t.split(".", 1)[-1].replace("-", " "),
                              "definition": TYPES.get(t), "parent_id": t.split(".", 1)[0] if "." in t else None,
                              "ontology": ONTOLOGY, "extra": None}
