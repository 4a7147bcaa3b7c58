"""One encoder pass: the detector's pass keeps each detected mention's trigger vector, equal to what embedding the
detected mentions with the detector's encoder gives, and discover on those vectors finds the types it finds
embedding them itself; the pipeline takes that path by default with a detector and says so."""
from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from support.mini_events import mini_tiny_bert, write_mini_events


@pytest.fixture
def detector(eventatlas_env):
    from eventatlas import config
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    ddir = write_mini_events(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    params = {"model_id": str(model), "complete_sentences": True, "heldout_sentences": 0.3, "dev_sentences": 0.3,
              "thresholds": [0.5], "train": {"epochs": 1, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}
    rec = read_record(run_method("event_detection", ddir, seed=0, params=params, device="cpu", flow="test"))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    return ddir, f"run:{rec['run']['run_id']}"


def _by_id(path) -> dict[str, np.ndarray]:
    from eventatlas.modeling.encode import load_embeddings

    ids, X = load_embeddings(path)
    return dict(zip(ids, np.asarray(X)))


def test_same_pass_vectors_equal_embedding_with_the_detectors_encoder(detector, tmp_path):
    from eventatlas import config
    from eventatlas.detection.apply import detect, load_detector
    from eventatlas.modeling.encode import embed_mentions
    from eventatlas.modeling.saved import resolve_ref

    ddir, ref = detector
    loaded = load_detector(ref)
    enc = loaded[0].encoder
    # a detector that cuts sentences short: those mentions are encoded again as embedding would (whole sentence)
    enc.max_length, enc.budget = 12, 10
    man = detect(ddir, ref, config.datasets_dir() / "found", name="found", threshold=0.0, loaded=loaded,
                 vectors_dir=tmp_path / "vec")
    v = man["detection"]["vectors"]
    assert v["by"] == f"detector {ref} (same pass)" and v["representation"] == "trigger"
    assert 0 < v["recomputed"] < v["rows"] == man["rows"]["mentions"]
    ours = _by_id(tmp_path / "vec" / "trigger.npy")
    ids = pq.read_table(config.datasets_dir() / "found" / "mentions.parquet")["mention_id"].to_pylist()
    assert list(ours) == ids  # one vector per mention, in the dataset's order
    theirs = _by_id(embed_mentions(config.datasets_dir() / "found", str(resolve_ref(ref).encoder_path), "trigger",
                                   cache_dir=tmp_path / "cache", device="cpu", precision="fp32"))
    assert theirs.keys() == ours.keys()
    worst = max(float(np.abs(ours[m] - theirs[m]).max()) for m in ids)
    assert worst <= 1e-5, worst


def test_discover_on_same_pass_vectors_finds_what_embedding_finds(detector, tmp_path):
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.discover.run import DiscoverConfig
    from eventatlas.discover.run import discover as run
    from eventatlas.pipelines.discover import discover
    from eventatlas.pipelines.local import engine
    from support.mini_events import SENTENCES

    _, ref = detector
    text = tmp_path / "news.txt"
    text.write_text(" ".join(s for ss in SENTENCES.values() for s in ss), encoding="utf-8")
    ingest("text", text, dataset="news")
    lines: list[str] = []
    out = discover("news", k=3, link_to=["mini_events"], detector=ref, device="cpu", threshold=0.0,
                   engine=engine(say=lines.append))
    assert any(f"encoder: the detector's own ({ref}, the default with a detector)" in ln for ln in lines)
    assert out["vectors"] == f"detector {ref} (same pass)" and out["config"]["encoder"] == ref
    assert out["detected"]["detection"]["vectors"]["rows"] == out["mentions"]
    # the same detected mentions embedded by discover itself, with the detector's encoder
    again = run(config.datasets_dir() / "news_detected", tmp_path / "again",
                DiscoverConfig(k=3, encoder=ref, link_to=["mini_events"], device="cpu"))
    assert again["vectors"] == f"{ref} (embedded)"
    a = pq.read_table(out["files"]["assignments"]).to_pylist()
    b = pq.read_table(again["files"]["assignments"]).to_pylist()
    assert [(r["mention_id"], r["type_id"]) for r in a] == [(r["mention_id"], r["type_id"]) for r in b]
    links = [pq.read_table(s["files"]["links"]).to_pylist() for s in (out, again)]
    assert links[0] and {r["encoder"] for r in links[0]} == {ref}  # the targets embedded with the detector's encoder
    key = lambda r: (r["source"], r["target"], r["method"], r["rank"])  # noqa: E731
    assert [key(r) for r in links[0]] == [key(r) for r in links[1]]
    assert np.allclose([r["raw_score"] for r in links[0]], [r["raw_score"] for r in links[1]], atol=1e-5)
    # a dataset with mentions of its own runs no detection: there is no detection pass to take vectors from
    with pytest.raises(ValueError, match="needs --detector"):
        discover("mini_events", encoder="detector", device="cpu", engine=engine())
