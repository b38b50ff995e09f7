"""The fuzzers drive the same in-process app as the HTTP tests."""

from tests.http.conftest import api_services, app_client

__all__ = ["api_services", "app_client"]
