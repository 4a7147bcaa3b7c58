"""Trained models as artifacts: what a run saves, how a saved model is named, how it is loaded.

A trained run leaves ``runs/<run_id>/model/``::

    model_card.json    the typed card (:class:`ModelCard`): method, run id, trained-on dataset, data
                       fingerprint, config, code version, seed, precision, headline metrics, parts, size
    README.md          the card for people, Hugging Face style (:mod:`eventatlas.modeling.card`): base
                       model, 3 headline numbers, a transformers snippet that reproduces the mention vectors
    config.json, model.safetensors, tokenizer, modules.json, 1_Pooling/ ...
                       the chosen encoder (``root_encoder``: :func:`card.chosen_encoder`) hard-linked at the
                       top, so ``AutoModel.from_pretrained(<model dir>)`` and ``SentenceTransformer(<model dir>)``
                       load the directory itself (eventatlas reads the encoder folders)
    encoder/           the fine-tuned transformer: ``save_pretrained`` (safetensors) + tokenizer, plus
                       the sentence-transformers files (mean pooling), so ``transformers.AutoModel``
                       and ``sentence_transformers.SentenceTransformer`` load it unchanged
    encoders/<name>/   further encoders of the same run (e.g. one per trained representation), same
                       layout; ``run:<run_id>@<name>`` names one of them
    heads/<name>.safetensors + heads/<name>.json
                       every other trained part (attention scorer, metric-learning head, Siamese /
                       meta network, cross-encoder head, prototypes), tensors + a small typed config

A method collects its parts with :class:`ModelWriter` (in a temporary directory); the runner
completes the card from the run record, links the chosen encoder's files to the top and writes the
README inside the partial directory, then renames it into place in one step, so a killed run never
leaves a half-written ``model/``.

A saved model is named wherever an encoder is accepted by ``run:<ref>`` (:func:`resolve_ref`):
``run:<run_id>``, a unique prefix of a run id, or ``run:<method>:<dataset>:latest``, each optionally
followed by ``@<encoder name>``; a directory holding a ``model_card.json`` works too.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field

MODEL_DIRNAME = "model"
CARD_NAME = "model_card.json"
ENCODER_DIRNAME = "encoder"
HEADS_DIRNAME = "heads"
REF_PREFIX = "run:"
FORMAT_VERSION = 1
_HEADLINE_MAX = 24  # metric cells kept on a card (the warehouse holds all of them)


class ModelError(ValueError):
    """A saved model that cannot be found, loaded or used; the message is one line."""


class HeadSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: str  # e.g. "attention_scorer", "siamese", "cross_encoder_head", "prototypes"
    file: str  # relative to the model directory
    config: dict[str, Any] = Field(default_factory=dict)


class ModelCard(BaseModel):
    """What ``model_card.json`` holds. Parts are relative paths inside the model directory."""

    model_config = ConfigDict(extra="forbid")
    format_version: int = FORMAT_VERSION
    method: str
    run_id: Optional[str] = None
    trained_on: Optional[str] = None
    data_fingerprint: Optional[str] = None
    config: dict[str, Any] = Field(default_factory=dict)
    code_version: Optional[str] = None
    seed: Optional[int] = None
    precision: Optional[str] = None
    base_model: Optional[str] = None
    representation: Optional[str] = None  # the mention representation the encoder is used with
    epoch: Optional[int] = None  # the chosen epoch, where the method selects one
    encoder: Optional[str] = None  # the default encoder's name (a key of ``encoders``)
    encoders: dict[str, str] = Field(default_factory=dict)  # name -> directory inside the model
    heads: dict[str, HeadSpec] = Field(default_factory=dict)
    inference: dict[str, Any] = Field(default_factory=dict)  # what applying the model needs beyond the parts
    metrics: dict[str, float] = Field(default_factory=dict)  # headline cells of the run
    headline: list[dict[str, Any]] = Field(default_factory=list)  # the README's 3 numbers (card.headline)
    root_encoder: Optional[str] = None  # the encoder whose files are also at the top of the model directory
    size_bytes: int = 0  # every file of the model but this card
    created_at: Optional[str] = None


def _dir_size(d: Path) -> int:
    """Bytes of a model's parts (the card itself, which records this number, left out); a file hard-linked
    twice (the top-level encoder) counts once."""
    seen: dict[tuple[int, int], int] = {}
    for p in d.rglob("*"):
        if p.is_file() and not p.is_symlink() and p.name != CARD_NAME:
            st = p.stat()
            seen[(st.st_dev, st.st_ino)] = st.st_size
    return sum(seen.values())


def _write_json(path: Path, obj: Any) -> None:
    from ..io import atomic_write_json

    atomic_write_json(path, obj)


# ----------------------------------------------------------------------------- writing
class ModelWriter:
    """Collects one run's trained parts in ``<run_dir>/model.partial/``; :func:`finalize` (the runner)
    completes the card and renames the directory to ``model/``.

    >>> w = ModelWriter(run_dir, method="frame_dml")
    >>> w.encoder(mention_encoder)                       # HF + sentence-transformers layout
    >>> w.head("proxies", {"weight": W}, kind="arcface", config={"margin": 0.5})
    >>> w.close(representation="trigger", epoch=3)       # the method's part of the card
    """

    def __init__(self, run_dir: str | os.PathLike, *, method: str):
        self.run_dir = Path(run_dir)
        self.dir = self.run_dir / (MODEL_DIRNAME + ".partial")
        self.card = ModelCard(method=method)
        # under a data-parallel launch only the main process (rank 0) writes; the others hold
        # the same weights and would race on the same files
        self.active = int(os.environ.get("RANK", "0")) == 0
        if self.active:
            if self.dir.exists():  # a previous attempt of this run died while saving
                shutil.rmtree(self.dir)
            self.dir.mkdir(parents=True)

    def encoder(self, module: Any, *, name: str = "encoder", default: bool | None = None,
                base_model: str | None = None, pooling: str = "mean") -> Path:
        """Save a :class:`eventatlas.modeling.MentionEncoder` (or anything with ``.model`` and
        ``.tokenizer``): safetensors weights, tokenizer, sentence-transformers files. The first encoder
        saved is the default one (``run:<id>``) unless ``default`` says otherwise. ``pooling`` (mean |
        cls) is what sentence-transformers applies when it loads the directory."""
        if base_model is None and hasattr(module, "model_id"):  # model_id None: the packaged default
            from .card import base_model_name

            base_model = base_model_name(module.model_id)
        d = self._encoder_slot(name, default, pooling, base_model)
        if not self.active:
            return d
        model = getattr(module, "model", module)
        model.save_pretrained(d, safe_serialization=True)
        module.tokenizer.save_pretrained(d)
        write_sentence_transformers_files(d, int(model.config.hidden_size), int(getattr(module, "max_length", 256)),
                                          pooling)
        return d

    def encoder_files(self, src: str | os.PathLike, *, max_length: int, name: str = "encoder",
                      default: bool | None = None, base_model: str | None = None, pooling: str = "mean") -> Path:
        """Add an encoder the run already wrote as a Hugging Face directory (``save_pretrained``): its files
        are hard-linked (copied where the file system cannot link), not loaded and saved again, so a run
        that keeps its own copy spends no second copy of the weights on disk."""
        src = Path(src)
        if not (src / "config.json").is_file():
            raise ModelError(f"{src}: not a Hugging Face model directory (no config.json)")
        d = self._encoder_slot(name, default, pooling, base_model)
        if not self.active:
            return d
        from ..io import link_tree

        link_tree(src, d)
        hidden = int(json.loads((src / "config.json").read_text(encoding="utf-8"))["hidden_size"])
        write_sentence_transformers_files(d, hidden, int(max_length), pooling)
        return d

    def _encoder_slot(self, name: str, default: bool | None, pooling: str, base_model: Any) -> Path:
        """Register encoder ``name`` on the card (the first one is the default) and make its directory."""
        _check_part_name(name)
        if pooling not in ("mean", "cls"):
            raise ModelError(f"encoder pooling {pooling!r}: mean or cls")
        rel = ENCODER_DIRNAME if name == "encoder" else f"{ENCODER_DIRNAME}s/{name}"
        self.card.encoders[name] = rel
        if default or (default is None and self.card.encoder is None):
            self.card.encoder = name
        if base_model is not None:
            self.card.base_model = str(base_model)
        d = self.dir / rel
        if self.active:
            d.mkdir(parents=True, exist_ok=True)
        return d

    def head(self, name: str, tensors: Mapping[str, Any], *, kind: str, config: Mapping[str, Any] | None = None) -> Path:
        """Save one trained part: a state dict (or any name -> tensor/array map) as safetensors, its
        config beside it."""
        import numpy as np
        import torch
        from safetensors.torch import save_file

        _check_part_name(name)
        cfg = dict(config or {})
        d = self.dir / HEADS_DIRNAME
        path = d / f"{name}.safetensors"
        self.card.heads[name] = HeadSpec(kind=kind, file=f"{HEADS_DIRNAME}/{name}.safetensors", config=cfg)
        if not self.active:
            return path
        flat = {}
        for k, v in tensors.items():
            t = torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
            flat[k] = t.detach().to("cpu").contiguous().clone()  # shared storage is refused by safetensors
        d.mkdir(parents=True, exist_ok=True)
        save_file(flat, str(path))
        _write_json(d / f"{name}.json", {"kind": kind, "config": cfg})
        return path

    def close(self, **card_fields: Any) -> Path:
        """The method's part of the card (representation, epoch, inference, ...); written now so the
        partial directory is self-describing, completed by :func:`finalize`."""
        # validated here, not at load: an unknown field or a wrong type fails the run that wrote it
        self.card = ModelCard.model_validate({**self.card.model_dump(), **card_fields})
        if self.active:
            _write_json(self.dir / CARD_NAME, self.card.model_dump(mode="json"))
        return self.dir


def _check_part_name(name: str) -> None:
    if not name or not all(c.isalnum() or c in "_-." for c in name) or name.startswith("."):
        raise ModelError(f"model part name {name!r}: letters, digits, '_', '-', '.' only")


def write_sentence_transformers_files(d: Path, hidden: int, max_seq_length: int, pooling: str = "mean") -> None:
    """The three small files that make a Hugging Face directory a sentence-transformers model with
    mean pooling (eventatlas's ``sentence`` representation) or [CLS] pooling. Written directly rather than through
    ``SentenceTransformer.save`` so saving does not load the weights a second time; the layout is
    checked by loading with sentence-transformers in the tests. The module types are the long-standing
    ``sentence_transformers.models.*`` names, which every sentence-transformers release from 3.0 reads
    (6.x maps them to its new module paths)."""
    _write_json(d / "modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
    _write_json(d / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    (d / "1_Pooling").mkdir(exist_ok=True)
    _write_json(d / "1_Pooling" / "config.json", {
        "word_embedding_dimension": hidden, "pooling_mode_cls_token": pooling == "cls",
        "pooling_mode_mean_tokens": pooling == "mean",
        "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
        "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": False, "include_prompt": True})


def headline_metrics(rows: list[Mapping[str, Any]]) -> dict[str, float]:
    """The card's metric cells: test rows where there are any (else all), labelled
    ``task/split/representation/clustering/variant/metric``, first ``_HEADLINE_MAX`` in row order."""
    test = [r for r in rows if r.get("split") == "test"]
    out: dict[str, float] = {}
    for r in test or rows:
        if r.get("value") is None:
            continue
        key = "/".join(str(r.get(k)) for k in ("task", "split", "representation", "clustering", "variant", "metric")
                       if r.get(k) not in (None, ""))
        out.setdefault(key, float(r["value"]))
        if len(out) >= _HEADLINE_MAX:
            break
    return out


def finalize(run_dir: str | os.PathLike, run: Mapping[str, Any], metrics: list[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Complete the card of ``<run_dir>/model.partial`` from the finished run record, hard-link the chosen
    encoder's files to its top, write the README card, and rename it to ``model/`` (replacing an earlier one
    of the same run). Returns the record's ``model`` entry (path, size_bytes, run_id, ...) or None when the
    method saved nothing."""
    from ..io import atomic_write_text
    from .card import card_markdown, chosen_encoder, headline

    run_dir = Path(run_dir)
    part = run_dir / (MODEL_DIRNAME + ".partial")
    if not (part / CARD_NAME).is_file():
        if part.exists():
            shutil.rmtree(part)
        return None
    card = ModelCard.model_validate(json.loads((part / CARD_NAME).read_text(encoding="utf-8")))
    fps = run.get("data_fingerprints") or {}
    trained_on = next(iter(fps), None) if len(fps) == 1 else (run.get("params") or {}).get("dataset")
    params = run.get("params") or {}
    card = card.model_copy(update={
        "run_id": run["run_id"], "trained_on": trained_on, "data_fingerprint": fps.get(trained_on),
        "config": params.get("config", params), "code_version": run.get("code_version"), "seed": run.get("seed"),
        "precision": card.precision or params.get("precision") or (params.get("config") or {}).get("precision"),
        "metrics": headline_metrics(list(metrics)), "headline": headline(list(metrics)),
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")})
    root = chosen_encoder(card)
    card = card.model_copy(update={"root_encoder": root, "base_model": _base_model(card, params, part, root)})
    if root is not None:
        _link_to_top(part / card.encoders[root], part)
    atomic_write_text(part / "README.md", card_markdown(card, part))
    card = card.model_copy(update={"size_bytes": _dir_size(part)})  # every file but the card, README included
    _write_json(part / CARD_NAME, card.model_dump(mode="json"))
    final = run_dir / MODEL_DIRNAME
    if final.exists():
        old = run_dir / (MODEL_DIRNAME + ".old")
        shutil.rmtree(old, ignore_errors=True)
        final.rename(old)
        part.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        part.rename(final)  # one rename: a kill leaves model.partial (retried) or model/, never half
    return model_entry(card, final)


_TOP_RESERVED = frozenset({CARD_NAME, "README.md", HEADS_DIRNAME, ENCODER_DIRNAME, ENCODER_DIRNAME + "s"})


def _link_to_top(src: Path, top: Path) -> None:
    """Every file of encoder directory ``src`` hard-linked at the same relative path under the model directory
    ``top`` (:func:`eventatlas.io.link_file`: a copy only where the file system cannot link); names the model
    directory itself uses (the cards, ``heads/``, ``encoder(s)/``) are left out. Re-linking replaces."""
    from ..io import link_file

    for f in sorted(src.rglob("*")):
        rel = f.relative_to(src)
        if not f.is_file() or rel.parts[0] in _TOP_RESERVED:
            continue
        to = top / rel
        to.parent.mkdir(parents=True, exist_ok=True)
        if to.exists() or to.is_symlink():
            to.unlink()
        link_file(f, to)


def _base_model(card: ModelCard, params: Mapping[str, Any], part: Path, root: str | None) -> str | None:
    """The base model the run fine-tuned: the card's (the method said), else the run config's ``model_id``
    (unset: the packaged all-MiniLM-L6-v2), else the saved encoder's ``_name_or_path``; None only for a run
    that records none of them."""
    from .card import base_model_name

    if card.base_model:
        return base_model_name(card.base_model)
    cfg = params.get("config", params)
    if isinstance(cfg, Mapping) and "model_id" in cfg:
        return base_model_name(cfg["model_id"])
    for name in ([root] if root else []) + list(card.encoders):
        try:
            cfg_json = json.loads((part / card.encoders[name] / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if cfg_json.get("_name_or_path"):
            return base_model_name(cfg_json["_name_or_path"])
    return None


def model_entry(card: ModelCard, path: Path) -> dict[str, Any]:
    """The run record's / warehouse ``models`` row for a saved model."""
    return {"run_id": card.run_id, "method": card.method, "trained_on": card.trained_on, "path": str(path),
            "size_bytes": card.size_bytes, "parts": sorted(list(card.encoders) + list(card.heads)),
            "representation": card.representation, "precision": card.precision, "base_model": card.base_model,
            "code_version": card.code_version, "created_at": card.created_at}


def card_markdown(card: ModelCard, model_dir: Path | None = None) -> str:
    """The README card (:func:`eventatlas.modeling.card.card_markdown`)."""
    from .card import card_markdown as render

    return render(card, model_dir)


# ----------------------------------------------------------------------------- naming and loading
@dataclass(frozen=True)
class SavedModel:
    """A saved model on disk: its card and where its parts are."""

    path: Path
    card: ModelCard
    selected: Optional[str] = None  # the encoder named by ``@name`` in the reference

    @property
    def ref(self) -> str:
        at = f"@{self.selected}" if self.selected and self.selected != self.card.encoder else ""
        return f"{REF_PREFIX}{self.card.run_id}{at}"

    @property
    def encoder_path(self) -> Path:
        name = self.selected or self.card.encoder
        if not name:
            raise ModelError(f"{self.ref}: the {self.card.method} model saved no encoder (parts: "
                             f"{', '.join(self.card.heads) or 'none'})")
        if name not in self.card.encoders:
            raise ModelError(f"{self.ref}: no encoder {name!r} (saved: {', '.join(self.card.encoders)})")
        return self.path / self.card.encoders[name]

    def head(self, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """(tensors, config) of one saved head."""
        from safetensors.torch import load_file

        spec = self.card.heads.get(name)
        if spec is None:
            raise ModelError(f"{self.ref}: no head {name!r} (saved: {', '.join(self.card.heads) or 'none'})")
        return load_file(str(self.path / spec.file)), dict(spec.config)


def is_ref(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(REF_PREFIX)


def read_model(path: str | os.PathLike) -> SavedModel:
    """The saved model in directory ``path`` (refused in one line when it is not one, or when it or a part its
    card names lies outside its directory: :func:`_check_inside`)."""
    p = Path(os.path.abspath(path))
    card_path = p / CARD_NAME
    try:
        raw = json.loads(card_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ModelError(f"{p}: not a saved model (no {CARD_NAME})") from None
    except (OSError, ValueError) as e:
        raise ModelError(f"{card_path}: unreadable model card ({e})") from None
    if not isinstance(raw, dict) or raw.get("format_version", FORMAT_VERSION) > FORMAT_VERSION:
        raise ModelError(f"{card_path}: model card format {raw.get('format_version') if isinstance(raw, dict) else '?'} "
                         f"is newer than this eventatlas reads ({FORMAT_VERSION})")
    try:
        card = ModelCard.model_validate(raw)
    except Exception as e:  # pydantic's message is multi-line: keep the first error
        first = str(e).splitlines()
        raise ModelError(f"{card_path}: invalid model card ({' '.join(first[:3])})") from None
    _check_inside(p, card, card_path)
    return SavedModel(p, card)


def _check_inside(model_dir: Path, card: ModelCard, card_path: Path) -> None:
    """A saved model loads only its own files: the model directory may not be a symlink out of the directory
    holding it (the run's), and every part its card names (encoders, heads) must be a relative path that stays
    inside the model directory once ``..`` and symlinks are resolved, the files of an encoder directory
    included. A card or a folder that points elsewhere is refused in one line: loading it would read weights
    (and tokenizer or code files) that are not this run's."""
    base = model_dir.resolve()
    if not base.is_relative_to(model_dir.parent.resolve()):
        raise ModelError(f"{model_dir}: the model directory is a link to {base}, outside its run directory "
                         f"{model_dir.parent}; a saved model loads only files inside its run directory")
    parts = [(f"encoder {n!r}", rel) for n, rel in card.encoders.items()]
    parts += [(f"head {n!r}", h.file) for n, h in card.heads.items()]
    if card.root_encoder is not None:  # the top-level copy of an encoder: the files beside the card
        parts += [(f"top-level file {q.name!r}", q.name) for q in sorted(model_dir.iterdir())
                  if q.name not in _TOP_RESERVED and q.name not in card.encoders.values()]
    for what, rel in parts:
        if Path(rel).is_absolute() or rel.startswith("~"):
            raise ModelError(f"{card_path}: {what} is the absolute path {rel!r}; a part of a saved model is a "
                             "path inside its model directory")
        target = model_dir / rel
        for q in [target, *_tree(target)]:
            real = q.resolve()
            if not real.is_relative_to(base):
                how = "leaves it through '..'" if ".." in Path(rel).parts else f"is a link to {real}"
                raise ModelError(f"{card_path}: {what} ({q}) {how}, outside the model directory {model_dir}; a "
                                 "saved model loads only files inside its model directory")


def _tree(d: Path) -> list[Path]:
    """Every entry under directory ``d`` (links listed, not followed); ``[]`` for a file or a missing path."""
    if not d.is_dir() or d.is_symlink():
        return []
    out = []
    for root, dirs, files in os.walk(d):
        out += [Path(root) / n for n in dirs + files]
    return out


def saved_models(runs_dir: str | os.PathLike | None = None) -> list[SavedModel]:
    """Every saved model under the runs directory, newest first (unreadable cards skipped)."""
    from .. import config

    root = Path(runs_dir) if runs_dir is not None else config.runs_dir()
    out = []
    for card in root.glob(f"*/{MODEL_DIRNAME}/{CARD_NAME}"):
        try:
            out.append(read_model(card.parent))
        except ModelError:
            continue
    return sorted(out, key=lambda m: (m.card.created_at or "", m.card.run_id or ""), reverse=True)


def resolve_ref(ref: str | os.PathLike, runs_dir: str | os.PathLike | None = None) -> SavedModel:
    """``run:<run_id>`` | ``run:<unique prefix>`` | ``run:<method>:<dataset>:latest`` | a model directory
    -> the saved model; anything absent, ambiguous or unreadable is refused in one line."""
    from .. import config

    s = str(ref)
    if not s.startswith(REF_PREFIX):
        p = Path(s)
        if (p / CARD_NAME).is_file():
            return read_model(p)
        if (p / MODEL_DIRNAME / CARD_NAME).is_file():
            return read_model(p / MODEL_DIRNAME)
        raise ModelError(f"{s}: not a saved model (use run:<run id>, or a directory with {CARD_NAME})")
    key = s[len(REF_PREFIX):].strip()
    key, _, enc = key.partition("@")
    found = _find(s, key, Path(runs_dir) if runs_dir is not None else config.runs_dir())
    if enc:
        found = SavedModel(found.path, found.card, enc)
        found.encoder_path  # noqa: B018  (refuses an unknown encoder name now, in one line)
    return found


_RUN_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=+-]*")


def bad_run_ref(key: str) -> str | None:
    """Why ``key`` cannot be a run id or the prefix of one, or None. A run id is a checked name plus a
    timestamp and a random suffix (so it may exceed a name's length): letters, digits, ``.``, ``_``, ``-``,
    ``=``, ``+``, no ``..``; never a path or a wildcard pattern (``*``, ``?``, ``[``)."""
    if "/" in key or "\\" in key:
        return "holds a path separator"
    if ".." in key:
        return "holds '..'"
    if _RUN_REF.fullmatch(key):
        return None
    bad = sorted({c for c in key if not re.fullmatch(r"[A-Za-z0-9._=+-]", c)})
    return f"holds {''.join(bad)!r}" if bad else "does not start with a letter or digit"


def _find(s: str, key: str, root: Path) -> SavedModel:
    forms = "run:<run id> | run:<unique prefix of one> | run:<method>:<dataset>:latest"
    if not key:
        raise ModelError(f"{s}: empty run reference ({forms})")
    if key.count(":") == 2 and key.endswith(":latest"):
        method, dataset, _ = key.split(":")
        for part in (method, dataset):
            if bad_run_ref(part):
                raise ModelError(f"{s}: {part!r} {bad_run_ref(part)}; not a method or dataset name ({forms})")
        found = [m for m in saved_models(root) if m.card.method == method and m.card.trained_on == dataset]
        if not found:
            raise ModelError(f"{s}: no saved {method} model trained on {dataset!r} under {root} "
                             "(`eventatlas models` lists the saved models)")
        return found[0]
    if bad_run_ref(key):  # a reference is a name, never a path or a pattern: run:*7 matches nothing
        raise ModelError(f"{s}: {key!r} {bad_run_ref(key)}; a run reference is a run id or its prefix, without "
                         f"path separators, '..' or wildcards ({forms})")
    exact = root / key / MODEL_DIRNAME
    if (exact / CARD_NAME).is_file():
        return read_model(exact)
    if (root / key).is_dir():
        raise ModelError(f"{s}: run {key} saved no model (it may predate saved models, have been run with "
                         "save_model=false, or be of a method that trains nothing)")
    cands = sorted(p.parent for p in root.glob(f"{key}*/{MODEL_DIRNAME}/{CARD_NAME}"))
    if not cands:
        raise ModelError(f"{s}: no saved model of a run {key!r} under {root} (`eventatlas models` lists them)")
    if len(cands) > 1:
        names = ", ".join(c.parent.name for c in cands[:4]) + (" ..." if len(cands) > 4 else "")
        raise ModelError(f"{s}: ambiguous, {len(cands)} runs start with {key!r} ({names})")
    return read_model(cands[0])
