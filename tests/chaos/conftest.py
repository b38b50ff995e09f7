"""The chaos suite runs by default and can be picked alone with ``-m chaos``."""

from __future__ import annotations

import pytest

# The campaign's asserts are its verdict: have pytest explain them as it does a test's own.
pytest.register_assert_rewrite("tests.chaos.campaign", "tests.chaos.audit")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: faults injected into a running Hades (tests/chaos); about 3 minutes")
