"""The top of a saved model: the chosen encoder (loads with transformers and sentence-transformers as the
directory itself) and the README model card, whose transformers snippet reproduces eventatlas's vectors."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from eventatlas.modeling import card as cardmod
from eventatlas.modeling.inputs import mark_triggers
from eventatlas.modeling.mention_encoder import MentionEncoder
from eventatlas.modeling.saved import ModelCard, ModelWriter, finalize, resolve_ref
from support.tiny_models import tiny_bert

from test_saved_models import TEXTS, _run, saved  # noqa: F401  (the fixture)

SPANS = [(t, t.index(w), t.index(w) + len(w)) for t, w in zip(TEXTS, ("attacked", "acquired", "convoy"))]
LONG = ("the company acquired a rival firm . " * 6 + "Rebels attacked a convoy . " + "troops attacked the town . " * 6)


def _ours(enc_dir, mentions, rep, *, max_length=32, markers=False):
    enc = MentionEncoder(enc_dir, max_length=max_length)
    s, a, b = [m[0] for m in mentions], [m[1] for m in mentions], [m[2] for m in mentions]
    if markers:
        s, a, b = mark_triggers(s, a, b)
    items = enc.prepare_sentences(s) if rep == "cls" else enc.prepare(s, a, b, rep)  # cls: plain sentences
    batch = enc.collate(items, rep)
    with torch.no_grad():
        return enc.encode_batch(batch, rep).numpy()


def _snippet(readme: str) -> str:
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    return next(b for b in blocks if "def mention_vectors" in b)


def test_the_model_directory_loads_as_the_chosen_encoder(saved):
    from sentence_transformers import SentenceTransformer
    from transformers import AutoModel, AutoTokenizer

    enc, run_dir, _ = saved
    m = resolve_ref(f"run:{run_dir.name}")
    assert m.card.root_encoder == "encoder"
    hf = AutoModel.from_pretrained(m.path)
    assert torch.equal(hf.embeddings.word_embeddings.weight, enc.model.embeddings.word_embeddings.weight)
    assert AutoTokenizer.from_pretrained(m.path)("attacked")["input_ids"] == enc.tokenizer("attacked")["input_ids"]
    # hard links to the encoder folder, not copies; eventatlas's layout is unchanged
    assert (m.path / "model.safetensors").samefile(m.encoder_path / "model.safetensors")
    assert (m.path / "1_Pooling" / "config.json").samefile(m.encoder_path / "1_Pooling" / "config.json")
    st = SentenceTransformer(str(m.path), device="cpu")
    np.testing.assert_allclose(st.encode(TEXTS[:2]), SentenceTransformer(str(m.encoder_path), device="cpu").encode(TEXTS[:2]),
                               atol=1e-6)


def test_card_front_matter_base_model_and_three_headline_numbers(saved):
    _, run_dir, _ = saved
    m = resolve_ref(f"run:{run_dir.name}")
    readme = (m.path / "README.md").read_text()
    front = readme.split("---\n")[1]
    assert "library_name: sentence-transformers" in front and 'base_model: "tiny"' in front
    assert '- "fnsample"' in front and '- "frame_dml"' in front
    assert "None" not in readme.split("## Load and encode")[0]  # base model, dataset, ... all named
    table = readme.split("## Headline numbers")[1].split("\n\n")[1].splitlines()
    assert len(table) == 2 + 3  # header, rule, exactly 3 numbers
    # induction's headline order (ari, nmi, bcubed_f) from the best configuration by ari (agglomerative)
    assert [(h["metric"], h["value"]) for h in m.card.headline] == [("ari", 0.3), ("nmi", 0.6), ("bcubed_f", 0.5)]
    assert "| induction ari | 30.0 | fnsample/test | representation trigger, clustering agglomerative |" in table
    assert "NOT the trigger vector" in readme  # sentence-transformers' pooling is said to be the sentence vector


def test_card_snippet_reproduces_the_trigger_vectors(saved):
    """The card's transformers code, run as printed (model path filled in), gives MentionEncoder's trigger
    vectors of the same mentions."""
    _, run_dir, _ = saved
    m = resolve_ref(f"run:{run_dir.name}")
    code = _snippet((m.path / "README.md").read_text())
    assert "representation='trigger'" in code and "max_length=32" in code
    code = re.sub(r"MODEL_DIR = .*", f"MODEL_DIR = {str(m.path)!r}", code)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)  # noqa: S102  (the card's own example runs)
    ours = _ours(m.encoder_path, [SPANS[0]], "trigger")
    np.testing.assert_allclose(ns["vectors"].numpy(), ours, atol=1e-5)
    got = ns["mention_vectors"](str(m.path), SPANS, representation="trigger", max_length=32)
    np.testing.assert_allclose(got.numpy(), _ours(m.encoder_path, SPANS, "trigger"), atol=1e-5)


@pytest.mark.parametrize("rep,markers", [("trigger", True), ("mask", False), ("window4", False),
                                         ("sentence", False), ("cls", False), ("trigger", False)])
def test_snippet_function_matches_every_representation(tmp_path, rep, markers):
    """mention_vectors (the card's function) == MentionEncoder for each representation, trigger markers and a
    sentence longer than the budget (windowed around the trigger) included."""
    d = tiny_bert(tmp_path, TEXTS + [LONG], layers=4)
    long_at = LONG.index("Rebels attacked") + len("Rebels ")
    mentions = SPANS + ([(LONG, long_at, long_at + len("attacked"))] if rep != "cls" else [])
    mk = cardmod.BATCH_ATTENTION_MARKERS if markers else None
    got = cardmod.mention_vectors(str(d), mentions, representation=rep, markers=mk, max_length=24).numpy()
    np.testing.assert_allclose(got, _ours(d, mentions, rep, max_length=24, markers=markers), atol=1e-5)


def test_grounding_markers_lie_inside_the_span(tmp_path):
    from eventatlas.grounding.data import MARKERS, Mentions

    d = tiny_bert(tmp_path, TEXTS)
    enc = MentionEncoder(d, max_length=32)
    enc.tokenizer.add_tokens(list(MARKERS), special_tokens=True)
    enc.model.resize_token_embeddings(len(enc.tokenizer))
    enc.save(tmp_path / "marked")
    ms = Mentions(ids=["a", "b", "c"], golds=[[0]] * 3, sentences=[s for s, _, _ in SPANS], starts=[a for _, a, _ in SPANS], ends=[b for _, _, b in SPANS])
    texts, a, b = ms.marked()
    marked = MentionEncoder(tmp_path / "marked", max_length=32)
    batch = marked.collate(marked.prepare(texts, a, b, "trigger"), "trigger")
    with torch.no_grad():
        ours = marked.encode_batch(batch, "trigger").numpy()
    spec = cardmod.mention_spec(ModelCard(method="grounding", representation="trigger", encoders={"biencoder": "x"},
                                          encoder="biencoder"), "biencoder")
    assert spec == {"representation": "trigger", "markers": tuple(MARKERS[:2]), "markers_in_span": True}
    got = cardmod.mention_vectors(str(tmp_path / "marked"), SPANS, representation="trigger",
                                  markers=spec["markers"], markers_in_span=True, max_length=32)
    np.testing.assert_allclose(got.numpy(), ours, atol=1e-5)


def test_chosen_encoder_and_markers_of_a_multi_encoder_model(tmp_path, eventatlas_env):
    """frame_dml: the dev-best fold goes to the top; batch_attention: the chosen representation, with its trigger
    markers in the card's call; a run with no model_id names the packaged base model."""
    from eventatlas import config

    enc = MentionEncoder(tiny_bert(tmp_path, TEXTS), max_length=32)
    run_dir = config.runs_dir() / "frame_dml-x-s0-1"
    w = ModelWriter(run_dir, method="frame_dml")
    for k, dev in ((0, 0.4), (1, 0.7), (2, 0.5)):
        w.encoder(enc, name=f"fold{k}", base_model="tiny")
        w.card.inference[f"fold{k}"] = {"dev": dev, "alpha_one_step": 0.3}
    w.close(representation="trigger")
    _run(run_dir, run_dir.name, method="frame_dml")
    m = resolve_ref(f"run:{run_dir.name}")
    assert (m.card.encoder, m.card.root_encoder) == ("fold0", "fold1")
    assert (m.path / "model.safetensors").samefile(m.path / "encoders" / "fold1" / "model.safetensors")
    assert "dev chose alpha = 0.3" in (m.path / "README.md").read_text()

    run_dir = config.runs_dir() / "batch_attention-x-s0-1"
    w = ModelWriter(run_dir, method="batch_attention")
    enc.model_id = None  # as a run with the default model_id
    w.encoder(enc, name="trigger")
    w.card.inference["trigger"] = {"trigger_markers": True}
    w.close(representation="trigger")
    finalize(run_dir, {"run_id": run_dir.name, "params": {"config": {"model_id": None}}, "seed": 0}, [])
    m = resolve_ref(f"run:{run_dir.name}")
    readme = (m.path / "README.md").read_text()
    assert m.card.base_model == "all-MiniLM-L6-v2"
    assert 'base_model: "sentence-transformers/all-MiniLM-L6-v2"' in readme
    assert "markers=('[', ']')" in _snippet(readme) and "The run wrote no scored metric rows." in readme


def test_base_model_from_the_run_config_or_the_encoder(tmp_path):
    from eventatlas.modeling.saved import _base_model

    card = ModelCard(method="x", encoders={"encoder": "encoder"}, encoder="encoder")
    assert _base_model(card, {"config": {"model_id": "bert-base-uncased"}}, tmp_path, "encoder") == "bert-base-uncased"
    assert _base_model(card, {"config": {"model_id": None}}, tmp_path, "encoder") == "all-MiniLM-L6-v2"
    (tmp_path / "encoder").mkdir()
    (tmp_path / "encoder" / "config.json").write_text('{"_name_or_path": "roberta-base"}')
    assert _base_model(card, {"config": {}}, tmp_path, "encoder") == "roberta-base"


def test_a_save_killed_while_finalizing_leaves_no_model(saved, monkeypatch):
    """A kill after the top-level links but before the rename: no model/ (nor a half one), the partial
    directory is discarded by the retried run; an earlier complete model of the run stays whole."""
    _, run_dir, _ = saved
    before = sorted(p.relative_to(run_dir / "model") for p in (run_dir / "model").rglob("*"))
    w = ModelWriter(run_dir, method="frame_dml")
    w.head("proxies", {"weight": torch.zeros(1)}, kind="arcface")
    w.encoder(MentionEncoder(resolve_ref(f"run:{run_dir.name}").encoder_path, max_length=32), base_model="tiny")
    w.close(representation="trigger")

    def killed(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cardmod, "card_markdown", killed)
    with pytest.raises(KeyboardInterrupt):
        _run(run_dir, run_dir.name)
    assert sorted(p.relative_to(run_dir / "model") for p in (run_dir / "model").rglob("*")) == before
    assert (run_dir / "model.partial" / "model.safetensors").exists()  # linked, never renamed into place
    assert list(ModelWriter(run_dir, method="frame_dml").dir.iterdir()) == []  # the retry starts clean


def test_cards_of_models_without_a_mention_encoder(tmp_path):
    """emr (heads only): no top-level encoder, no snippet, the frozen base model named; event_detection (an
    encoder trained for its heads): the snippet is there, said to give a plain trigger vector."""
    w = ModelWriter(tmp_path / "emr", method="emr")
    w.head("meta", {"w": torch.zeros(2)}, kind="meta_network")
    w.close(representation="trigger", base_model="all-MiniLM-L6-v2")
    entry = finalize(tmp_path / "emr", {"run_id": "emr-1", "seed": 0}, [])
    m = resolve_ref(entry["path"])
    readme = (m.path / "README.md").read_text()
    assert m.card.root_encoder is None and not (m.path / "config.json").exists()
    assert "library_name: eventatlas" in readme and "def mention_vectors" not in readme
    assert "frozen base model `all-MiniLM-L6-v2`" in readme

    w = ModelWriter(tmp_path / "det", method="event_detection")
    w.encoder(MentionEncoder(tiny_bert(tmp_path, TEXTS), max_length=32), base_model="tiny")
    w.close(epoch=1)
    m = resolve_ref(finalize(tmp_path / "det", {"run_id": "det-1", "seed": 0}, [])["path"])
    readme = (m.path / "README.md").read_text()
    assert "was not trained on a mention vector" in readme and "representation='trigger'" in _snippet(readme)


def test_a_top_level_file_linking_out_is_refused(saved, tmp_path):
    from eventatlas.modeling.saved import ModelError

    _, run_dir, _ = saved
    outside = tmp_path / "elsewhere.safetensors"
    outside.write_bytes(b"x")
    top = run_dir / "model" / "model.safetensors"
    top.unlink()
    top.symlink_to(outside)
    with pytest.raises(ModelError, match="top-level file 'model.safetensors'"):
        resolve_ref(f"run:{run_dir.name}")


def test_headline_leaves_out_the_base_models_rows_and_counts():
    rows = [{"task": "training", "split": "train", "metric": "loss", "value": 0.1},
            {"task": "induction", "dataset": "d", "split": "dev", "variant": "arcface", "metric": "bcubed_f", "value": 0.99},
            {"task": "induction", "dataset": "d", "split": "test", "variant": "vanilla", "metric": "bcubed_f", "value": 0.9},
            {"task": "induction", "dataset": "d", "split": "test", "variant": "arcface", "metric": "n_clusters", "value": 9},
            {"task": "induction", "dataset": "d", "split": "test", "variant": "arcface", "metric": "purity_f", "value": 0.4},
            {"task": "induction", "dataset": "d", "split": "test", "variant": "arcface", "metric": "bcubed_f", "value": 0.5},
            {"task": "induction", "dataset": "d", "split": "test", "variant": "softmax", "metric": "bcubed_f", "value": 0.6}]
    got = cardmod.headline(rows)
    assert [(h["metric"], h["value"], h["config"]["variant"]) for h in got] == \
        [("bcubed_f", 0.6, "softmax"), ("purity_f", 0.4, "arcface")]  # fewer than 3 when the run has fewer
    sim = [{"task": "similarity", "dataset": d, "split": "test", "metric": m, "value": v}
           for d, m, v in (("a", "mcnc_acc", 0.3), ("b", "hard_sim_acc", 0.7), ("c", "transitive_spearman", 0.2))]
    assert [h["metric"] for h in cardmod.headline(sim)] == ["hard_sim_acc", "transitive_spearman", "mcnc_acc"]


def test_headline_takes_the_mean_over_folds_where_there_is_one():
    rows = [{"task": "induction", "split": "test", "setting": s, "variant": "adacos", "metric": "bcubed_f", "value": v}
            for s, v in (("fold 0", 0.9), ("mean of 2 folds", 0.6), ("fold 1", 0.3))]
    assert [(h["value"], h["config"]["setting"]) for h in cardmod.headline(rows)] == [(0.6, "mean of 2 folds")]
