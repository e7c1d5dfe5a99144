"""An in-memory fake of the Honcho v3 HTTP API, for tests and benchmarks.

`FakeHoncho` answers the HTTP requests the real ``honcho-ai`` SDK sends, so tests exercise the
SDK itself rather than a mock of it. It is written from the documented contract of Honcho server
v3.0.12 (``shared/reference/honcho-notes.md``), not from the server's code. Use it either way:

```python
fake = FakeHoncho(api_key="test-key")
client = fake.client("http://honcho.test")  # httpx.Client over httpx.MockTransport
sdk = honcho.Honcho(api_key="test-key", base_url="http://honcho.test", workspace_id="ws",
                    max_retries=0, http_client=client)

with fake.serve() as base_url:  # a real HTTP server on 127.0.0.1, for subprocesses/benchmarks
    ...
```

Routes (all JSON; every route except ``GET /health`` needs ``Authorization: Bearer <api_key>``,
else 401; 422 bodies carry ``{"detail": ...}``):

* ``POST /v3/workspaces`` ``{"id", "metadata"?, "configuration"?}``: get-or-create, 201 created
  or 200 existing.
* ``POST /v3/workspaces/list?page=&size=`` ``{"filters"?: {"id"}}``: a page of workspaces.
* ``POST /v3/workspaces/{ws}/peers`` ``{"id", "metadata"?, "configuration"?: {"observe_me"}}``:
  get-or-create (the workspace too).
* ``POST /v3/workspaces/{ws}/sessions`` ``{"id", "metadata"?, "configuration"?, "peers"?}``:
  get-or-create (the workspace and the named peers too).
* ``GET|POST|PUT /v3/workspaces/{ws}/sessions/{s}/peers``: list (a page), add, set members.
* ``GET|PUT /v3/workspaces/{ws}/sessions/{s}/peers/{p}/config``: 200, and 204 with no body.
* ``POST /v3/workspaces/{ws}/sessions/{s}/messages`` ``{"messages": [...]}``: 201 with the list of
  created messages; get-or-creates the workspace, the session and the authoring peers.
* ``POST /v3/workspaces/{ws}/sessions/{s}/messages/list?page=&size=&reverse=`` ``{"filters"?}``.
* ``POST /v3/workspaces/{ws}/sessions/{s}/search`` and ``POST /v3/workspaces/{ws}/search``
  ``{"query", "filters"?, "limit"?}``: a bare list of messages.
* ``GET /health``: ``{"status": "ok"}``.
* ``POST /v3/workspaces/{ws}/sessions/list``: a page of the active sessions.
* ``DELETE /v3/workspaces/{ws}/sessions/{s}``: 202, only queued: the session leaves the lists and
  its id cannot be used again (404), its messages stay listed and searchable.
* ``DELETE /v3/workspaces/{ws}``: 409 while a session is active, else 202 (it remains).

Anything else is answered 404 (``FakeHoncho does not implement ...``). `delete_workspace`
deletes a workspace the way the real server allows (sessions first).

Rules enforced, as the server enforces them (``tests/contract`` runs the same assertions on both):
ids match ``^[A-Za-z0-9_-]{1,512}$`` in bodies (an invalid peer id inside a message is the
server's 500); 1-100 messages per create; content at most 25,000 characters (NUL characters are
then stripped); metadata a JSON object with at most 100 top-level keys and at most 5 levels of
nested objects/arrays (the metadata object itself is level 1); unknown body keys and filter
columns are a 422, ``AND``/``OR``/``NOT`` take lists, an ordering operator on a text column is a
422 and an unknown operator on a column the server's 500 (in metadata it is a literal to
contain). Body validation errors are FastAPI-style lists that echo the offending ``input``
(content included), as FastAPI does. There are no idempotency keys: a repeated create stores a
second copy, as the real server does. Search is the server's (``_text_search`` says how, with
and without embeddings).

Where the fake departs from the server, all of it: it has no embedding model (its semantic mode
ranks by a trigram stand-in); it also validates ids in paths, where the server checks only
bodies, so a client bug surfaces in tests; and it simplifies as follows.

* Filters: ``{"metadata": {...}}`` is JSONB containment (a nested object matches if contained, a
  list means "contains these elements"); a metadata key whose value is an object made only of
  operators applies those operators to that key. Top-level fields ``workspace_id``,
  ``session_id``, ``peer_id``, ``token_count``, ``created_at`` accept a scalar (equality), a list
  (membership), ``"*"`` (anything), ``null`` or an operator object (``gte lte gt lt ne in contains
  icontains``); ``AND``/``OR``/``NOT`` take a list of filters (``NOT`` keeps rows where none
  matches, so a missing metadata key passes), nested at most 5 deep.
* ``token_count`` is ``ceil(len(content) / 4)``, not a tokenizer's count.
* Listing or searching a session that does not exist returns an empty result, not 404.
* Existing peers and sessions: provided metadata replaces, provided configuration is merged key
  by key, provided session peers are added.

Fault injection (each injected fault consumes one matching request, in the order queued, before
authentication; a fault targets one `RouteKind` or, with ``kind=None``, any route except
``/health`` - note the SDK's first request from a new client is ``POST /v3/workspaces``):

* `FakeHoncho.fail_next`: answer with a status (default 503) without touching state.
* `FakeHoncho.timeout_next`: no answer and no effect. Through the MockTransport the client sees
  ``httpx.ReadTimeout``; over HTTP the server holds the connection open without answering until
  the client gives up and closes it, or ``timeout_hold_s`` passes, or the server stops: the client
  waits for its own timeout, so give the SDK a short ``timeout`` in tests (nothing calls sleep).
* `FakeHoncho.commit_then_fail_next`: apply the request, then answer 500 (or another status), or
  drop the connection (``"disconnect"``: ``httpx.RemoteProtocolError`` through the MockTransport,
  a closed socket over HTTP), or time out (``"timeout"``) - the ambiguous outcomes.
* `FakeHoncho.down`: connection refused. Through the MockTransport every request raises
  ``httpx.ConnectError``; over HTTP the listener is closed (and open connections are cut), and it
  is reopened on the same port when ``down`` goes back to False.
* ``latency_s``: added before each answer over HTTP only (for benchmarks).

Inspection: `FakeHoncho.messages`, `FakeHoncho.sessions`, `FakeHoncho.peers`,
`FakeHoncho.workspaces` and `FakeHoncho.requests`, a log of every request with its parsed body
(the ``Authorization`` header is not kept). Everything is guarded by one lock, so the fake can be
shared by threads and by the HTTP server's handler threads.
"""

from __future__ import annotations

from indexer.testing._cleanup import delete_workspace
from indexer.testing._fake import FakeHoncho
from indexer.testing._model import (
    DEFAULT_API_KEY,
    MAX_MESSAGE_CHARS,
    MAX_MESSAGES_PER_REQUEST,
    FakeMessage,
    FakePeer,
    FakeSession,
    Outcome,
    RecordedRequest,
    RouteKind,
)

__all__ = [
    "DEFAULT_API_KEY",
    "MAX_MESSAGE_CHARS",
    "MAX_MESSAGES_PER_REQUEST",
    "FakeHoncho",
    "FakeMessage",
    "FakePeer",
    "FakeSession",
    "Outcome",
    "RecordedRequest",
    "RouteKind",
    "delete_workspace",
]
