"""The API in-process over the session nats-server, as ``hades.runtime`` builds it, for the HTTP tests to drive."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from nats.aio.client import Client

from hades.adapters.nats.event_store import NatsEventStore
from hades.adapters.nats.log_store import NatsLogStore
from hades.clock import SystemClock
from hades.http.app import create_app
from hades.http.services import ApiServices
from hades.projections.runner import ProjectionRunner
from hades.projections.views import ReadModels
from hades.tasks import stop_all

#: Build an httpx client over ``create_app(services, **app_options)``; ``services`` fields may be replaced.
AppClient = Callable[..., contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def api_services(nc: Client) -> AsyncIterator[ApiServices]:
    """Real event and log stores, the views following the event stream for the whole test."""
    store = NatsEventStore(nc)
    views = ReadModels()
    projections = ProjectionRunner(store.replay_batches, views.apply)
    follow = asyncio.create_task(projections.run(), name="test-projections")
    try:
        yield ApiServices(store=store, logs=NatsLogStore(nc), views=views, projections=projections, clock=SystemClock())
    finally:
        await stop_all([follow], patience=0.5)


@pytest.fixture
def app_client(api_services: ApiServices) -> AppClient:
    """``async with app_client(auth_key="k", max_request_bytes=10) as http: ...``."""

    @contextlib.asynccontextmanager
    async def open_client(
        app_options: dict[str, Any] | None = None, **service_fields: Any
    ) -> AsyncIterator[httpx.AsyncClient]:
        services = dataclasses.replace(api_services, **service_fields)
        app: Any = create_app(services, **(app_options or {}))  # litestar's ASGI signature is narrower than httpx's
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
            yield http

    return open_client
