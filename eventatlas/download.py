"""Polite, resumable downloads with checksum verification.

``download(url, dest, sha256=...)`` streams into ``dest.part`` with a descriptive User-Agent,
resumes an interrupted transfer with an HTTP Range request, retries transient failures
(connection errors, 429, 5xx) with exponential backoff, verifies the sha256 and only then
renames the file into place (atomic). Without a checksum it refuses to run unless
``insecure_skip_checksum=True`` — a hash is never invented.

``fetch_dataset(name)`` downloads the files pinned in ``datasets/registry.yaml``. Registry
checksums marked ``unverified`` count as missing: pass ``sha256=`` (or ``--sha256``) or opt out
with ``--insecure-skip-checksum``.

CLI: ``python -m eventatlas.download maven [--dest DIR] [--sha256 FILE=HEX ...] [--insecure-skip-checksum]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import httpx
from tqdm import tqdm

from . import config
from .io import sha256_file
from .registry import dataset_entry

USER_AGENT = "eventatlas/0.1 (research dataset downloader; +https://github.com/eventatlas)"
RETRY_STATUS = {429, 500, 502, 503, 504}


class ChecksumError(RuntimeError):
    """The downloaded bytes do not have the pinned sha256."""


class ChecksumRequired(RuntimeError):
    """No verified checksum is known and the caller did not opt out."""


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
                    raise RuntimeError(f"download of {url} failed after {attempt} attempt(s): {e}") from e
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


def fetch_dataset(name: str, dest_dir: str | os.PathLike | None = None, *, sha256: str | dict | None = None,
                  insecure_skip_checksum: bool = False, registry: dict | None = None, **kw) -> Path:
    """Download every file pinned for ``name`` in the registry into ``dest_dir``
    (default ``<data_root>/downloads/<name>``); returns the directory."""
    entry = dataset_entry(name, registry).get("download")
    if not entry or not entry.get("files"):
        raise ValueError(f"dataset {name!r} has no download in datasets/registry.yaml; give a local path instead")
    dest = Path(dest_dir) if dest_dir else config.data_root() / "downloads" / name
    files = entry["files"]
    for fname, spec in files.items():
        given = sha256.get(fname) if isinstance(sha256, dict) else (sha256 if len(files) == 1 else None)
        download(spec["url"], dest / fname, sha256=_usable(given) or _usable(spec.get("sha256")),
                 insecure_skip_checksum=insecure_skip_checksum, **kw)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m eventatlas.download", description=__doc__.split("\n\n")[0])
    ap.add_argument("name", help="dataset name in datasets/registry.yaml (e.g. maven)")
    ap.add_argument("--dest", help="target directory (default <data_root>/downloads/<name>)")
    ap.add_argument("--sha256", action="append", default=[], metavar="[FILE=]HEX", help="expected sha256 (per file: FILE=HEX)")
    ap.add_argument("--insecure-skip-checksum", action="store_true", help="download without checksum verification")
    a = ap.parse_args(argv)
    sums: dict | str | None = None
    if a.sha256:
        if len(a.sha256) == 1 and "=" not in a.sha256[0]:
            sums = a.sha256[0]
        else:
            sums = dict(x.split("=", 1) for x in a.sha256)
    try:
        out = fetch_dataset(a.name, a.dest, sha256=sums, insecure_skip_checksum=a.insecure_skip_checksum)
    except (ChecksumRequired, ChecksumError, ValueError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
