"""`detect`: a saved detector (run:<id>) finds mentions in a dataset's sentences and writes them as a new dataset
of unlabelled mentions that carry the detector's word; the source's text tables come along, the ingest-like
record lands in the warehouse, and a method that needs gold types refuses the result in one line."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from support.mini_events import mini_tiny_bert, write_mini_events


@pytest.fixture
def trained(eventatlas_env):
    from eventatlas import config
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    ddir = write_mini_events(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    params = {"model_id": str(model), "complete_sentences": True, "heldout_sentences": 0.3, "dev_sentences": 0.3,
              "thresholds": [0.3, 0.5], "train": {"epochs": 2, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}
    rec = read_record(run_method("event_detection", ddir, seed=0, params=params, device="cpu", flow="test"))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    return ddir, f"run:{rec['run']['run_id']}"


def test_detect_writes_unlabelled_mentions_with_the_detectors_word(trained):
    from eventatlas.data import Manifest, NotApplicable
    from eventatlas.methods import SPECS
    from eventatlas.methods.context import run_in_dir
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine
    from eventatlas.store.warehouse import Warehouse

    ddir, ref = trained
    lines: list[str] = []
    out = detect("mini_events", ref, "mini_found", threshold=0.0, device="cpu", engine=engine(say=lines.append))
    man = out["manifest"]
    det = Manifest.read(man["dataset_dir"])
    sentences = {(m["doc_id"], m["sent_idx"]): m["sentence"] for m in pq.read_table(ddir / "mentions.parquet").to_pylist()}
    rows = pq.read_table(det.path / "mentions.parquet").to_pylist()
    # threshold 0: every word of every sentence is inside a trigger, so every sentence has a detection
    assert {(r["doc_id"], r["sent_idx"]) for r in rows} == set(sentences)
    assert man["detection"]["sentences"] == len(sentences)
    assert man["detection"]["model"] == ref and man["detection"]["mentions"] == len(rows) > 0
    for r in rows:
        assert r["labels"] == [] and r["sentence"][r["trigger_start"]:r["trigger_end"]] == r["trigger"]
        extra = json.loads(r["extra"])
        assert extra["predicted_by"] == ref and 0.0 <= extra["score"] <= 1.0 and extra["predicted_type"]
    assert det.kinds() == frozenset({"mentions"})  # unlabelled: no gold to score against
    with pytest.raises(NotApplicable, match="typed_mentions"):
        run_in_dir(SPECS["untuned"], det.path, det.path.parent / "x", device="cpu")
    _, runs = Warehouse().query_rows("SELECT count(*) FROM runs WHERE flow = 'ingest' AND params LIKE '%mini_found%'")
    assert runs[0][0] == 1
    # the detector's own threshold finds fewer
    fewer = detect("mini_events", ref, "mini_found2", device="cpu", engine=engine(say=lines.append))["manifest"]
    assert fewer["detection"]["mentions"] <= len(rows)


def test_detect_refuses_what_it_cannot_do(trained):
    from eventatlas.modeling.saved import ModelError
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine

    ddir, ref = trained
    with pytest.raises(ValueError, match="would replace the dataset"):
        detect("mini_events", ref, "mini_events", device="cpu", engine=engine())
    with pytest.raises(FileNotFoundError, match="no dataset 'nope'"):
        detect("nope", ref, device="cpu", engine=engine())
    with pytest.raises(ModelError):
        detect("mini_events", "run:no-such-run", device="cpu", engine=engine())


def test_evaluate_on_scores_heldout_at_home_and_type_agnostic_elsewhere(trained):
    from eventatlas import config
    from eventatlas.io import DatasetWriter
    from eventatlas.run.runner import evaluate_model
    from eventatlas.tracking.records import read_record
    from support.mini_events import SENTENCES

    ddir, ref = trained
    complete = {"complete_sentences": True}
    home = read_record(evaluate_model(ref, ddir, params=complete, device="cpu"))
    rows = [r for r in _metrics(home)]
    assert {r["split"] for r in rows} == {"heldout"} and {"ti_f1", "tc_f1"} <= {r["metric"] for r in rows}
    # another dataset with a type the detector never saw: identification only
    other = config.data_root() / "datasets" / "other_events"
    with DatasetWriter(other, "other_events") as w:
        for i, s in enumerate(SENTENCES["Life.Death"]):
            a = s.index("died")
            w.write("mentions", {"mention_id": f"o{i}", "dataset": "other_events", "doc_id": f"o{i}", "sent_idx": 0,
                                 "sentence": s, "trigger_start": a, "trigger_end": a + 4, "trigger": "died",
                                 "labels": ["Die_elsewhere"]})
        w.commit({"reader": "sample"})
    away = read_record(evaluate_model(ref, other, params=complete, device="cpu"))
    rows = _metrics(away)
    assert {r["metric"] for r in rows} == {"ti_precision", "ti_recall", "ti_f1", "n_predicted", "n_gold"}
    assert {r["split"] for r in rows} == {"all"} and {r["setting"] for r in rows} == {"type-agnostic (other inventory)"}
    assert next(r["value"] for r in rows if r["metric"] == "n_gold") == len(SENTENCES["Life.Death"])


def _metrics(record):
    assert record["run"]["status"] == "completed", record["run"].get("error")
    return pq.read_table(record["metrics_path"]).to_pylist()


def test_detect_in_a_text_dataset_reads_its_sentences(trained):
    from eventatlas import config
    from eventatlas.data import Manifest
    from eventatlas.data.ingest import ingest
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine

    _, ref = trained
    ingest("text", config.samples_dir() / "text", dataset="my_text", progress=False)
    src = Manifest.read(config.datasets_dir() / "my_text")
    assert "text" in src.kinds()
    sents = {(r["doc_id"], r["sent_idx"]): r["text"]
             for r in pq.read_table(src.path / "sentences.parquet").to_pylist()}
    man = detect("my_text", ref, threshold=0.0, device="cpu", engine=engine())["manifest"]
    assert man["dataset"] == "my_text_detected" and man["detection"]["sentences"] == len(sents)
    det = Manifest.read(man["dataset_dir"])
    rows = pq.read_table(det.path / "mentions.parquet").to_pylist()
    assert rows and all(sents[(r["doc_id"], r["sent_idx"])] == r["sentence"] for r in rows)
    # the text tables come along: the detected dataset still has the documents and sentences
    assert det.rows["sentences"] == len(sents) and det.rows["documents"] == src.rows["documents"]
    assert pq.read_table(det.path / "sentences.parquet").num_rows == len(sents)


def _found(man) -> list[tuple]:
    """The detected mentions without their dataset's name (which their ids carry): span, type, score."""
    from pathlib import Path

    rows = pq.read_table(Path(man["dataset_dir"]) / "mentions.parquet").to_pylist()
    out = []
    for r in rows:
        e = json.loads(r["extra"])
        out.append((r["doc_id"], r["sent_idx"], r["trigger_start"], r["trigger_end"], e["predicted_type"],
                    e["predicted_by"], e["score"]))
    return sorted(out)


def _same(a: list[tuple], b: list[tuple]) -> None:
    """Equal spans and types; scores equal to float noise (another batch composition pads differently)."""
    assert [x[:-1] for x in a] == [x[:-1] for x in b] and a
    assert max(abs(x[-1] - y[-1]) for x, y in zip(a, b)) <= 2e-4


def test_shards_split_the_documents_and_find_what_one_process_finds(trained):
    from eventatlas import config
    from eventatlas.detection.apply import shard_of
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine

    ddir, ref = trained
    one = detect("mini_events", ref, "one", threshold=0.3, device="cpu", engine=engine())["manifest"]
    three = detect("mini_events", ref, "three", threshold=0.3, device="cpu", shards=3, engine=engine())["manifest"]
    _same(_found(one), _found(three))
    assert three["detection"]["shards"] == 3 and one["detection"]["shards"] == 1
    assert three["detection"]["sentences"] == one["detection"]["sentences"]
    assert three["rows"] == one["rows"]
    # a document's sentences all go to one shard, the same one in every process; the shards are all used here
    docs = sorted({r["doc_id"] for r in pq.read_table(ddir / "mentions.parquet").to_pylist()})
    assert [shard_of(d, 3) for d in docs] == [shard_of(d, 3) for d in docs]
    assert len({shard_of(d, 3) for d in docs}) == 3 and {shard_of(d, 1) for d in docs} == {0}
    assert not list(config.datasets_dir().glob(".*-parts-*"))  # the parts go once the dataset is written
    with pytest.raises(ValueError, match="positive number of shards"):
        detect("mini_events", ref, "none", device="cpu", shards=0, engine=engine())


def test_a_failing_shard_leaves_no_dataset_and_no_parts(trained, monkeypatch):
    from eventatlas import config
    from eventatlas.detection import apply
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine

    ddir, ref = trained
    real = apply.detect_part

    def second_fails(*a, **kw):
        if kw.get("shard") == 1:
            raise OSError("disk gone on purpose")
        return real(*a, **kw)

    monkeypatch.setattr(apply, "detect_part", second_fails)
    with pytest.raises(OSError, match="on purpose"):
        detect("mini_events", ref, "broken", threshold=0.3, device="cpu", shards=2, engine=engine())
    assert not (config.datasets_dir() / "broken").exists()
    assert not list(config.datasets_dir().glob(".*-parts-*"))


@pytest.mark.network
@pytest.mark.timeout(600)
def test_shards_on_a_dask_cluster_find_what_one_process_finds(trained):
    from eventatlas.pipelines.detect import detect
    from eventatlas.pipelines.local import engine

    ddir, ref = trained
    one = detect("mini_events", ref, "here", threshold=0.3, device="cpu", engine=engine())["manifest"]
    lines: list[str] = []
    two = detect("mini_events", ref, "on_dask", threshold=0.3, device="cpu", shards=2,
                 engine=engine("dask:2", say=lines.append))["manifest"]
    _same(_found(one), _found(two))
    assert two["detection"]["shards"] == 2 and any("2 shard(s)" in ln for ln in lines)
