"""Polite, resumable downloads with checksum verification.

``download(url, dest, sha256=...)`` streams into ``dest.part`` with a descriptive User-Agent,
resumes an interrupted transfer with an HTTP Range request, retries transient failures
(connection errors, 429, 5xx) with exponential backoff, verifies the sha256 and only then
renames the file into place (atomic). Without a checksum it refuses to run unless
``insecure_skip_checksum=True`` — a hash is never invented.

``fetch_dataset(name)`` downloads the files pinned in ``datasets/registry.yaml``. Registry
checksums marked ``unverified`` count as missing: pass ``sha256=`` (one hex digest for a one-file
dataset, else ``{file name: hex}``; CLI ``--sha256 NAME=HEX`` per file or ``--sha256-file SUMS`` with
``sha256sum`` lines) or opt out with ``--insecure-skip-checksum``. Every checksum is checked before
the first byte is fetched. ``fetch(name)`` also returns the sums it computed, so a download without
verification tells the user what to pin next time.

A checksum refusal (:class:`ChecksumError`, :class:`ChecksumRequired`) is final; only
:class:`DownloadFailed` with ``transient=True`` (connection errors, 429, 5xx after the local retries)
is worth retrying at a higher level.

CLI: ``python -m eventatlas.data.download maven [--dest DIR] [--sha256 FILE=HEX ...] [--sha256-file SUMS]
[--insecure-skip-checksum]``.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from tqdm import tqdm

from .. import config
from ..io import sha256_file
from .registry import dataset_entry

USER_AGENT = "eventatlas/0.1 (research dataset downloader; +https://github.com/eventatlas)"
RETRY_STATUS = {429, 500, 502, 503, 504}


class ChecksumError(RuntimeError):
    """The downloaded bytes do not have the pinned sha256."""


class ChecksumRequired(RuntimeError):
    """No verified checksum is known and the caller did not opt out."""


class DownloadFailed(RuntimeError):
    """The transfer failed after the local retries; ``transient`` says whether trying later may help."""

    def __init__(self, msg: str, *, transient: bool):
        super().__init__(msg)
        self.transient = transient


# seconds between tries of a download that failed transiently after the local retries: the ingest task's
# Prefect retries and the CLI's direct path (`retry_transient`) both wait these
TRANSIENT_RETRY_DELAYS = (10, 30, 90)

log = logging.getLogger(__name__)


def retry_transient(fn, delays=TRANSIENT_RETRY_DELAYS, warn=None):
    """``fn()``, tried again after each of ``delays`` seconds while it raises a transient
    :class:`DownloadFailed` (what the ingest task's Prefect retries do, without Prefect); anything
    else, or the last failure, is raised."""
    left = list(delays)
    while True:
        try:
            return fn()
        except DownloadFailed as e:
            if not e.transient or not left:
                raise
            (warn or log.warning)(f"download failed ({e}); trying again in {left[0]} s")
            time.sleep(left.pop(0))

_SUM_LINE = re.compile(r"^([0-9a-fA-F]{64}) [ *](.+)$")            # sha256sum: "HEX  name" / "HEX *name"
_BSD_LINE = re.compile(r"^SHA256 \((.+)\) = ([0-9a-fA-F]{64})$")   # sha256sum --tag / BSD sha256


def parse_sha256_file(path: str | os.PathLike) -> dict[str, str]:
    """``{file name: hex}`` from a checksum file as ``sha256sum`` writes it (``HEX  name``, ``HEX *name``
    or the ``--tag`` form ``SHA256 (name) = HEX``); blank and ``#`` lines are skipped, a directory part
    of the name is dropped. A malformed line raises ``ValueError`` naming file and line."""
    out: dict[str, str] = {}
    p = Path(path)
    for n, raw in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _SUM_LINE.match(line)
        name, hexsum = (m.group(2), m.group(1)) if m else (None, None)
        if not m and (b := _BSD_LINE.match(line)):
            name, hexsum = b.group(1), b.group(2)
        if name is None:
            raise ValueError(f"{p}: line {n}: expected 'SHA256  FILENAME' (sha256sum format), got {line[:80]!r}")
        name = name.replace("\\", "/").rsplit("/", 1)[-1]
        if name in out and out[name] != hexsum.lower():
            raise ValueError(f"{p}: line {n}: second, different checksum for {name}")
        out[name] = hexsum.lower()
    if not out:
        raise ValueError(f"{p}: no checksum lines")
    return out


def parse_sha256_args(values: list[str] | tuple[str, ...] | None, sha256_file: str | os.PathLike | None = None
                      ) -> str | dict[str, str] | None:
    """CLI checksums to ``fetch_dataset``'s ``sha256``: one bare ``HEX`` stays a string (one-file
    datasets); ``NAME=HEX`` entries and a checksum file become ``{name: hex}`` (entries win)."""
    values = [v.strip() for v in values or [] if v and v.strip()]
    bare = [v for v in values if "=" not in v]
    if bare and (len(values) > 1 or sha256_file):
        raise ValueError("a bare --sha256 HEX is for a one-file dataset; give NAME=HEX per file or --sha256-file")
    if bare:
        return bare[0]
    sums: dict[str, str] = dict(parse_sha256_file(sha256_file)) if sha256_file else {}
    for v in values:
        name, hexsum = v.split("=", 1)
        sums[name.strip()] = hexsum.strip()
    return sums or None


def sha256sum_lines(sums: dict[str, str]) -> str:
    """``sums`` in the format ``sha256sum`` writes (and ``--sha256-file`` reads)."""
    return "\n".join(f"{h}  {n}" for n, h in sums.items())


def _usable(sha: str | None) -> str | None:
    if not sha or str(sha).strip().lower() in ("unverified", "none", "null", "unknown"):
        return None
    sha = str(sha).strip().lower()
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ValueError(f"not a sha256 hex digest: {sha!r}")
    return sha


def download(url: str, dest: str | os.PathLike, *, sha256: str | None = None, insecure_skip_checksum: bool = False,
             retries: int = 5, backoff: float = 1.0, timeout: float = 60.0, user_agent: str = USER_AGENT,
             progress: bool | None = None, client: httpx.Client | None = None) -> Path:
    """Download ``url`` to ``dest`` (resumable, verified, atomic). Returns ``dest``."""
    dest = Path(dest)
    sha = _usable(sha256)
    if sha is None and not insecure_skip_checksum:
        raise ChecksumRequired(f"no verified sha256 for {url}; pass sha256=... (CLI --sha256) or insecure_skip_checksum=True "
                               "(CLI --insecure-skip-checksum) to download without verification")
    if dest.exists() and (sha is None or sha256_file(dest) == sha):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    own = client is None
    client = client or httpx.Client(follow_redirects=True, timeout=timeout, headers={"User-Agent": user_agent})
    try:
        attempt = 0
        while True:
            have = part.stat().st_size if part.exists() else 0
            headers = {"Range": f"bytes={have}-"} if have else {}
            try:
                with client.stream("GET", url, headers=headers) as r:
                    if r.status_code == 416 and have:
                        break  # server has nothing after what we hold: the part file is complete
                    if r.status_code in RETRY_STATUS:
                        raise httpx.HTTPStatusError(f"HTTP {r.status_code}", request=r.request, response=r)
                    r.raise_for_status()
                    if have and r.status_code != 206:
                        have = 0  # server ignored the Range header: start over
                    total = r.headers.get("Content-Length")
                    total = int(total) + have if total and total.isdigit() else None
                    with open(part, "ab" if have else "wb") as f, tqdm(total=total, initial=have, unit="B", unit_scale=True,
                                                                      desc=dest.name, disable=(None if progress is None else not progress), leave=False) as bar:
                        for chunk in r.iter_bytes(1 << 16):
                            f.write(chunk)
                            bar.update(len(chunk))
                    if total is not None and part.stat().st_size < total:
                        raise httpx.ReadError(f"connection closed after {part.stat().st_size} of {total} bytes")
                break
            except (httpx.TransportError, httpx.HTTPStatusError) as e:
                retryable = isinstance(e, httpx.TransportError) or e.response.status_code in RETRY_STATUS
                attempt += 1
                if not retryable or attempt > retries:
                    raise DownloadFailed(f"download of {url} failed after {attempt} attempt(s): {e}",
                                         transient=retryable) from e
                time.sleep(backoff * 2 ** (attempt - 1))
    finally:
        if own:
            client.close()
    if sha is not None:
        got = sha256_file(part)
        if got != sha:
            part.unlink(missing_ok=True)  # corrupt or different file: never keep it for a resume
            raise ChecksumError(f"checksum mismatch for {url}: expected sha256 {sha}, got {got}; the file was discarded")
    os.replace(part, dest)
    return dest


@dataclass
class Fetched:
    """What :func:`fetch` downloaded: the directory, each file's sha256 as computed on disk, and
    which files were verified against a pinned or given checksum."""

    dir: Path
    sums: dict[str, str] = field(default_factory=dict)
    verified: dict[str, bool] = field(default_factory=dict)


def _expected_sums(name: str, files: dict, sha256: str | dict | None, insecure: bool) -> dict[str, str | None]:
    """The checksum each file must have, settled before any request (a refusal costs no transfer)."""
    if isinstance(sha256, str) and _usable(sha256) is not None and len(files) > 1:
        raise ChecksumRequired(f"{name} has {len(files)} files ({', '.join(files)}): one --sha256 cannot cover them; "
                               "give NAME=HEX per file or --sha256-file SUMS (sha256sum format)")
    if isinstance(sha256, dict):
        unknown = sorted(set(sha256) - set(files))
        if unknown:
            raise ChecksumRequired(f"checksums given for files that {name} does not have: {', '.join(unknown)}; "
                                   f"its files: {', '.join(files)}")
    want: dict[str, str | None] = {}
    for fname, spec in files.items():
        given = sha256.get(fname) if isinstance(sha256, dict) else sha256
        want[fname] = _usable(given) or _usable(spec.get("sha256"))
    missing = [f for f, h in want.items() if h is None]
    if missing and not insecure:
        raise ChecksumRequired(f"no verified sha256 for {', '.join(missing)} of {name}; pass --sha256-file SUMS "
                               "(sha256sum format) or --sha256 NAME=HEX per file, or --insecure-skip-checksum")
    return want


def check_sums(name: str, sha256: str | dict | None = None, insecure_skip_checksum: bool = False,
               registry: dict | None = None) -> dict[str, str | None]:
    """The checksum each file of ``name``'s download must have ({file: hex or None when skipped});
    raises ``ValueError`` (no download) or :class:`ChecksumRequired` without touching the network."""
    entry = dataset_entry(name, registry).get("download")
    if not entry or not entry.get("files"):
        raise ValueError(f"dataset {name!r} has no download in datasets/registry.yaml; give a local path instead")
    return _expected_sums(name, entry["files"], sha256, insecure_skip_checksum)


def fetch(name: str, dest_dir: str | os.PathLike | None = None, *, sha256: str | dict | None = None,
          insecure_skip_checksum: bool = False, registry: dict | None = None, **kw) -> Fetched:
    """Download every file pinned for ``name`` in the registry into ``dest_dir``
    (default ``<data_root>/downloads/<name>``). Unverified files' sums are logged in
    ``sha256sum`` format (warning) so they can be pinned."""
    want = check_sums(name, sha256, insecure_skip_checksum, registry)
    files = dataset_entry(name, registry)["download"]["files"]
    dest = Path(dest_dir) if dest_dir else config.data_root() / "downloads" / name
    out = Fetched(dest)
    for fname, spec in files.items():
        path = download(spec["url"], dest / fname, sha256=want[fname], insecure_skip_checksum=insecure_skip_checksum, **kw)
        out.sums[fname] = want[fname] or sha256_file(path)
        out.verified[fname] = want[fname] is not None
    unverified = {f: h for f, h in out.sums.items() if not out.verified[f]}
    if unverified:
        log.warning("downloaded %s without checksum verification; computed sums (save as a file, pass "
                    "--sha256-file):\n%s", name, sha256sum_lines(unverified))
    return out


def fetch_dataset(name: str, dest_dir: str | os.PathLike | None = None, **kw) -> Path:
    """:func:`fetch`, returning only the directory."""
    return fetch(name, dest_dir, **kw).dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eventatlas.data.download", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="dataset name in datasets/registry.yaml (e.g. maven)")
    ap.add_argument("--dest", help="target directory (default <data_root>/downloads/<name>)")
    ap.add_argument("--sha256", action="append", default=[], metavar="[FILE=]HEX", help="expected sha256 (per file: FILE=HEX)")
    ap.add_argument("--sha256-file", metavar="SUMS", help="checksum file, 'HEX  FILENAME' lines as sha256sum writes")
    ap.add_argument("--insecure-skip-checksum", action="store_true", help="download without checksum verification")
    a = ap.parse_args(argv)
    try:
        sums = parse_sha256_args(a.sha256, a.sha256_file)
        out = fetch(a.name, a.dest, sha256=sums, insecure_skip_checksum=a.insecure_skip_checksum)
    except (ChecksumRequired, ChecksumError, ValueError, OSError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out.dir)
    if not all(out.verified.values()):
        print("not verified; computed sums (save them and pass --sha256-file next time):")
        print(sha256sum_lines(out.sums))
    return 0


if __name__ == "__main__":
    sys.exit(main())
