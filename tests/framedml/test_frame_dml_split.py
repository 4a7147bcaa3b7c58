"""Verb cross-validation of frame_dml (data layer): disjoint verbs, equal polysemy proportions, seeded."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from eventatlas.data.verbsplit import (
    assign, cap_per_lu, dataset_table, fold_roles, frame_mentions, role_index, split_verbs,
)


def _verb_frames(n_mono=31, n_poly=14):
    vf = {f"m{i}": {f"F{i % 5}"} for i in range(n_mono)}
    vf.update({f"p{i}": {f"F{i % 5}", f"F{(i + 1) % 5}"} for i in range(n_poly)})
    return vf


def test_no_verb_in_two_sets_and_polysemy_proportions_equal():
    vf = _verb_frames()
    sets = split_verbs(vf, n_sets=3, seed=0)
    flat = [v for s in sets for v in s]
    assert len(flat) == len(set(flat)) == len(vf)  # every verb exactly once
    mono = [sum(v.startswith("m") for v in s) for s in sets]
    poly = [sum(v.startswith("p") for v in s) for s in sets]
    # round-robin: 31 monosemous -> 11/10/10, 14 polysemous -> 5/5/4 (each group dealt from set 0)
    assert mono == [11, 10, 10] and poly == [5, 5, 4]


def test_split_is_deterministic_by_seed():
    vf = _verb_frames()
    assert split_verbs(vf, seed=3) == split_verbs(dict(reversed(list(vf.items()))), seed=3)  # input order irrelevant
    assert split_verbs(vf, seed=3) != split_verbs(vf, seed=4)


def test_fold_roles():
    assert fold_roles(0) == {"train": [2], "dev": [1], "test": [0]}
    assert fold_roles(2) == {"train": [1], "dev": [0], "test": [2]}
    assert fold_roles(1, n_sets=4) == {"train": [0, 3], "dev": [2], "test": [1]}
    with pytest.raises(ValueError):
        fold_roles(3)


def _mentions_table():
    # verb, frame per mention: 'run' is polysemous (two LUs), others monosemous; one noun dropped
    rows = [("run", "Self_motion"), ("run", "Self_motion"), ("run", "Operating"), ("walk", "Self_motion"),
            ("eat", "Ingestion"), ("eat", "Ingestion"), ("drink", "Ingestion"), ("buy", "Commerce_buy")]
    n = len(rows) + 1
    extra = [json.dumps({"lu": f"{v}.v"}) for v, _ in rows] + [json.dumps({"lu": "meal.n"})]
    labels = [[f] for _, f in rows] + [["Ingestion"]]
    return pa.table({"mention_id": [f"x{i}" for i in range(n)], "labels": labels, "extra": extra,
                     "sentence": ["they go"] * n, "trigger_start": [5] * n, "trigger_end": [7] * n,
                     "split": ["train"] * n})


def test_frame_mentions_assign_and_table():
    fm = frame_mentions(_mentions_table())
    assert len(fm) == 8 and fm.selection["drops"]["lu_pos"]["n"] == 1
    assert fm.verbs.tolist()[:4] == ["run", "run", "run", "walk"]
    assert len(set(fm.lus.tolist())) == 6  # run.v@Self_motion, run.v@Operating, walk, eat, drink, buy
    sets = split_verbs(fm.verb_frames(), n_sets=3, seed=0)
    set_of = assign(fm.verbs, sets)
    for v in set(fm.verbs):  # all mentions of a verb land in one set
        assert len(set(set_of[fm.verbs == v])) == 1
    idx = role_index(set_of, fold=0)
    assert sorted(np.concatenate(list(idx.values())).tolist()) == list(range(8))
    rows = dataset_table(fm, set_of)
    total = rows[-1]
    assert total == {"set": "all", "verbs": 5, "monosemous": 4, "polysemous": 1, "lus": 6, "frames": 4,
                     "instances": 8}
    assert sum(r["instances"] for r in rows[:-1]) == 8 and sum(r["verbs"] for r in rows[:-1]) == 5


def test_cap_per_lu_is_seeded_and_keeps_small_lus():
    lus = np.array(["a"] * 5 + ["b"] * 2 + ["c"], dtype=object)
    idx = np.arange(8)
    kept = cap_per_lu(idx, lus, 2, seed=0)
    assert [list(lus[kept]).count(x) for x in "abc"] == [2, 2, 1]
    assert kept.tolist() == cap_per_lu(idx, lus, 2, seed=0).tolist()
    assert cap_per_lu(idx, lus, None).tolist() == idx.tolist()
