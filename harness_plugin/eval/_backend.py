"""Where the evaluation's Honcho is: the fake over real HTTP (default), or a configured server.

The fake (`indexer.testing.FakeHoncho`) is served on 127.0.0.1 for the length of the run with a
fresh random key, a ticking clock and a fixed seed, so every run sends the same requests and gets
the same answers. `--live` uses the `[honcho]` base URL and key of the operator's configuration
and owns exactly two uniquely named synthetic workspaces: it refuses to start if either exists,
creates them, and deletes them (and only them) at the end, whatever happened in between.

Honcho deletes as a queue: a workspace that still has an active session is refused (409), so the
run deletes each of its sessions first (each answered 202 and only queued: the session leaves the
lists at once, its messages stay until the server's background worker runs), then the workspace
(202 again). A cleanup that cannot finish never costs the report: `Backend.left` names what an
operator must delete by hand, and the report carries it as a warning.

Workspace creation and deletion are raw HTTP here (`/v3/workspaces`, `/v3/workspaces/list`,
`/v3/workspaces/{id}/sessions/list`, `DELETE`): the Honcho adapter has no deletion, on purpose,
and the product never deletes. Everything else goes through the adapter like the product itself.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Literal

import httpx

from cards import (
    RemoteMisconfigured,
    RemoteRejected,
    RemoteUnauthorized,
    RemoteUnavailable,
)
from harness_plugin.eval._transport import WatchingTransport
from indexer.testing import delete_workspace

if TYPE_CHECKING:
    from harness_plugin.config import HonchoConfig
    from indexer.testing import FakeHoncho

KEY_ENV = "ARTMEM_EVAL_HONCHO_KEY"
FAKE_WORKSPACES = {"main": "artmem-eval", "second": "artmem-eval-second"}
EPOCH = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
HOLD_LIMIT_S = 3.0  # a held fake request waits at most this long (past every recall deadline)
ADMIN_TIMEOUT_S = 20.0


@dataclass
class Backend:
    """The Honcho every person of every case talks to, and how to reach it."""

    kind: Literal["fake", "live"]
    base_url: str
    api_key_env: str
    environ: Mapping[str, str] = field(repr=False)
    workspaces: dict[str, str]
    transport: WatchingTransport
    fake: FakeHoncho | None = None
    timeout_s: float = 5.0
    settle_s: float = 0.0  # live: wait this long after a delivery (Honcho embeds in the background)
    left: list[str] = field(default_factory=list)  # live: what cleanup could not delete
    _holds: list[threading.Event] = field(default_factory=list)

    def hold(self, kind: Literal["peer_context", "workspace_search", "session_search"]) -> None:
        """Make requests of `kind` wait until `release` (fake only)."""
        assert self.fake is not None
        event = self.fake.hold(kind)
        event.clear()  # the fake keeps one event per kind: re-arm it
        self._holds.append(event)

    def release(self) -> None:
        """Let every held request go, and bring the fake back up with no faults queued."""
        for event in self._holds:
            event.set()
        self._holds.clear()
        if self.fake is not None:
            self.fake.down = False
            self.fake.clear_faults()


@contextlib.contextmanager
def fake_backend() -> Iterator[Backend]:
    """The fake Honcho over HTTP on 127.0.0.1, with the run's two workspaces created."""
    from indexer.testing import FakeHoncho

    key = secrets.token_hex(16)
    fake = FakeHoncho(api_key=key, seed=0, clock=ticking_clock(), timeout_hold_s=HOLD_LIMIT_S)
    with fake.serve() as base_url:
        backend = Backend(
            kind="fake",
            base_url=base_url,
            api_key_env=KEY_ENV,
            environ={**os.environ, KEY_ENV: key},
            workspaces=dict(FAKE_WORKSPACES),
            transport=WatchingTransport(httpx.HTTPTransport()),
            fake=fake,
            timeout_s=5.0,
        )
        try:
            with _admin(backend) as admin:
                for workspace in backend.workspaces.values():
                    _create(admin, workspace)
            yield backend
        finally:
            backend.release()
            backend.transport.shutdown()


@contextlib.contextmanager
def live_backend(honcho: HonchoConfig, settle_s: float) -> Iterator[Backend]:
    """A configured Honcho; two fresh synthetic workspaces, deleted afterwards.

    What cannot be deleted is listed in `Backend.left` (sessions as `workspace/sessions/id`),
    never raised: the run's report matters more than its cleanup.

    Raises:
        ConfigError: the API key variable is unset.
        RemoteMisconfigured: a workspace of that name already exists (nothing is touched).
        RemoteUnavailable, RemoteUnauthorized, RemoteRejected: Honcho refused or failed.
    """
    token = secrets.token_hex(6)
    backend = Backend(
        kind="live",
        base_url=honcho.base_url,
        api_key_env=honcho.api_key_env,
        environ={**os.environ, honcho.api_key_env: honcho.api_key(os.environ)},
        workspaces={"main": f"artmem-eval-{token}", "second": f"artmem-eval-{token}-b"},
        transport=WatchingTransport(httpx.HTTPTransport()),
        timeout_s=max(honcho.timeout_s, 10.0),
        settle_s=settle_s,
    )
    created: list[str] = []
    try:
        with _admin(backend) as admin:
            for workspace in backend.workspaces.values():
                if _exists(admin, workspace):
                    raise RemoteMisconfigured(
                        "a workspace with the evaluation's synthetic name already exists; "
                        "refusing to use or delete it"
                    )
            for workspace in backend.workspaces.values():
                _create(admin, workspace)
                created.append(workspace)
        yield backend
    finally:
        backend.transport.shutdown()
        with _admin(backend) as admin:
            for workspace in created:
                backend.left += delete_workspace(admin, workspace)  # never raises


def ticking_clock(start: datetime = EPOCH, step_s: float = 1.0) -> Callable[[], datetime]:
    """A clock that moves `step_s` forward on every reading: stable, ordered timestamps."""
    ticks = itertools.count()
    lock = threading.Lock()

    def now() -> datetime:
        with lock:
            tick = next(ticks)
        return start + timedelta(seconds=tick * step_s)

    return now


@contextlib.contextmanager
def _admin(backend: Backend) -> Iterator[httpx.Client]:
    key = backend.environ[backend.api_key_env]
    with httpx.Client(
        base_url=backend.base_url,
        headers={"Authorization": f"Bearer {key}"},
        timeout=ADMIN_TIMEOUT_S,
    ) as client:
        yield client


def _exists(admin: httpx.Client, workspace: str) -> bool:
    found = _send(admin, "POST", "/v3/workspaces/list", {"filters": {"id": workspace}})
    items = found.json().get("items", []) if found.content else []
    return any(isinstance(item, dict) and item.get("id") == workspace for item in items)


def _create(admin: httpx.Client, workspace: str) -> None:
    body = {"id": workspace, "metadata": {"source": "artmem-eval", "synthetic": True}}
    created = _send(admin, "POST", "/v3/workspaces", body)
    if created.status_code != 201:  # 200: it existed a moment ago; not ours to use or delete
        raise RemoteMisconfigured(
            "the evaluation's synthetic workspace appeared before it was created; refusing it"
        )


def _send(admin: httpx.Client, method: str, path: str, body: object) -> httpx.Response:
    try:
        response = admin.request(method, path, json=body)
    except httpx.HTTPError as exc:
        raise RemoteUnavailable(f"honcho is unreachable: {type(exc).__name__}") from exc
    if response.status_code in (401, 403):
        raise RemoteUnauthorized("honcho refused the credentials (401/403)")
    if response.status_code >= 500:
        raise RemoteUnavailable(f"honcho answered {response.status_code}")
    if response.status_code >= 400:
        raise RemoteRejected(f"honcho rejected {method} of a workspace: {response.status_code}")
    return response
