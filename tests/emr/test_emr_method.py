"""The `emr` method end to end on the self-written EMR sample (real encoder, tiny Siamese budget)."""
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from eventatlas.data.ingest import ingest
from eventatlas.methods import ParamError, get_spec
from eventatlas.run.runner import run_method
from eventatlas.tracking.records import load_metrics, read_record

SAMPLE = Path(__file__).resolve().parents[2] / "datasets" / "samples" / "emr" / "emr_sample.json"
PARAMS = {"min_mentions": 8, "n_corpus": 4, "n_query": 3, "n_dev": 1, "n_none": 50, "queries_per_type": 2,
          "ks": [2, 3], "repetitions": 2, "representations": ["trigger"], "siamese": {"epochs": 2, "hidden": 16, "negatives": 8, "batch_size": 5}}


@pytest.fixture
def sample_dataset(eventatlas_env):
    ingest("maven_sentences", SAMPLE, out_dir=eventatlas_env / "data" / "datasets" / "emr_sample", dataset="emr_sample")
    return eventatlas_env / "data" / "datasets" / "emr_sample"


def test_emr_run_records_episodes_and_retrieval_rows(sample_dataset):
    rec = read_record(run_method("emr", sample_dataset, seed=0, params=PARAMS, device="cpu"))
    run = rec["run"]
    assert run["status"] == "completed", run.get("error")
    rows = load_metrics(rec)
    assert {r["task"] for r in rows} == {"retrieval"}
    assert {r["variant"] for r in rows} == {"adhoc", "siamese"}
    # Attack, Acquisition, Death have 8; per-type MAP at the largest k
    assert {r["setting"] for r in rows} == {"k=2 m=3", "k=3 m=3", "k=3 m=3 type=Acquisition", "k=3 m=3 type=Attack",
                                            "k=3 m=3 type=Death"}
    # the other representation is one more ad-hoc ranker on the same episodes
    assert {(r["variant"], r["representation"]) for r in rows} == {("adhoc", "window4"), ("adhoc", "trigger"),
                                                                   ("siamese", "window4")}
    by = {(r["variant"], r["setting"], r["metric"]): r["value"] for r in rows if r["representation"] == "window4"}
    for v in ("adhoc", "siamese"):
        assert 0 < by[(v, "k=2 m=3", "map")] <= 1
        assert by[(v, "k=2 m=3", "map_std")] >= 0
        assert ("recall@10" in {m for (_, _, m) in by})
    # ad-hoc window4 retrieval on hand-written sentences beats the random-ranking MAP (~4/|corpus|)
    ep = run["params"]["episodes"][0]
    assert ep["types"] == ["Acquisition", "Attack", "Death"]
    assert ep["none_sources"] == {"mention": 4, "no_event": 4}  # Arriving + Election mentions, 4 no-event
    assert by[("adhoc", "k=3 m=3", "map")] > 3 * 4 / ep["corpus_size"]
    arts = {a["kind"]: a for a in rec["artifacts"]}
    items = pq.read_table(arts["emr/episode_items"]["path"]).to_pylist()
    queries = pq.read_table(arts["emr/episode_queries"]["path"]).to_pylist()
    for r in (0, 1):
        corpus = {i["mention_id"] for i in items if i["repetition"] == r and i["role"] == "corpus"}
        shots = {m for q in queries if q["repetition"] == r for m in q["shot_mention_ids"]}
        assert shots and not shots & corpus
    per_q = pq.read_table(arts["emr/scores_per_query"]["path"]).to_pylist()
    for v in ("adhoc", "siamese"):  # the per-type rows are the mean of that type's queries over repetitions
        att = [q["map"] for q in per_q if q["model"] == v and q["k"] == 3 and q["type"] == "Attack"
               and q["representation"] == "window4"]
        assert len(att) == 2 * 2 and by[(v, "k=3 m=3 type=Attack", "map")] == pytest.approx(sum(att) / len(att))
    reps = pq.read_table(arts["emr/scores_per_repetition"]["path"]).to_pylist()
    assert len(reps) == 2 * 2 * 3  # repetitions x ks x (2 ad-hoc rankers + siamese)
    assert all((r["train_loss_first_epoch"] is None) == (r["model"] == "adhoc") for r in reps)
    pool = pq.read_table(arts["emr/pool"]["path"]).to_pylist()
    ne = [p for p in pool if p["source"] == "no_event"]
    assert len(ne) == 4 and all(p["sentence"][p["trigger_start"]:p["trigger_end"]] == p["trigger"] for p in ne)
    assert json.dumps(run["params"]["timings_s"])


def test_emr_params_are_validated_and_unlabelled_data_refused(eventatlas_env, tmp_path):
    with pytest.raises(ParamError, match="k_shots"):
        get_spec("emr").validate({"k_shots": [2]})
    with pytest.raises(ParamError, match="models"):
        get_spec("emr").validate({"models": ["oracle"]})
    # mentions without gold labels (candidates only): nothing to evaluate retrieval against
    from eventatlas.io import DatasetWriter

    ddir = eventatlas_env / "data" / "datasets" / "unl"
    with DatasetWriter(ddir, "unl") as w:
        w.write("mentions", {"mention_id": "m0", "dataset": "unl", "doc_id": "1", "sentence": "It rained .",
                             "trigger_start": 3, "trigger_end": 9, "trigger": "rained", "labels": []})
        w.commit({"reader": "maven_sentences"})
    rec = read_record(run_method("emr", ddir, seed=0, params=PARAMS, device="cpu"))
    assert rec["run"]["status"] == "skipped" and "gold event types" in rec["run"]["error"]


def test_another_encoder_is_one_more_adhoc_ranker(sample_dataset, tmp_path):
    """An encoder directory (e.g. one fine-tuned by another method) ranks the same episodes."""
    from support.tiny_models import tiny_bert

    sents = [" ".join(x["tokens"]) for x in json.loads(SAMPLE.read_text())]
    enc = tiny_bert(tmp_path, sents, layers=4, name="tuned_enc")
    params = {**PARAMS, "repetitions": 1, "models": ["adhoc"], "representations": [], "encoders": [str(enc)]}
    rec = read_record(run_method("emr", sample_dataset, seed=0, params=params, device="cpu"))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    rows = load_metrics(rec)
    assert {r["representation"] for r in rows} == {"window4", "window4@tuned_enc"}
    maps = {(r["representation"], r["setting"]): r["value"] for r in rows if r["metric"] == "map"}
    assert all(0 < v <= 1 for v in maps.values()) and ("window4@tuned_enc", "k=3 m=3") in maps
