"""``NATS_URL`` may list a cluster's servers, comma-separated: every one is tried, a password is never printed."""

from __future__ import annotations

import pytest

from hades.adapters.nats.connection import NatsUnreachable, connect_once, connect_options
from tests.conftest import free_port


def test_a_comma_separated_url_is_a_list_of_servers() -> None:
    options = connect_options(" nats://a:4222, nats://b:4222,,nats://c:4222 ,")
    assert options["servers"] == ["nats://a:4222", "nats://b:4222", "nats://c:4222"]
    assert options["max_reconnect_attempts"] == -1  # a role never gives up on the cluster


async def test_a_server_down_in_the_list_is_passed_over(nats_url: str) -> None:
    down = f"nats://127.0.0.1:{free_port()}"
    nc = await connect_once(f"{down},{nats_url}", timeout=2)
    try:
        assert nc.is_connected
        assert nc.connected_url is not None
        assert f"{nc.connected_url.scheme}://{nc.connected_url.netloc}" == nats_url
    finally:
        await nc.close()


async def test_no_server_answering_names_them_all_without_the_password() -> None:
    first, second = free_port(), free_port()
    url = f"nats://hades:s3cret@127.0.0.1:{first},nats://127.0.0.1:{second}"
    with pytest.raises(NatsUnreachable) as raised:
        await connect_once(url, timeout=1)
    message = str(raised.value)
    assert f"nats://hades:****@127.0.0.1:{first},nats://127.0.0.1:{second}" in message
    assert "s3cret" not in message
