"""The `discover` method on the mini world with a tiny trained detector: the held-out sentences only, the
detector's TI scores equal to what `evaluate` gives it there, clustering scored on matched mentions, hidden
types out of the known inventory, the novelty rule chosen on dev, and the refusals."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from support.mini_events import mini_tiny_bert, write_mini_events

CUT = {"heldout_sentences": 0.3, "dev_sentences": 0.3}


@pytest.fixture
def trained(eventatlas_env):
    from eventatlas import config
    from eventatlas.run.runner import run_method
    from eventatlas.tracking.records import read_record

    ddir = write_mini_events(config.data_root())
    model = mini_tiny_bert(eventatlas_env)
    params = {"model_id": str(model), "complete_sentences": True, **CUT, "thresholds": [0.3, 0.5],
              "train": {"epochs": 2, "batch_size": 4, "lr": 1e-3, "precision": "fp32"}}
    rec = read_record(run_method("event_detection", ddir, seed=0, params=params, device="cpu", flow="test"))
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    return ddir, f"run:{rec['run']['run_id']}", str(model)


def test_discover_scores_detection_clustering_and_novelty_on_held_out_sentences(trained):
    from eventatlas.methods.spec import ParamError
    from eventatlas.run.runner import evaluate_model, run_method
    from eventatlas.tracking.records import read_record

    ddir, ref, model = trained
    params = {"detector": ref, "model_id": model, "complete_sentences": True, **CUT, "hidden_types": 2,
              "hidden_min_mentions": 1, "link_sample": 5}
    path = run_method("discover", ddir, seed=0, params=params, device="cpu", flow="test")
    rec = read_record(path)
    assert rec["run"]["status"] == "completed", rec["run"].get("error")
    rows = pq.read_table(path.parent / "metrics.parquet").to_pylist()

    def get(task, variant, metric, split="heldout"):
        return [r["value"] for r in rows if (r["task"], r["variant"], r["metric"], r["split"]) ==
                (task, variant, metric, split)]

    # the detector's identification on the held-out sentences is what `evaluate` measures there
    home = evaluate_model(ref, ddir, params={"complete_sentences": True}, device="cpu")
    ev = pq.read_table(home.parent / "metrics.parquet").to_pylist()
    assert get("detection", "detector", "ti_f1") == [next(r["value"] for r in ev if r["metric"] == "ti_f1")]
    assert get("detection", "gold", "ti_f1") == []  # gold mentions are not a detection
    # every gold mention matches itself; a detector's matched mentions are a subset of its mentions
    assert get("induction", "gold", "n_matched") == get("induction", "gold", "n_mentions")
    assert get("induction", "detector", "n_matched")[0] <= get("induction", "detector", "n_mentions")[0]
    # the gold clustering scored on the mentions the detector found: the same count as the detector's matched
    assert get("induction", "gold_found", "n_matched") == get("induction", "detector", "n_matched")
    params_out = rec["run"]["params"]
    hidden = params_out["runs"]["heldout/gold"]["hidden"]
    assert len(hidden) == 2 and set(params_out["chosen_on_dev"]) <= {"gold", "lexical", "detector"}
    # the hidden types are out of the known inventory the types were linked to
    links = pq.read_table(path.parent / "discover-heldout-gold" / "links.parquet").to_pylist()
    known = {r["target"].split("::", 1)[1] for r in links if r["target"].startswith("mini_events:known::")}
    assert known and not known & set(hidden)
    types = pq.read_table(path.parent / "discover-heldout-gold" / "types.parquet").to_pylist()
    assert all(t["new"] is not None and t["best_link"] for t in types)
    summary = json.loads((path.parent / "discover-heldout-gold" / "discover.json").read_text())
    assert summary["config"]["novelty_scorer"] == params_out["chosen_on_dev"]["gold"][0]
    # a cut other than the detector's would score its training sentences: refused
    from eventatlas.methods import get_spec
    from eventatlas.methods.context import method_runner

    with pytest.raises(ParamError, match="cut mini_events with"):
        method_runner(get_spec("discover"))(ddir, path.parent.parent / "x", seed=0, device="cpu",
                                            config={**params, "heldout_sentences": 0.2})
    with pytest.raises(ParamError, match="variant 'detector' needs detector"):
        method_runner(get_spec("discover"))(ddir, path.parent.parent / "y", seed=0, device="cpu",
                                            config={**params, "detector": None, "variants": ["detector"]})


def test_a_dataset_without_mentions_is_detected_with_the_newest_detector(trained):
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.pipelines.discover import discover
    from eventatlas.pipelines.local import engine

    _, ref, _ = trained
    ingest("text", config.samples_dir() / "text", dataset="my_text", progress=False)
    said: list[str] = []
    out = discover("my_text", k=2, threshold=0.0, device="cpu", engine=engine(say=said.append))
    assert out["detected"]["dataset"] == "my_text_detected" and out["detected"]["detection"]["model"] == ref
    assert any(f"my_text has no mentions: detecting them with the newest saved detector, {ref}" in s for s in said)


def test_without_mentions_or_a_detector_the_refusal_says_how_to_get_one(eventatlas_env):
    from eventatlas import config
    from eventatlas.data.ingest import ingest
    from eventatlas.pipelines.discover import discover
    from eventatlas.pipelines.local import engine

    ingest("text", config.samples_dir() / "text", dataset="my_text", progress=False)
    with pytest.raises(ValueError, match=r"no saved detector to find them: train one with `eventatlas train "
                                         r"event_detection maven_subset`"):
        discover("my_text", engine=engine())
