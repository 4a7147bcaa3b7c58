"""Zip archives read defensively: member paths checked, members streamed under a size and
expansion cap, damage (truncation, CRC errors) reported with the archive's path.

Caps (per member): ``max_bytes`` uncompressed bytes (default 512 MiB, env
``EVENTATLAS_ZIP_MAX_MEMBER_BYTES``) and ``max_ratio`` uncompressed/compressed (default 200, env
``EVENTATLAS_ZIP_MAX_RATIO``; members under 1 MiB are exempt from the ratio, small XML compresses
well). Both are counted on the bytes actually inflated, not on the sizes the archive claims.
Cap (whole archive): the members inflated in total may not exceed ``max_total`` (default 4 GiB, env
``EVENTATLAS_ZIP_MAX_TOTAL_BYTES``) nor ``max_ratio`` times the archive's size (so many small members,
each under the ratio floor, cannot add up to a bomb); checked on the declared sizes when the archive is
read (before a member is inflated) and on the inflated bytes as they are read.
"""
from __future__ import annotations

import contextlib
import os
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from ..errors import InputError

DEFAULT_MAX_BYTES = 512 << 20
DEFAULT_MAX_RATIO = 200.0
DEFAULT_MAX_TOTAL = 4 << 30
RATIO_FLOOR = 1 << 20  # members smaller than this are never refused for their ratio
_CHUNK = 1 << 20


def _env_num(key: str, default: float) -> float:
    v = os.environ.get(key)
    try:
        return float(v) if v else default
    except ValueError:
        raise ValueError(f"{key}={v!r} is not a number") from None


def looks_like_zip(path: Path) -> bool:
    """A ``.zip`` name or the zip magic: such a file is opened as a zip, so damage is reported as such."""
    if path.suffix.lower() == ".zip":
        return True
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def unsafe_member(name: str) -> str | None:
    """Why a member name may not be used (path traversal / absolute path), or None."""
    n = name.replace("\\", "/")
    if n.startswith("/") or (len(n) > 1 and n[1] == ":"):
        return "absolute path"
    if ".." in PurePosixPath(n).parts:
        return "'..' in path"
    return None


class SafeZip:
    """A zip opened for reading with checked names and capped, streamed members."""

    def __init__(self, path: str | os.PathLike, *, max_bytes: int | None = None, max_ratio: float | None = None,
                 max_total: int | None = None):
        self.path = Path(path)
        self.max_bytes = int(max_bytes if max_bytes is not None else _env_num("EVENTATLAS_ZIP_MAX_MEMBER_BYTES", DEFAULT_MAX_BYTES))
        self.max_ratio = float(max_ratio if max_ratio is not None else _env_num("EVENTATLAS_ZIP_MAX_RATIO", DEFAULT_MAX_RATIO))
        total = int(max_total if max_total is not None else _env_num("EVENTATLAS_ZIP_MAX_TOTAL_BYTES", DEFAULT_MAX_TOTAL))
        self.max_total = min(total, max(RATIO_FLOOR, int(self.path.stat().st_size * self.max_ratio)))
        self.inflated = 0  # bytes inflated so far, all members
        try:
            self.zip = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, EOFError, OSError) as e:
            raise InputError(self.path, "-", f"damaged zip archive ({e}); download or copy it again") from None
        self._infos = {}
        for info in self.zip.infolist():
            why = unsafe_member(info.filename)
            if why:
                self.zip.close()
                raise InputError(self.path, f"member {info.filename!r}",
                                 f"refused archive member ({why}); the archive is not a clean release")
            self._infos[info.filename] = info

    @property
    def filename(self) -> str:
        return str(self.path)

    def namelist(self) -> list[str]:
        return list(self._infos)

    def read(self, name: str) -> bytes:
        """The member's bytes, inflated in chunks; refused past the size or expansion cap."""
        with self.open(name) as f:
            return b"".join(iter(lambda: f.read(_CHUNK), b""))

    def open(self, name: str) -> "MemberStream":
        """The member as a binary stream (``read``, ``readline``) under the same caps as :meth:`read`, so a
        reader can take a large member line by line instead of holding it."""
        info = self._infos[name]
        limit = self.max_bytes
        if info.file_size > RATIO_FLOOR:
            limit = min(limit, max(RATIO_FLOOR, int(info.compress_size * self.max_ratio)))
        if info.file_size > limit:
            self._too_big(name, info.file_size, info)
        if self.inflated + info.file_size > self.max_total:
            self._total_refused(self.inflated + info.file_size)
        return MemberStream(self, name, info)

    def size(self, name: str) -> int:
        """The member's declared uncompressed size (what the archive claims; reading counts the real bytes)."""
        return self._infos[name].file_size

    def _total_refused(self, size: int) -> None:
        raise InputError(self.path, "-", f"archive expands to over {size} bytes in total from {self.path.stat().st_size} "
                         f"(cap {self.max_total}: min(EVENTATLAS_ZIP_MAX_TOTAL_BYTES, ratio {self.max_ratio:g} x archive size)); "
                         "raise EVENTATLAS_ZIP_MAX_TOTAL_BYTES / EVENTATLAS_ZIP_MAX_RATIO if the archive is trusted")

    def _too_big(self, name: str, size: int, info: zipfile.ZipInfo) -> None:
        raise InputError(self.path, f"member {name!r}",
                         f"member expands to over {size} bytes from {info.compress_size} compressed (caps: {self.max_bytes} "
                         f"bytes, ratio {self.max_ratio:g}); raise EVENTATLAS_ZIP_MAX_MEMBER_BYTES / EVENTATLAS_ZIP_MAX_RATIO "
                         "if the archive is trusted")

    def close(self) -> None:
        self.zip.close()

    def __enter__(self) -> "SafeZip":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MemberStream:
    """One zip member read in pieces: every block inflated counts against the member's and the archive's caps,
    and damage is an InputError naming archive and member."""

    def __init__(self, owner: SafeZip, name: str, info: zipfile.ZipInfo):
        self.owner, self.name, self.info, self.total = owner, name, info, 0
        with self._damage():
            self.f = owner.zip.open(info)

    @contextlib.contextmanager
    def _damage(self):
        try:
            yield
        except (zipfile.BadZipFile, zlib.error, EOFError) as e:
            raise InputError(self.owner.path, f"member {self.name!r}",
                             f"damaged zip archive ({e}); download or copy it again") from None

    def _count(self, block: bytes) -> bytes:
        z = self.owner
        self.total += len(block)
        z.inflated += len(block)
        if z.inflated > z.max_total:
            z._total_refused(z.inflated)
        if self.total > z.max_bytes or (self.total > RATIO_FLOOR and self.total > self.info.compress_size * z.max_ratio):
            z._too_big(self.name, self.total, self.info)
        return block

    def read(self, n: int = -1) -> bytes:
        with self._damage():
            return self._count(self.f.read(n))

    def readline(self, limit: int = -1) -> bytes:
        with self._damage():
            return self._count(self.f.readline(limit))

    def close(self) -> None:
        self.f.close()

    def __enter__(self) -> "MemberStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
