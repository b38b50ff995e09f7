"""``CALLBACK_ALLOWED_HOSTS`` and ``CALLBACK_DENY_PRIVATE``: refused at submit (400 naming the host) and again when a
delivery connects (the name is resolved then, and a refused address is never sent a byte).

The receivers are real HTTP servers on 127.0.0.1; ``localhost`` is the name that resolves to one.
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

import pytest

from hades.adapters.http_delivery import HttpDelivery
from hades.config import Settings
from hades.core.spec import parse_job_request
from hades.core.urls import CallbackPolicy, address_kind, callback_host
from hades.http.build import refused_callback
from hades.runtime import Roles
from tests.conftest import StartHades, eventually
from tests.support.receiver import receiving

# -- the policy itself ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "kind"),
    [
        ("127.0.0.1", "loopback"),
        ("127.9.9.9", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.7", "private"),
        ("172.16.3.4", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("fe80::1", "link-local"),
        ("fd00::1", "unique-local"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("100.64.0.1", "shared (carrier-grade NAT)"),
        ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: judged as the IPv4 address it reaches
        ("::ffff:169.254.169.254", "link-local"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_internal_addresses_are_named_by_kind(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


def test_names_match_exactly_or_below_a_wildcard_whatever_the_case() -> None:
    policy = CallbackPolicy.parse(" hooks.example.org, *.ci.example.com ,")
    assert policy.names_host("hooks.example.org")
    assert policy.names_host("HOOKS.Example.org.")
    assert policy.names_host("a.ci.example.com")
    assert policy.names_host("a.b.ci.example.com")
    assert not policy.names_host("ci.example.com")  # the wildcard is for names below it
    assert not policy.names_host("evilci.example.com")
    assert not policy.names_host("hooks.example.org.evil.net")
    assert not policy.names_host("example.org")


def test_an_entry_that_is_neither_name_nor_range_stops_the_settings() -> None:
    with pytest.raises(ValueError, match=r"CALLBACK_ALLOWED_HOSTS: 'not a host'"):
        Settings(CALLBACK_ALLOWED_HOSTS="ok.example.org, not a host")
    assert Settings(CALLBACK_ALLOWED_HOSTS="10.0.0.0/8, 1password.com").callback_policy.names == ("1password.com",)


def test_the_default_allows_any_target() -> None:
    policy = Settings().callback_policy
    assert not policy.restricts
    assert policy.host_refusal("127.0.0.1") is None
    assert policy.address_refusal("anything", "169.254.169.254") is None


def test_an_explicitly_allowed_range_wins_over_deny_private() -> None:
    policy = CallbackPolicy.parse("10.1.0.0/16", deny_private=True)
    assert policy.address_refusal("builds.internal", "10.1.2.3") is None
    refusal = policy.address_refusal("builds.internal", "10.2.0.1")
    assert refusal == "callback URL host builds.internal (10.2.0.1) is a private address (CALLBACK_DENY_PRIVATE)"


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://u:pw@Hooks.Example.org:8443/x?q#f", "Hooks.Example.org"),
        ("http://[fe80::1%25eth0]:80/", "fe80::1"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
        ("http://ex%C3%A4mple.org/", "exämple.org"),
    ],
)
def test_the_host_is_read_as_the_url_parser_reads_it(url: str, host: str) -> None:
    assert callback_host(url) == host


def _spec(**fields: Any) -> Any:
    return parse_job_request(json.dumps({"name": "j", "steps": [{"image": "alpine"}], **fields}).encode())


@pytest.mark.parametrize(
    ("allowed", "deny_private", "url", "message"),
    [
        (
            "*.example.org",
            False,
            "https://evil.net/hook",
            "Invalid callback_url: callback URL host evil.net is not allowed (CALLBACK_ALLOWED_HOSTS)",
        ),
        (
            "",
            True,
            "http://127.0.0.1:8080/hook",
            "Invalid callback_url: callback URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)",
        ),
        (
            "",
            True,
            "http://169.254.169.254/latest/meta-data/",
            "Invalid callback_url: callback URL host 169.254.169.254 is a link-local address (CALLBACK_DENY_PRIVATE)",
        ),
        (
            "",
            True,
            "http://[::ffff:10.0.0.1]/",
            "Invalid callback_url: callback URL host ::ffff:10.0.0.1 (10.0.0.1) is a private address "
            "(CALLBACK_DENY_PRIVATE)",
        ),
    ],
)
def test_submit_refuses_a_forbidden_callback_url_naming_the_host(
    allowed: str, deny_private: bool, url: str, message: str
) -> None:
    policy = CallbackPolicy.parse(allowed, deny_private)
    assert refused_callback(_spec(callback_url=url), policy) == message
    assert refused_callback(_spec(status_callback_url=url), policy) == message.replace(
        "Invalid callback_url", "Invalid status_callback_url"
    )


def test_submit_lets_names_through_when_only_resolution_can_tell() -> None:
    # localhost is checked when a delivery connects; with only names allowed, it is refused at once
    assert refused_callback(_spec(callback_url="http://localhost/h"), CallbackPolicy(deny_private=True)) is None
    policy = CallbackPolicy.parse("*.example.org, 10.0.0.0/8")
    assert refused_callback(_spec(callback_url="http://builds.corp/h"), policy) is None
    assert refused_callback(_spec(callback_url="http://a.example.org/h"), policy) is None


# -- at delivery: resolved, checked, connected to the checked address --------------------------------------------


async def _post(policy: CallbackPolicy, url: str) -> Any:
    delivery = HttpDelivery(5.0, policy=policy)
    try:
        return await delivery.post_json(url, b"{}")
    finally:
        await delivery.aclose()


async def test_a_name_resolving_to_loopback_is_refused_and_never_sent() -> None:
    async with receiving(200) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        result = await _post(CallbackPolicy(deny_private=True), f"http://localhost:{port}/hook")
        assert not result.ok
        assert result.status_code is None
        assert result.error is not None
        assert result.error.startswith("not sent: callback URL host localhost (")
        assert result.error.endswith("is a loopback address (CALLBACK_DENY_PRIVATE)")
        assert receiver.requests == []


async def test_an_address_literal_is_refused_before_connecting() -> None:
    async with receiving(200) as receiver:
        result = await _post(CallbackPolicy(deny_private=True), f"{receiver.url}/hook")
        assert result.error == "not sent: callback URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)"
        assert receiver.requests == []


async def test_a_name_outside_the_allowed_list_is_refused_and_never_sent() -> None:
    async with receiving(200) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        result = await _post(CallbackPolicy.parse("*.example.org"), f"http://localhost:{port}/hook")
        assert result.error == "not sent: callback URL host localhost is not allowed (CALLBACK_ALLOWED_HOSTS)"
        assert receiver.requests == []


async def test_a_name_resolving_outside_the_allowed_ranges_is_refused_at_connect() -> None:
    async with receiving(200) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        result = await _post(CallbackPolicy.parse("10.0.0.0/8"), f"http://localhost:{port}/hook")
        assert result.error is not None
        assert result.error.startswith("not sent: callback URL host localhost (")
        assert result.error.endswith("is not allowed (CALLBACK_ALLOWED_HOSTS)")
        assert receiver.requests == []


@pytest.mark.parametrize(
    ("allowed", "deny_private"),
    [("localhost", False), ("127.0.0.0/8", True), ("::1/128, 127.0.0.1/32", True)],
    ids=["name", "range-over-deny-private", "ranges"],
)
async def test_an_allowed_target_is_delivered_through_the_guard(allowed: str, deny_private: bool) -> None:
    async with receiving(204) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        result = await _post(CallbackPolicy.parse(allowed, deny_private), f"http://localhost:{port}/hook")
        assert (result.ok, result.status_code) == (True, 204), result.error
        assert [r.path for r in receiver.requests] == ["/hook"]


async def test_an_allowed_name_still_may_not_resolve_to_an_internal_address() -> None:
    async with receiving(204) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        result = await _post(CallbackPolicy.parse("localhost", deny_private=True), f"http://localhost:{port}/hook")
        assert result.error is not None
        assert result.error.endswith("is a loopback address (CALLBACK_DENY_PRIVATE)")
        assert receiver.requests == []


async def test_an_unresolvable_name_is_a_failed_attempt_not_a_crash() -> None:
    result = await _post(CallbackPolicy(deny_private=True), "http://no-such-host.invalid/hook")
    assert result.error is not None
    assert result.error.startswith("ConnectError: cannot resolve no-such-host.invalid")


# -- end to end: a running Hades refuses at submit and records the refusal at delivery ---------------------------


async def test_hades_refuses_at_submit_and_records_a_refused_delivery(start_hades: StartHades, tmp_path: Any) -> None:
    async with receiving(200) as receiver:
        port = receiver.url.rsplit(":", 1)[1]
        hades = await start_hades(
            Roles(api=True, scheduler=True, executor=True, notifier=True),
            HADES_EXECUTOR="process",
            HADES_PROCESS_WORKSPACES=str(tmp_path),
            CALLBACK_DENY_PRIVATE="true",
            WEBHOOK_MAX_ATTEMPTS="1",
            LOG_FORWARD_MAX_ATTEMPTS="1",
        )
        job = {"name": "ssrf", "steps": [{"id": 1, "image": "ignored", "script": "echo hi"}]}
        refused = await hades.client.post("/build", json={**job, "callback_url": f"{receiver.url}/logs"})
        assert refused.status_code == 400
        assert refused.text == (
            "Invalid callback_url: callback URL host 127.0.0.1 is a loopback address (CALLBACK_DENY_PRIVATE)"
        )
        hooks = {"callback_url": f"http://localhost:{port}/logs", "status_callback_url": f"http://localhost:{port}/s"}
        job_id = await hades.submit({**job, **hooks})
        await hades.wait_terminal(job_id)

        async def both_recorded() -> list[dict[str, Any]] | None:
            rows: list[dict[str, Any]] = (await hades.client.get(f"/jobs/{job_id}/deliveries")).json()["deliveries"]
            return rows if {row["kind"] for row in rows} == {"logs", "webhook"} else None

        rows = await eventually(both_recorded)
        for row in rows:
            assert (row["ok"], row["final"], row["status_code"]) == (False, True, None)
            assert row["error"].startswith("not sent: callback URL host localhost (")
            assert row["error"].endswith("is a loopback address (CALLBACK_DENY_PRIVATE)")
        assert receiver.requests == []
