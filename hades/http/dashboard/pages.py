"""The dashboard's pages share paths with the Go-contract API (``/jobs``, ``/jobs/<id>``): which of the two a request
gets, decided before any of the API's guards runs."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from hades.http.dashboard.routes import index_html
from hades.http.openapi import PATH as OPENAPI_PATH

#: Paths that are never a page, whoever asks: the dashboard's own data and files, the schema, the probes.
NOT_PAGES = frozenset({"/metrics", "/ping", "/health", OPENAPI_PATH})
NOT_PAGE_PREFIXES = ("/api/", "/static/", f"{OPENAPI_PATH}/")


def asks_for_html(accept: str) -> bool:
    """A browser navigating to a URL names ``text/html`` first. API clients never do: curl, httpx and requests send
    ``*/*``, Go's ``net/http`` no ``Accept`` at all, and the dashboard's own ``fetch`` calls ``*/*`` too."""
    first = accept.split(",", 1)[0].split(";", 1)[0]
    return first.strip().lower() == "text/html"


def answers_by_accept(request: Request[Any, Any, State]) -> bool:
    """A GET whose answer depends on ``Accept``: a page to a browser navigating, the API's answer to anyone else."""
    path = request.url.path
    return (
        request.method == "GET"
        and request.app.state.dashboard is not None
        and path not in NOT_PAGES
        and not path.startswith(NOT_PAGE_PREFIXES)
        and "/artifacts/" not in path  # a download is a file, whoever asks
    )


def is_page(request: Request[Any, Any, State]) -> bool:
    """A browser navigating to one of the dashboard's pages (``/``, ``/login``, ``/jobs``, ``/jobs/<id>``...)."""
    return answers_by_accept(request) and asks_for_html(request.headers.get("accept", ""))


def varying_by_accept(send: Send) -> Send:
    """``send`` with ``Vary: Accept`` added to the response's headers, so that a cache between Hades and its
    clients keeps the page and the API's answer of one URL apart (the bodies are the Go API's, unchanged)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", ()), (b"vary", b"Accept")]}
        await send(message)

    return sending


def pages_before_guards(app: ASGIApp) -> ASGIApp:
    """Answer a browser's navigation with the dashboard before the route's guards run.

    Litestar checks a route's guards before its ``before_request`` hook, so with ``AUTH_KEY`` set a reload of
    ``/jobs/<id>`` met the Basic-auth challenge meant for API clients (the browser's password prompt) instead of
    the page. The page is the app's shell only: its data comes from the session-guarded ``/api`` routes, and
    without a session the app goes to its login and back.
    """

    async def middleware(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP and scope["method"] == "GET":  # all POST /build pays for it
            request: Request[Any, Any, State] = Request(scope, receive)
            if answers_by_accept(request):
                send = varying_by_accept(send)
                if asks_for_html(request.headers.get("accept", "")):
                    await index_html().to_asgi_response(None, request)(scope, receive, send)
                    return
        await app(scope, receive, send)

    return middleware
