"""Sentences to words and labels, word scores to spans, and the lexical baseline, on a real (tiny) WordPiece
tokenizer so the words are the ones the detector sees."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from eventatlas.detection.decode import spans
from eventatlas.detection.lexical import LexicalDetector
from eventatlas.detection.words import B, I, IGNORE, O, Sentence, encode, label, sentences_of
from support.tiny_models import tiny_bert

TEXTS = ["Rebels set fire to the base near no.2 road .", "The king died ."]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert(tmp_path_factory.mktemp("tok"), TEXTS), use_fast=True)


def test_words_labels_multiword_and_misaligned_triggers(tok):
    s = Sentence(("d", 0), TEXTS[0], [(7, 18, "Arson"), (33, 37, "Other"), (2, 5, "Bad")])
    enc = encode(tok, [s.text], 64)[0]
    words = [s.text[a:b] for a, b in enc.spans]
    assert words == ["Rebels", "set", "fire", "to", "the", "base", "near", "no", ".", "2", "road", "."]
    assert len(enc.first) == len(words) and enc.first[0] == 1  # piece 0 is [CLS]
    stats: dict[str, int] = {}
    label(enc, s, {"Arson": 0, "Other": 1}, stats)
    # "set fire to" = B I I typed Arson; "no.2" = 3 words, B I I; "bels" (2, 5) is inside "Rebels": misaligned
    assert enc.bio == [B, B, I, I, O, O, O, B, I, I, O, O]
    assert enc.types == [IGNORE, 0, 0, 0, IGNORE, IGNORE, IGNORE, 1, 1, 1, IGNORE, IGNORE]
    assert stats == {"misaligned": 1}


def test_truncated_triggers_are_counted(tok):
    s = Sentence(("d", 1), TEXTS[1], [(9, 13, "Die")])
    enc = label(encode(tok, [s.text], 4)[0], s, {"Die": 0}, stats := {})  # [CLS] the king [SEP]
    assert [s.text[a:b] for a, b in enc.spans] == ["The", "king"] and enc.bio == [O, O]
    assert stats == {"truncated_triggers": 1}


def test_decode_cuts_at_a_new_start_and_keeps_both_scores():
    word_spans = [(0, 3), (4, 7), (8, 11), (12, 15)]
    ident = np.array([[0.9, 0.05, 0.05],   # outside at 0.5
                      [0.2, 0.7, 0.1],     # trigger start
                      [0.3, 0.1, 0.6],     # continues (P(I) > P(B))
                      [0.1, 0.8, 0.1]])    # P(B) > P(I): a new trigger
    typ = np.array([[1.0, 0.0], [0.6, 0.4], [0.2, 0.8], [0.3, 0.7]])
    got = spans(ident, typ, word_spans, 0.5, ["A", "B"])
    assert [g[:3] for g in got] == [(4, 11, "B"), (12, 15, "B")]  # mean type probs of words 1-2: (.4, .6)
    assert got[0][3] == pytest.approx((0.8 + 0.7) / 2) and got[0][4] == pytest.approx(0.6)
    assert spans(ident, typ, word_spans, 0.95, ["A", "B"]) == []
    # word 0 joins in at 0.05 as a trigger of its own: word 1 has P(B) > P(I), so it starts another
    assert [g[:2] for g in spans(ident, typ, word_spans, 0.05, ["A", "B"])] == [(0, 3), (4, 11), (12, 15)]


def test_lexical_baseline_majority_type_longest_match(tok):
    train = [Sentence(("a", 0), "They set fire to it", [(5, 16, "Arson")]),
             Sentence(("a", 1), "Fire broke out", [(0, 4, "Fire")]), Sentence(("a", 2), "a fire", [(2, 6, "Fire")]),
             Sentence(("a", 3), "the fire", [(4, 8, "Arson")])]
    lex = LexicalDetector(train)
    assert lex.lexicon == {"set fire to": "Arson", "fire": "Fire"}
    enc = encode(tok, [TEXTS[0]], 64)[0]
    assert lex.predict(TEXTS[0], enc.spans) == [(7, 18, "Arson")]


def test_sentences_of_groups_mentions_and_keeps_sentences_without_events():
    mentions = pa.table({"doc_id": ["d1", "d1", "d2"], "sent_idx": [0, 0, 1], "sentence": ["A b c", "A b c", "X y"],
                         "trigger_start": [2, 0, 2], "trigger_end": [3, 1, 3], "labels": [["T2"], ["T1"], ["T3"]]})
    docs = pa.table({"doc_id": ["d1", "d2"], "sentences": [["A b c", "No event here"], ["First", "X y"]]})
    got = sentences_of(mentions, docs)
    assert [(s.key, s.text, s.gold) for s in got] == [
        (("d1", 0), "A b c", [(0, 1, "T1"), (2, 3, "T2")]), (("d1", 1), "No event here", []),
        (("d2", 0), "First", []), (("d2", 1), "X y", [(2, 3, "T3")])]
