"""Strict trigger scores (TextEE's): identification by span, classification by span and type; hand cases."""
from __future__ import annotations

import pytest

from eventatlas.evaluation import RowKey
from eventatlas.evaluation.detection import detection_scores, evaluate_detection

GOLD = [("s1", 0, 5, "Attack"), ("s1", 10, 14, "Die"), ("s2", 3, 8, "Meet"), ("s2", 20, 31, "Transport")]


def test_identification_and_classification_hand_computed():
    pred = [("s1", 0, 5, "Attack"),      # span and type right
            ("s1", 10, 14, "Attack"),    # span right, type wrong
            ("s2", 3, 9, "Meet"),        # off by one character: wrong for both
            ("s3", 0, 2, "Meet")]        # a sentence without gold
    got = detection_scores(pred, GOLD)
    # TI: 2 of 4 predicted spans are gold spans, 2 of 4 gold spans found
    assert got["ti_precision"] == pytest.approx(0.5) and got["ti_recall"] == pytest.approx(0.5)
    assert got["ti_f1"] == pytest.approx(0.5)
    # TC: 1 of 4 right; F1 = 2 * .25 * .25 / .5 = .25
    assert got["tc_precision"] == pytest.approx(0.25) and got["tc_recall"] == pytest.approx(0.25)
    assert got["tc_f1"] == pytest.approx(0.25)
    assert (got["n_predicted"], got["n_gold"]) == (4, 4)


def test_unequal_precision_and_recall_and_duplicates():
    pred = [("s1", 0, 5, "Attack"), ("s1", 0, 5, "Attack")]  # one span twice counts once
    got = detection_scores(pred, GOLD)
    assert got["ti_precision"] == 1.0 and got["ti_recall"] == pytest.approx(0.25)
    assert got["ti_f1"] == pytest.approx(2 * 1.0 * 0.25 / 1.25)  # 0.4
    # P + R < 1 still gives the harmonic mean: 1 right of 3 predicted, 1 of 4 gold -> 2*(1/3)(1/4)/(7/12) = 2/7
    got = detection_scores([("s1", 0, 5, "Attack"), ("s9", 0, 1, "X"), ("s9", 2, 3, "X")], GOLD)
    assert got["ti_f1"] == pytest.approx(2 / 7)


def test_a_span_with_two_types_is_one_identification_and_two_classifications():
    got = detection_scores([("s1", 0, 5, "Attack"), ("s1", 0, 5, "Die")], GOLD)
    assert got["n_predicted"] == 1 and got["ti_precision"] == 1.0
    assert got["tc_precision"] == pytest.approx(0.5)


def test_nothing_right_nothing_predicted_and_type_agnostic_rows():
    assert detection_scores([("s1", 1, 2, "Attack")], GOLD)["ti_f1"] == 0.0
    empty = detection_scores([], GOLD)
    assert empty["ti_precision"] == 0.0 and empty["ti_recall"] == 0.0 and empty["tc_f1"] == 0.0
    rows = evaluate_detection([("s1", 0, 5, "Whatever")], GOLD, key=RowKey("d", "m", 3, split="heldout"),
                              type_agnostic=True)
    assert {r["metric"] for r in rows} == {"ti_precision", "ti_recall", "ti_f1", "n_predicted", "n_gold"}
    assert {(r["task"], r["split"], r["seed"]) for r in rows} == {("detection", "heldout", 3)}
    assert next(r["value"] for r in rows if r["metric"] == "ti_recall") == pytest.approx(0.25)
