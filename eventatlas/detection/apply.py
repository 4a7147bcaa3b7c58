"""Apply a saved detector (``run:<id>``) to a dataset's sentences and write the detected mentions as a new
dataset: the source's documents (and sentences table, when it has one) carried over by hard links, and a
``mentions`` table whose rows carry no gold label (``labels`` empty: every downstream method reads them as
unlabelled mentions, and a scorer that needs gold refuses the dataset by its kinds) and, in ``extra``, the
detector's word: ``predicted_by`` (the run), ``score`` (trigger probability), ``predicted_type`` and
``type_score``.

It streams: sentences are read in chunks of ``chunk`` rows, each chunk encoded once and scored in
length-sorted batches, and the mentions go to the dataset writer as they come, so memory stays bounded by
the chunk whatever the corpus size.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Iterator

log = logging.getLogger(__name__)


def load_detector(ref: str, device: str = "cpu") -> tuple[Any, dict[str, Any], str]:
    """The saved detector as a :class:`.model.Detector` on ``device``, its card's inference block and its ref."""
    import torch

    from ..modeling.mention_encoder import MentionEncoder
    from ..modeling.saved import ModelError, resolve_ref
    from .model import Detector

    saved = resolve_ref(ref)
    if saved.card.method != "event_detection":
        raise ModelError(f"{saved.ref} is a {saved.card.method} model, not a detector (train one: "
                         "`eventatlas train event_detection DATASET`)")
    inf = dict(saved.card.inference)
    enc = MentionEncoder(str(saved.encoder_path), max_length=int(inf.get("max_length", 128)))
    model = Detector(enc, len(inf["types"]))
    for name in ("identification", "typing"):
        tensors, _ = saved.head(name)
        getattr(model, name).load_state_dict({k: v.to(torch.float32) for k, v in tensors.items()})
    return model.to(device).eval(), inf, saved.ref


def sentence_batches(dataset_dir: Path, chunk: int) -> Iterator[list[tuple[str, int, str, str | None]]]:
    """``(doc_id, sent_idx, text, split)`` in chunks: the ``sentences`` table when the dataset has one (a text
    dataset), else the documents' sentence lists, else the mentions' sentences (the set of sentence keys is
    the one unbounded thing held then: a dataset with only mentions is an annotated benchmark, not a corpus)."""
    import pyarrow.parquet as pq

    sent = dataset_dir / "sentences.parquet"
    buf: list[tuple[str, int, str, str | None]] = []
    if sent.exists() and pq.ParquetFile(sent).metadata.num_rows:
        for b in pq.ParquetFile(sent).iter_batches(batch_size=chunk, columns=["doc_id", "sent_idx", "text", "split"]):
            d = b.to_pydict()
            yield [(str(a), int(k), t, s) for a, k, t, s in zip(d["doc_id"], d["sent_idx"], d["text"], d["split"]) if t]
        return
    docs, ments = dataset_dir / "documents.parquet", dataset_dir / "mentions.parquet"
    if docs.exists() and pq.ParquetFile(docs).metadata.num_rows:
        for b in pq.ParquetFile(docs).iter_batches(batch_size=max(1, chunk // 8),
                                                   columns=["doc_id", "sentences", "split"]):
            d = b.to_pydict()
            for a, sents, s in zip(d["doc_id"], d["sentences"], d["split"]):
                buf += [(str(a), k, t, s) for k, t in enumerate(sents or []) if t]
                if len(buf) >= chunk:
                    yield buf
                    buf = []
    elif ments.exists():  # only mentions (no document text): their sentences, each once
        seen: set[tuple[str, int]] = set()
        for b in pq.ParquetFile(ments).iter_batches(batch_size=chunk, columns=["doc_id", "sent_idx", "sentence", "split"]):
            d = b.to_pydict()
            for a, k, t, s in zip(d["doc_id"], d["sent_idx"], d["sentence"], d["split"]):
                if t and (str(a), int(k or 0)) not in seen:
                    seen.add((str(a), int(k or 0)))
                    buf.append((str(a), int(k or 0), t, s))
            if len(buf) >= chunk:
                yield buf
                buf = []
    else:
        raise ValueError(f"{dataset_dir}: no sentences to detect in (no sentences, documents or mentions table)")
    if buf:
        yield buf


def detect(dataset_dir: str | Path, ref: str, out_dir: str | Path, *, name: str, device: str = "cpu",
           precision: str = "fp32", threshold: float | None = None, batch_size: int = 64, chunk: int = 4096,
           progress: bool | None = None, loaded: tuple[Any, dict[str, Any], str] | None = None) -> dict[str, Any]:
    """Detect mentions in every sentence of ``dataset_dir`` with the saved detector ``ref`` (or ``loaded``, what
    :func:`load_detector` returns) and write dataset ``name`` to ``out_dir``; returns its manifest (with
    ``detection``: the model, threshold and counts)."""
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    from ..data.manifest import Manifest
    from ..io import DatasetWriter, link_file, stable_id
    from .decode import spans
    from .model import word_scores
    from .words import encode

    src = Manifest.read(dataset_dir)
    model, inf, ref = loaded or load_detector(ref, device)
    th = float(inf["threshold"] if threshold is None else threshold)
    types = list(inf["types"])
    out_dir = Path(out_dir)
    n_sent = src.rows.get("sentences") or None
    t0, n, found = time.perf_counter(), 0, 0
    bar = tqdm(total=n_sent, desc=f"detect {name}", unit="sent", disable=(not progress) if progress is not None else None)
    with DatasetWriter(out_dir, name, tables=["mentions"]) as w:
        for part in sentence_batches(src.path, chunk):
            items = encode(model.encoder.tokenizer, [t for _, _, t, _ in part], model.encoder.max_length)
            for (doc, k, text, split), it, (pi, pt) in zip(part, items, word_scores(
                    model, items, device=device, batch_size=batch_size, precision=precision, progress=bar.update)):
                for a, b, typ, sc, ts in spans(pi, pt, it.spans, th, types):
                    w.write("mentions", {
                        "mention_id": stable_id(name, doc, k, a, b), "dataset": name, "doc_id": doc, "sent_idx": k,
                        "sentence": text, "trigger_start": a, "trigger_end": b, "trigger": text[a:b], "split": split,
                        "labels": [], "extra": json.dumps({"predicted_by": ref, "score": round(sc, 4),
                                                           "predicted_type": typ, "type_score": round(ts, 4)})})
                    found += 1
            n += len(part)
        bar.close()
        # the source's text tables come along unchanged (hard links: no copy of a large corpus)
        carried = {}
        for table in ("documents", "sentences", "event_types"):
            p = src.path / f"{table}.parquet"
            if p.exists() and src.rows.get(table):
                link_file(p, w.stage / p.name)
                carried[table] = pq.ParquetFile(p).metadata.num_rows
        seconds = time.perf_counter() - t0
        man = w.commit({"reader": "detect", "source": str(src.path), "language": src.language,
                        "rows": {**carried, "mentions": found},
                        "detection": {"model": ref, "threshold": th, "sentences": n, "mentions": found,
                                      "seconds": round(seconds, 1), "sentences_per_s": round(n / max(seconds, 1e-9), 1),
                                      "source_dataset": src.dataset, "source_fingerprint": src.data_fingerprint()}})
    log.info("detect %s: %d mentions in %d sentences (%.0f sentences/s) with %s at threshold %.2f", name, found, n,
             n / max(seconds, 1e-9), ref, th)
    return {**man, "dataset_dir": str(out_dir)}
