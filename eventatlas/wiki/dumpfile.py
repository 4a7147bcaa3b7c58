"""Reading Wikidata JSON dumps: the decompressed byte stream (parallel decompressors when installed),
lines and entities with errors that name file and line, and shards (bz2 multistream offsets, byte
ranges of a plain dump) with the blocks of whole lines a shard yields. The event scan that runs over
them is :mod:`eventatlas.wiki.wikidata`.
"""
from __future__ import annotations

import bz2
import gzip
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import orjson

from eventatlas.errors import InputError
from eventatlas.io import Rejects


class DumpError(InputError):
    """:class:`InputError` that survives pickling (raised inside worker processes)."""

    def __reduce__(self):
        return (DumpError, (self.source, self.location, str(self).split(": ", 2)[-1]))


# --- reading dumps ------------------------------------------------------------------------------
def _stream_error(path: Path, e: Exception, lineno: int) -> InputError:
    return DumpError(path, f"after line {lineno}", f"corrupt or truncated compressed stream ({type(e).__name__}: {e})")


def open_dump(path: str | os.PathLike) -> io.BufferedReader:
    """Binary stream of the decompressed dump; parallel decompressors via subprocess when installed."""
    path = Path(path)
    name = path.name
    if name.endswith(".gz"):
        if shutil.which("pigz"):
            return _subprocess_reader(["pigz", "-dc", str(path)], path)
        return gzip.open(path, "rb")  # type: ignore[return-value]
    if name.endswith(".bz2"):
        for tool in ("lbzip2", "pbzip2"):
            if shutil.which(tool):
                return _subprocess_reader([tool, "-dc", str(path)], path)
        return bz2.open(path, "rb")  # type: ignore[return-value]
    return open(path, "rb")


class _ProcReader(io.RawIOBase):
    def __init__(self, cmd, path):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.path = path

    def readable(self):
        return True

    def readinto(self, b):
        n = self.proc.stdout.readinto(b)
        if n == 0:
            rc = self.proc.wait()
            if rc != 0:
                raise OSError(f"{self.path}: decompressor failed ({rc}): {self.proc.stderr.read().decode()[:300]}")
        return n

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        super().close()


def _subprocess_reader(cmd, path) -> io.BufferedReader:
    return io.BufferedReader(_ProcReader(cmd, path), buffer_size=1 << 20)


def iter_dump_lines(path: str | os.PathLike) -> Iterator[bytes]:
    """Lines of a (compressed) dump; a damaged stream raises :class:`InputError` naming file and line."""
    path = Path(path)
    n = 0
    f = open_dump(path)
    try:
        while True:
            try:
                line = f.readline()
            except (EOFError, OSError, ValueError) as e:
                raise _stream_error(path, e, n) from e
            if not line:
                break
            n += 1
            yield line
    finally:
        f.close()


def iter_entities(path: str | os.PathLike, *, rejects: Rejects | None = None) -> Iterator[dict]:
    """Every entity of a dump, parsed (slow path; the protocol's ``iter_entities``)."""
    for i, line in enumerate(iter_dump_lines(path), 1):
        s = line.strip().rstrip(b",")
        if not s or s in (b"[", b"]"):
            continue
        try:
            yield orjson.loads(s)
        except orjson.JSONDecodeError as e:
            if rejects is None:
                raise DumpError(path, f"line {i}", f"bad JSON: {e}") from e
            rejects.add(str(path), f"line {i}", "bad_json", str(e), s[:200].decode("utf-8", "replace"))


# --- shards -------------------------------------------------------------------------------------
_BZ2_MAGIC = re.compile(rb"BZh[1-9]\x31\x41\x59\x26\x53\x59")


@dataclass(frozen=True)
class Shard:
    path: str
    start: int  # byte offset in the file (compressed offset for bz2)
    end: int
    kind: str  # "plain" | "bz2-multistream" | "whole"
    index: int = 0
    streams: tuple[int, ...] = ()  # bz2: every stream offset of the file, then the file size


def bz2_stream_offsets(path: str | os.PathLike, chunk: int = 1 << 22) -> list[int]:
    """Byte offsets of the bz2 streams concatenated in a file (stream headers are byte aligned)."""
    offs = []
    with open(path, "rb") as f:
        pos, tail = 0, b""
        while True:
            buf = f.read(chunk)
            if not buf:
                break
            data = tail + buf
            base = pos - len(tail)
            for m in _BZ2_MAGIC.finditer(data):
                o = base + m.start()
                if not offs or o > offs[-1]:
                    offs.append(o)
            tail = data[-9:]
            pos += len(buf)
    return offs


def _verify_stream_starts(path, offs: list[int]) -> list[int]:
    """Keep only offsets where a bz2 stream really starts (the magic can occur inside compressed data)."""
    good = []
    with open(path, "rb") as f:
        for o in offs:
            f.seek(o)
            try:
                bz2.BZ2Decompressor().decompress(f.read(64 * 1024), max_length=1)
                good.append(o)
            except OSError:
                continue
    return good


def plan_shards(path: str | os.PathLike, n: int) -> list[Shard]:
    """Split a dump into up to ``n`` independently scannable shards."""
    path = Path(path)
    size = path.stat().st_size
    name = path.name
    if name.endswith(".gz") or (n <= 1 and name.endswith(".bz2")):
        return [Shard(str(path), 0, size, "whole")]
    n = max(1, n)
    if name.endswith(".bz2"):
        offs = _verify_stream_starts(path, bz2_stream_offsets(path))
        if len(offs) < 2:
            return [Shard(str(path), 0, size, "whole")]
        cuts = sorted({offs[min(len(offs) - 1, round(i * len(offs) / n))] for i in range(n)})
        bounds = cuts + [size]
        allo = tuple(offs) + (size,)
        return [Shard(str(path), bounds[i], bounds[i + 1], "bz2-multistream", i, allo) for i in range(len(cuts))]
    step = max(1, size // n)
    bounds = [min(size, i * step) for i in range(n)] + [size]
    return [Shard(str(path), bounds[i], bounds[i + 1], "plain", i) for i in range(n) if bounds[i] < bounds[i + 1]]


def _iter_stream(f, start: int, end: int) -> Iterator[bytes]:
    """Decompress the single bz2 stream stored in bytes [start, end) of ``f``."""
    f.seek(start)
    dec = bz2.BZ2Decompressor()
    remaining = end - start
    while remaining > 0 and not dec.eof:
        raw = f.read(min(1 << 20, remaining))
        if not raw:
            break
        remaining -= len(raw)
        out = dec.decompress(raw)
        if out:
            yield out
    if not dec.eof:
        raise EOFError(f"bz2 stream at byte {start} ended before its end-of-stream marker")


BLOCK = 8 << 20  # bytes of decompressed JSON handled per block


def iter_dump_blocks(path: str | os.PathLike, block: int = BLOCK) -> Iterator[bytes]:
    """Blocks of whole lines of a (compressed) dump; a damaged stream raises :class:`InputError`."""
    path = Path(path)
    f = open_dump(path)
    carry = b""
    nread = 0
    try:
        while True:
            try:
                buf = f.read(block)
            except (EOFError, OSError, ValueError) as e:
                raise DumpError(path, f"decompressed byte {nread}", f"corrupt or truncated compressed stream ({type(e).__name__}: {e})") from e
            if not buf:
                break
            nread += len(buf)
            data = carry + buf
            cut = data.rfind(b"\n") + 1
            if cut:
                yield data[:cut]
                carry = data[cut:]
            else:
                carry = data
        if carry:
            yield carry
    finally:
        f.close()


def _lines_to_blocks(chunks: Iterator[bytes], block: int = BLOCK) -> Iterator[bytes]:
    buf = []
    size = 0
    for c in chunks:
        buf.append(c)
        size += len(c)
        if size >= block:
            yield b"".join(buf)
            buf, size = [], 0
    if buf:
        yield b"".join(buf)


def shard_blocks(shard: Shard) -> Iterator[bytes]:
    """Blocks of the lines that *start* inside the shard (the last one completed from the following data)."""
    path = Path(shard.path)
    if shard.kind == "whole":
        yield from iter_dump_blocks(path)
        return
    with open(path, "rb") as f:
        if shard.kind == "plain":
            pos = shard.start
            if shard.start > 0:
                f.seek(shard.start - 1)
                f.readline()  # finish the line that began before us (owned by the previous shard)
                pos = f.tell()
            while pos < shard.end:
                buf = f.read(min(BLOCK, shard.end - pos))
                if not buf:
                    break
                pos += len(buf)
                if not buf.endswith(b"\n"):
                    buf += f.readline()  # complete the last line (may run past our end)
                    pos = f.tell()
                yield buf
            return
        yield from _lines_to_blocks(_bz2_shard_pieces(f, shard))


def _bz2_shard_pieces(f, shard: Shard) -> Iterator[bytes]:
    """Whole-line pieces of a multi-stream bz2 shard."""
    offs = list(shard.streams)
    mine = [i for i, o in enumerate(offs[:-1]) if shard.start <= o < shard.end]
    need_skip = False
    if mine and mine[0] > 0:  # our first line is whole only if the previous stream ended a line
        prev = b"".join(_iter_stream(f, offs[mine[0] - 1], offs[mine[0]]))
        need_skip = not prev.endswith(b"\n")
    buf = b""
    for i in mine:
        for out in _iter_stream(f, offs[i], offs[i + 1]):
            buf += out
            cut = buf.rfind(b"\n") + 1
            if not cut:
                continue
            piece, buf = buf[:cut], buf[cut:]
            if need_skip:
                piece = piece[piece.find(b"\n") + 1:]
                need_skip = False
            if piece:
                yield piece
    if buf and not need_skip:
        j = mine[-1] + 1 if mine else len(offs) - 1
        while j < len(offs) - 1:  # finish the line straddling into the next shard's streams
            rest = b"".join(_iter_stream(f, offs[j], offs[j + 1]))
            nl = rest.find(b"\n")
            if nl >= 0:
                buf += rest[: nl + 1]
                break
            buf += rest
            j += 1
        yield buf
