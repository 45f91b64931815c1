"""The plain-HTTP transport (calibrate/judges/transport.py) against real loopback servers:
keep-alive reuse, connections the server closed or asked to close, chunked and large answers,
connect and read timeouts, dropped connections, cancellation, and https staying on httpx's
default transport (a real TLS server with a self-signed certificate)."""

from __future__ import annotations

import asyncio
import http.server
import json
import socket
import ssl
import subprocess
import threading

import httpx
import pytest

from calibrate.judges import transport as transport_module
from calibrate.judges.backends import Endpoint, OpenAIBackend, ShardedTransport, build_client
from calibrate.judges.errors import RetryableError, Unreachable
from calibrate.judges.execution import run_coroutine
from calibrate.judges.render import Rendered
from calibrate.judges.transport import AsyncioStream, H11Transport

MESSAGES = Rendered("You judge.", "Claim: x")
ANSWER = {"choices": [{"message": {"content": '{"verdict": "supported"}'}}], "usage": {"prompt_tokens": 3}}


class LoopbackServer:
    """A raw HTTP/1.1 server on asyncio streams whose behaviour each test chooses.

    `mode`: "ok" answers with keep-alive; "close_after" answers, then closes the connection
    without saying so; "close_header" answers with `Connection: close` (and keeps the
    connection open); "chunked" answers with chunked transfer-encoding; "silent" reads the
    request and never answers; "drop" closes the connection after reading the request;
    "big" answers with a 1 MB JSON body; "http10" answers as HTTP/1.0 without a length (the
    body ends when the connection closes).
    """

    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.connections = 0
        self.requests = 0

    async def start(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/v1"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                body = json.loads(await reader.readexactly(length))
                assert body["messages"][-1]["content"] == "Claim: x"
                self.requests += 1
                if self.mode == "silent":
                    await asyncio.sleep(30)
                if self.mode == "drop":
                    break
                answer = dict(ANSWER, padding="x" * 1_000_000) if self.mode == "big" else ANSWER
                payload = json.dumps(answer).encode()
                if self.mode == "http10":
                    writer.write(b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + payload)
                    break
                if self.mode == "chunked":
                    half = len(payload) // 2
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                                 + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (payload[:half], payload[half:]))
                                 + b"0\r\n\r\n")
                else:
                    close = b"Connection: close\r\n" if self.mode == "close_header" else b""
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%s"
                                 b"Content-Length: %d\r\n\r\n%s" % (close, len(payload), payload))
                await writer.drain()
                if self.mode == "close_after":
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def stop(self) -> None:
        self.server.close()


def calls(server: LoopbackServer, n: int, *, read_timeout: float = 120.0, connect_timeout: float = 5.0,
          base_url: str | None = None) -> list[object]:
    """Make n sequential judge calls through build_client; return answers or the errors raised."""

    async def go() -> list[object]:
        url = base_url or await server.start()
        endpoint = Endpoint("openai", url, "m")
        backend = OpenAIBackend(endpoint, {})
        results: list[object] = []
        try:
            async with build_client(endpoint, read_timeout=read_timeout, connect_timeout=connect_timeout) as client:
                for _ in range(n):
                    try:
                        results.append((await backend.complete(client, MESSAGES)).text)
                    except RetryableError as exc:
                        results.append(exc)
                    await asyncio.sleep(0.05)  # let a closing server's FIN arrive
        finally:
            if base_url is None:
                await server.stop()
        return results

    return run_coroutine(go())


def test_plain_http_endpoints_use_the_h11_transport_and_https_the_default():
    async def transport_of(url: str) -> httpx.AsyncBaseTransport:
        async with build_client(Endpoint("openai", url, "m")) as client:
            return client._transport

    assert isinstance(run_coroutine(transport_of("http://127.0.0.1:9/v1")), H11Transport)
    assert isinstance(run_coroutine(transport_of("https://api.openai.com/v1")), ShardedTransport)


def test_the_h11_transport_refuses_https():
    async def go() -> None:
        async with httpx.AsyncClient(transport=H11Transport(4)) as client:
            await client.get("https://127.0.0.1:9/")

    with pytest.raises(httpx.UnsupportedProtocol):
        run_coroutine(go())


@pytest.mark.parametrize(("mode", "connections"), [
    ("ok", 1),  # keep-alive: one connection for every call
    ("close_after", 4),  # the server closed the idle connection: not reused
    ("close_header", 4),  # the server said `Connection: close`: not reused
    ("chunked", 1),  # a chunked answer is reassembled, and the connection reused
    ("http10", 4),  # an HTTP/1.0 answer without a length ends when the connection closes
    ("big", 1),  # a 1 MB answer arrives whole
])
def test_answers_and_connection_reuse(mode, connections):
    server = LoopbackServer(mode)
    assert calls(server, 4) == ['{"verdict": "supported"}'] * 4
    assert server.requests == 4 and server.connections == connections


def test_idle_connections_expire(monkeypatch):
    monkeypatch.setattr(transport_module, "KEEPALIVE_SECONDS", 0.0)
    server = LoopbackServer("ok")
    assert calls(server, 3) == ['{"verdict": "supported"}'] * 3
    assert server.connections == 3


def test_reading_pauses_while_unread_data_piles_up_and_resumes():
    blob = bytes(range(256)) * 4096  # 1 MB, four times the high-water mark

    async def go() -> tuple[bool, bytes]:
        async def send(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(blob)
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(send, "127.0.0.1", 0)
        stream = await AsyncioStream.connect("127.0.0.1", server.sockets[0].getsockname()[1], timeout=5)
        await asyncio.sleep(0.3)  # nobody reads meanwhile
        paused = stream.paused_reading and len(stream.buffer) < len(blob)
        received = bytearray()
        while chunk := await stream.read(timeout=5):
            received += chunk
        stream.close()
        server.close()
        return paused, bytes(received)

    paused, received = run_coroutine(go())
    assert paused and received == blob


def test_read_timeout_is_retryable():
    server = LoopbackServer("silent")
    [error] = calls(server, 1, read_timeout=0.3)
    assert isinstance(error, RetryableError) and not isinstance(error, Unreachable)
    assert "no answer" in str(error) and "ReadTimeout" in str(error)


def test_a_dropped_connection_is_retryable():
    server = LoopbackServer("drop")
    [error] = calls(server, 1)
    assert isinstance(error, RetryableError) and not isinstance(error, Unreachable)
    assert "dropped" in str(error)


def test_a_cancelled_call_does_not_leave_its_connection_for_reuse():
    server = LoopbackServer("silent")

    async def go() -> tuple[int, int]:
        url = await server.start()
        transport = H11Transport(4)
        async with httpx.AsyncClient(transport=transport) as client:
            call = asyncio.ensure_future(client.post(url + "/chat/completions", json={"messages": [{"content": "Claim: x"}]}))
            await asyncio.sleep(0.2)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            idle = sum(len(streams) for streams in transport.idle.values())
        await server.stop()
        return idle, server.requests

    assert run_coroutine(go()) == (0, 1)


def test_connection_refused_is_unreachable():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    [error] = calls(LoopbackServer(), 1, base_url=f"http://127.0.0.1:{port}/v1")
    assert isinstance(error, Unreachable) and "cannot reach" in str(error)


def test_connect_timeout_is_unreachable():
    # A listening socket whose accept queue is full and never drained: Linux drops further
    # SYNs, so a new connection neither succeeds nor fails until the client gives up.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        [error] = calls(LoopbackServer(), 1, connect_timeout=0.3, base_url=f"http://127.0.0.1:{port}/v1")
    finally:
        for filler in fillers:
            filler.close()
        listener.close()
    assert isinstance(error, Unreachable) and "connect timeout" in str(error)


@pytest.fixture
def tls_server(tmp_path, monkeypatch):
    """An https server with a self-signed certificate for 127.0.0.1, trusted via SSL_CERT_FILE."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["content-length"]))
            payload = json.dumps(ANSWER).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    yield f"https://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_https_endpoints_work_through_the_default_backend(tls_server):
    assert calls(LoopbackServer(), 2, base_url=tls_server) == ['{"verdict": "supported"}'] * 2
