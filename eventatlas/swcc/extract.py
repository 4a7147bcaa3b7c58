"""(subject, verb, object) events from raw sentences through a dependency parse, into the same tables as
the ``event_tuples`` reader (documents, events as mentions, ``cooccurrence`` event pairs), so SWCC can
train on text a user has (or on the sentences of any ingested dataset: MAVEN, Wikipedia, WikiEvents).

The parser sits behind ONE function type, :data:`Parser` = ``Callable[[list[str]], list[list[Token]]]``
(one list of :class:`Token` per sentence). :func:`spacy_parser` builds one from an installed spaCy
pipeline; any other parser (Stanza, a UD file, a test's hand-made parses) plugs in the same way.
:func:`load_parser` turns one string (the ``extract-events --parser`` option) into a Parser: an
installed spaCy pipeline by package name or directory (``spacy:<name or path>``, or the bare name or
path), or any Parser function by import path (``import:<module>:<function>``).

Rules of :func:`svo_events` (heads, lower-cased word forms as in Weber et al.'s open-IE tuples):
a token whose ``pos`` is ``VERB`` is an event; its subject is a child with ``dep`` in ``nsubj`` /
``nsubjpass`` / ``nsubj:pass`` (else, for a verb conjoined to another verb, that verb's subject); its
object a child with ``dep`` in ``dobj`` / ``obj`` / ``attr`` / ``oprd`` (else the ``pobj`` of its first
``prep`` child, the tuples' prepositional slot). A verb with neither subject nor object is not an event.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Sequence

__all__ = ["Token", "Parser", "svo_events", "spacy_parser", "load_parser", "extract_events",
           "sentences_by_document", "write_extracted"]

SUBJ = ("nsubj", "nsubjpass", "nsubj:pass")
OBJ = ("dobj", "obj", "attr", "oprd")


@dataclass(frozen=True)
class Token:
    text: str
    dep: str
    head: int  # index of the head token in the sentence (the root points at itself)
    pos: str


Parser = Callable[[list[str]], list[list[Token]]]


def svo_events(sent: Sequence[Token]) -> list[tuple[str | None, str, str | None]]:
    """The (subj, verb, obj) events of one parsed sentence (module doc), in verb order."""
    children: dict[int, list[int]] = {}
    for i, t in enumerate(sent):
        if t.head != i:
            children.setdefault(t.head, []).append(i)

    def child(i: int, deps: Iterable[str]) -> int | None:
        deps = tuple(deps)
        return next((c for c in children.get(i, []) if sent[c].dep in deps), None)

    def subject(i: int) -> int | None:
        s = child(i, SUBJ)
        if s is None and sent[i].dep == "conj" and sent[sent[i].head].pos == "VERB":
            s = child(sent[i].head, SUBJ)
        return s

    out = []
    for i, t in enumerate(sent):
        if t.pos != "VERB":
            continue
        s, o = subject(i), child(i, OBJ)
        if o is None:
            p = child(i, ("prep",))
            o = child(p, ("pobj",)) if p is not None else None
        if s is None and o is None:
            continue
        word = lambda k: sent[k].text.lower() if k is not None else None  # noqa: E731
        out.append((word(s), t.text.lower(), word(o)))
    return out


DEFAULT_SPACY_MODEL = "en_core_web_sm"


def spacy_parser(model: str = DEFAULT_SPACY_MODEL, batch_size: int = 256) -> Parser:
    """A :data:`Parser` over an installed spaCy pipeline: ``model`` is a package name or the directory of a
    saved pipeline (both go to ``spacy.load``; nothing is downloaded here)."""
    try:
        import spacy
    except ImportError:
        raise RuntimeError("spaCy is not installed: pip install spacy and a pipeline with a parser, or pass "
                           "another Parser to extract_events") from None
    try:
        nlp = spacy.load(model, disable=["ner", "lemmatizer", "textcat"])
    except OSError as e:
        raise RuntimeError(f"spaCy pipeline {model!r} is not installed ({e}); install it, or pass another "
                           "Parser to extract_events") from None

    def parse(sentences: list[str]) -> list[list[Token]]:
        return [[Token(t.text, t.dep_, t.head.i, t.pos_) for t in doc]
                for doc in nlp.pipe(sentences, batch_size=batch_size)]

    return parse


def load_parser(spec: str = DEFAULT_SPACY_MODEL) -> Parser:
    """The :data:`Parser` a string names: ``import:<module>:<function>`` imports a Parser function (for
    Stanza, a UD reader, ...); ``spacy:<name or path>`` or a bare ``<name or path>`` loads an installed spaCy
    pipeline through :func:`spacy_parser`."""
    import importlib

    if spec.startswith("import:"):
        mod, _, fn = spec[len("import:"):].rpartition(":")
        if not mod or not fn:
            raise ValueError(f"parser {spec!r}: expected import:<module>:<function>")
        try:
            parse = getattr(importlib.import_module(mod), fn)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"parser {spec!r}: cannot import {fn!r} from {mod!r} ({e})") from None
        if not callable(parse):
            raise ValueError(f"parser {spec!r}: {mod}.{fn} is not callable")
        return parse
    model = spec[len("spacy:"):] if spec.startswith("spacy:") else spec
    if not model:
        raise ValueError("parser 'spacy:': name a spaCy pipeline (package name or directory)")
    return spacy_parser(model)


def sentences_by_document(dataset_dir) -> dict[str, list[str]]:
    """{doc_id: distinct sentences in order} of an ingested dataset's mentions (the text a source has)."""
    from ..data.manifest import read_table

    t = read_table(dataset_dir, "mentions", columns=["doc_id", "sentence"])
    out: dict[str, dict[str, None]] = {}
    for d, s in zip(t["doc_id"].to_pylist(), t["sentence"].to_pylist()):
        out.setdefault(d, {})[s] = None
    return {d: list(s) for d, s in out.items()}


def extract_events(docs: Mapping[str, Sequence[str]], parse: Parser, *, dataset: str = "extracted_events",
                   stats: dict | None = None, batch_docs: int = 64) -> Iterator[tuple[str, dict]]:
    """``(table, row)`` pairs as the ``event_tuples`` reader yields them, for ``{doc_id: sentences}``;
    ``stats``: documents, sentences, events, documents_without_events, cooccurring_pairs."""
    from ..readers.event_tuples import cooccurrence_rows, count_pairs, document_row, mention_row

    st = stats if stats is not None else {}
    for k in ("documents", "sentences", "events", "documents_without_events"):
        st.setdefault(k, 0)
    from tqdm import tqdm

    counts: Counter = Counter()
    ids = list(docs)
    # parsing is the long step (minutes for 100k sentences): a bar on a terminal, as the ingest shows
    bar = tqdm(total=len(ids), desc="extract events", unit=" docs", disable=None, leave=False)
    for b0 in range(0, len(ids), batch_docs):
        chunk = ids[b0:b0 + batch_docs]
        flat = [(d, s) for d in chunk for s in docs[d]]
        parsed = parse([s for _, s in flat]) if flat else []
        if len(parsed) != len(flat):
            raise ValueError(f"parser returned {len(parsed)} parses for {len(flat)} sentences")
        per_doc: dict[str, list] = {d: [] for d in chunk}
        for (d, s), toks in zip(flat, parsed):
            per_doc[d] += [(e, s) for e in svo_events(toks)]
        st["sentences"] += len(flat)
        for d in chunk:
            evs = per_doc[d]
            if not evs:
                st["documents_without_events"] += 1
                continue
            yield "documents", document_row(dataset, d, None, {"n_events": len(evs), "n_sentences": len(docs[d])})
            for pos, (svo, sent) in enumerate(evs):
                yield "mentions", mention_row(dataset, d, pos, svo, None, source_sentence=sent)
            st["documents"] += 1
            st["events"] += len(evs)
            count_pairs(counts, [e for e, _ in evs])
        bar.update(len(chunk))
    bar.close()
    yield from cooccurrence_rows(dataset, counts)
    st["cooccurring_pairs"] = len(counts)


def write_extracted(docs: Mapping[str, Sequence[str]], parse: Parser, out_dir, *, dataset: str = "extracted_events",
                    source: str | None = None, parser: str | None = None) -> dict:
    """Extract and write an ``event_cooccurrence`` dataset (all tables or none; manifest last, with the
    ``stats`` that mark it as co-occurrence data; ``parser``: what parsed it, recorded). Returns the manifest."""
    from ..io import DatasetWriter

    st: dict = {}
    with DatasetWriter(out_dir, dataset, tables=["documents", "mentions", "event_pairs"]) as w:
        for table, row in extract_events(docs, parse, dataset=dataset, stats=st):
            w.write(table, row)
        return w.commit({"reader": "svo_extract", "source": source, "parser": parser, "stats": st,
                         "language": "en"})
