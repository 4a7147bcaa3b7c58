"""Prefect runtime glue for the CLI's flow calls: what happens when the CLI is killed (kill -9, OOM).

- The temporary Prefect API server that Prefect starts when no API is configured is a child
  process; on Linux it now gets ``PR_SET_PDEATHSIG`` (SIGTERM when its parent dies), so it no longer
  survives its parent as an orphan listening on 127.0.0.1. It is started from the main thread
  (the death signal follows the thread that forked it).
- Flow runs started by the CLI carry the tags ``eventatlas-cli`` and
  ``eventatlas-pid:<host>:<pid>:<start ticks>``. At the next start, :func:`reap_crashed` marks
  every RUNNING/PENDING such flow run of this host whose process is gone (or is another process
  with a reused pid) as CRASHED, with its running task runs; deployments run by a worker are left to
  the worker (no such tags).

Use: ``with guarded(): flow(...)``.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
from typing import Callable, Iterator

TAG = "eventatlas-cli"
PID_TAG = "eventatlas-pid"
PR_SET_PDEATHSIG = 1


def _process_start_ticks(pid: int) -> str | None:
    """Field 22 of /proc/<pid>/stat (start time in clock ticks since boot); None if gone or a zombie."""
    try:
        stat = open(f"/proc/{pid}/stat", encoding="ascii", errors="replace").read()
    except OSError:
        return None
    rest = stat[stat.rfind(")") + 2:].split()  # after "pid (comm) "
    if not rest or rest[0] in ("Z", "X"):
        return None
    return rest[19]


def pid_tag(pid: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{PID_TAG}:{socket.gethostname()}:{pid}:{_process_start_ticks(pid) or '?'}"


def process_gone(tag: str, host: str | None = None) -> bool | None:
    """For a ``pid_tag``: True if that process no longer runs (or its pid now belongs to another
    process), False if it runs, None if it ran on another host (cannot tell)."""
    try:
        _, tag_host, pid, ticks = tag.split(":", 3)
        pid_i = int(pid)
    except ValueError:
        return None
    if tag_host != (host or socket.gethostname()):
        return None
    now = _process_start_ticks(pid_i)
    if now is None:
        return True
    return ticks not in ("?", now)


class _SubprocessWithPdeathsig:
    """Stands in for the ``subprocess`` module inside ``prefect.server.api.server``: its Popen gives
    the child PR_SET_PDEATHSIG=SIGTERM (and exits at once if the parent is already gone)."""

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)  # resolved here: nothing to load after fork
        self._prctl = self._libc.prctl

    def __getattr__(self, name: str):
        return getattr(subprocess, name)

    def Popen(self, *args, **kwargs):  # noqa: N802 - the name Prefect calls
        parent = os.getpid()
        prctl = self._prctl

        def die_with_parent() -> None:
            prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the signal was armed
                os._exit(1)

        if kwargs.get("preexec_fn") is None:
            kwargs["preexec_fn"] = die_with_parent
        return subprocess.Popen(*args, **kwargs)


def temporary_server_dies_with_parent() -> bool:
    """Make Prefect's temporary API server die with this process (Linux); idempotent."""
    if not sys.platform.startswith("linux"):
        return False
    from prefect.server.api import server

    if not isinstance(server.subprocess, _SubprocessWithPdeathsig):
        server.subprocess = _SubprocessWithPdeathsig()
    return True


def _start_temporary_server_here() -> None:
    """Start the temporary server now, from the calling (main) thread, when no API is configured."""
    from prefect.settings import PREFECT_API_URL

    if PREFECT_API_URL.value():
        return
    from prefect.server.api.server import SubprocessASGIServer

    SubprocessASGIServer().start()


def temporary_server_pid() -> int | None:
    """The pid of this process's temporary API server, if it runs one."""
    from prefect.server.api.server import SubprocessASGIServer

    srv = SubprocessASGIServer._instances.get(None)
    return srv.server_process.pid if srv is not None and srv.server_process is not None else None


def reap_crashed(warn: Callable[[str], None] | None = None) -> list[str]:
    """Mark RUNNING/PENDING flow runs started by an eventatlas CLI process of this host that is gone
    as CRASHED (and their RUNNING/PENDING task runs). Returns the flow run ids marked."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, FlowRunFilterState,
                                                FlowRunFilterStateType, FlowRunFilterTags, TaskRunFilter,
                                                TaskRunFilterState, TaskRunFilterStateType)
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    live = [StateType.RUNNING, StateType.PENDING]
    marked: list[str] = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
            state=FlowRunFilterState(type=FlowRunFilterStateType(any_=live)),
            tags=FlowRunFilterTags(all_=[TAG])))
        for fr in runs:
            tag = next((t for t in fr.tags if t.startswith(PID_TAG + ":")), None)
            if tag is None or not process_gone(tag):
                continue
            pid = tag.split(":")[2]
            msg = f"its process (pid {pid}) is gone (killed?); marked crashed at the next eventatlas start"
            client.set_flow_run_state(fr.id, Crashed(message=msg), force=True)
            for tr in client.read_task_runs(
                    flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[fr.id])),
                    task_run_filter=TaskRunFilter(state=TaskRunFilterState(type=TaskRunFilterStateType(any_=live)))):
                client.set_task_run_state(tr.id, Crashed(message=msg), force=True)
            marked.append(str(fr.id))
            if warn is not None:
                warn(f"flow run {fr.name} ({fr.id}) marked crashed: {msg}")
    return marked


@contextlib.contextmanager
def guarded(warn: Callable[[str], None] | None = None) -> Iterator[None]:
    """Around a CLI flow call: the temporary server dies with us, runs of dead CLI processes are
    marked crashed, and the runs started here carry this process's pid tag."""
    from prefect import tags

    temporary_server_dies_with_parent()
    _start_temporary_server_here()
    reap_crashed(warn)
    with tags(TAG, pid_tag()):
        yield
