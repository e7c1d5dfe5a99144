"""Fixtures: the HTTP fake of Honcho, and our adapter over it with the real SDK."""

from __future__ import annotations

import pytest
from honcho_helpers import KEY, settings

from indexer import HonchoMemoryService
from indexer.testing import FakeHoncho


@pytest.fixture
def fake() -> FakeHoncho:
    return FakeHoncho(api_key=KEY)


@pytest.fixture
def service(fake):
    svc = HonchoMemoryService(settings(), KEY, fake.transport())
    yield svc
    svc.close()
