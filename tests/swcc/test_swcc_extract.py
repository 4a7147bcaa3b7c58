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


def test_load_parser_imports_any_parser_function():
    from eventatlas.swcc.extract import load_parser

    assert load_parser("import:test_swcc_extract:fake_parse") is fake_parse
    for bad, msg in [("import:fake_parse", "expected import:<module>:<function>"),
                     ("import:test_swcc_extract:no_such_fn", "cannot import 'no_such_fn'"),
                     ("import:test_swcc_extract:PARSES", "is not callable"), ("spacy:", "name a spaCy pipeline")]:
        with pytest.raises(ValueError, match=msg):
            load_parser(bad)


class _FakeSpacy:
    """Stands in for the spaCy module: records what ``load`` was given; its pipeline replays PARSES."""

    def __init__(self):
        self.loaded = []

    def load(self, model, disable=()):
        from types import SimpleNamespace as NS

        self.loaded.append(model)

        def doc(sentence):
            toks = [NS(text=t.text, dep_=t.dep, pos_=t.pos, i=i) for i, t in enumerate(PARSES[sentence])]
            for tok, t in zip(toks, PARSES[sentence]):
                tok.head = toks[t.head]
            return toks

        return NS(pipe=lambda sentences, batch_size: (doc(s) for s in sentences))


def test_load_parser_points_spacy_at_a_pipeline_by_name_or_path(monkeypatch, tmp_path):
    import sys

    from eventatlas.swcc.extract import load_parser

    fake = _FakeSpacy()
    monkeypatch.setitem(sys.modules, "spacy", fake)
    s = "The suspect fled to Canada and hid ."
    for spec, expected in [("en_core_web_sm", "en_core_web_sm"), (f"spacy:{tmp_path}", str(tmp_path)),
                           (str(tmp_path / "my_pipeline"), str(tmp_path / "my_pipeline"))]:
        parse = load_parser(spec)
        assert fake.loaded[-1] == expected
        # spaCy tokens become Tokens (head index, dep, pos), so the rules give the hand-parse's events
        assert parse([s]) == [PARSES[s]] and svo_events(parse([s])[0])[0] == ("suspect", "fled", "canada")


def _source_dataset(d, docs):
    """An ingested-like dataset whose mentions carry the given sentences (what extract-events reads)."""
    from eventatlas.io import DatasetWriter
    from eventatlas.readers._common import mention_row

    with DatasetWriter(d, "src", tables=["mentions"]) as w:
        for doc, sents in docs.items():
            for k, s in enumerate(sents):
                w.write("mentions", mention_row("src", doc, k, s, 0, len(s.split()[0]), None))
        w.commit({"reader": "test"})


def test_extract_events_command_with_a_pluggable_parser(tmp_path):
    import json

    from typer.testing import CliRunner

    from eventatlas.cli import app
    from eventatlas.data import Manifest
    from eventatlas.swcc.data import load_events

    _source_dataset(tmp_path / "src", {"d1": ["Police arrested the suspect .", "The suspect fled to Canada and hid ."],
                                       "d2": ["Stop !"]})
    out = tmp_path / "src_svo"
    r = CliRunner().invoke(app, ["extract-events", str(tmp_path / "src"), "--parser",
                                 "import:test_swcc_extract:fake_parse", "--out", str(out)])
    assert r.exit_code == 0, r.output
    printed = json.loads(r.output)
    assert printed == {"dataset": "src_svo", "parser": "import:test_swcc_extract:fake_parse", "documents": 1,
                       "sentences": 3, "events": 3, "documents_without_events": 1, "cooccurring_pairs": 3}
    man = Manifest.read(out)
    assert "event_cooccurrence" in man.kinds()
    assert json.loads((out / "manifest.json").read_text())["parser"] == "import:test_swcc_extract:fake_parse"
    ev = load_events(out)  # what `eventatlas train swcc` reads
    assert sorted(ev.texts) == ["police arrested suspect", "suspect fled canada", "suspect hid"]
    # bad input: one line, exit 2, nothing written
    for args, msg in [([str(tmp_path / "nope")], "is not ingested"),
                      ([str(tmp_path / "src"), "--parser", "import:nosuchmod_xyz:f"], "cannot import")]:
        r = CliRunner().invoke(app, ["extract-events", *args, "--out", str(tmp_path / "x")])
        assert r.exit_code == 2 and msg in r.output and not (tmp_path / "x").exists()
