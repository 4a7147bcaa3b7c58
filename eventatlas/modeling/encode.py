"""Sentence and event-mention encoders on top of Hugging Face transformer models (inference).

``Encoder`` runs the shared :class:`eventatlas.modeling.MentionEncoder` (the same module the
trainers fine-tune) frozen, under ``torch.inference_mode``. The default model is the packaged
offline copy of all-MiniLM-L6-v2; any other HF id or local directory loads unchanged. The mention
representations (``sentence``, ``trigger``, ``mask``, ``mix``, ``window4``) and the trigger windowing
are defined once in :mod:`eventatlas.modeling.inputs`; ``mix`` = ``(1 - alpha) * trigger + alpha * mask``.

Speed: one fast-tokenizer call per chunk, length-sorted batches with dynamic padding (original
order restored), ``torch.inference_mode`` and bf16 autocast where :mod:`eventatlas.modeling.device` measured
it faster (``precision="auto"``). Outputs are float32.

``embed_mentions`` caches per (model fingerprint, representation, alpha, max_length, precision,
mentions content hash) under ``config.cache_dir()/embeddings``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from .. import config
from ..io import Rejects, atomic_path, atomic_write_json
from .inputs import REPRESENTATIONS, ModelInput, check_span  # noqa: F401 (re-exported)
from .mention_encoder import model_name, resolve_model  # noqa: F401 (re-exported)

log = logging.getLogger(__name__)

CACHE_FORMAT = 2  # bump when the cached layout or a representation's definition changes


class Encoder:
    """Frozen transformer encoder for sentences and event mentions (see module doc).

    ``device``: ``auto | cpu | cuda | cuda:N`` (:func:`eventatlas.modeling.device.resolve_device`);
    ``precision``: ``auto | fp32 | bf16`` (:func:`eventatlas.modeling.device.resolve_precision`).
    ``module`` reuses an already loaded (e.g. fine-tuned) :class:`MentionEncoder`.
    """

    def __init__(
        self,
        model_id: str | os.PathLike | None = None,
        device: str | None = None,
        precision: str = "auto",
        max_length: int = 256,
        batch_size: int = 64,
        *,
        progress: bool | None = None,
        num_threads: int | None = None,
        chunk_size: int = 8192,
        module: Any = None,
    ):
        from .device import ensure_device, resolve_precision, set_threads
        from .mention_encoder import MentionEncoder

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        set_threads(num_threads)  # otherwise whatever the caller set is respected
        self.device = ensure_device(device)
        self.module = module if module is not None else MentionEncoder(model_id, max_length=max_length)
        self.model_id = self.module.model_id
        self.model_path = self.module.model_path
        self.precision = resolve_precision(precision, self.device, shape=self.module.shape(), mode="inference")
        self.batch_size = batch_size
        self.progress = progress  # None: tqdm decides (off when not a terminal)
        self.chunk_size = max(chunk_size, batch_size)
        self.forward_calls = 0
        self.module.to(self.device)

    # the pieces tests and tools look at
    @property
    def tokenizer(self):
        return self.module.tokenizer

    @property
    def model(self):
        return self.module.model

    @property
    def max_length(self) -> int:
        return self.module.max_length

    @property
    def hidden_size(self) -> int:
        return self.module.hidden_size

    @property
    def mask_token_used(self) -> str | None:
        return self.module.mask.kind

    @property
    def mask_token(self) -> str | None:
        return self.module.mask.text

    @property
    def mask_id(self) -> int | None:
        return self.module.mask.id

    def dim(self, representation: str = "sentence") -> int:
        return self.module.dim(representation)

    # ----------------------------------------------------------------- public API

    def encode_sentences(self, sentences: Sequence[str], normalize: bool = False, pooling: str = "mean") -> np.ndarray:
        """One float32 vector per sentence from the last layer: ``pooling="mean"`` = attention-masked mean
        (sentence-transformers' pooling), ``"cls"`` = the first ([CLS]) position."""
        from .inputs import SENTENCE_POOLINGS

        if pooling not in SENTENCE_POOLINGS:
            raise ValueError(f"pooling must be one of {tuple(SENTENCE_POOLINGS)}, got {pooling!r}")
        rep = SENTENCE_POOLINGS[pooling]
        sentences = _as_str_list(sentences, "sentences")
        out = np.empty((len(sentences), self.hidden_size), dtype=np.float32)
        with self._bar(len(sentences), "encode sentences") as bar:
            for c0 in range(0, len(sentences), self.chunk_size):
                items = self.module.prepare_sentences(sentences[c0 : c0 + self.chunk_size])
                out[c0 : c0 + len(items)] = self.run(items, rep, bar)
        return _l2(out) if normalize else out

    def encode_mentions(
        self,
        sentences: Sequence[str],
        starts: Sequence[int],
        ends: Sequence[int],
        representation: str = "trigger",
        alpha: float = 0.5,
        normalize: bool = False,
    ) -> np.ndarray:
        """One float32 vector per mention; ``starts``/``ends`` are end-exclusive char offsets."""
        if representation not in REPRESENTATIONS:
            raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {representation!r}")
        sentences = _as_str_list(sentences, "sentences")
        starts, ends = list(starts), list(ends)
        if not (len(sentences) == len(starts) == len(ends)):
            raise ValueError(f"lengths differ: {len(sentences)} sentences, {len(starts)} starts, {len(ends)} ends")
        for i, (s, a, b) in enumerate(zip(sentences, starts, ends)):
            reason = check_span(s, a, b)
            if reason:
                raise ValueError(f"mention {i}: {reason}")
        starts, ends = [int(a) for a in starts], [int(b) for b in ends]
        if representation == "mix":
            # Two passes (original and masked sentence) combined; alpha=0 / 1 skip the unused one.
            v_word = self.encode_mentions(sentences, starts, ends, "trigger") if alpha != 1 else 0.0
            v_mask = self.encode_mentions(sentences, starts, ends, "mask") if alpha != 0 else 0.0
            out = ((1.0 - alpha) * v_word + alpha * v_mask).astype(np.float32)
            return _l2(out) if normalize else out
        out = np.empty((len(sentences), self.dim(representation)), dtype=np.float32)
        with self._bar(len(sentences), f"encode {representation}") as bar:
            for c0 in range(0, len(sentences), self.chunk_size):
                sl = slice(c0, c0 + self.chunk_size)
                items = self.prepare(sentences[sl], starts[sl], ends[sl], representation, offset=c0)
                out[c0 : c0 + len(items)] = self.run(items, representation, bar)
        return _l2(out) if normalize else out

    def prepare(
        self, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int], representation: str, offset: int = 0
    ) -> list[ModelInput]:
        """Windowed inputs with pooling targets (:func:`eventatlas.modeling.inputs.prepare_mentions`)."""
        return self.module.prepare(sentences, starts, ends, representation, offset=offset)

    def run(self, items: Sequence[ModelInput], representation: str, bar=None) -> np.ndarray:
        """Vectors of prepared inputs: length-sorted, dynamically padded batches; input order kept."""
        import torch

        from .device import autocast

        out = np.empty((len(items), self.dim(representation)), dtype=np.float32)
        order = np.argsort([-len(it.ids) for it in items], kind="stable")
        was_training = self.module.training
        self.module.eval()
        try:
            with torch.inference_mode(), autocast(self.device, self.precision):
                for b0 in range(0, len(items), self.batch_size):
                    idx = order[b0 : b0 + self.batch_size]
                    batch = {k: v.to(self.device) for k, v in self.module.collate([items[k] for k in idx], representation).items()}
                    out[idx] = self._forward(batch, representation).cpu().numpy()
                    if bar is not None:
                        bar.update(len(idx))
        finally:
            self.module.train(was_training)
        return out

    # ----------------------------------------------------------------- internals

    def _forward(self, batch, representation: str):
        """One model call; counted so tests can prove a cache hit does no encoding."""
        self.forward_calls += 1
        return self.module.encode_batch(batch, representation)

    def _bar(self, total: int, desc: str):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="sent", disable=(not self.progress) if self.progress is not None else None)


def _as_str_list(xs: Iterable[str], what: str) -> list[str]:
    xs = list(xs)
    for i, x in enumerate(xs):
        if not isinstance(x, str):
            raise TypeError(f"{what}[{i}] is {type(x).__name__}, expected str")
    return xs


def _l2(x: np.ndarray) -> np.ndarray:
    return (x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)).astype(np.float32)


# --------------------------------------------------------------------------- caching


def model_fingerprint(model_id: str | os.PathLike | None) -> dict[str, Any]:
    """Name + revision of a model without loading it.

    Local dirs: hash of every config/tokenizer file and the *content* of the weight files (two
    fine-tuned copies of one architecture have the same file sizes, so sizes alone would let their
    cached embeddings collide); weight hashes are memoised per (path, size, mtime). Hub ids: the
    resolved snapshot commit and the config hash.
    """
    path = resolve_model(model_id)
    p = Path(path)
    h = hashlib.sha256()
    if p.is_dir():
        for f in sorted(p.rglob("*")):
            if not f.is_file() or f.name.startswith("."):
                continue
            rel = f.relative_to(p).as_posix()
            if f.suffix in (".json", ".txt", ".model") or f.name in ("merges.txt", "vocab.txt"):
                h.update(rel.encode() + b"\0" + f.read_bytes() + b"\0")
            elif f.suffix in (".safetensors", ".bin", ".pt", ".h5", ".msgpack", ".onnx"):
                st = f.stat()
                h.update(f"{rel}\0{_weights_sha256(str(f.resolve()), st.st_size, st.st_mtime_ns)}\0".encode())
        revision = None
    else:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(path)
        h.update(cfg.to_json_string(use_diff=False).encode())
        revision = getattr(cfg, "_commit_hash", None)
    return {"name": model_name(model_id), "path": path, "revision": revision, "hash": h.hexdigest()[:16]}


@lru_cache(maxsize=64)
def _weights_sha256(path: str, size: int, mtime_ns: int) -> str:
    from ..io import sha256_file

    return sha256_file(path)


_MENTION_COLS = ["mention_id", "sentence", "trigger_start", "trigger_end"]


def _mentions_path(p: str | os.PathLike) -> Path:
    p = Path(p)
    return p / "mentions.parquet" if p.is_dir() else p


def mentions_content_hash(mentions_parquet: str | os.PathLike, batch_rows: int = 65536) -> tuple[str, int]:
    """Hash of the columns the encoder reads (ids, sentences, offsets), streamed; and the row count.

    Not the dataset's fingerprint (``eventatlas.data.Manifest.fingerprint``, the ingested input
    files): this one keys the embedding cache on exactly what the encoder sees.

    Content-based, so unrelated column changes (labels, extra) or a rewrite of the
    same rows do not invalidate the cache.
    """
    path = _mentions_path(mentions_parquet)
    pf = _open_mentions(path)
    h, n = hashlib.sha256(), 0
    for batch in pf.iter_batches(batch_size=batch_rows, columns=_MENTION_COLS):
        cols = [batch.column(c).to_pylist() for c in _MENTION_COLS]
        h.update("\x1e".join(f"{i}\x1f{s}\x1f{a}\x1f{b}" for i, s, a, b in zip(*cols)).encode("utf-8", "surrogatepass"))
        h.update(b"\x1d")
        n += batch.num_rows
    return h.hexdigest()[:16], n


def _open_mentions(path: Path):
    import pyarrow.parquet as pq

    from ..errors import InputError

    if not path.exists():
        raise FileNotFoundError(f"mentions parquet not found: {path}")
    try:
        pf = pq.ParquetFile(path)
    except Exception as e:
        raise InputError(path, "file", f"not a readable parquet file: {e}") from e
    missing = [c for c in _MENTION_COLS if c not in pf.schema_arrow.names]
    if missing:
        raise InputError(path, "schema", f"missing column(s) {missing} (need {_MENTION_COLS})")
    return pf


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_.")[-60:] or "model"


def embeddings_dir(cache_dir: str | os.PathLike | None = None) -> Path:
    """Where cached embeddings live: ``cache_dir`` itself when given, else ``config.cache_dir()/embeddings``."""
    return Path(cache_dir) if cache_dir is not None else config.cache_dir() / "embeddings"


def embed_mentions(
    mentions_parquet: str | os.PathLike,
    model_id: str | os.PathLike | None = None,
    representation: str = "trigger",
    cache_dir: str | os.PathLike | None = None,
    alpha: float = 0.5,
    **encoder_kw: Any,
) -> Path:
    """Embed every mention of a mentions parquet (or dataset dir); return the cached ``.npy`` path.

    Rows with an unusable span are left out (``<key>.rejects.parquet`` says why);
    ``<key>.ids.parquet`` gives the mention_id of each row of the ``.npy``. The JSON
    sidecar is written last: without it an entry counts as absent.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if representation not in REPRESENTATIONS:
        raise ValueError(f"representation must be one of {REPRESENTATIONS}, got {representation!r}")
    path = _mentions_path(mentions_parquet)
    pf = _open_mentions(path)
    fp, n_rows = mentions_content_hash(path)
    from .device import ensure_device, resolve_precision
    from .mention_encoder import model_shape

    device = ensure_device(encoder_kw.get("device"))  # auto is resolved (and refused if unavailable) before any work
    precision = resolve_precision(encoder_kw.get("precision", "auto"), device, shape=model_shape(model_id))
    key_fields = {
        "format": CACHE_FORMAT,
        "model": model_fingerprint(model_id),
        "representation": representation,
        "alpha": float(alpha) if representation == "mix" else None,
        "max_length": int(encoder_kw.get("max_length", 256)),
        "precision": precision,
        "data": fp,
    }
    digest = hashlib.sha256(json.dumps(key_fields, sort_keys=True).encode()).hexdigest()[:20]
    key = f"{_slug(Path(key_fields['model']['name']).name)}.{representation}.{digest}"
    out_dir = embeddings_dir(cache_dir)
    npy, ids_pq, side = out_dir / f"{key}.npy", out_dir / f"{key}.ids.parquet", out_dir / f"{key}.json"
    if side.exists() and npy.exists() and ids_pq.exists():
        log.info("embeddings cache hit: %s", npy)
        return npy
    log.info("embedding %d mentions of %s (%s, %s on %s)", n_rows, path, representation, precision, device)

    # one progress bar over the whole table (the encoder's per-chunk bars stay off) and a log line at
    # most every 30 s, so a Prefect run's logs (--watch, the UI) show embedding moving too
    show = encoder_kw.pop("progress", None)
    encoder = Encoder(model_id, **{**encoder_kw, "precision": precision, "device": device, "progress": False})
    rejects = Rejects(dataset=str(path.parent.name))
    out_dir.mkdir(parents=True, exist_ok=True)
    n_ok, row0 = 0, 0
    progress = EmbedProgress(n_rows, f"embed {path.parent.name} {representation}", show)
    with progress, atomic_path(npy) as tmp_npy, atomic_path(ids_pq) as tmp_ids:
        # Rows are streamed into an over-allocated memmap, then trimmed to the kept rows.
        arr = np.lib.format.open_memmap(tmp_npy, mode="w+", dtype=np.float32, shape=(n_rows, encoder.dim(representation)))
        ids_schema = pa.schema([pa.field("mention_id", pa.string(), nullable=False)])
        with pq.ParquetWriter(tmp_ids, ids_schema) as w:
            for batch in pf.iter_batches(batch_size=encoder.chunk_size, columns=_MENTION_COLS):
                mids, sents, starts, ends = (batch.column(c).to_pylist() for c in _MENTION_COLS)
                keep = []
                for k, (mid, s, a, b) in enumerate(zip(mids, sents, starts, ends)):
                    reason = "missing mention_id" if not mid else check_span(s, a, b)
                    if reason:
                        rejects.add(path.name, f"row {row0 + k} (mention_id={mid})", "bad_span", reason, raw=s)
                    else:
                        keep.append(k)
                row0 += batch.num_rows
                progress.update(batch.num_rows)
                if not keep:
                    continue
                try:
                    X = encoder.encode_mentions(
                        [sents[k] for k in keep], [starts[k] for k in keep], [ends[k] for k in keep], representation, alpha=alpha
                    )
                except ValueError as e:
                    from ..errors import InputError

                    raise InputError(path, f"rows {row0 - batch.num_rows}..{row0 - 1}", str(e)) from e
                arr[n_ok : n_ok + len(keep)] = X
                n_ok += len(keep)
                w.write_table(pa.table({"mention_id": pa.array([mids[k] for k in keep], pa.string())}, schema=ids_schema))
        arr.flush()
        del arr
        if n_ok < n_rows:
            _truncate_npy(tmp_npy, n_ok, encoder.dim(representation))
    if len(rejects):
        from ..io import write_parquet

        write_parquet(rejects.table(), out_dir / f"{key}.rejects.parquet")
    meta = {
        **key_fields,
        "key": key,
        "mentions_parquet": str(path),
        "rows": n_rows,
        "embedded": n_ok,
        "rejected": len(rejects),
        "dim": encoder.dim(representation),
        "mask_token_used": encoder.mask_token_used if representation in ("mask", "mix") else None,
        "batch_size": encoder.batch_size,
        "device": encoder.device,
    }
    atomic_write_json(side, meta)
    return npy


class EmbedProgress:
    """A tqdm bar over all rows of an embedding job (terminal only, unless ``show``) plus an INFO log
    line at most every ``every_s`` seconds and at the end (rows done, rate)."""

    def __init__(self, total: int, desc: str, show: bool | None = None, every_s: float = 30.0):
        self.total, self.desc, self.show, self.every_s = total, desc, show, every_s
        self.done, self.bar = 0, None

    def __enter__(self):
        from tqdm.auto import tqdm

        self.t0 = self.last = time.perf_counter()
        self.bar = tqdm(total=self.total, desc=self.desc, unit=" mentions", mininterval=1,
                        disable=(not self.show) if self.show is not None else None)
        return self

    def update(self, n: int) -> None:
        self.done += n
        self.bar.update(n)
        now = time.perf_counter()
        if now - self.last >= self.every_s and self.done < self.total:
            self.last = now
            log.info("%s: %d/%d mentions (%.0f/s)", self.desc, self.done, self.total, self.done / (now - self.t0))

    def __exit__(self, *exc):
        self.bar.close()
        if exc[0] is None:
            dt = time.perf_counter() - self.t0
            log.info("%s: %d mentions in %.1f s", self.desc, self.done, dt)
        return False


def _truncate_npy(path: Path, n: int, d: int) -> None:
    """Rewrite a .npy in place to its first n rows (header + data)."""
    src = np.load(path, mmap_mode="r")
    tmp = path.with_name(path.name + ".trim")
    try:
        out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n, d))
        out[:] = src[:n]
        out.flush()
        del out, src
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_embeddings(path: str | os.PathLike, mmap: bool = False) -> tuple[list[str], np.ndarray]:
    """(mention ids, float32 matrix) of a cached entry; ``path`` is the ``.npy`` returned by ``embed_mentions``."""
    import pyarrow.parquet as pq

    path = Path(path)
    if path.suffix != ".npy":
        path = path.with_name(path.name + ".npy")
    ids_path = path.with_name(path.name[: -len(".npy")] + ".ids.parquet")
    if not path.exists() or not ids_path.exists():
        raise FileNotFoundError(f"embeddings not found: need {path} and {ids_path}")
    X = np.load(path, mmap_mode="r" if mmap else None)
    ids = pq.read_table(ids_path, columns=["mention_id"]).column("mention_id").to_pylist()
    if len(ids) != X.shape[0]:
        raise ValueError(f"{path}: {X.shape[0]} rows but {ids_path.name} has {len(ids)} ids")
    return ids, X
