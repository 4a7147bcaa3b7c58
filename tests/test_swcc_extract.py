"""The (s, v, o) extractor on hand-parsed sentences (the parser is pluggable: these parses stand in for one)."""
from __future__ import annotations

import pytest

from eventatlas.swcc.extract import Token, extract_events, spacy_parser, svo_events, write_extracted


def T(spec: str) -> list[Token]:
    """'word/dep/head/POS ...' -> tokens."""
    out = []
    for item in spec.split():
        w, dep, head, pos = item.split("/")
        out.append(Token(w, dep, int(head), pos))
    return out


# hand-parsed (Universal/ClearNLP labels as spaCy's English pipelines produce them)
PARSES = {
    "Police arrested the suspect .": T("Police/nsubj/1/PROPN arrested/ROOT/1/VERB the/det/3/DET suspect/dobj/1/NOUN "
                                       "./punct/1/PUNCT"),
    "The suspect fled to Canada and hid .": T(
        "The/det/1/DET suspect/nsubj/2/NOUN fled/ROOT/2/VERB to/prep/2/ADP Canada/pobj/3/PROPN and/cc/2/CCONJ "
        "hid/conj/2/VERB ./punct/2/PUNCT"),
    "The bill was signed by the president .": T(
        "The/det/1/DET bill/nsubjpass/3/NOUN was/auxpass/3/AUX signed/ROOT/3/VERB by/agent/3/ADP the/det/6/DET "
        "president/pobj/4/NOUN ./punct/3/PUNCT"),
    "Stop !": T("Stop/ROOT/0/VERB !/punct/0/PUNCT"),
}


def fake_parse(sentences):
    return [PARSES[s] for s in sentences]


def test_svo_from_hand_parses():
    assert svo_events(PARSES["Police arrested the suspect ."]) == [("police", "arrested", "suspect")]
    # the prepositional object fills the object slot; a conjoined verb inherits the subject
    assert svo_events(PARSES["The suspect fled to Canada and hid ."]) == [("suspect", "fled", "canada"),
                                                                         ("suspect", "hid", None)]
    assert svo_events(PARSES["The bill was signed by the president ."]) == [("bill", "signed", None)]
    assert svo_events(PARSES["Stop !"]) == []  # no argument: not an event


def test_extract_events_tables_and_counts(tmp_path):
    docs = {"d1": ["Police arrested the suspect .", "The suspect fled to Canada and hid ."],
            "d2": ["Police arrested the suspect .", "The bill was signed by the president ."], "d3": ["Stop !"]}
    st = {}
    rows = list(extract_events(docs, fake_parse, dataset="x", stats=st))
    assert st == {"documents": 2, "sentences": 5, "events": 5, "documents_without_events": 1, "cooccurring_pairs": 4}
    ments = [r for t, r in rows if t == "mentions"]
    assert [m["sentence"] for m in ments[:3]] == ["police arrested suspect", "suspect fled canada", "suspect hid"]
    pairs = {frozenset([p["event_a"]["verb"], p["event_b"]["verb"]]): p["score"] for t, p in rows if t == "event_pairs"}
    assert pairs == {frozenset(["arrested", "fled"]): 1.0, frozenset(["arrested", "hid"]): 1.0,
                     frozenset(["fled", "hid"]): 1.0, frozenset(["arrested", "signed"]): 1.0}
    from eventatlas.data import Manifest

    man = write_extracted(docs, fake_parse, tmp_path / "ex", dataset="ex")
    assert Manifest.read(tmp_path / "ex").kinds() == {"mentions", "event_cooccurrence"}
    assert man["rows"]["mentions"] == 5
    with pytest.raises(ValueError, match="parser returned 1 parses for 2 sentences"):
        list(extract_events({"d": ["a", "b"]}, lambda s: [[]]))


def test_spacy_parser_says_what_is_missing():
    try:
        import spacy  # noqa: F401
    except ImportError:
        with pytest.raises(RuntimeError, match="spaCy is not installed"):
            spacy_parser()
        return
    with pytest.raises(RuntimeError, match="not installed"):
        spacy_parser("no_such_pipeline_xyz")
