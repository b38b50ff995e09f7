"""The API's own OpenAPI document, served at ``/schema`` (JSON; with the Swagger UI at ``/schema`` when DEBUG=true,
as the Go Hades serves swagger only in debug) and checked in as ``docs/openapi.json``.

Regenerate the checked-in copy after changing a route: ``.venv/bin/python -m hades.http.openapi > docs/openapi.json``.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme

PATH = "/schema"


def _version() -> str:
    try:
        return version("hades")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that was never installed
        return "0.0.0"


def openapi_config(debug: bool = False) -> OpenAPIConfig:
    """The JSON document at ``/schema`` and ``/schema/openapi.json``; the Swagger UI at ``/schema`` in debug."""
    plugins = (
        [SwaggerRenderPlugin(path="/"), JsonRenderPlugin()]
        if debug
        else [JsonRenderPlugin(path=["/", "/openapi.json"])]
    )
    return OpenAPIConfig(
        title="Hades",
        version=_version(),
        description="The Hades job scheduler: the Go Hades's HTTP contract, its Log Manager routes, and the dashboard.",
        path=PATH,
        render_plugins=plugins,
        components=Components(
            security_schemes={
                "basic": SecurityScheme(type="http", scheme="basic", description="user hades, password AUTH_KEY"),
                "pipeline_token": SecurityScheme(
                    type="http",
                    scheme="bearer",
                    description="a pipeline's token, as its stages get it in HADES_PIPELINE_TOKEN",
                ),
            },
        ),
        use_handler_docstrings=True,
    )


def document() -> dict[str, Any]:
    """The document every app serves (the routes do not depend on its services or settings)."""
    from litestar import Litestar

    from hades.http.app import API_ROUTES
    from hades.http.dashboard.routes import ROUTES as DASHBOARD_ROUTES

    return Litestar(
        route_handlers=[*API_ROUTES, *DASHBOARD_ROUTES], openapi_config=openapi_config()
    ).openapi_schema.to_schema()


def render(schema: dict[str, Any]) -> str:
    """The checked-in form: sorted keys, two-space indents, a final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    print(render(document()), end="")
