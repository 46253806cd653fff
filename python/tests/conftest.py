"""Shared pytest fixtures: the committed fixture folder, loaded once."""

from __future__ import annotations

import pytest

from attention_port import fixtures
from attention_port.cli import DEFAULT_FIXTURES

FIXTURES_DIR = DEFAULT_FIXTURES
ALL_CASES = fixtures.load_fixtures(FIXTURES_DIR)
VALID_CASES = [case for case in ALL_CASES if not case.expects_error]
INVALID_CASES = [case for case in ALL_CASES if case.expects_error]


def case_params(cases):
    return [pytest.param(case, id=case.id) for case in cases]
