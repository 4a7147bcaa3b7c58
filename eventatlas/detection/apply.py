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

Same-pass vectors (``vectors=True``): the detection pass also keeps each detected mention's ``trigger`` vector,
pooled from the hidden states the detector's encoder computed anyway (:func:`eventatlas.modeling.mention_encoder.
pooled` over :func:`eventatlas.modeling.inputs.prepare_mentions`' targets), so ``discover`` need not run the
encoder again. They equal what :func:`eventatlas.modeling.encode.embed_mentions` gives with the detector's
encoder (its default ``max_length``): a mention whose sentence the detector truncated, or that embedding would
window, is encoded again on its own, as embedding would. Each part keeps them beside its mentions
(``trigger.npy`` / ``trigger.ids.parquet``, :func:`eventatlas.modeling.encode.load_embeddings`' layout);
:func:`assemble` concatenates them into ``vectors_dir`` with a ``trigger.json`` saying who made them.
"""
from __future__ import annotations

import contextlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ..io import stable_id

log = logging.getLogger(__name__)

EMBED_MAX_LENGTH = 256  # embed_mentions' default max_length: the same-pass vectors equal what it gives
VECTORS = "trigger"  # the representation, and the vector files' stem (load_embeddings(<dir>/trigger.npy))


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
                loaded: tuple[Any, dict[str, Any], str] | None = None, vectors: bool = False) -> dict[str, Any]:
    """Detect mentions in shard ``shard`` of ``shards`` of ``dataset_dir``'s sentences (documents split by
    :func:`shard_of`) and write them to ``part_dir`` (a dataset of one ``mentions`` table, written atomically);
    returns the part's summary: ``path``, ``sentences``, ``mentions``, ``seconds``, ``model``, ``threshold``
    (and ``vectors``, ``precision`` with ``vectors``: the same-pass trigger vectors written beside them)."""
    from tqdm.auto import tqdm

    from ..data.manifest import Manifest
    from ..io import DatasetWriter
    from .decode import spans
    from .model import scored_batches
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
    with DatasetWriter(part_dir, f"{name}-part{shard}", tables=["mentions"]) as w, contextlib.ExitStack() as stack:
        vec = _Vectors(model, w.stage, device, precision, batch_size) if vectors else None
        if vec is not None:
            stack.callback(vec.release)  # its open files, whatever happens (the staging directory goes on failure)
        for part in sentence_batches(src.path, chunk):
            if shards > 1:
                part = [p for p in part if shard_of(p[0], shards) == shard]
                if not part:
                    continue
            texts = [t for _, _, t, _ in part]
            items = encode(model.encoder.tokenizer, texts, model.encoder.max_length)
            got: list[list[tuple]] = [[] for _ in part]
            for rows, pi, pt, h in scored_batches(model, items, device=device, batch_size=batch_size,
                                                  precision=precision, hidden=vec is not None):
                for r, i in enumerate(rows):
                    k = len(items[i].first)
                    got[i] = spans(pi[r, :k], pt[r, :k], items[i].spans, th, types)
                if vec is not None:
                    vec.pool(h, rows, items, texts, got)
                bar.update(len(rows))
            for i, (doc, k, text, split) in enumerate(part):
                for a, b, typ, sc, ts in got[i]:
                    mid = stable_id(name, doc, k, a, b)
                    w.write("mentions", {
                        "mention_id": mid, "dataset": name, "doc_id": doc, "sent_idx": k,
                        "sentence": text, "trigger_start": a, "trigger_end": b, "trigger": text[a:b], "split": split,
                        "labels": [], "extra": json.dumps({"predicted_by": ref, "score": round(sc, 4),
                                                           "predicted_type": typ, "type_score": round(ts, 4)})})
                    found += 1
            if vec is not None:
                vec.write_chunk(part, texts, got, name)
            n += len(part)
        bar.close()
        if vec is not None:
            vec.close()
        w.commit({"reader": "detect-part", "shard": shard, "shards": shards})
    seconds = time.perf_counter() - t0
    log.info("%s: %d mentions in %d sentences (%.0f sentences/s)", what, found, n, n / max(seconds, 1e-9))
    out = {"path": str(part_dir), "shard": shard, "sentences": n, "mentions": found, "seconds": round(seconds, 1),
           "model": ref, "threshold": th}
    if vec is not None:
        out.update(vectors=vec.rows, precision=precision, dim=vec.dim, recomputed=vec.recomputed)
    return out


class _Vectors:
    """A part's same-pass trigger vectors: pooled from a batch's hidden states where the detector saw the
    whole sentence exactly as embedding would, else (a longer sentence) encoded again on its own; streamed to
    a raw file in the chunk's mention order, then written as ``trigger.npy`` / ``trigger.ids.parquet``."""

    def __init__(self, model: Any, stage: Path, device: str, precision: str, batch_size: int):
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.enc, self.stage, self.device, self.precision, self.batch_size = (model.encoder, Path(stage), device,
                                                                              precision, batch_size)
        self.dim = int(self.enc.dim(VECTORS))
        self.raw = open(self.stage / f".{VECTORS}.f32", "wb")  # noqa: SIM115 - closed in close()
        self.schema = pa.schema([pa.field("mention_id", pa.string(), nullable=False)])
        self.ids = pq.ParquetWriter(self.stage / f"{VECTORS}.ids.parquet", self.schema)
        self.rows, self.recomputed, self.again = 0, 0, None
        self.got: dict[tuple[int, int], np.ndarray] = {}  # (sentence row, mention number) -> vector, this chunk

    def pool(self, h: Any, rows: list[int], items: list[Any], texts: list[str], got: list[list[tuple]]) -> None:
        """The batch's mentions' vectors from its hidden states ``h`` (rows in ``rows`` order)."""
        import torch

        from ..modeling.mention_encoder import pooled

        cand = [(r, i, j) for r, i in enumerate(rows) for j in range(len(got[i]))
                if len(items[i].ids) < self.enc.max_length and len(items[i].ids) <= EMBED_MAX_LENGTH]
        # (others: cut by the detector or windowed by embedding, so encoded again in write_chunk)
        if not cand:
            return
        prepared = self.enc.prepare([texts[i] for _, i, _ in cand], [got[i][j][0] for _, i, j in cand],
                                    [got[i][j][1] for _, i, j in cand], VECTORS)  # one tokenizer call per batch
        keys, sel, targets = [], [], []
        for (r, i, j), p in zip(cand, prepared):
            if p.ids == items[i].ids:  # the very input the detector ran: pool its hidden states
                keys.append((i, j))
                sel.append(r)
                targets.append(p.target)
        if not keys:
            return
        W = torch.zeros((len(keys), h.shape[1]), dtype=torch.float32, device=h.device)
        for m, t in enumerate(targets):
            W[m, t] = 1.0
        with torch.inference_mode():
            V = pooled(h[torch.as_tensor(sel, device=h.device)], W).cpu().numpy()
        for key, v in zip(keys, V):
            self.got[key] = v

    def _again(self, sentences: list[str], starts: list[int], ends: list[int]) -> np.ndarray:
        """Vectors of mentions the pass could not pool, as embedding computes them (its own encoder settings)."""
        import torch

        from ..modeling.mention_encoder import MentionEncoder

        if self.again is None:
            self.again = MentionEncoder(self.enc.model_path, max_length=EMBED_MAX_LENGTH).to(self.device).eval()
        m = self.again
        items = m.prepare(sentences, starts, ends, VECTORS)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        autocast = torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16,
                                  enabled=self.precision == "bf16")
        for lo in range(0, len(items), self.batch_size):
            b = {k: v.to(self.device) for k, v in m.collate(items[lo: lo + self.batch_size], VECTORS).items()}
            with torch.inference_mode(), autocast:
                out[lo: lo + len(b["input_ids"])] = m.encode_batch(b, VECTORS).float().cpu().numpy()
        return out

    def write_chunk(self, part: list[tuple], texts: list[str], got: list[list[tuple]], name: str) -> None:
        """The chunk's vectors in its mentions' order (the order they were written in)."""
        import pyarrow as pa

        late = [(i, j) for i, ms in enumerate(got) for j in range(len(ms)) if (i, j) not in self.got]
        if late:
            V = self._again([texts[i] for i, _ in late], [got[i][j][0] for i, j in late],
                            [got[i][j][1] for i, j in late])
            self.got.update(zip(late, V))
            self.recomputed += len(late)
        keys = [(i, j) for i, ms in enumerate(got) for j in range(len(ms))]
        if keys:
            np.stack([self.got[k] for k in keys]).astype(np.float32).tofile(self.raw)
            ids = [stable_id(name, part[i][0], part[i][1], got[i][j][0], got[i][j][1]) for i, j in keys]
            self.ids.write_table(pa.table({"mention_id": pa.array(ids, pa.string())}, schema=self.schema))
            self.rows += len(keys)
        self.got.clear()

    def release(self) -> None:
        if not self.raw.closed:
            self.raw.close()
            self.ids.close()

    def close(self) -> None:
        """The raw rows as ``trigger.npy`` (the raw file removed)."""
        self.release()
        raw = self.stage / f".{VECTORS}.f32"
        with open(self.stage / f"{VECTORS}.npy", "wb") as f:
            _npy_header(f, self.rows, self.dim)
            with open(raw, "rb") as r:
                shutil.copyfileobj(r, f, 1 << 24)
        raw.unlink()


def _npy_header(f: Any, rows: int, dim: int) -> None:
    """A float32 (rows, dim) ``.npy`` header; the rows follow as raw bytes. Files copied with read/write, not
    memory maps: a map's touched pages would count in the process's RSS at corpus scale."""
    np.lib.format.write_array_header_1_0(f, {"descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                                             "fortran_order": False, "shape": (rows, dim)})


def _npy_data(path: Path) -> Any:
    """An open ``.npy`` file positioned at its data, with its shape."""
    f = open(path, "rb")  # noqa: SIM115 - the caller closes it
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, fortran, dtype = read(f)
    if dtype != np.float32 or fortran or len(shape) != 2:
        f.close()
        raise ValueError(f"{path}: not a float32 matrix")
    return f, shape


def assemble(dataset_dir: str | Path, parts: list[dict[str, Any]], out_dir: str | Path, *, name: str,
             seconds: float | None = None, vectors_dir: str | Path | None = None) -> dict[str, Any]:
    """Write dataset ``name`` to ``out_dir`` from the shards' parts (:func:`detect_part`, in shard order): their
    mentions, the source's text tables (hard links: no copy of a large corpus) and the manifest with the
    ``detection`` summary. The single writer of the new dataset: nothing of it exists until it is complete.
    ``vectors_dir``: the parts' same-pass vectors go there (:func:`assemble_vectors`), before the dataset."""
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
    vectors = assemble_vectors(parts, vectors_dir, name=name) if vectors_dir is not None else None
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
                                      "source_dataset": src.dataset, "source_fingerprint": src.data_fingerprint(),
                                      **({"vectors": vectors} if vectors else {})}})
    log.info("detect %s: %d mentions in %d sentences (%.0f sentences/s) with %s at threshold %.2f, %d shard(s)",
             name, found, n, n / max(seconds, 1e-9), parts[0]["model"], parts[0]["threshold"], len(parts))
    return {**man, "dataset_dir": str(out_dir)}


def assemble_vectors(parts: list[dict[str, Any]], vectors_dir: str | Path, *, name: str) -> dict[str, Any]:
    """The parts' same-pass vectors as one ``trigger.npy`` / ``trigger.ids.parquet`` in ``vectors_dir`` (rows in
    the dataset's mention order), then ``trigger.json`` (written last: without it they count as absent);
    returns what that says."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ..io import atomic_path, atomic_write_json, write_parquet

    if any("vectors" not in p for p in parts):
        raise ValueError(f"vectors for {name} wanted, but a part was detected without them")
    d = Path(vectors_dir)
    rows, dim = sum(p["vectors"] for p in parts), parts[0]["dim"]
    with atomic_path(d / f"{VECTORS}.npy") as tmp, open(tmp, "wb") as out:
        _npy_header(out, rows, dim)
        for p in parts:
            f, shape = _npy_data(Path(p["path"]) / f"{VECTORS}.npy")
            with f:
                if shape != (p["vectors"], dim):
                    raise ValueError(f"part {p['shard']} of {name}: vectors {shape}, expected {(p['vectors'], dim)}")
                shutil.copyfileobj(f, out, 1 << 24)
    write_parquet(pa.concat_tables([pq.read_table(Path(p["path"]) / f"{VECTORS}.ids.parquet") for p in parts]),
                  d / f"{VECTORS}.ids.parquet")
    meta = {"by": f"detector {parts[0]['model']} (same pass)", "model": parts[0]["model"], "dataset": name,
            "representation": VECTORS, "max_length": EMBED_MAX_LENGTH, "precision": parts[0]["precision"],
            "rows": rows, "dim": dim, "recomputed": sum(p["recomputed"] for p in parts)}
    atomic_write_json(d / f"{VECTORS}.json", meta)
    log.info("same-pass vectors of %s: %d x %d (%d encoded again on their own) -> %s", name, rows, dim,
             meta["recomputed"], d)
    return {**meta, "path": str(d / f"{VECTORS}.npy")}


def detect(dataset_dir: str | Path, ref: str, out_dir: str | Path, *, name: str, device: str = "cpu",
           precision: str = "fp32", threshold: float | None = None, batch_size: int = 64, chunk: int = 4096,
           progress: bool | None = None, loaded: tuple[Any, dict[str, Any], str] | None = None,
           vectors_dir: str | Path | None = None) -> dict[str, Any]:
    """Detect mentions in every sentence of ``dataset_dir`` with the saved detector ``ref`` (or ``loaded``, what
    :func:`load_detector` returns) and write dataset ``name`` to ``out_dir``, in this process (one shard);
    returns its manifest (with ``detection``: the model, threshold and counts). ``vectors_dir``: also the
    same-pass trigger vectors, there."""
    import tempfile

    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-parts-", dir=out_dir.parent))
    try:
        t0 = time.perf_counter()
        part = detect_part(dataset_dir, ref, scratch / "part-0", name=name, device=device, precision=precision,
                           threshold=threshold, batch_size=batch_size, chunk=chunk, progress=progress, loaded=loaded,
                           vectors=vectors_dir is not None)
        return assemble(dataset_dir, [part], out_dir, name=name, seconds=time.perf_counter() - t0,
                        vectors_dir=vectors_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
