"""The fast path in front of litestar answers ``POST /build`` exactly as the litestar route does (status, body,
headers), for accepted and refused jobs alike, and hands everything it does not answer itself to litestar."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from hades.http.app import MAX_REQUEST_BYTES, SECURITY_HEADERS, create_app
from hades.http.fast_build import BuildFastPath
from hades.http.services import ApiServices

KEY = "s3cret"
JOB = {"name": "fast", "steps": [{"id": 1, "image": "busybox", "script": "true"}]}
BODIES = {
    "accepted": json.dumps(JOB).encode(),
    "not-json": b"{nope",
    "empty": b"",
    "no-name": json.dumps({"steps": []}).encode(),
    "bad-memory": json.dumps({**JOB, "steps": [{"id": 1, "memory_limit": "lots"}]}).encode(),
    "bad-callback": json.dumps({**JOB, "callback_url": "ftp://x"}).encode(),
    "negative-timeout": json.dumps({**JOB, "timeout_seconds": -1}).encode(),
}
_UUID = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Counting:
    """The litestar app, counting the requests handed to it."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.calls += 1
        await self.app(scope, receive, send)


@dataclasses.dataclass
class Apps:
    litestar: httpx.AsyncClient
    fast: httpx.AsyncClient
    handed_on: Counting


@pytest.fixture(params=["", KEY], ids=["open", "locked"])
async def apps(request: pytest.FixtureRequest, api_services: ApiServices) -> AsyncIterator[Apps]:
    services = dataclasses.replace(api_services, auth_key=request.param)
    app: Any = create_app(services, max_request_bytes=1000)
    counting = Counting(app)
    fast: Any = BuildFastPath(counting, services, 1000, SECURITY_HEADERS)
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as plain,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://test") as quick,
    ):
        if request.param:
            plain.auth = quick.auth = ("hades", KEY)
        yield Apps(plain, quick, counting)


def answer(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    """Status, headers (by lower-case name, sorted) and body, the job id masked."""
    headers = sorted((name.lower(), value) for name, value in response.headers.items())
    return response.status_code, headers, _UUID.sub(b"<id>", response.content)


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
async def test_the_fast_path_answers_as_litestar_does(apps: Apps, body: bytes) -> None:
    expected = answer(await apps.litestar.post("/build", content=body, headers={"Content-Type": "application/json"}))
    got = answer(await apps.fast.post("/build", content=body, headers={"Content-Type": "application/json"}))
    assert got == expected
    assert apps.handed_on.calls == 0


async def test_what_it_does_not_answer_itself_goes_to_litestar(apps: Apps) -> None:
    async def both(**request: Any) -> None:
        expected = answer(await apps.litestar.request(**request))
        assert answer(await apps.fast.request(**request)) == expected

    await both(method="POST", url="/build", content=b"x" * 1001)  # 413, from the Content-Length
    assert apps.handed_on.calls == 1
    chunked = [b'{"name": "chunked", ', b'"steps": [{"image": "busybox"}]}']

    async def stream() -> AsyncIterator[bytes]:
        for chunk in chunked:
            yield chunk

    response = await apps.fast.post("/build", content=stream())  # no Content-Length: litestar reads it
    assert response.status_code == 200 and apps.handed_on.calls == 2
    await both(method="GET", url="/build")
    await both(method="POST", url="/build/", content=BODIES["accepted"])
    await both(method="GET", url="/ping")
    assert apps.handed_on.calls == 5


async def test_a_request_without_the_key_is_challenged_by_litestar(api_services: ApiServices) -> None:
    services = dataclasses.replace(api_services, auth_key=KEY)
    counting = Counting(create_app(services))
    fast: Any = BuildFastPath(counting, services, MAX_REQUEST_BYTES, SECURITY_HEADERS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://test") as http:
        for auth in (None, ("hades", "wrong"), ("someone", KEY)):
            response = await http.post("/build", content=BODIES["accepted"], auth=auth)
            assert response.status_code == 401 and response.content == b""
            assert response.headers["www-authenticate"] == 'Basic realm="Authorization Required"'
    assert counting.calls == 3
