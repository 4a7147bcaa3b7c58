"""The NYT narrative-cloze dev set (reader ``nyt_cloze_dev``) on a hand-made tuple file: the held-out split is
deterministic and follows the documented count rule, every question has exactly one right answer from its own
document, and SWCC's training data never holds a held-out document (events or co-occurrence counts)."""
from __future__ import annotations

import hashlib
import json
import math
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest
from conftest import shared_path

from eventatlas.data.ingest import ingest
from eventatlas.io import Rejects
from eventatlas.readers import nyt_cloze_dev

# line -> tuples 'verb subj obj prep'; distinct events per line: 1: 4 (the first repeats), 2: 2 (too few: not
# eligible), 3-6: 5, 7: 6. "said he _NULL_" and "voted senate bill" occur in several documents.
DOCS = {
    1: ["ran dog park _NULL_", "ate dog bone _NULL_", "said he _NULL_ _NULL_", "slept dog _NULL_ _NULL_",
        "ran dog park _NULL_"],
    2: ["said he _NULL_ _NULL_", "barked dog cat at"],
    3: ["voted senate bill _NULL_", "signed president bill _NULL_", "said he _NULL_ _NULL_", "vetoed governor law _NULL_",
        "sued state company _NULL_"],
    4: ["won team game _NULL_", "scored striker goal in", "praised coach players _NULL_", "cheered fans team _NULL_",
        "lost rival final _NULL_"],
    5: ["rose stocks _NULL_ _NULL_", "fell bonds _NULL_ _NULL_", "cut fed rates _NULL_", "said he _NULL_ _NULL_",
        "bought investors shares _NULL_"],
    6: ["arrested police suspect _NULL_", "charged prosecutors suspect with", "voted senate bill _NULL_",
        "convicted jury suspect _NULL_", "sentenced judge suspect to"],
    7: ["opened museum exhibit _NULL_", "painted artist mural _NULL_", "visited tourists museum _NULL_",
        "closed museum wing _NULL_", "sold gallery painting _NULL_", "bought collector painting _NULL_"],
}
OPTS = {"heldout_fraction": 0.3, "min_heldout_docs": 2, "questions_per_doc": 2, "max_context": 3, "negatives": 4}


def _text(t: str) -> str:
    verb, subj, obj, _ = t.split()
    return " ".join(w for w in (subj, verb, obj) if w != "_NULL_")


def _distinct(line: int) -> list[str]:
    return list(dict.fromkeys(_text(t) for t in DOCS[line]))


def _write(path, lines):
    path.write_text("".join((" <TUP> ".join(DOCS[n]) if n in lines else "") + "\n" for n in range(1, 8)),
                    encoding="utf-8")
    return path


def _held_lines(stem: str, seed: int = 0) -> list[int]:
    """The rule re-done by hand: eligible = >= 3 distinct events; the ceil(0.3 * 6) = 2 (>= min 2) smallest
    sha256("<seed>:<doc_id>")."""
    eligible = [n for n in DOCS if len(_distinct(n)) >= 3]
    assert len(eligible) == 6
    n_hold = max(2, math.ceil(0.3 * 6))
    return sorted(sorted(eligible, key=lambda n: hashlib.sha256(f"{seed}:{stem}:{n}".encode()).hexdigest())[:n_hold])


def _rows(path, **opts):
    out: dict[str, list] = {}
    stats: dict = {}
    for table, row in nyt_cloze_dev.read(path, rejects=Rejects("dev"), stats=stats, **{**OPTS, **opts}):
        out.setdefault(table, []).append(row)
    return out, stats


def test_split_is_deterministic_and_follows_the_count_rule(tmp_path):
    f = _write(tmp_path / "tiny.txt", set(DOCS))
    rows, stats = _rows(f)
    again, _ = _rows(f)
    assert rows == again  # a pure function of the file and the options
    held = _held_lines("tiny")
    assert [r["doc_id"] for r in rows["documents"]] == [f"tiny:{n}" for n in held]
    assert stats["eligible_documents"] == 6 and stats["heldout_documents"] == 2 and stats["source_documents"] == 7
    # per document: k = min(3, m - 1) context events, min(2, m - k) questions; 5 candidates (4 negatives)
    expected = {n: min(2, len(_distinct(n)) - min(3, len(_distinct(n)) - 1)) for n in held}
    blocks: dict[str, list] = {}
    for r in rows["event_pairs"]:
        blocks.setdefault(r["block_id"], []).append(r)
    per_doc = {n: sum(1 for b in blocks if b.startswith(f"tiny:{n}:")) for n in held}
    assert per_doc == expected and stats["questions"] == sum(expected.values()) == len(blocks)
    other_seed, _ = _rows(f, seed=5)
    assert [r["doc_id"] for r in other_seed["documents"]] == [f"tiny:{n}" for n in _held_lines("tiny", 5)]
    assert nyt_cloze_dev.heldout_count(2161, 0.1, 2) == 217 and nyt_cloze_dev.heldout_count(8, 0.1, 2) == 2
    assert nyt_cloze_dev.heldout_count(1, 0.1, 2) == 1


def test_each_question_has_one_right_answer_from_its_own_document(tmp_path):
    f = _write(tmp_path / "tiny.txt", set(DOCS))
    rows, _ = _rows(f)
    held = _held_lines("tiny")
    pool = {t for n in held for t in _distinct(n)}
    blocks: dict[str, list] = {}
    for r in rows["event_pairs"]:
        blocks.setdefault(r["block_id"], []).append(r)
    for block, cands in blocks.items():
        line, pos = int(block.split(":")[1]), int(block.split(":")[2])
        own = _distinct(line)
        texts = [_text(f"{c['event_b']['verb']} {c['event_b']['subj'] or '_NULL_'} {c['event_b']['obj'] or '_NULL_'} x")
                 for c in cands]
        assert [c["score"] for c in cands] == [1.0] + [0.0] * (len(cands) - 1)  # exactly one right answer, first
        assert texts[0] == own[pos]  # the event at its position in its own document
        negs = texts[1:]
        assert len(set(negs)) == len(negs) == min(4, len(pool - set(own)))
        assert not set(negs) & set(own) and set(negs) <= pool  # from the other held-out documents only
        extra = json.loads(cands[0]["extra"])
        k = min(3, len(own) - 1)
        ctx = [" ".join(w for w in (e["subj"], e["verb"], e["obj"]) if w) for e in extra["context"]]
        assert ctx == own[pos - k:pos] and extra["doc_id"] == f"tiny:{line}" and extra["n_candidates"] == len(cands)


def test_heldout_documents_never_reach_training(tmp_path, eventatlas_env):
    from eventatlas.swcc.data import load_events
    from eventatlas.swcc.protocol import eval_sets

    f = _write(tmp_path / "tiny.txt", set(DOCS))
    base = eventatlas_env / "data" / "datasets"
    ingest("event_tuples", f, out_dir=base / "tuples", dataset="tuples", progress=False)
    ingest("nyt_cloze_dev", f, out_dir=base / "dev", dataset="dev", progress=False, **OPTS)
    held = _held_lines("tiny")
    evals, docs = eval_sets(SimpleNamespace(eval_datasets=[str(base / "dev")]))
    assert list(evals) == ["dev"] and docs == {f"tiny:{n}" for n in held}
    ev = load_events(base / "tuples", exclude_docs=docs)
    # the same file without the held-out lines (blank lines keep the other documents' ids)
    (tmp_path / "kept").mkdir()
    kept = _write(tmp_path / "kept" / "tiny.txt", set(DOCS) - set(held))
    ingest("event_tuples", kept, out_dir=base / "kept", dataset="kept", progress=False)
    ref = load_events(base / "kept")

    def pairs(e):
        return {tuple(sorted((e.texts[i], e.texts[int(j)]))): float(c) for i in range(len(e))
                for j, c in zip(e.indices[e.indptr[i]:e.indptr[i + 1]], e.counts[e.indptr[i]:e.indptr[i + 1]])}

    assert sorted(ev.texts) == sorted(ref.texts) and pairs(ev) == pairs(ref)
    only_held = {t for n in held for t in _distinct(n)} - {t for n in DOCS if n not in held for t in _distinct(n)}
    assert only_held and not only_held & set(ev.texts)
    assert ev.record["excluded_documents"]["requested"] == ev.record["excluded_documents"]["found"] == 2
    assert ev.record["n_documents_sampled"] == 5
    # nothing excluded: every document, the stored counts
    full = load_events(base / "tuples")
    assert only_held <= set(full.texts) and full.record["excluded_documents"]["found"] == 0
    assert pq.read_table(base / "dev" / "documents.parquet").num_rows == 2


def test_real_nyt_dev_set_counts(tmp_path):
    path = shared_path("event_tuples", "nyt_inverse_cloze_docs.txt")
    stats: dict = {}
    n_rows = sum(1 for _ in nyt_cloze_dev.read(path, rejects=Rejects("dev"), stats=stats))
    assert stats["source_documents"] == stats["eligible_documents"] == 2161
    assert stats["heldout_documents"] == 217 and stats["questions"] == 1085 >= 1000
    assert stats["candidates"] == 5 * 1085 and n_rows == 217 + 5 * 1085
