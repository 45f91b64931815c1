"""A lean httpx transport for plain-HTTP endpoints: HTTP/1.1 (h11) over asyncio Protocols.

On asyncio, httpx's default transport goes through httpcore's connection pool and its anyio
network backend: per request, several locks and cancel scopes, the pool's bookkeeping, and a
socket stream wrapper around every read and write. At 64 concurrent calls to a local server
that machinery cost more CPU than everything else in a run, and the runner has one Python
thread (bench/results/judge.md). `H11Transport` keeps the httpx API (the client, requests,
responses, timeouts and exception classes are httpx's) and h11 for the protocol itself, and
replaces the rest with a stack of idle keep-alive connections and one `asyncio.Protocol` per
connection: a read waits on one future with a `call_later` timer, and the bytes of a request
(headers and body) leave in one `send`.

It speaks plain HTTP/1.1 only and reads each answer whole (judge answers are small), up to
WIRE_FACTOR × `max_answer_bytes` on the wire: beyond that it stops reading, closes the
connection and raises `AnswerTooLarge` (`backends.read_capped` caps the decoded size). TLS
endpoints — every hosted API — keep httpx's default transport: their calls take seconds, so
the client's CPU per call does not matter there. `backends.build_client` chooses by the base
URL's scheme.

Errors are httpx's: `ConnectTimeout`/`ConnectError` when connecting, `ReadTimeout`/
`WriteTimeout`, `ReadError`/`WriteError` for a reset connection, `RemoteProtocolError` for a
connection closed before the answer or a malformed one. An idle connection that the server
closed (or that sent something unasked) is not reused; nor is one idle longer than 5 s.
"""

from __future__ import annotations

import asyncio
import time

import h11
import httpx

# Stop reading from the socket while this much is unread (flow control; answers are small).
HIGH_WATER = 256 * 1024
READ_SIZE = 64 * 1024
KEEPALIVE_SECONDS = 5.0  # httpx's default keep-alive expiry


class AnswerTooLarge(httpx.TransportError):
    """An answer longer than the cap (JUDGE_MAX_ANSWER_BYTES); `size` is how much was seen or declared."""

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


WIRE_FACTOR = 2  # bytes read off the wire may reach this × the cap (compressed data is smaller, bar a few bytes)


def too_large(size: int, limit: int, *, declared: bool = False, decoded: bool = False, wire: bool = False) -> AnswerTooLarge:
    """Return the AnswerTooLarge error of an answer of `size` bytes (or more) against the cap `limit`."""
    what = ("declares" if declared else "decompresses to more than" if decoded else "is more than")
    where = " on the wire" if wire else ""
    return AnswerTooLarge(f"the answer {what} {size:,} bytes{where}; answers may have at most {limit:,} bytes "
                          "(JUDGE_MAX_ANSWER_BYTES)", size=size, limit=limit)


class AsyncioStream(asyncio.Protocol):
    """One TCP connection as an asyncio Protocol, read and written like a stream."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None  # a read waiting for data
        self.drained: asyncio.Future[None] | None = None  # set while the kernel's send buffer is full
        self.paused_reading = False

    @classmethod
    async def connect(cls, host: str, port: int, timeout: float | None) -> AsyncioStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                _, stream = await loop.create_connection(cls, host, port)
        except TimeoutError as exc:
            raise httpx.ConnectTimeout(f"no connection to {host}:{port} within {timeout} s") from exc
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return stream

    # ---- asyncio.Protocol callbacks
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > HIGH_WATER and not self.paused_reading and self.transport is not None:
            self.transport.pause_reading()
            self.paused_reading = True
        self._wake(self.waiter)

    def eof_received(self) -> bool:
        self.eof = True
        self._wake(self.waiter)
        return False  # let the transport close itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self.error = exc
        self._wake(self.waiter)
        self._wake(self.drained)

    def pause_writing(self) -> None:
        self.drained = self.loop.create_future()

    def resume_writing(self) -> None:
        self._wake(self.drained)
        self.drained = None

    @staticmethod
    def _wake(future: asyncio.Future[None] | None) -> None:
        if future is not None and not future.done():
            future.set_result(None)

    async def _wait(self, future: asyncio.Future[None], timeout: float | None, error: type[Exception]) -> None:
        """Await `future`, raising `error` if it takes longer than `timeout` seconds."""
        timer = None
        if timeout is not None:
            timer = self.loop.call_later(timeout, lambda: future.done() or future.set_exception(error("timed out")))
        try:
            await future
        finally:
            if timer is not None:
                timer.cancel()

    # ---- the stream side
    async def read(self, timeout: float | None) -> bytes:
        """Return what arrived (up to READ_SIZE bytes), waiting for it; b"" at the end."""
        if not self.buffer and not self.eof:
            self.waiter = self.loop.create_future()
            try:
                await self._wait(self.waiter, timeout, httpx.ReadTimeout)
            finally:
                self.waiter = None
        if self.buffer:
            data = bytes(self.buffer[:READ_SIZE])
            del self.buffer[:READ_SIZE]
            if self.paused_reading and len(self.buffer) <= HIGH_WATER // 4 and self.transport is not None:
                self.transport.resume_reading()
                self.paused_reading = False
            return data
        if self.error is not None:
            raise httpx.ReadError(str(self.error) or type(self.error).__name__)
        return b""

    async def write(self, data: bytes, timeout: float | None) -> None:
        if self.transport is None or self.transport.is_closing():
            raise httpx.WriteError(str(self.error or "the connection is closed"))
        self.transport.write(data)
        if self.drained is not None:
            await self._wait(self.drained, timeout, httpx.WriteTimeout)

    @property
    def reusable(self) -> bool:
        """Whether an idle connection is still open with nothing unread (else the server closed it)."""
        return not self.eof and not self.buffer and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class H11Transport(httpx.AsyncBaseTransport):
    """Plain-HTTP/1.1 for httpx: h11 over `AsyncioStream`, idle connections reused newest first."""

    def __init__(self, max_connections: int, max_answer_bytes: int | None = None) -> None:
        self.max_connections = max_connections
        self.max_answer_bytes = max_answer_bytes
        self.slots: asyncio.Semaphore | None = None  # made inside the event loop
        self.idle: dict[tuple[str, int], list[tuple[AsyncioStream, h11.Connection, float]]] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"H11Transport speaks plain http, not {request.url.scheme!r}")
        timeout: dict[str, float | None] = request.extensions.get("timeout", {})
        if self.slots is None:
            self.slots = asyncio.Semaphore(self.max_connections)
        async with self.slots:
            address = (request.url.host, request.url.port or 80)
            stream, connection = await self._connection(address, timeout.get("connect"))
            try:
                response = await self._exchange(stream, connection, request, timeout, self.max_answer_bytes)
            except BaseException:
                stream.close()
                raise
        if connection.our_state is h11.DONE and connection.their_state is h11.DONE:
            connection.start_next_cycle()
            self.idle.setdefault(address, []).append((stream, connection, time.monotonic() + KEEPALIVE_SECONDS))
        else:
            stream.close()
        return response

    async def _connection(self, address: tuple[str, int], timeout: float | None) -> tuple[AsyncioStream, h11.Connection]:
        idle = self.idle.get(address, [])
        now = time.monotonic()
        while idle:
            stream, connection, expires = idle.pop()
            if expires > now and stream.reusable:
                return stream, connection
            stream.close()
        return await AsyncioStream.connect(*address, timeout), h11.Connection(h11.CLIENT)

    @staticmethod
    async def _exchange(stream: AsyncioStream, connection: h11.Connection, request: httpx.Request,
                        timeout: dict[str, float | None], cap: int | None = None) -> httpx.Response:
        try:
            data = connection.send(h11.Request(method=request.method, target=request.url.raw_path,
                                               headers=request.headers.raw))
            body = await request.aread()  # already read for bytes and JSON bodies
            if body:
                data += connection.send(h11.Data(data=body))
            data += connection.send(h11.EndOfMessage())
            await stream.write(data, timeout.get("write"))
            head: h11.Response | None = None
            answer = bytearray()
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    connection.receive_data(await stream.read(timeout.get("read")))
                elif isinstance(event, h11.Response):
                    head = event
                    declared = dict(event.headers).get(b"content-length", b"")
                    if cap is not None and declared.isdigit() and int(declared) > WIRE_FACTOR * cap:
                        raise too_large(int(declared), cap, declared=True)
                elif isinstance(event, h11.Data):
                    answer += event.data
                    if cap is not None and len(answer) > WIRE_FACTOR * cap:
                        raise too_large(WIRE_FACTOR * cap, cap, wire=True)
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError("the server closed the connection before answering")
        except h11.ProtocolError as exc:
            raise httpx.RemoteProtocolError(str(exc) or type(exc).__name__) from exc
        assert head is not None
        return httpx.Response(head.status_code, headers=head.headers, stream=httpx.ByteStream(bytes(answer)),
                              extensions={"http_version": b"HTTP/1.1", "reason_phrase": head.reason})

    async def aclose(self) -> None:
        for idle in self.idle.values():
            for stream, _, _ in idle:
                stream.close()
        self.idle.clear()


__all__ = ["WIRE_FACTOR", "AnswerTooLarge", "AsyncioStream", "H11Transport", "too_large"]
