"""Query by example over an ingested corpus (what ``eventatlas search`` runs).

Examples come from a JSON-lines file, one per line: a sentence with its trigger in brackets
(``"The rebels [stormed] the city."``, as a JSON string or ``{"text": ...}``) or an existing mention
(``{"mention_id": ...}``). Bad input is refused with one line naming the file and line.

The corpus is the dataset's ``mentions.parquet``, embedded once (``embed_mentions``: cached by
content, model and representation) and searched with a faiss ``IndexFlatIP`` over unit vectors:
``adhoc`` = mean cosine over the examples (one search with the mean unit example vector);
``siamese`` trains a network on the examples at query time (:mod:`eventatlas.emr.models`; its
outside mentions are a seeded sample of the corpus) and ranks the corpus by its mean cosine;
``meta:<run id>`` loads the network a run meta-trained on other types (:mod:`eventatlas.emr.meta`),
maps the corpus through it once per search and searches a faiss index over the mapped vectors;
``run:<run id>`` is an emr run's saved model: its tuned encoder (model ``contrastive``), ranked like the
frozen one (trigger markers on both sides when it was trained with them), or its meta network.
``auto`` (the command's default) is the ranker the dev rule preferred (:mod:`eventatlas.emr.dev`): the
newest saved emr model whose run chose a trained ranker on its development types, else the frozen
encoder's ad-hoc ranking (:func:`default_ranker`). Mentions given as examples are left out of the results.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

MODELS = ("adhoc", "siamese")
TRAINED = ("contrastive", "meta")  # dev-rule choices that name a saved model rather than the frozen encoder
# The representation that retrieves best with the frozen default encoder: trigger beat window4 in the
# project's retrieval measurements (EMR's representation rows) and on held-out queries.
DEFAULT_REPRESENTATION = "trigger"
RESULT_COLUMNS = ("rank", "score", "mention_id", "doc_id", "sentence", "trigger_start", "trigger_end", "trigger",
                  "labels")


class SearchError(ValueError):
    """Bad examples or an unusable corpus; the message is one line naming the file/line or dataset."""


@dataclass(frozen=True)
class Example:
    where: str  # "file:line"
    sentence: str | None = None
    start: int | None = None
    end: int | None = None
    mention_id: str | None = None


def marked_span(text: str, where: str) -> tuple[str, int, int]:
    """``"The rebels [stormed] the city."`` -> (``"The rebels stormed the city."``, 11, 18)."""
    a, b = text.find("["), text.find("]")
    if a < 0 or b < 0:
        raise SearchError(f"{where}: no trigger marked with [brackets] in {text!r}")
    if b < a or text.count("[") != 1 or text.count("]") != 1:
        raise SearchError(f"{where}: mark exactly one trigger as [word] in {text!r}")
    trigger = text[a + 1:b]
    if not trigger.strip():
        raise SearchError(f"{where}: the [brackets] are empty in {text!r}")
    sentence = text[:a] + trigger + text[b + 1:]
    return sentence, a, a + len(trigger)


def read_examples(path: str | Path) -> list[Example]:
    p = Path(path)
    if not p.exists():
        raise SearchError(f"{p}: examples file not found")
    out = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{p}:{n}"
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise SearchError(f"{where}: not valid JSON ({e.msg}); give a JSON string or object per line") from None
        if isinstance(obj, dict) and obj.get("mention_id") is not None:
            out.append(Example(where, mention_id=str(obj["mention_id"])))
            continue
        text = obj if isinstance(obj, str) else (obj.get("text") or obj.get("sentence")) if isinstance(obj, dict) else None
        if not isinstance(text, str):
            raise SearchError(f"{where}: expected a marked sentence (string or {{\"text\": ...}}) or "
                              f"{{\"mention_id\": ...}}, got {line.strip()[:80]!r}")
        s, a, b = marked_span(text, where)
        out.append(Example(where, s, a, b))
    if not out:
        raise SearchError(f"{p}: no examples (one JSON line per example)")
    return out


def query_examples(queries: Sequence[str]) -> list[Example]:
    """Examples given on the command line (``--query "Rebels [attacked] the base."``), each one marked sentence."""
    return [Example(f"--query {n}", *marked_span(q, f"--query {n}")) for n, q in enumerate(queries, 1)]


def load_corpus(dataset_dir: str | Path) -> pa.Table:
    from ..data.manifest import read_table, table_path, table_rows

    d = Path(dataset_dir)
    p = table_path(d, "mentions")
    if not (d / "manifest.json").exists():
        raise SearchError(f"dataset {d.name!r} is not ingested (no {d / 'manifest.json'})")
    if table_rows(d, "mentions") == 0:
        raise SearchError(f"dataset {d.name!r} has no mentions to search (empty corpus: {p})")
    return read_table(d, "mentions", columns=["mention_id", "doc_id", "sentence", "trigger_start", "trigger_end",
                                              "trigger", "labels"])


def resolve_examples(examples: list[Example], corpus: pa.Table, dataset: str) -> tuple[list[Example], set[str]]:
    """Mention-id examples replaced by their sentence and span; the set of those ids (left out of results)."""
    ids = [e.mention_id for e in examples if e.mention_id is not None]
    if not ids:
        return examples, set()
    import pyarrow.compute as pc

    rows = corpus.filter(pc.is_in(corpus["mention_id"], value_set=pa.array(ids, pa.string()))).to_pylist()
    by_id = {r["mention_id"]: r for r in rows}
    out = []
    for e in examples:
        if e.mention_id is None:
            out.append(e)
            continue
        r = by_id.get(e.mention_id)
        if r is None:
            raise SearchError(f"{e.where}: mention id {e.mention_id!r} is not in dataset {dataset!r}")
        out.append(Example(e.where, r["sentence"], int(r["trigger_start"]), int(r["trigger_end"]), e.mention_id))
    return out, set(ids)


class CorpusIndex:
    """A corpus's cached embeddings behind a faiss inner-product index over unit vectors."""

    def __init__(self, ids: list[str], X: np.ndarray, embeddings: Path | None = None):
        import faiss

        from ..evaluation._vectors import unit_rows

        self.ids = ids
        self.X = X  # raw vectors (the Siamese model transforms these)
        self.embeddings = embeddings
        self.index = faiss.IndexFlatIP(X.shape[1])
        self.index.add(unit_rows(np.asarray(X, dtype=np.float32), "corpus"))
        self._mapped: dict[str, CorpusIndex] = {}

    def mapped(self, key: str, fn: Callable[[np.ndarray], np.ndarray]) -> "CorpusIndex":
        """This corpus through ``fn`` (a meta-trained network), mapped once per ``key`` and kept, so a caller
        that reuses the index for many queries does not push the whole corpus through the network each time."""
        if key not in self._mapped:
            self._mapped[key] = CorpusIndex(self.ids, fn(np.asarray(self.X)), self.embeddings)
        return self._mapped[key]

    @classmethod
    def build(cls, dataset_dir: str | Path, *, model_id: str | None = None, representation: str = "window4",
              cache_dir: str | Path | None = None, **encoder_kw: Any) -> "CorpusIndex":
        from ..modeling.encode import embed_mentions, load_embeddings

        src = Path(dataset_dir) if Path(dataset_dir).suffix == ".parquet" else Path(dataset_dir) / "mentions.parquet"
        npy = embed_mentions(src, model_id, representation, cache_dir=cache_dir,
                             **encoder_kw)
        ids, X = load_embeddings(npy)
        if not ids:
            raise SearchError(f"dataset {Path(dataset_dir).name!r}: no mention could be embedded (see {npy.name} rejects)")
        return cls(ids, X, npy)

    def __len__(self) -> int:
        return len(self.ids)

    def search(self, query: np.ndarray, top: int, exclude: set[int] = frozenset()) -> tuple[np.ndarray, np.ndarray]:
        """(row indices, scores) of the ``top`` best rows for one (d,) query, ``exclude`` rows left out."""
        k = min(len(self), top + len(exclude))
        scores, idx = self.index.search(np.ascontiguousarray(query[None, :], dtype=np.float32), k)
        keep = [j for j, i in enumerate(idx[0]) if i >= 0 and int(i) not in exclude][:top]
        return idx[0][keep].astype(np.int64), scores[0][keep]


def best_representation(model_id: str | None, meta_info: dict[str, Any] | None = None) -> str:
    """The representation to search with when none is given: a meta network's own; a saved model's
    (its card says what it was trained with); else :data:`DEFAULT_REPRESENTATION`."""
    from ..modeling.inputs import REPRESENTATIONS
    from ..modeling.saved import is_ref, resolve_ref

    if meta_info and meta_info.get("representation"):
        return str(meta_info["representation"])
    if is_ref(model_id):
        rep = resolve_ref(str(model_id)).card.representation
        if rep in REPRESENTATIONS:
            return rep
    return DEFAULT_REPRESENTATION


def default_ranker(model_id: str | None = None) -> tuple[str, str]:
    """(``--model`` value, why) of ``auto``: an explicit encoder is ranked ad hoc; else the newest saved emr
    model whose run's dev rule chose a trained ranker (``run:<id>`` / ``meta:run:<id>``); else ``adhoc``."""
    from ..modeling.saved import saved_models

    if model_id is not None:
        return "adhoc", "ad-hoc ranking with the given --encoder"
    for m in saved_models():
        chosen = ((m.card.inference or {}).get("dev_choice") or {}).get("chosen") or {}
        if m.card.method == "emr" and chosen.get("model") in TRAINED:
            ref = m.ref if chosen["model"] == "contrastive" and m.card.encoders else f"meta:{m.ref}"
            return ref, f"the dev rule of {m.ref} chose its {chosen['model']} ranker"
    return "adhoc", "no saved emr run's dev rule chose a trained ranker: the frozen encoder, ranked ad hoc"


def _saved_ranker(ref: str, model_id: str | None) -> tuple[str, str, str | None, bool]:
    """``run:<id>`` -> (model, model_id, representation, trigger markers) of a saved emr model."""
    from ..modeling.saved import ModelError, resolve_ref

    try:
        m = resolve_ref(ref)
    except ModelError as e:
        raise SearchError(f"--model {ref}: {e}") from None
    if m.card.method != "emr":
        raise SearchError(f"--model {ref}: a {m.card.method} model, not an emr ranker (give it as --encoder instead)")
    if not m.card.encoders:
        return f"meta:{m.ref}", model_id, None, False
    if model_id is not None and model_id != ref:
        raise SearchError(f"--model {ref} ranks with its own tuned encoder: leave out --encoder {model_id}")
    spec = (m.card.inference or {}).get("contrastive") or {}
    return "adhoc", m.ref, m.card.representation, bool(spec.get("trigger_markers"))


def _marked_corpus(dataset_dir: Path, cache_dir: str | Path | None) -> Path:
    """The dataset's mentions with "[ trigger ]" markers written into the sentences (spans moved with
    them), cached by the mentions' content: what a ranker trained on marked inputs reads."""
    from .. import config as paths
    from ..io import write_parquet
    from ..modeling.encode import mentions_content_hash
    from ..modeling.inputs import mark_table

    src = Path(dataset_dir) / "mentions.parquet"
    fp, _ = mentions_content_hash(src)
    out = (Path(cache_dir) if cache_dir else paths.cache_dir()) / "marked_mentions" / f"{fp[:24]}.parquet"
    if not out.exists():
        import pyarrow.parquet as pq

        t = mark_table(pq.read_table(src))
        write_parquet(t, out)
    return out


def search(dataset_dir: str | Path, examples_path: str | Path | None = None, *, queries: Sequence[str] = (),
           model: str = "adhoc", top: int = 50,
           model_id: str | None = None, representation: str | None = None, device: str = "auto", seed: int = 0,
           siamese: Any = None, max_outside: int = 50_000, cache_dir: str | Path | None = None,
           on_epoch: Callable[[int, int], None] | None = None, index: CorpusIndex | None = None) -> pa.Table:
    """Rank the corpus for the examples (those of ``examples_path`` and the marked sentences ``queries``);
    returns :data:`RESULT_COLUMNS` rows, best first. The table's schema metadata says which representation
    and encoder ranked it (``representation=None``: the best known one, :func:`best_representation`)."""
    from .. import config as paths
    from ..modeling.device import resolve_device
    from ..modeling.encode import Encoder
    from .models import SiameseParams, adhoc_query, siamese_scores, train_query_networks

    meta, label, markers = None, model, False
    if model == "auto":
        model, _ = default_ranker(model_id)
        label = model
    if model.startswith("run:"):
        model, model_id, rep, markers = _saved_ranker(model, model_id)
        representation = representation or rep
    if model.startswith("meta:"):
        from .meta import MetaError, load_meta

        try:
            meta = load_meta(model.split(":", 1)[1])
        except MetaError as e:
            raise SearchError(str(e)) from None
        representation = representation or best_representation(model_id, meta.info)
        want = {"representation": representation, "model_id": model_id or paths.DEFAULT_MODEL}
        bad = [f"{k}={meta.info.get(k)!r}" for k, v in want.items() if meta.info.get(k) != v]
        if bad:
            raise SearchError(f"--model {model}: that network was trained on {', '.join(bad)}; search with the same "
                              "--representation/--encoder")
    elif model not in MODELS:
        raise SearchError(f"unknown model {model!r}; known: auto, {', '.join(MODELS)}, run:<run id>, meta:<run id>")
    from ..modeling.mention_encoder import model_name
    from ..modeling.saved import ModelError

    try:
        representation = representation or best_representation(model_id)
        encoder_name = model_name(model_id)
    except ModelError as e:
        raise SearchError(f"--encoder: {e}") from None
    if top < 1:
        raise SearchError(f"--top must be >= 1, got {top}")
    dataset_dir = Path(dataset_dir)
    if examples_path is None and not queries:
        raise SearchError("no examples: give --examples FILE or --query \"a sentence with its [trigger]\"")
    # bad examples fail before anything is embedded
    examples = (read_examples(examples_path) if examples_path is not None else []) + query_examples(queries)
    corpus = load_corpus(dataset_dir)
    examples, given = resolve_examples(examples, corpus, dataset_dir.name)
    if model == "siamese" and len(examples) < 2:
        raise SearchError(f"{examples_path or '--query'}: the siamese model needs at least 2 examples (same-class "
                          "pairs), got 1")
    device = resolve_device(device)
    if index is None:
        index = CorpusIndex.build(_marked_corpus(dataset_dir, cache_dir) if markers else dataset_dir,
                                  model_id=model_id, representation=representation, cache_dir=cache_dir, device=device)
    enc = Encoder(model_id, device=device, progress=False)
    sents, starts, ends = [e.sentence for e in examples], [e.start for e in examples], [e.end for e in examples]
    if markers:
        from ..modeling.inputs import mark_triggers

        sents, starts, ends = mark_triggers(sents, starts, ends)
    E = enc.encode_mentions(sents, starts, ends, representation)
    pos = {m: i for i, m in enumerate(index.ids)}
    exclude = {pos[m] for m in given if m in pos}
    if model == "adhoc":
        rows, scores = index.search(adhoc_query(E), top, exclude)
    elif meta is not None:
        mapped = index.mapped(model, lambda X: meta.transform(X, device=device))
        rows, scores = mapped.search(adhoc_query(meta.transform(E, device=device)), top, exclude)
    else:
        params = siamese if siamese is not None else SiameseParams()
        rng = np.random.default_rng([seed, 5])
        allowed = np.setdiff1d(np.arange(len(index)), np.fromiter(exclude, np.int64, len(exclude)))
        out_idx = np.sort(rng.choice(allowed, size=min(max_outside, len(allowed)), replace=False))
        net, _ = train_query_networks(E[None], np.asarray(index.X[out_idx]), params, seed=seed, device=device,
                                      on_epoch=on_epoch)
        s = siamese_scores(net, E[None], np.asarray(index.X), device=device)[0]
        s[list(exclude)] = -np.inf
        k = min(top, len(s) - len(exclude))
        cand = np.argpartition(-s, k - 1)[:k] if k < len(s) else np.arange(len(s))
        rows = cand[np.lexsort((cand, -s[cand]))][:k]
        scores = s[rows]
    ids = [index.ids[i] for i in rows]
    import pyarrow.compute as pc

    found = corpus.filter(pc.is_in(corpus["mention_id"], value_set=pa.array(ids, pa.string())))
    by_id = {r["mention_id"]: r for r in found.to_pylist()}
    res = [{"rank": n + 1, "score": float(sc), **by_id[m]} for n, (m, sc) in enumerate(zip(ids, scores))]
    schema = pa.schema([("rank", pa.int32()), ("score", pa.float32()), ("mention_id", pa.string()),
                        ("doc_id", pa.string()), ("sentence", pa.string()), ("trigger_start", pa.int32()),
                        ("trigger_end", pa.int32()), ("trigger", pa.string()), ("labels", pa.list_(pa.string()))])
    schema = schema.with_metadata({"representation": representation + ("+markers" if markers else ""),
                                   "encoder": encoder_name, "model": label})
    return pa.Table.from_pylist(res, schema=schema)
