"""Crawl state that survives a kill: append-only JSONL shards + an atomic ``state.json``.

Layout of a checkpoint directory::

    state.json                 # params of the build, completed phases, small meta (atomic rewrite)
    .lock                      # flock: one crawler per checkpoint
    <namespace>/part-000000.jsonl   # {"k": key, "v": value} one record a line, append-only
    <namespace>/part-000001.jsonl   # a new shard every ``shard_records`` records

A key is *done* exactly when its record line is complete on disk, so the fetched-set and
the results can never disagree. A batch (e.g. the 50 entities of one ``wbgetentities``
answer) is written with one ``write`` and flushed (and fsynced) before the call returns.
A process killed mid-write leaves at most a torn last line; reopening truncates it, so
those keys are fetched again and nothing is duplicated. Reading also de-duplicates by key
(first record wins) as a second guard.
"""
from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import orjson

from ..io import atomic_write_json

__all__ = ["Checkpoint", "CheckpointMismatch", "CheckpointLocked"]

STATE_VERSION = 1
_NS_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")


class CheckpointMismatch(ValueError):
    """The checkpoint was written by a build with other parameters."""


class CheckpointLocked(RuntimeError):
    """Another live process holds this checkpoint."""


def _ns_dirname(ns: str) -> str:
    if not _NS_RE.match(ns):
        raise ValueError(f"bad checkpoint namespace {ns!r} (letters, digits, _ . : - only)")
    return ns.replace(":", "__")


class _Namespace:
    def __init__(self, root: Path, name: str, shard_records: int, fsync: bool):
        self.name = name
        self.dir = root / _ns_dirname(name)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shard_records = shard_records
        self.fsync = fsync
        self.keys: set[str] = set()
        self.torn_bytes = 0
        self._fh = None
        self._shard_idx = 0
        self._shard_lines = 0
        self._load()

    def _shards(self) -> list[Path]:
        return sorted(self.dir.glob("part-*.jsonl"))

    def _load(self) -> None:
        shards = self._shards()
        for i, shard in enumerate(shards):
            last = i == len(shards) - 1
            good_end = 0
            lines = 0
            with open(shard, "rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break  # torn tail of a killed writer
                    try:
                        rec = orjson.loads(line)
                        key = rec["k"]
                    except (orjson.JSONDecodeError, KeyError, TypeError) as e:
                        if last:
                            break
                        raise ValueError(f"{shard}:{lines + 1}: corrupt checkpoint record ({e})") from e
                    self.keys.add(key)
                    good_end += len(line)
                    lines += 1
            size = shard.stat().st_size
            if size != good_end:
                if not last:
                    raise ValueError(f"{shard}: sealed checkpoint shard ends in a partial record")
                self.torn_bytes = size - good_end
                with open(shard, "r+b") as f:
                    f.truncate(good_end)
            if last:
                self._shard_idx, self._shard_lines = i, lines

    def _open(self) -> Any:
        if self._shard_lines >= self.shard_records:  # roll over (also when reopening a full shard)
            if self._fh is not None:
                self._fh.close()
                self._fh = None
            self._shard_idx += 1
            self._shard_lines = 0
        if self._fh is None:
            self._fh = open(self.dir / f"part-{self._shard_idx:06d}.jsonl", "ab")
        return self._fh

    def append(self, items: Iterable[tuple[str, Any]]) -> int:
        buf = bytearray()
        n = 0
        batch: set[str] = set()
        for key, value in items:
            key = str(key)
            if key in self.keys or key in batch:
                continue
            batch.add(key)
            buf += orjson.dumps({"k": key, "v": value}, option=orjson.OPT_SORT_KEYS)
            buf += b"\n"
            n += 1
        if not n:
            return 0
        fh = self._open()
        fh.write(bytes(buf))  # one write per batch: a kill tears at most the last line
        fh.flush()
        if self.fsync:
            os.fsync(fh.fileno())
        self._shard_lines += n
        self.keys |= batch
        return n

    def iter(self) -> Iterator[tuple[str, Any]]:
        if self._fh is not None:
            self._fh.flush()
        seen: set[str] = set()
        for shard in self._shards():
            with open(shard, "rb") as f:
                for line in f:
                    if not line.endswith(b"\n"):
                        break
                    rec = orjson.loads(line)
                    if rec["k"] in seen:
                        continue
                    seen.add(rec["k"])
                    yield rec["k"], rec["v"]

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class Checkpoint:
    """Persistent crawl state for one build.

    ``params`` identify the build (root item, languages, endpoints...); reopening a
    checkpoint with different params raises :class:`CheckpointMismatch` unless
    ``reset=True``, which starts over. Use as a context manager (releases the lock).
    """

    def __init__(self, directory: str | os.PathLike, params: Mapping[str, Any] | None = None, *,
                 shard_records: int = 5000, fsync: bool = True, reset: bool = False):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shard_records = shard_records
        self.fsync = fsync
        self._lock_fh = open(self.dir / ".lock", "a+b")
        try:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            self._lock_fh.close()
            raise CheckpointLocked(f"{self.dir}: checkpoint in use by another process") from e
        params_norm = orjson.loads(orjson.dumps(dict(params or {}), option=orjson.OPT_SORT_KEYS))
        state_path = self.dir / "state.json"
        if state_path.exists() and not reset:
            state = orjson.loads(state_path.read_bytes())
            if state.get("params") != params_norm:
                self._lock_fh.close()
                raise CheckpointMismatch(
                    f"{self.dir}: checkpoint belongs to a build with params {state.get('params')}, "
                    f"not {params_norm}; use another directory or reset=True")
            self.state = state
            self.resumed = True
        else:
            if reset:
                self._wipe()
            self.state = {"version": STATE_VERSION, "params": params_norm, "complete": [], "meta": {}}
            self._save()
            self.resumed = False
        self._ns: dict[str, _Namespace] = {}

    def _wipe(self) -> None:
        for p in sorted(self.dir.rglob("part-*.jsonl")):
            p.unlink()
        (self.dir / "state.json").unlink(missing_ok=True)

    def _save(self) -> None:
        atomic_write_json(self.dir / "state.json", self.state)

    def ns(self, name: str) -> _Namespace:
        if name not in self._ns:
            self._ns[name] = _Namespace(self.dir, name, self.shard_records, self.fsync)
        return self._ns[name]

    # -- records ---------------------------------------------------------------------------
    def is_done(self, ns: str, key: str) -> bool:
        return str(key) in self.ns(ns).keys

    def done_keys(self, ns: str) -> set[str]:
        return set(self.ns(ns).keys)

    def missing(self, ns: str, keys: Iterable[str]) -> list[str]:
        """Keys not yet recorded, in the given order, without duplicates."""
        done = self.ns(ns).keys
        out, seen = [], set()
        for k in keys:
            k = str(k)
            if k not in done and k not in seen:
                seen.add(k)
                out.append(k)
        return out

    def record(self, ns: str, items: Iterable[tuple[str, Any]] | Mapping[str, Any]) -> int:
        """Append (key, value) records durably; keys already recorded are skipped. Returns records written."""
        if isinstance(items, Mapping):
            items = items.items()
        return self.ns(ns).append(items)

    def items(self, ns: str) -> Iterator[tuple[str, Any]]:
        """All records of a namespace in write order, one per key."""
        return self.ns(ns).iter()

    def load(self, ns: str) -> dict[str, Any]:
        return dict(self.items(ns))

    # -- phases / meta ---------------------------------------------------------------------
    def is_complete(self, phase: str) -> bool:
        return phase in self.state["complete"]

    def mark_complete(self, phase: str) -> None:
        if phase not in self.state["complete"]:
            self.state["complete"].append(phase)
            self._save()

    def get_meta(self, key: str, default: Any = None) -> Any:
        return self.state["meta"].get(key, default)

    def set_meta(self, key: str, value: Any) -> None:
        self.state["meta"][key] = orjson.loads(orjson.dumps(value))
        self._save()

    def stats(self) -> dict[str, int]:
        return {name: len(n.keys) for name, n in self._ns.items()}

    def close(self) -> None:
        for n in self._ns.values():
            n.close()
        if not self._lock_fh.closed:
            fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_UN)
            self._lock_fh.close()

    def __enter__(self) -> "Checkpoint":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
