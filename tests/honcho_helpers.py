"""Settings for the adapter over the HTTP fake of Honcho."""

from __future__ import annotations

from indexer import HonchoSettings

KEY = "test-key-5f2c9e"
BASE = "http://honcho.test"


def settings(**overrides) -> HonchoSettings:
    values = {
        "base_url": BASE,
        "workspace_id": "ws",
        "user_peer_id": "alice",
        "assistant_peer_id": "artmem-assistant",
        "timeout_s": 2.0,
        "create_workspace": True,
    }
    values.update(overrides)
    return HonchoSettings(**values)
