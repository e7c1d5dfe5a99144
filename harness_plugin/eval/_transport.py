"""What went to Honcho: an httpx transport that counts requests and looks for planted strings.

Every Honcho client of the evaluation sends through one `WatchingTransport`. It counts requests
by route template (ids replaced by `{ws}`, `{s}`, `{p}`), adds up request bytes, and checks each
request body for the run's planted secrets and for text capture must exclude (tool output,
subagent reports, event fields it must not read, our own injected recall), as they are and
JSON-escaped. It keeps counts only; bodies are never stored.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field

import httpx

_PLACEHOLDERS = {"workspaces": "{ws}", "sessions": "{s}", "peers": "{p}"}


def route_template(method: str, path: str) -> str:
    """`POST /v3/workspaces/{ws}/sessions/{s}/messages` for any ids (content-free)."""
    parts = path.strip("/").split("/")
    shown = []
    for index, part in enumerate(parts):
        before = parts[index - 1] if index else ""
        if before in _PLACEHOLDERS and part != "list":
            shown.append(_PLACEHOLDERS[before])
        else:
            shown.append(part if part.isidentifier() or part == "v3" else "{id}")
    return f"{method} /" + "/".join(shown)


@dataclass
class Tally:
    """Counts since the last `reset`."""

    by_route: Counter[str] = field(default_factory=Counter)
    bytes_sent: int = 0
    failed: int = 0
    secrets: int = 0
    excluded: int = 0
    known: Counter[str] = field(default_factory=Counter)  # by defect id


@dataclass
class WatchingTransport(httpx.BaseTransport):
    """Counts and scans requests, then hands them to `inner`."""

    inner: httpx.BaseTransport
    tally: Tally = field(default_factory=Tally)
    _secrets: list[bytes] = field(default_factory=list)
    _excluded: list[bytes] = field(default_factory=list)
    excluded_values: list[str] = field(default_factory=list)
    _known: dict[str, list[bytes]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def plant(
        self,
        *,
        secrets: list[str],
        excluded: list[str],
        known: dict[str, list[str]] | None = None,
    ) -> None:
        """What must never be sent, from now on (replaces earlier lists).

        `known`: secrets whose upload is a known defect, counted apart under the defect's id.
        """
        with self._lock:
            self._secrets = _forms(secrets)
            self._excluded = _forms(excluded)
            self.excluded_values = list(excluded)
            self._known = {defect: _forms(values) for defect, values in (known or {}).items()}

    def exclude(self, value: str) -> None:
        """Add one more text that must never be sent (e.g. a recall block just injected)."""
        with self._lock:
            self._excluded += _forms([value])
            self.excluded_values.append(value)

    def reset(self) -> Tally:
        """The counts so far; counting starts again from zero."""
        with self._lock:
            done, self.tally = self.tally, Tally()
        return done

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Count and scan `request`, then send it."""
        body = request.read()
        template = route_template(request.method, request.url.path)
        with self._lock:
            self.tally.by_route[template] += 1
            self.tally.bytes_sent += len(body)
            self.tally.secrets += sum(1 for s in self._secrets if s in body)
            self.tally.excluded += sum(1 for s in self._excluded if s in body)
            for defect, forms in self._known.items():
                self.tally.known[defect] += sum(1 for s in forms if s in body)
        try:
            response = self.inner.handle_request(request)
        except httpx.HTTPError:
            with self._lock:
                self.tally.failed += 1
            raise
        if response.status_code >= 500:
            with self._lock:
                self.tally.failed += 1
        return response

    def close(self) -> None:
        """Clients come and go; the inner transport lives as long as the run (`shutdown`)."""

    def shutdown(self) -> None:
        """Close the inner transport."""
        self.inner.close()


def _forms(values: list[str]) -> list[bytes]:
    """Each value as UTF-8, and as it appears inside a JSON string when that differs."""
    forms: list[bytes] = []
    for value in values:
        for form in (value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
            encoded = form.encode("utf-8")
            if encoded not in forms:
                forms.append(encoded)
    return forms
