"""Scoring discover against the gold it never read, and the known/new verdict: each function against a case
worked by hand."""
from __future__ import annotations

import pyarrow as pa
import pytest

from eventatlas.discover.novelty import best_links, mark_new
from eventatlas.discover.score import choose_threshold, coverage, gold_of_spans, majority, naming_hits, novelty
from eventatlas.schema import LINKS


def _card(t, lab):
    return {"type_id": t, "majority_label": lab}


def test_spans_match_gold_strictly_and_majority_breaks_ties_alphabetically():
    gold = {(("d", 0), 3, 9): "Attack", (("d", 1), 0, 4): "Arrest"}
    assert gold_of_spans([(("d", 0), 3, 9), (("d", 0), 3, 8), (("d", 1), 0, 4)], gold) == ["Attack", None, "Arrest"]
    assert majority(["B", None, "A", "B", "A"]) == "A" and majority(["B", "B", "A"]) == "B"
    assert majority([None, None]) is None


def test_naming_hits_asks_only_types_with_a_reachable_target():
    cards = [_card("t1", "Attack"), _card("t2", "Arrest"), _card("t3", None), _card("t4", "Hidden")]
    top = {"t1": "Attack", "t2": "Attack", "t3": "Attack", "t4": "Attack"}
    # same inventory: Hidden is not in it (no target), t3 has no majority -> asked t1, t2: 1 hit of 2
    reach = {"Attack": ["Attack"], "Arrest": ["Arrest"]}
    assert naming_hits(cards, top, reach) == (0.5, 2)
    # through a mapping to frames: Attack -> Attack frame, Arrest -> Arrest frame, Hidden -> Attack frame
    frames = {"Attack": ["Attack"], "Arrest": ["Arrest"], "Hidden": ["Attack", "Hostile_encounter"]}
    assert naming_hits(cards, top, frames) == (pytest.approx(2 / 3), 3)
    assert naming_hits([_card("t1", "X")], top, {}) == (None, 0)
    assert coverage(cards, ["Attack", "Arrest", "Meet", "Hidden"]) == 0.75


def test_novelty_precision_recall_and_what_is_ignored():
    cards = [_card("t1", "H1"), _card("t2", "H1"), _card("t3", "Known"), _card("t4", None), _card("t5", "H2"),
             _card("t6", "Mapped")]
    new = {"t1": True, "t2": False, "t3": True, "t4": True, "t5": False, "t6": True}
    got = novelty(cards, new, positives=["H1", "H2", "H3"], ignore=["Mapped"])
    # marked new (t6 ignored): t1 (right), t3 (known: wrong), t4 (spurious: wrong) -> P 1/3
    # positives present as a majority: H1, H2 (H3 never is) -> found H1 -> R 1/2
    assert got["new_precision"] == pytest.approx(1 / 3) and got["new_recall"] == 0.5
    assert got["new_f1"] == pytest.approx(2 * (1 / 3) * 0.5 / (1 / 3 + 0.5))
    assert (got["n_new"], got["n_hidden_present"]) == (3.0, 2.0)
    none = novelty(cards, {}, positives=["H1"])
    assert none["new_precision"] is None and none["new_recall"] == 0.0 and none["new_f1"] is None


def test_threshold_chosen_by_new_f1_lower_on_ties():
    cards = [_card("a", "H"), _card("b", "K"), _card("c", "K")]
    best = {"a": 0.4, "b": 0.6, "c": 0.8}
    th, at, curve = choose_threshold(cards, best, positives=["H"], ignore=[], grid=[0.3, 0.5, 0.7, 0.9])
    # 0.3: none new (F1 undefined); 0.5: a only (P 1, R 1); 0.7: a, b (P 1/2); 0.9: all (P 1/3)
    assert th == 0.5 and at["new_f1"] == 1.0 and [c["below"] for c in curve] == [0.3, 0.5, 0.7, 0.9]
    assert curve[2]["new_precision"] == 0.5 and curve[3]["new_precision"] == pytest.approx(1 / 3)
    th2, _, _ = choose_threshold(cards, {"a": 0.4, "b": 0.9, "c": 0.9}, ["H"], [], [0.5, 0.6])
    assert th2 == 0.5  # both give F1 1: the lower marks no more types new


def _link(src, tgt, method, raw):
    return {"source": src, "target": tgt, "relation": "r", "kind": "learned", "score": 1.0, "raw_score": raw,
            "rank": 1, "method": method, "calibration": "rank", "encoder": "e", "run_id": "x", "provenance": "p",
            "evidence_mention_ids": []}


def test_best_link_over_every_inventory_and_the_verdict():
    links = pa.Table.from_pylist([
        _link("disc::t1", "fn::Attack", "centroid", 0.71), _link("disc::t1", "maven::Attack", "centroid", 0.83),
        _link("disc::t1", "maven::Raid", "vote", 0.4), _link("disc::t2", "fn::Arrest", "centroid", 0.42),
        _link("disc::t2", "fn::Arrest2", "centroid", 0.42), _link("disc::t3", "fn::X", "vote", 0.9)], schema=LINKS)
    best = best_links(links, "centroid")
    # across inventories the higher raw score wins; an exact tie goes to the first target by id
    assert best == {"disc::t1": ("maven::Attack", 0.83), "disc::t2": ("fn::Arrest", 0.42)}
    cards = mark_new([{"type_id": "t1"}, {"type_id": "t2"}, {"type_id": "t3"}], "disc", links, "centroid", 0.5)
    assert [(c["best_link"], c["best_score"], c["new"]) for c in cards] == [
        ("maven::Attack", 0.83, False), ("fn::Arrest", 0.42, True), (None, None, None)]
    with pytest.raises(ValueError, match="novelty scorer 'cosine'"):
        best_links(links, "cosine")
