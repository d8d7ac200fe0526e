"""Shared fixtures for the matching engine's tests."""

from __future__ import annotations

import pytest

from feedmesh.match.index import BACKENDS


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    """Every available kernel backend (numba and numpy): results must not depend on it."""
    return str(request.param)
