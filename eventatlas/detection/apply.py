"""Apply a saved detector (``run:<id>``) to a dataset's sentences and write the detected mentions as a new
dataset: the source's documents (and sentences table, when it has one) carried over by hard links, and a
``mentions`` table whose rows carry no gold label (``labels`` empty: every downstream method reads them as
unlabelled mentions, and a scorer that needs gold refuses the dataset by its kinds) and, in ``extra``, the
detector's word: ``predicted_by`` (the run), ``score`` (trigger probability), ``predicted_type`` and
``type_score``.

It streams: sentences are read in chunks of ``chunk`` rows, each chunk encoded once and scored in
length-sorted batches, and the mentions go to the dataset writer as they come, so memory stays bounded by
the chunk whatever the corpus size. It shards: :func:`detect_part` does the documents of one shard (a stable
hash of the document id) into a part, on whatever worker a runner gives it, and :func:`assemble` writes the
dataset from the parts, in one process.
"""
from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Iterator

from ..io import stable_id

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


def shard_of(doc_id: str, shards: int) -> int:
    """The shard a document's sentences go to: a stable hash of its id (the same on every worker and machine),
    so a document's sentences stay together and the shards split the corpus evenly."""
    return int(stable_id(doc_id, length=8), 16) % shards if shards > 1 else 0


def detect_part(dataset_dir: str | Path, ref: str, part_dir: str | Path, *, name: str, shard: int = 0, shards: int = 1,
                device: str = "cpu", precision: str = "fp32", threshold: float | None = None, batch_size: int = 64,
                chunk: int = 4096, progress: bool | None = None,
                loaded: tuple[Any, dict[str, Any], str] | None = None) -> dict[str, Any]:
    """Detect mentions in shard ``shard`` of ``shards`` of ``dataset_dir``'s sentences (documents split by
    :func:`shard_of`) and write them to ``part_dir`` (a dataset of one ``mentions`` table, written atomically);
    returns the part's summary: ``path``, ``sentences``, ``mentions``, ``seconds``, ``model``, ``threshold``."""
    from tqdm.auto import tqdm

    from ..data.manifest import Manifest
    from ..io import DatasetWriter
    from .decode import spans
    from .model import word_scores
    from .words import encode

    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}: expected 0 <= shard < shards")
    src = Manifest.read(dataset_dir)
    model, inf, ref = loaded or load_detector(ref, device)
    th = float(inf["threshold"] if threshold is None else threshold)
    types = list(inf["types"])
    total = src.rows.get("sentences") if shards == 1 else None
    t0, n, found = time.perf_counter(), 0, 0
    what = f"detect {name}" + (f" [{shard + 1}/{shards}]" if shards > 1 else "")
    bar = tqdm(total=total or None, desc=what, unit="sent", disable=(not progress) if progress is not None else None)
    with DatasetWriter(part_dir, f"{name}-part{shard}", tables=["mentions"]) as w:
        for part in sentence_batches(src.path, chunk):
            if shards > 1:
                part = [p for p in part if shard_of(p[0], shards) == shard]
                if not part:
                    continue
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
        w.commit({"reader": "detect-part", "shard": shard, "shards": shards})
    seconds = time.perf_counter() - t0
    log.info("%s: %d mentions in %d sentences (%.0f sentences/s)", what, found, n, n / max(seconds, 1e-9))
    return {"path": str(part_dir), "shard": shard, "sentences": n, "mentions": found, "seconds": round(seconds, 1),
            "model": ref, "threshold": th}


def assemble(dataset_dir: str | Path, parts: list[dict[str, Any]], out_dir: str | Path, *, name: str,
             seconds: float | None = None) -> dict[str, Any]:
    """Write dataset ``name`` to ``out_dir`` from the shards' parts (:func:`detect_part`, in shard order): their
    mentions, the source's text tables (hard links: no copy of a large corpus) and the manifest with the
    ``detection`` summary. The single writer of the new dataset: nothing of it exists until it is complete."""
    import pyarrow.parquet as pq

    from ..data.manifest import Manifest
    from ..io import DatasetWriter, link_file

    src = Manifest.read(dataset_dir)
    parts = sorted(parts, key=lambda p: p["shard"])
    if len({(p["model"], p["threshold"]) for p in parts}) != 1:
        raise ValueError(f"the parts of {name} disagree on the model or threshold: "
                         f"{sorted({(p['model'], p['threshold']) for p in parts})}")
    n, found = sum(p["sentences"] for p in parts), 0
    seconds = float(seconds if seconds is not None else sum(p["seconds"] for p in parts))
    with DatasetWriter(out_dir, name, tables=["mentions"]) as w:
        for p in parts:
            f = Path(p["path"]) / "mentions.parquet"
            if f.exists():
                for b in pq.ParquetFile(f).iter_batches(batch_size=8192):
                    for row in b.to_pylist():
                        w.write("mentions", row)
                        found += 1
        carried = {}
        for table in ("documents", "sentences", "event_types"):
            p_ = src.path / f"{table}.parquet"
            if p_.exists() and src.rows.get(table):
                link_file(p_, w.stage / p_.name)
                carried[table] = pq.ParquetFile(p_).metadata.num_rows
        man = w.commit({"reader": "detect", "source": str(src.path), "language": src.language,
                        "rows": {**carried, "mentions": found},
                        "detection": {"model": parts[0]["model"], "threshold": parts[0]["threshold"], "sentences": n,
                                      "mentions": found, "shards": len(parts), "seconds": round(seconds, 1),
                                      "sentences_per_s": round(n / max(seconds, 1e-9), 1),
                                      "source_dataset": src.dataset, "source_fingerprint": src.data_fingerprint()}})
    log.info("detect %s: %d mentions in %d sentences (%.0f sentences/s) with %s at threshold %.2f, %d shard(s)",
             name, found, n, n / max(seconds, 1e-9), parts[0]["model"], parts[0]["threshold"], len(parts))
    return {**man, "dataset_dir": str(out_dir)}


def detect(dataset_dir: str | Path, ref: str, out_dir: str | Path, *, name: str, device: str = "cpu",
           precision: str = "fp32", threshold: float | None = None, batch_size: int = 64, chunk: int = 4096,
           progress: bool | None = None, loaded: tuple[Any, dict[str, Any], str] | None = None) -> dict[str, Any]:
    """Detect mentions in every sentence of ``dataset_dir`` with the saved detector ``ref`` (or ``loaded``, what
    :func:`load_detector` returns) and write dataset ``name`` to ``out_dir``, in this process (one shard);
    returns its manifest (with ``detection``: the model, threshold and counts)."""
    import shutil
    import tempfile

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-parts-", dir=out_dir.parent))
    try:
        t0 = time.perf_counter()
        part = detect_part(dataset_dir, ref, scratch / "part-0", name=name, device=device, precision=precision,
                           threshold=threshold, batch_size=batch_size, chunk=chunk, progress=progress, loaded=loaded)
        return assemble(dataset_dir, [part], out_dir, name=name, seconds=time.perf_counter() - t0)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
