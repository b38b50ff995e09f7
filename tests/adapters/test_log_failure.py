"""A loop that tries again logs NATS being away in one line, and anything else with its traceback: during an outage
every role's periodic duties fail every few seconds, and a traceback each time buried what mattered."""

from __future__ import annotations

import logging

import pytest
from nats.errors import TimeoutError as NatsTimeoutError

from hades.adapters.nats.connection import log_failure
from hades.core.errors import StoreUnavailable

log = logging.getLogger("tests.log_failure")


@pytest.mark.parametrize("error", [NatsTimeoutError(), ConnectionRefusedError(111, "refused"), StoreUnavailable("x")])
def test_nats_away_is_one_warning_line(error: Exception, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=log.name):
        try:
            raise error
        except Exception:
            log_failure(log, "heartbeat of %s failed; trying again", "e-1")
    (record,) = caplog.records
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert record.getMessage() == f"heartbeat of e-1 failed; trying again (NATS unavailable: {error!r})"


def test_anything_else_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=log.name):
        try:
            raise KeyError("bug")
        except Exception:
            log_failure(log, "watchdog round failed; trying again")
    (record,) = caplog.records
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.getMessage() == "watchdog round failed; trying again"
