"""A real HTTP receiver on 127.0.0.1 for delivery tests: it answers as told, records what it read, and when."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus


@dataclass
class Received:
    """One request as the receiver read it; ``at`` is the wall-clock time its body was in."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float = 0.0

    def json(self) -> object:
        return json.loads(self.body)


@dataclass
class Receiver:
    """A minimal HTTP/1.1 server: the n-th request (from 1) for a path gets ``answers[n-1]`` (the last one repeats).

    An answer is a status code, ``"close"`` (drop the connection without answering), ``"hang"`` (never answer) or
    bytes (200 with that body).
    Paths are counted without their query, so each job's hook gets its own sequence of answers.
    """

    answers: Sequence[int | str | bytes]
    requests: list[Received] = field(default_factory=list)
    url: str = ""
    _server: asyncio.Server | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self._released.set()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def for_path(self, path: str) -> list[Received]:
        return [r for r in self.requests if r.path.partition("?")[0] == path]

    def for_job(self, job_id: str) -> list[Received]:
        return self.for_path(f"/hook/{job_id}")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, path, _ = head[0].split(" ", 2)
            pairs = (line.split(":", 1) for line in head[1:] if line)
            headers = {name.strip().lower(): value.strip() for name, value in pairs}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            request = Received(method, path, headers, body, time.time())
            self.requests.append(request)
            answer = self.answers[min(len(self.for_path(path.partition("?")[0])), len(self.answers)) - 1]
            if answer == "hang":
                await self._released.wait()
            elif isinstance(answer, bytes):
                writer.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(answer)}\r\nConnection: close\r\n\r\n".encode())
                writer.write(answer)
                await writer.drain()
            elif isinstance(answer, int):
                status = f"{answer} {HTTPStatus(answer).phrase}"
                writer.write(f"HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()


@contextlib.asynccontextmanager
async def receiving(*answers: int | str | bytes) -> AsyncIterator[Receiver]:
    """A receiver listening for the duration of the block."""
    receiver = Receiver(answers)
    await receiver.start()
    try:
        yield receiver
    finally:
        await receiver.stop()
