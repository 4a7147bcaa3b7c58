"""The crawler's client against hostile answers from a local fault server (127.0.0.1): a gzip bomb and an
oversized body hit the size cap, a server trickling its body or its headers hits the deadline, and
redirects leave neither the requested host nor the Wikimedia domains, nor loop."""
from __future__ import annotations

import socket
import socketserver
import threading
import time
import tracemalloc
import zlib
from urllib.parse import parse_qs, urlsplit

import pytest

from eventatlas.wiki.http import HttpError, PoliteClient

pytestmark = pytest.mark.network

MiB = 2**20
TRICKLE_MAX_S = 30  # a trickling answer stops by itself after this many bytes/seconds
_ZEROS = bytes(MiB)


def _zero_block() -> bytes:
    """Raw deflate bytes for 1 MiB of zeros, ending in a full flush: repeated k times they decode to
    k MiB, so a ~1 MB gzip body that expands to 1 GiB is sent without ever making the 1 GiB."""
    c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(_ZEROS) + c.flush(zlib.Z_FULL_FLUSH)


_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


class _Handler(socketserver.BaseRequestHandler):
    server: "_FaultServer"

    def handle(self) -> None:
        self.request.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            part = self.request.recv(4096)
            if not part:
                return
            head += part
        target = head.split(b" ", 2)[1].decode()
        path, query = urlsplit(target).path, parse_qs(urlsplit(target).query)
        with self.server.lock:
            self.server.log.append(path)
        try:
            getattr(self, "do_" + path.strip("/").split("/")[0])(path, query)
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            pass  # the client gave up: what these tests want

    def _send(self, status: str, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        hdrs = {"Content-Type": "application/json", "Content-Length": str(len(body)), "Connection": "close", **(headers or {})}
        out = f"HTTP/1.1 {status}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs.items()) + "\r\n"
        self.request.sendall(out.encode() + body)

    def do_ok(self, path, query) -> None:
        self._send("200 OK", b'{"ok": true}')

    def do_redirect(self, path, query) -> None:  # /redirect?to=<Location>
        self._send("302 Found", headers={"Location": query["to"][0]})

    def do_loop(self, path, query) -> None:  # /loop/a -> /loop/b -> /loop/a
        self._send("302 Found", headers={"Location": "/loop/b" if path.endswith("/a") else "/loop/a"})

    def do_chain(self, path, query) -> None:  # /chain/n -> /chain/n+1: never ends (the client must stop)
        self._send("302 Found", headers={"Location": f"/chain/{int(path.rsplit('/', 1)[1]) + 1}"})

    def do_bomb(self, path, query) -> None:  # ~1 MB of gzip expanding to 1 GiB
        block = self.server.zero_block
        n = 1024
        self.request.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                             f"Content-Length: {len(_GZIP_HEADER) + n * len(block)}\r\nConnection: close\r\n\r\n".encode())
        self.request.sendall(_GZIP_HEADER)
        for _ in range(n):  # no trailer: a client that read this far has already failed the test
            self.request.sendall(block)

    def do_big(self, path, query) -> None:  # plain body, chunked (no length known up front), up to 256 MiB
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                             b"Connection: close\r\n\r\n")
        chunk = b"%x\r\n" % MiB + b" " * MiB + b"\r\n"
        for _ in range(256):
            self.request.sendall(chunk)
            self.server.sent += MiB

    def do_declared(self, path, query) -> None:  # says up front that it is 2 MiB
        self._send("200 OK", b" " * (2 * MiB))

    def do_slowbody(self, path, query) -> None:  # headers at once, then a byte a second
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
        for _ in range(TRICKLE_MAX_S):
            self.request.sendall(b" ")
            time.sleep(1)

    def do_slowheaders(self, path, query) -> None:  # the header block itself a byte a second
        self.request.sendall(b"HTTP/1.1 200 OK\r\nX-Slow: ")
        for _ in range(TRICKLE_MAX_S):
            self.request.sendall(b"x")
            time.sleep(1)


class _FaultServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.log: list[str] = []
        self.sent = 0
        self.zero_block = _zero_block()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture(scope="module")
def server():
    s = _FaultServer()
    t = threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    t.start()
    yield s
    s.shutdown()
    s.server_close()


@pytest.fixture(autouse=True)
def _fresh_log(server):
    server.log.clear()
    server.sent = 0


def _client(**kw) -> PoliteClient:
    opts = dict(contact="eventatlas-tests@example.org", timeout=5.0, backoff_base=0.01, backoff_cap=0.02, seed=1)
    return PoliteClient(**{**opts, **kw})


def _get(c: PoliteClient, url: str, params: dict | None = None):
    with c:
        return c.get_json(url, params, mediawiki=False, use_cache=False)


def _one_line(e: pytest.ExceptionInfo) -> str:
    msg = str(e.value)
    assert "\n" not in msg and isinstance(e.value, HttpError)
    return msg


def test_gzip_bomb_stops_at_the_cap_without_expanding_it(server):
    url = server.url + "/bomb"
    cap = 8 * MiB
    tracemalloc.start()
    try:
        t0 = time.monotonic()
        with pytest.raises(HttpError) as e:
            _get(_client(max_response_bytes=cap), url)
        took = time.monotonic() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = _one_line(e)
    assert msg.startswith(url) and f"size cap of {cap} bytes" in msg and "after gzip decompression" in msg
    assert peak < 4 * cap, peak  # the 1 GiB is never made: at most about the cap is held
    assert server.log == ["/bomb"]  # a cap violation is not retried or fetched again
    assert took < 5.0


def test_oversized_plain_body_stops_reading_at_the_cap(server):
    url = server.url + "/big"
    with pytest.raises(HttpError) as e:
        _get(_client(max_response_bytes=MiB), url)
    msg = _one_line(e)
    assert msg.startswith(url) and f"size cap of {MiB} bytes" in msg and "as received" in msg
    assert server.log == ["/big"]
    last, deadline = -1, time.monotonic() + 10
    while server.sent != last and time.monotonic() < deadline:  # until the writes stop: the client hung up
        last = server.sent
        time.sleep(0.3)
    assert server.sent < 64 * MiB  # the client hung up long before the 256 MiB were sent


def test_declared_oversized_body_is_refused_before_reading(server):
    with pytest.raises(HttpError, match=r"by its Content-Length 2097152") as e:
        _get(_client(max_response_bytes=MiB), server.url + "/declared")
    _one_line(e)
    assert server.log == ["/declared"]


@pytest.mark.parametrize("path", ["/slowbody", "/slowheaders"])
def test_trickling_server_cannot_hold_a_request_past_the_deadline(server, path):
    t0 = time.monotonic()
    with pytest.raises(HttpError) as e:
        _get(_client(timeout=1.5), server.url + path)
    took = time.monotonic() - t0
    msg = _one_line(e)
    assert msg.startswith(server.url + path) and "deadline of 1.5s passed" in msg
    assert 1.4 <= took < 4.0, took  # not the server's 30 s
    assert server.log == [path]  # the deadline is the call's: no retry after it


def test_deadline_is_checked_between_body_chunks_on_any_transport():
    """A transport without the socket-level deadline (a mock here, a proxy in real life) is still
    stopped between the chunks of a trickled body."""
    import httpx

    def trickle():
        for _ in range(TRICKLE_MAX_S):
            time.sleep(0.25)
            yield b" "

    c = _client(timeout=1.0, transport=httpx.MockTransport(lambda req: httpx.Response(200, content=trickle())))
    t0 = time.monotonic()
    with pytest.raises(HttpError, match=r"deadline of 1s passed: timeout \(ReadTimeout\)"):
        _get(c, "http://127.0.0.1:9/x")
    assert time.monotonic() - t0 < 2.5  # not the 7.5 s the whole body takes


def test_a_stalled_attempt_is_retried_within_the_deadline(server):
    """attempt_timeout caps one attempt; the call's deadline still bounds the sum of attempts."""
    t0 = time.monotonic()
    with pytest.raises(HttpError, match=r"deadline of 2s passed: timeout \(ReadTimeout\) \(after 2 attempts\)"):
        _get(_client(timeout=2.0, attempt_timeout=1.0), server.url + "/slowheaders")
    assert 1.9 <= time.monotonic() - t0 < 5.0
    assert server.log == ["/slowheaders", "/slowheaders"]


@pytest.mark.parametrize("location", [
    "http://localhost:{port}/ok",  # same server, another host name
    "http://169.254.169.254/latest/meta-data/",  # the cloud metadata address
    "file:///etc/passwd",
    "ftp://127.0.0.1/ok",
    "gopher://127.0.0.1:{port}/ok",
    "https://en.wikipedia.org.evil.example/w/api.php",  # a Wikimedia name as a prefix is not a Wikimedia host
])
def test_redirects_off_the_allowed_hosts_are_refused(server, location):
    location = location.format(port=server.server_address[1])
    url = f"{server.url}/redirect"
    t0 = time.monotonic()
    with pytest.raises(HttpError) as e:
        _get(_client(), url, {"to": location})
    msg = _one_line(e)
    assert msg.startswith(url) and f"redirect to {location!r} refused" in msg
    assert time.monotonic() - t0 < 2.0  # refused at once, no connection tried
    assert len(server.log) == 1  # not retried, and the other-host hop (same server) never arrived


def test_a_redirect_on_the_same_host_is_followed(server):
    assert _get(_client(), f"{server.url}/redirect", {"to": "/ok"}) == {"ok": True}
    assert _get(_client(), f"{server.url}/redirect", {"to": f"{server.url}/ok"}) == {"ok": True}
    assert server.log == ["/redirect", "/ok", "/redirect", "/ok"]


def test_a_redirect_loop_is_refused(server):
    with pytest.raises(HttpError) as e:
        _get(_client(), server.url + "/loop/a")
    msg = _one_line(e)
    assert msg.startswith(server.url + "/loop/a") and "redirect loop: Location '/loop/a' leads back to" in msg
    assert server.log == ["/loop/a", "/loop/b"]


def test_too_many_redirects_are_refused(server):
    with pytest.raises(HttpError) as e:
        _get(_client(max_redirects=3), server.url + "/chain/0")
    msg = _one_line(e)
    assert "more than 3 redirects" in msg and "'/chain/4'" in msg
    assert server.log == ["/chain/0", "/chain/1", "/chain/2", "/chain/3"]
