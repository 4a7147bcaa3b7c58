"""Where the cells of a grid run: the ``runner`` string of ``train-all`` (no Prefect here).

``parse_runner(text) -> RunnerSpec`` validates the string before anything runs:

- ``local`` (default): every cell in the flow's process, one after another (the embedded behaviour);
- ``process`` / ``process:N``: Prefect's ``ProcessPoolTaskRunner`` with N processes (default: CPU count);
- ``dask`` / ``dask:N``: a temporary local Dask cluster of N single-threaded worker processes;
- ``dask:tcp://host:8786`` (or ``tls://``): an existing Dask scheduler (started with ``dask scheduler``);
- ``ray`` / ``ray:N``: a temporary local Ray cluster with N CPUs (one cell per CPU), through ``prefect-ray``
  (the optional extra ``eventatlas[ray]``);
- ``ray:ray://host:10001`` (Ray client), ``ray:host:6379`` or ``ray:auto``: an existing Ray cluster
  (started with ``ray start --head``).

The Prefect task runner is built from the spec in ``tasks/runners.py``. ``pinned_threads(n)`` is what a
cell on a pooled worker runs under: torch, OpenMP and BLAS limited to ``n`` threads so that two cells
sharing a machine do not oversubscribe its cores.
"""
from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from typing import Iterator, Literal

FORMS = "local | process[:N] | dask[:N] | dask:tcp://host:port | ray[:N] | ray:ray://host:port | ray:host:port | ray:auto"
_RAY_ADDRESS = re.compile(r"^(ray://)?(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>\d{1,5})$")
_ADDRESS = re.compile(r"^(tcp|tls)://(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\])(:(?P<port>\d{1,5}))?$")


@dataclass(frozen=True)
class RunnerSpec:
    kind: Literal["local", "process", "dask", "ray"]
    workers: int | None = None  # process / local dask / local ray: pool size (None: the CPU count)
    address: str | None = None  # dask: an existing scheduler; ray: an existing cluster

    @property
    def distributed(self) -> bool:
        """Cells run outside the flow's process (pinned threads, retries, reuse of unfinished runs)."""
        return self.kind != "local"

    def n_workers(self) -> int:
        return self.workers or os.cpu_count() or 1


def _count(kind: str, text: str, raw: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"bad runner {raw!r}: {kind}:N needs a positive worker count, got {text!r} "
                         f"(expected {FORMS})")
    return int(text)


RAY_MISSING = ("runner 'ray' needs prefect-ray and ray, which are not installed: pip install -e '.[ray]' "
               "(the optional extra; README 'Scale out')")


def parse_runner(text: str | None, *, check_installed: bool = True) -> RunnerSpec:
    """The spec of a runner string, or a ``ValueError`` naming the accepted forms (and, with
    ``check_installed``, refusing ``ray`` when ``prefect-ray`` is not importable)."""
    raw = "local" if text is None else str(text)
    s = raw.strip()
    kind, _, rest = s.partition(":")
    kind = kind.lower()
    if kind == "local" and not rest:
        return RunnerSpec("local")
    if kind == "process":
        return RunnerSpec("process", _count(kind, rest, raw) if rest else None)
    if kind == "dask":
        if not rest:
            return RunnerSpec("dask")
        if rest.isdigit() or rest.lstrip("-").isdigit():
            return RunnerSpec("dask", _count(kind, rest, raw))
        m = _ADDRESS.match(rest)
        if not m or (m["port"] and not 0 < int(m["port"]) < 65536):
            raise ValueError(f"bad runner {raw!r}: a Dask scheduler address looks like tcp://host:8786 "
                             f"(expected {FORMS})")
        return RunnerSpec("dask", address=rest if m["port"] else f"{rest}:8786")
    if kind == "ray":
        import importlib.util

        if check_installed and importlib.util.find_spec("prefect_ray") is None:
            raise ValueError(RAY_MISSING)
        if not rest:
            return RunnerSpec("ray")
        if rest.isdigit() or rest.lstrip("-").isdigit():
            return RunnerSpec("ray", _count(kind, rest, raw))
        m = _RAY_ADDRESS.match(rest)
        if rest != "auto" and (not m or not 0 < int(m["port"]) < 65536):
            raise ValueError(f"bad runner {raw!r}: a Ray cluster address looks like ray://host:10001, host:6379 or "
                             f"auto (expected {FORMS})")
        return RunnerSpec("ray", address=rest)
    raise ValueError(f"unknown runner {raw!r} (expected {FORMS})")


@contextlib.contextmanager
def pinned_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch, OpenMP and BLAS limited to ``n`` threads (no-op for ``None``)."""
    if not n:
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    from ..modeling.device import set_threads

    before, env = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    set_threads(n)
    os.environ["OMP_NUM_THREADS"] = str(int(n))
    try:
        with threadpool_limits(limits=int(n)):
            yield
    finally:
        torch.set_num_threads(before)
        if env is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = env
