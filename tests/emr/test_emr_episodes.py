"""The k-shot m-way EMR sampler on hand-made data: disjoint roles, seeded, None items from outside the m types."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eventatlas.data import NotApplicable
from eventatlas.emr.episodes import candidate_pool, content_words, sample_episode

# type -> number of mentions: A, B, C are frequent (>= 12), D and E rare (the "None" side)
COUNTS = {"A": 15, "B": 13, "C": 12, "D": 4, "E": 3}


def _dataset(tmp_path):
    mids, docs, sents, starts, ends, trig, labels = [], [], [], [], [], [], []
    for t, n in COUNTS.items():
        for i in range(n):
            s = f"Sentence {i} where {t.lower()}verb happened ."
            a = s.index(f"{t.lower()}verb")
            mids.append(f"{t}{i}"), docs.append(f"d{t}{i}"), sents.append(s), starts.append(a)
            ends.append(a + 5), trig.append(s[a:a + 5]), labels.append([t])
    # an unlabelled mention: never in any role
    mids.append("U0"), docs.append("dU"), sents.append("An unlabelled thing ."), starts.append(3)
    ends.append(13), trig.append("unlabelled"), labels.append([])
    pq.write_table(pa.table({"mention_id": mids, "doc_id": docs, "sentence": sents, "trigger_start": starts,
                             "trigger_end": ends, "trigger": trig, "labels": labels}), tmp_path / "mentions.parquet")
    no_event = ["The weather was mild that autumn .", "It is what it is ."]  # the second has no content word
    pq.write_table(pa.table({"doc_id": ["n0", "n1", "dA0"], "sentences": [[no_event[0]], [no_event[1]], ["x"]],
                             "extra": [json.dumps({"n_events": 0}), json.dumps({"n_events": 0}),
                                       json.dumps({"n_events": 1})]}), tmp_path / "documents.parquet")
    return tmp_path


def test_content_words_skip_stop_words_and_short_tokens():
    s = "It is what it is, the weather was mild ."
    assert [s[a:b] for a, b in content_words(s)] == ["weather", "mild"]


def test_pool_has_labelled_mentions_and_recorded_no_event_candidates(tmp_path):
    pool = candidate_pool(_dataset(tmp_path), seed=3)
    src = pool["source"].to_pylist()
    assert src.count("mention") == sum(COUNTS.values())  # the unlabelled mention is left out
    assert "U0" not in pool["mention_id"].to_pylist()
    ne = [r for r in pool.to_pylist() if r["source"] == "no_event"]
    assert len(ne) == 1  # the sentence without a content word gives no candidate
    r = ne[0]
    assert r["label"] is None and r["doc_id"] == "n0"
    assert r["trigger"] in {"weather", "mild", "autumn"}
    assert r["sentence"][r["trigger_start"]:r["trigger_end"]] == r["trigger"]


def test_episode_roles_are_disjoint_and_none_items_come_from_outside(tmp_path):
    pool = candidate_pool(_dataset(tmp_path), seed=0)
    ep = sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, n_dev=5, n_none=100, queries_per_type=3,
                        ks=(2, 4), seed=7)
    labels = pool["label"].to_pylist()
    assert ep.types == ["A", "B", "C"]
    corpus = ep.corpus.tolist()
    assert len(corpus) == len(set(corpus))
    queries = {int(i) for t in ep.types for i in ep.query_pool[t]}
    devs = {int(i) for t in ep.types for i in ep.dev[t]}
    assert not queries & set(corpus) and not devs & set(corpus) and not queries & devs
    for t in ep.types:
        assert sum(lab == t for lab in ep.corpus_labels) == 6
        assert len(ep.query_pool[t]) == 4 and {labels[i] for i in ep.query_pool[t]} == {t}
    assert len(ep.dev["A"]) == 5 and len(ep.dev["C"]) == 2  # C: 12 - 6 - 4 left
    none = [i for i, lab in zip(corpus, ep.corpus_labels) if lab is None]
    # every item outside the m types is taken (fewer than n_none): D, E mentions and the no-event candidate
    assert len(none) == COUNTS["D"] + COUNTS["E"] + 1
    assert {labels[i] for i in none} == {"D", "E", None}
    assert ep.record["none_sources"] == {"mention": 7, "no_event": 1} and ep.record["n_none"] == 8
    # queries: k distinct shots from the type's query pool, queries_per_type per type
    for k in (2, 4):
        assert len(ep.queries[k]) == 9
        for q in ep.queries[k]:
            assert len(set(q.shots.tolist())) == k and set(q.shots.tolist()) <= set(ep.query_pool[q.type].tolist())
    rel = ep.relevant(2)
    assert all(ep.corpus_labels[j] == q.type for q, r in zip(ep.queries[2], rel) for j in r)
    assert ep.setting(2) == "k=2 m=3"


def test_episode_is_a_function_of_the_seed(tmp_path):
    pool = candidate_pool(_dataset(tmp_path), seed=0)
    kw = dict(min_mentions=12, n_corpus=6, n_query=4, n_dev=5, n_none=5, queries_per_type=2, ks=(2,))
    a, b, c = sample_episode(pool, seed=1, **kw), sample_episode(pool, seed=1, **kw), sample_episode(pool, seed=2, **kw)
    assert a.corpus.tolist() == b.corpus.tolist()
    assert [q.shots.tolist() for q in a.queries[2]] == [q.shots.tolist() for q in b.queries[2]]
    assert a.tables()[0].equals(b.tables()[0]) and a.tables()[1].equals(b.tables()[1])
    assert a.corpus.tolist() != c.corpus.tolist()
    assert len([x for x in a.corpus_labels if x is None]) == 5


def test_max_types_and_refusals(tmp_path):
    pool = candidate_pool(_dataset(tmp_path), seed=0)
    ep = sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, n_none=3, queries_per_type=1, ks=(2,),
                        max_types=2, seed=0)
    assert len(ep.types) == 2 and ep.record["n_eligible_types"] == 3
    # the type left out of the m is a "None" candidate now
    left = ({"A", "B", "C"} - set(ep.types)).pop()
    assert ep.record["n_outside_available"] == COUNTS[left] + COUNTS["D"] + COUNTS["E"] + 1
    with pytest.raises(NotApplicable, match="min_mentions=14"):
        sample_episode(pool, min_mentions=14, n_corpus=6, n_query=4, ks=(2,))
    with pytest.raises(ValueError, match="query pool"):
        sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, ks=(5,))
    with pytest.raises(ValueError, match="must cover"):
        sample_episode(pool, min_mentions=8, n_corpus=6, n_query=4, ks=(2,))


def test_pool_refuses_a_dataset_without_labels(tmp_path):
    pq.write_table(pa.table({"mention_id": ["m"], "doc_id": ["d"], "sentence": ["A b c"], "trigger_start": [0],
                             "trigger_end": [1], "trigger": ["A"], "labels": [[]]}), tmp_path / "mentions.parquet")
    with pytest.raises(NotApplicable, match="no mention has a gold label"):
        candidate_pool(tmp_path)


@pytest.mark.shared_data
def test_episode_on_the_real_maven_subset(tmp_path):
    from conftest import shared_path

    from eventatlas.data.ingest import ingest

    src = shared_path("maven", "subset", "maven_subset_a.json")
    ingest("maven_sentences", src, out_dir=tmp_path / "maven_subset", dataset="maven_subset")
    pool = candidate_pool(tmp_path / "maven_subset", seed=0)
    src_counts = pool["source"].value_counts().to_pylist()
    counts = {d["values"]: d["counts"] for d in src_counts}
    assert counts["mention"] == 9562 and 270 <= counts["no_event"] <= 284  # one per no-event sentence with a content word
    ep = sample_episode(pool, seed=0)  # the paper's protocol: >= 100 mentions, 50 / 10 / 40, n0 = 2000
    assert ep.record["m"] == 29 and len(ep.corpus) == 29 * 50 + 2000
    assert set(ep.record["none_sources"]) == {"mention", "no_event"}
    assert all(len(ep.queries[k]) == 290 for k in (2, 5, 10))


def test_dev_episode_uses_only_development_mentions(tmp_path):
    from eventatlas.emr.episodes import dev_episode

    pool = candidate_pool(_dataset(tmp_path), seed=0)
    ep = sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, n_dev=5, n_none=3, queries_per_type=3,
                        ks=(2,), seed=7)
    dev = dev_episode(ep, n_query=2, n_none=100, queries_per_type=2, ks=(2,), seed=7)
    # dev pools: A 5, B 3, C 2 -> C has no dev corpus left after 2 dev queries: left out (recorded)
    assert dev.types == ["A", "B"] and dev.record["left_out"] == ["C"]
    test_items = set(ep.corpus.tolist()) | {int(i) for t in ep.types for i in ep.query_pool[t]}
    dev_items = set(dev.corpus.tolist()) | {int(i) for t in dev.types for i in dev.query_pool[t]}
    assert not dev_items & test_items  # nothing of the test episode is seen while tuning
    assert all(set(q.shots.tolist()) <= set(ep.dev[q.type].tolist()) for q in dev.queries[2])
    assert sum(lab == "A" for lab in dev.corpus_labels) == 3 and sum(lab == "B" for lab in dev.corpus_labels) == 1
    # the None side: the outside items not in the test corpus (D, E and the no-event candidate are all in it)
    labels = pool["label"].to_pylist()
    none = [i for i, lab in zip(dev.corpus.tolist(), dev.corpus_labels) if lab is None]
    assert all(labels[i] not in ep.types for i in none) and not set(none) & set(ep.corpus.tolist())
    with pytest.raises(NotApplicable, match="development mentions"):
        dev_episode(ep, n_query=4, n_none=1, queries_per_type=1, ks=(2,))


def test_allowed_types_restrict_the_m_types(tmp_path):
    pool = candidate_pool(_dataset(tmp_path), seed=0)
    ep = sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, n_none=100, queries_per_type=1, ks=(2,),
                        allowed_types=["A", "C", "D"], seed=0)
    assert ep.types == ["A", "C"] and ep.record["allowed_types"] == ["A", "C", "D"]
    assert "B" in {pool["label"][int(i)].as_py() for i, lab in zip(ep.corpus, ep.corpus_labels) if lab is None}
    with pytest.raises(NotApplicable, match="among the 2 allowed type"):
        sample_episode(pool, min_mentions=12, n_corpus=6, n_query=4, ks=(2,), allowed_types=["A", "D"])
