"""The Honcho contract, driven through the real honcho-ai SDK.

Contract tests run against five backends: ``fake`` (FakeHoncho behind httpx.MockTransport),
``fake-http`` (FakeHoncho served over real HTTP on 127.0.0.1), ``fake-semantic`` (FakeHoncho
searching as a server with embeddings does), ``live`` (a real Honcho without embeddings) and
``live-semantic`` (a real Honcho with them). The live ones are opt-in: ``-m live`` with
HONCHO_BASE_URL and HONCHO_EMBED_BASE_URL set (``../shared/tools/honcho-env.sh`` starts both),
and HONCHO_API_KEY for the auth test. Each live test uses its own fresh workspace and deletes it
as the evaluation does. Fault-injection and inspection tests are fake-only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import honcho
import httpx
import pytest
from honcho.api_types import SessionPeerConfig

from indexer.testing import MAX_MESSAGE_CHARS, FakeHoncho, delete_workspace

API_KEY = "test-key"
MOCK_URL = "http://honcho.test"
HURRIED_S = 0.2  # the timeout of a request sent in `Backend.hurried`
CARDS_CONFIG = {"reasoning": {"enabled": False}, "summary": {"enabled": False}}


@dataclass
class Backend:
    """One Honcho endpoint, and a factory for SDK clients talking to it."""

    name: str
    base_url: str
    api_key: str | None
    workspace: str
    fake: FakeHoncho | None
    search_mode: str = "lexical"
    clients: list[httpx.Client] = field(default_factory=list)
    hurry: bool = False  # see `hurried`

    def sdk(self, *, api_key: str | None = None, timeout: float = 10.0) -> honcho.Honcho:
        """Build the SDK the way the adapter does: max_retries=0 and an explicit key."""
        if self.base_url == MOCK_URL:
            assert self.fake is not None
            http_client = self.fake.client(MOCK_URL)
        else:
            http_client = httpx.Client(base_url=self.base_url, transport=_Hurried(self))
        self.clients.append(http_client)
        return honcho.Honcho(
            api_key=api_key if api_key is not None else self.api_key,
            base_url=self.base_url,
            workspace_id=self.workspace,
            max_retries=0,
            timeout=timeout,
            http_client=http_client,
        )

    def raw(self) -> httpx.Client:
        """A plain httpx client for requests the SDK cannot make."""
        if self.base_url == MOCK_URL:
            assert self.fake is not None
            client = self.fake.client(MOCK_URL)
        else:
            client = httpx.Client(base_url=self.base_url, timeout=10.0)
        self.clients.append(client)
        return client

    def close(self) -> None:
        for client in self.clients:
            client.close()

    @contextlib.contextmanager
    def hurried(self) -> Iterator[None]:
        """Over HTTP, the SDK's requests sent in the block time out after `HURRIED_S`.

        The fake never answers a request it times out (it holds the line open): only the
        client's own timeout ends it. So only the request meant to time out is sent in here;
        every other one keeps the SDK's timeout, and none can time out on a busy machine.
        Through the MockTransport a timeout is raised at once, whatever the timeout.
        """
        self.hurry = True
        try:
            yield
        finally:
            self.hurry = False


class _Hurried(httpx.HTTPTransport):
    """Real HTTP; a request sent while its backend is `hurried` gets `HURRIED_S` to finish."""

    def __init__(self, backend: Backend) -> None:
        super().__init__()
        self._backend = backend

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self._backend.hurry:
            request.extensions["timeout"] = httpx.Timeout(HURRIED_S).as_dict()
        return super().handle_request(request)


@contextlib.contextmanager
def _fake_backend(name: str, fake: FakeHoncho | None = None) -> Iterator[Backend]:
    mode = "semantic" if name == "fake-semantic" else "lexical"
    fake = fake or FakeHoncho(api_key=API_KEY, search_mode=mode)
    if name in ("fake", "fake-semantic"):
        backend = Backend(name, MOCK_URL, API_KEY, "ws", fake, mode)
        try:
            yield backend
        finally:
            backend.close()
        return
    with fake.serve() as base_url:
        backend = Backend(name, base_url, API_KEY, "ws", fake)
        try:
            yield backend
        finally:
            backend.close()


LIVE = {
    "live": ("HONCHO_BASE_URL", "lexical"),
    "live-semantic": ("HONCHO_EMBED_BASE_URL", "semantic"),
}


@contextlib.contextmanager
def _live_backend(name: str) -> Iterator[Backend]:
    variable, mode = LIVE[name]
    base_url = os.environ.get(variable)
    if not base_url:
        pytest.skip(f"set {variable} to run the live contract (tools/honcho-env.sh)")
    workspace = f"artmem-contract-{uuid.uuid4().hex[:12]}"
    live = Backend(name, base_url, os.environ.get("HONCHO_API_KEY"), workspace, None, mode)
    try:
        yield live
    finally:
        headers = {"Authorization": f"Bearer {live.api_key}"} if live.api_key else {}
        with httpx.Client(base_url=base_url, headers=headers, timeout=20) as admin:
            assert delete_workspace(admin, workspace) == []
        live.close()


@pytest.fixture(
    params=[
        "fake",
        "fake-http",
        "fake-semantic",
        pytest.param("live", marks=pytest.mark.live),
        pytest.param("live-semantic", marks=pytest.mark.live),
    ]
)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    opened = _live_backend if request.param in LIVE else _fake_backend
    with opened(request.param) as found:
        yield found


@pytest.fixture(params=["fake", "fake-http"])
def faked(request: pytest.FixtureRequest) -> Iterator[Backend]:
    with _fake_backend(request.param) as found:
        yield found


@pytest.fixture
def mock() -> Iterator[Backend]:
    with _fake_backend("fake") as found:
        yield found


def _fake(backend: Backend) -> FakeHoncho:
    assert backend.fake is not None
    return backend.fake


def _stored(backend: Backend, session: str) -> list[str]:
    return [m.content for m in _fake(backend).messages(backend.workspace, session)]


# ============================================================================================
# The contract (fake, fake over HTTP, live)
# ============================================================================================


def test_health(backend):
    response = backend.raw().get("/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_get_or_create_is_idempotent(backend):
    sdk = backend.sdk()
    first_peer = sdk.peer("alice")
    second_peer = sdk.peer("alice")
    first_session = sdk.session("s-idem")
    second_session = sdk.session("s-idem")
    assert first_peer.created_at == second_peer.created_at
    assert first_session.created_at == second_session.created_at
    assert first_session.is_active is True
    if backend.fake:
        assert list(backend.fake.peers("ws")) == ["alice"]
        assert list(backend.fake.sessions("ws")) == ["s-idem"]
        statuses = [(r.kind, r.outcome) for r in backend.fake.requests]
        assert statuses == [
            ("workspace_create", 201),
            ("peer_create", 201),
            ("peer_create", 200),
            ("session_create", 201),
            ("session_create", 200),
        ]


def test_peer_configuration_observe_me(backend):
    sdk = backend.sdk()
    peer = sdk.peer("artmem-assistant", configuration={"observe_me": False})
    assert peer.configuration.observe_me is False
    assert sdk.peer("artmem-assistant").get_configuration().observe_me is False


def test_session_configuration_disables_reasoning_and_summary(backend):
    sdk = backend.sdk()
    session = sdk.session("cards-p1", configuration=CARDS_CONFIG)
    assert session.configuration.reasoning.enabled is False
    assert session.configuration.summary.enabled is False
    fetched = sdk.session("cards-p1").get_configuration()
    assert fetched.reasoning.enabled is False
    assert fetched.summary.enabled is False


def test_session_peers_and_their_configuration(backend):
    sdk = backend.sdk()
    assistant = sdk.peer("artmem-assistant", configuration={"observe_me": False})
    session = sdk.session(
        "cards-p2",
        configuration=CARDS_CONFIG,
        peers=[(assistant, SessionPeerConfig(observe_me=False, observe_others=False))],
    )
    assert session.get_peer_configuration(assistant).observe_me is False
    session.set_peer_configuration("artmem-assistant", SessionPeerConfig(observe_me=True))
    assert session.get_peer_configuration("artmem-assistant").observe_me is True
    session.add_peers(["alice"])
    assert {p.id for p in session.peers()} == {"artmem-assistant", "alice"}


def test_add_messages_round_trip(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-round")
    metadata = {
        "source": "artmem",
        "kind": "experiment-card",
        "delivery_id": "d" * 64,
        "nested": {"list": [1, "two", {"three": 3}], "flag": True, "none": None},
    }
    created = session.add_messages([alice.message("Cohort response table", metadata=metadata)])
    assert len(created) == 1
    message = created[0]
    assert len(message.id) == 21
    assert message.content == "Cohort response table"
    assert message.peer_id == "alice"
    assert message.session_id == "s-round"
    assert message.workspace_id == backend.workspace
    assert message.metadata == metadata
    assert isinstance(message.token_count, int)
    assert message.created_at.tzinfo is not None
    listed = session.messages()
    assert [m.id for m in listed] == [message.id]
    if backend.fake:
        assert _stored(backend, "s-round") == ["Cohort response table"]
        assert backend.fake.requests[-2].outcome == 201


def test_message_creation_creates_session_and_peer(backend):
    sdk = backend.sdk()
    session = honcho.Session("s-implicit", sdk)  # no request: the message creates it
    session.add_messages([honcho.MessageCreateParams(peer_id="bob", content="hello")])
    assert [m.peer_id for m in session.messages()] == ["bob"]
    assert {p.id for p in session.peers()} == {"bob"}


def test_a_client_created_at_is_kept_and_filterable(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-time")
    old = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    [dated] = session.add_messages([alice.message("old", created_at=old)])
    session.add_messages([alice.message("new")])
    assert dated.created_at == old
    before = session.messages(filters={"created_at": {"lt": "2025-01-01T00:00:00+00:00"}})
    assert [m.content for m in before] == ["old"]


def test_nul_characters_are_stripped(backend):
    sdk = backend.sdk()
    session = sdk.session("s-nul")
    [message] = session.add_messages([sdk.peer("alice").message("a\x00b")])
    assert message.content == "ab"


def test_one_to_one_hundred_messages_per_request(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-count")
    with pytest.raises(honcho.UnprocessableEntityError) as info:
        session.add_messages([alice.message(f"m{i}") for i in range(101)])
    assert info.value.status == 422
    with pytest.raises(honcho.UnprocessableEntityError):
        session.add_messages([])
    assert session.messages().total == 0
    assert len(session.add_messages([alice.message(f"m{i}") for i in range(100)])) == 100


def test_content_is_at_most_25000_characters(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-size")
    with pytest.raises(honcho.UnprocessableEntityError):
        session.add_messages([alice.message("x" * (MAX_MESSAGE_CHARS + 1))])
    [message] = session.add_messages([alice.message("x" * MAX_MESSAGE_CHARS)])
    assert len(message.content) == MAX_MESSAGE_CHARS


def test_metadata_has_at_most_100_keys(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-meta")
    too_many = {f"k{i}": i for i in range(101)}
    with pytest.raises(honcho.UnprocessableEntityError):
        session.add_messages([alice.message("x", metadata=too_many)])
    just_enough = {f"k{i}": i for i in range(100)}
    assert session.add_messages([alice.message("x", metadata=just_enough)])[0].metadata == (
        just_enough
    )


@pytest.mark.parametrize("bad_id", ["has.dot", "has space", "scope.x", "x" * 513])
def test_invalid_ids_in_bodies_are_rejected(backend, bad_id):
    sdk = backend.sdk()
    with pytest.raises(honcho.UnprocessableEntityError):
        sdk.session(bad_id)
    session = sdk.session("s-ids")
    # The server validates a message's peer id only when it creates the peer, and fails there
    # with a 500: a retryable-looking answer to a permanent error. Clients check ids first.
    with pytest.raises(honcho.ServerError):
        session.add_messages([honcho.MessageCreateParams(peer_id=bad_id, content="x")])


def test_list_paginates_a_metadata_containment_filter(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-page")
    session.add_messages(
        [
            alice.message(f"m{i}", metadata={"delivery_id": "d1" if i % 3 else "d2", "i": i})
            for i in range(8)
        ]
    )
    page = session.messages(filters={"metadata": {"delivery_id": "d1"}}, size=2)
    assert (page.total, page.pages, page.page, page.size) == (5, 3, 1, 2)
    assert [m.content for m in page.items] == ["m1", "m2"]
    assert page.has_next_page()
    assert [m.content for m in page] == ["m1", "m2", "m4", "m5", "m7"]  # follows every page
    newest_first = session.messages(filters={"metadata": {"delivery_id": "d1"}}, reverse=True)
    assert [m.content for m in newest_first] == ["m7", "m5", "m4", "m2", "m1"]
    assert session.messages(filters={"metadata": {"delivery_id": "nope"}}).total == 0
    third = session.messages(filters={"metadata": {"delivery_id": "d1"}}, page=3, size=2)
    assert [m.content for m in third.items] == ["m7"]
    assert not third.has_next_page()


def test_containment_of_nested_objects_and_lists(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-contain")
    session.add_messages(
        [
            alice.message("a", metadata={"tags": ["x", "y"], "card": {"project": "p", "rev": 2}}),
            alice.message("b", metadata={"tags": ["y"], "card": {"project": "q", "rev": 2}}),
        ]
    )

    def contents(filters):
        return [m.content for m in session.messages(filters=filters)]

    assert contents({"metadata": {"tags": ["x"]}}) == ["a"]
    assert contents({"metadata": {"tags": ["y"]}}) == ["a", "b"]
    assert contents({"metadata": {"card": {"project": "q"}}}) == ["b"]
    assert contents({"metadata": {"card": {"rev": 2}, "tags": ["x", "y"]}}) == ["a"]
    assert contents({"metadata": {"card": {"project": "p", "rev": 3}}}) == []


def test_filter_operators_and_combinators(backend):
    sdk = backend.sdk()
    alice, bob = sdk.peer("alice"), sdk.peer("bob")
    session = sdk.session("s-ops")
    session.add_messages(
        [
            alice.message("a1", metadata={"n": 1, "kind": "card"}),
            bob.message("b2", metadata={"n": 2, "kind": "chat"}),
            alice.message("a3", metadata={"n": 3}),
        ]
    )

    def contents(filters):
        return [m.content for m in session.messages(filters=filters)]

    assert contents({"peer_id": "bob"}) == ["b2"]
    assert contents({"peer_id": {"in": ["alice", "carol"]}}) == ["a1", "a3"]
    assert contents({"peer_id": {"icontains": "ALI"}}) == ["a1", "a3"]
    assert contents({"NOT": [{"peer_id": "alice"}]}) == ["b2"]  # `ne` cannot say it (below)
    assert contents({"metadata": {"n": {"gte": 2}}}) == ["b2", "a3"]
    assert contents({"AND": [{"peer_id": "alice"}, {"metadata": {"n": {"lt": 3}}}]}) == ["a1"]
    assert contents({"OR": [{"peer_id": "bob"}, {"metadata": {"n": 3}}]}) == ["b2", "a3"]
    # NOT keeps rows where the field is missing.
    assert contents({"NOT": [{"metadata": {"kind": "card"}}]}) == ["b2", "a3"]
    assert contents({"session_id": "s-ops", "metadata": {"kind": "card"}}) == ["a1"]


@pytest.mark.parametrize(
    "filters",
    [
        {"nonsense": 1},
        {"AND": [{"bogus_field": "x"}]},
        {"NOT": {"peer_id": "bob"}},  # combinators take lists only
        {"peer_id": {"ne": "alice"}},  # ordering operators on a text column compare numbers
        {"peer_id": {"gt": "a"}},
    ],
)
def test_unknown_filter_keys_are_rejected(backend, filters):
    session = backend.sdk().session("s-badfilter")
    with pytest.raises(honcho.UnprocessableEntityError):
        session.messages(filters=filters)


def test_an_unknown_operator_fails_on_a_column_and_matches_nothing_in_metadata(backend):
    session = backend.sdk().session("s-badop")
    session.add_messages([backend.sdk().peer("alice").message("x", metadata={"n": 1})])
    assert [
        m.content for m in session.messages(filters={"metadata": {"n": {"between": [1, 2]}}})
    ] == []
    with pytest.raises(honcho.ServerError):
        session.messages(filters={"peer_id": {"between": [1, 2]}})


def test_session_search(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    session = sdk.session("s-search")
    session.add_messages(
        [
            alice.message("Treatment response by cohort", metadata={"project_id": "p1"}),
            alice.message("Cohort sizes per site", metadata={"project_id": "p2"}),
            alice.message("Unrelated note about lunch", metadata={"project_id": "p1"}),
        ]
    )
    hits = session.search("cohort")
    assert {"Treatment response by cohort", "Cohort sizes per site"} <= {m.content for m in hits}
    assert all(isinstance(m, honcho.Message) for m in hits)
    filtered = session.search("cohort", filters={"metadata": {"project_id": "p1"}})
    assert [m.content for m in filtered][0] == "Treatment response by cohort"
    assert {m.metadata["project_id"] for m in filtered} == {"p1"}
    assert len(session.search("cohort", limit=1)) == 1
    if backend.search_mode == "lexical":
        assert session.search("zebra") == []
        assert [m.content for m in session.search("SIZES PER")] == ["Cohort sizes per site"]
    else:  # no similarity cut-off: every message of the session is a candidate
        assert len(session.search("zebra")) == 3


def test_workspace_search(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    sdk.session("s-ws1").add_messages([alice.message("cohort alpha", metadata={"k": "1"})])
    sdk.session("s-ws2").add_messages([alice.message("cohort beta", metadata={"k": "2"})])
    assert {"cohort alpha", "cohort beta"} <= {m.content for m in sdk.search("cohort")}
    only = sdk.search("cohort", filters={"session_id": "s-ws2"})
    assert [m.content for m in only] == ["cohort beta"]


def test_workspace_search_with_a_metadata_filter_scopes_project_and_person(backend):
    # What recall and memory_search send: containment of layer, project and person.
    sdk = backend.sdk()
    alice, bob = sdk.peer("alice"), sdk.peer("bob")
    scope = {"layer": "conversation", "project_id": "p1", "user_peer_id": "alice"}
    sdk.session("s-m1").add_messages([alice.message("cohorts stay at three", metadata=scope)])
    sdk.session("s-m2").add_messages(
        [
            bob.message("cohorts stay at three", metadata={**scope, "user_peer_id": "bob"}),
            alice.message("cohorts stay at three", metadata={**scope, "project_id": "p2"}),
        ]
    )
    hits = sdk.search("cohorts", filters={"metadata": scope}, limit=10)
    assert [(m.session_id, m.metadata["user_peer_id"]) for m in hits] == [("s-m1", "alice")]


def test_session_metadata_and_peers_at_creation(backend):
    # What a conversation session is created with: the harness session id, observed person.
    sdk = backend.sdk()
    session = sdk.session(
        "dsh_contract",
        metadata={"source": "artmem", "dsh_session_id": "main-session-1"},
        peers=[
            ("alice", SessionPeerConfig(observe_me=True, observe_others=False)),
            ("artmem-assistant", SessionPeerConfig(observe_me=False, observe_others=False)),
        ],
    )
    assert session.get_metadata() == {"source": "artmem", "dsh_session_id": "main-session-1"}
    assert session.get_peer_configuration("artmem-assistant").observe_me is False


def test_peer_context_and_dialectic_shapes(backend):
    sdk = backend.sdk()
    alice = sdk.peer("alice")
    if backend.fake:
        backend.fake.set_peer_memory(
            backend.workspace, "alice", representation="- likes Parquet", peer_card=["Alice"],
            chat_answer="She prefers Parquet.",
        )  # fmt: skip
    context = alice.context()
    assert context.peer_id == "alice"
    assert context.representation is None or isinstance(context.representation, str)
    assert context.peer_card is None or all(isinstance(x, str) for x in context.peer_card)
    if backend.fake:
        assert context.representation == "- likes Parquet" and context.peer_card == ["Alice"]
        assert alice.chat("what format?", reasoning_level="low", timeout=5) == (
            "She prefers Parquet."
        )


def test_a_repeated_create_duplicates(backend):
    """No idempotency key exists: the duplicate defence must live in the client."""
    sdk = backend.sdk()
    session = sdk.session("s-dup")
    message = sdk.peer("alice").message("same", metadata={"delivery_id": "d-1"})
    first = session.add_messages([message])
    second = session.add_messages([message])
    assert first[0].id != second[0].id
    assert session.messages(filters={"metadata": {"delivery_id": "d-1"}}).total == 2


def test_a_bad_key_is_401(backend):
    if backend.api_key is None:
        pytest.skip("the server runs without auth")
    sdk = backend.sdk(api_key="wrong-key")
    with pytest.raises(honcho.AuthenticationError) as info:
        sdk.peer("alice")
    assert info.value.status == 401


def _post_each(sdk, session_id, texts, metadata=None):
    """One request per text, so each has its own time (the messages of a request share one)."""
    session = sdk.session(session_id)
    alice = sdk.peer("alice")
    for text in texts:
        session.add_messages([alice.message(text, metadata=metadata or {})])
    return session


SEARCH_TEXTS = [
    "The Quick-Brown fox jumped over the lazy dog.",
    "A fox and a cat",
    "heron heron heron heron",
    "a heron by the lake",
    "our lab reports every assay result in millimolar units",
    "axb and 100% sure",
    "mail a.b@example.org about it",
    "Running runners ran quickly; genes and Gene expression",
    "Hyperparameter sweep errors at 37C and 12.5 mM",
]


def _contents(hits):
    return [m.content for m in hits]


def test_lexical_search_rules(backend):
    if backend.search_mode != "lexical":
        pytest.skip("a server without embeddings")
    sdk = backend.sdk()
    _post_each(sdk, "s-lex", SEARCH_TEXTS)

    def found(query, **kwargs):
        return _contents(sdk.search(query, **kwargs))

    # Any special character: one literal, case-insensitive substring, newest first.
    assert found("QUICK-B") == [SEARCH_TEXTS[0]]
    assert found("brown-quick") == []
    assert found("fox.") == []
    assert found("cat's") == []
    assert found("b@ex") == [SEARCH_TEXTS[6]]
    assert found("a_b") == [] and found("100%") == [SEARCH_TEXTS[5]]  # no wildcards
    assert found("Which units does our lab report assay results in?") == []
    # Otherwise every English stem of the query, in any order, or a substring.
    assert found("Which units does our lab report assay results in") == [SEARCH_TEXTS[4]]
    assert found("jumping foxes") == [SEARCH_TEXTS[0]]
    assert found("fox cat") == found("cat fox") == [SEARCH_TEXTS[1]]
    assert found("genes") == found("gene") == [SEARCH_TEXTS[7]]
    assert found("errors") == found("hyperparam") == [SEARCH_TEXTS[8]]
    assert found("uick") == [SEARCH_TEXTS[7], SEARCH_TEXTS[0]]  # substring only: newest first
    assert found("the") == [SEARCH_TEXTS[3], SEARCH_TEXTS[0]]  # a stop word: substring only
    assert found("heron") == [SEARCH_TEXTS[2], SEARCH_TEXTS[3]]  # ts_rank first
    assert found("millimolar units assay lab telescope") == []  # AND of every stem
    assert found("zzqx") == []
    assert found("a", limit=3) == [SEARCH_TEXTS[8], SEARCH_TEXTS[7], SEARCH_TEXTS[6]]


def test_lexical_search_equals_the_fakes(backend):
    """Stems, stop words, substrings and ts_rank order, against the fake's own answers."""
    if backend.search_mode != "lexical":
        pytest.skip("a server without embeddings")
    queries = [
        "lab units", "report result", "heron lake", "fox", "dog lazy", "runner", "run",
        "37c", "12.5", "mm", "expression genes", "every", "our", "ab", "assay results",
    ]  # fmt: skip
    sdk = backend.sdk()
    _post_each(sdk, "s-same", SEARCH_TEXTS + ["lab lab units report", "units, units and labs"])
    with _fake_backend("fake") as reference:
        _post_each(
            reference.sdk(),
            "s-same",
            SEARCH_TEXTS + ["lab lab units report", "units, units and labs"],
        )
        for query in queries:
            expected = _contents(reference.sdk().search(query, limit=20))
            assert _contents(sdk.search(query, limit=20)) == expected, query


def test_semantic_search_has_no_cut_off(backend):
    if backend.search_mode != "semantic":
        pytest.skip("a server with embeddings")
    sdk = backend.sdk()
    _post_each(sdk, "s-sem", SEARCH_TEXTS[:4], {"k": "1"})
    _post_each(sdk, "s-sem2", ["cohort table"], {"k": "2"})
    # A full-text hit is in the list at once, embedded or not (embedding runs after the
    # write, and a message without one ties with the nearest by embedding, which goes first).
    assert "cohort table" in _contents(sdk.search("cohort table", limit=2))
    everything = sorted(SEARCH_TEXTS[:4] + ["cohort table"])
    # Nothing is cut once every message is embedded; the server gives no signal for that, so
    # the live run asks again until it is (the fake embeds as it writes).
    every = _until(
        lambda: sorted(_contents(sdk.search("telescope astronomy", limit=10))), everything
    )
    assert every == everything
    assert len(sdk.search("zzqx", limit=2)) == 2  # only the limit shortens the list
    scoped = sdk.search("zzqx", filters={"metadata": {"k": "2"}})
    assert _contents(scoped) == ["cohort table"]  # and the filters


def _until(read, wanted, deadline_s=30.0):
    """`read()` until it returns `wanted` or the deadline passes; the last answer."""
    stop = time.monotonic() + deadline_s
    answer = read()
    while answer != wanted and time.monotonic() < stop:
        threading.Event().wait(0.1)  # a remote server's background task: nothing to wait on
        answer = read()
    return answer


def test_search_limits(backend):
    client = backend.raw()
    headers = {"Authorization": f"Bearer {backend.api_key}"} if backend.api_key else {}
    path = f"/v3/workspaces/{backend.workspace}/search"
    backend.sdk().peer("alice")  # the workspace exists
    for limit in (0, 101):
        answer = client.post(path, json={"query": "x", "limit": limit}, headers=headers)
        assert answer.status_code == 422, limit
    assert client.post(path, json={"query": ""}, headers=headers).json() == []


def test_list_page_and_size_bounds(backend):
    sdk = backend.sdk()
    _post_each(sdk, "s-pages", ["one", "two", "three"])
    client = backend.raw()
    headers = {"Authorization": f"Bearer {backend.api_key}"} if backend.api_key else {}
    path = f"/v3/workspaces/{backend.workspace}/sessions/s-pages/messages/list"
    for query in ("size=0", "size=101", "page=0"):
        assert client.post(f"{path}?{query}", json={}, headers=headers).status_code == 422
    past = client.post(f"{path}?page=9&size=2", json={}, headers=headers)
    assert past.status_code == 200 and past.json()["items"] == []
    assert past.json()["total"] == 3 and past.json()["pages"] == 2


def test_deletes_are_queued_and_a_workspace_with_sessions_is_refused(backend):
    sdk = backend.sdk()
    _post_each(sdk, "s-del", ["kept after deletion"])
    client = backend.raw()
    headers = {"Authorization": f"Bearer {backend.api_key}"} if backend.api_key else {}
    ws = f"/v3/workspaces/{backend.workspace}"

    def sessions():
        listed = client.post(f"{ws}/sessions/list", json={}, headers=headers)
        return [item["id"] for item in listed.json()["items"]]

    assert client.delete(ws, headers=headers).status_code == 409
    assert sessions() == ["s-del"]
    assert client.delete(f"{ws}/sessions/s-del", headers=headers).status_code == 202
    assert client.delete(f"{ws}/sessions/s-del", headers=headers).status_code == 404
    assert client.delete(f"{ws}/sessions/never", headers=headers).status_code == 404
    assert sessions() == []
    # Only queued: the messages stay listed and searchable; the id cannot be used again.
    session = honcho.Session("s-del", sdk)
    assert _contents(session.messages()) == ["kept after deletion"]
    assert _contents(sdk.search("kept")) == ["kept after deletion"]
    with pytest.raises(honcho.NotFoundError):
        sdk.session("s-del")
    with pytest.raises(honcho.NotFoundError):
        session.add_messages([sdk.peer("alice").message("again")])
    assert client.delete(ws, headers=headers).status_code == 202
    assert client.delete(ws, headers=headers).status_code == 202  # and it remains
    assert client.post(f"{ws}/peers", json={"id": "zed"}, headers=headers).status_code == 201
    assert client.delete(f"{ws}-never", headers=headers).status_code == 404


def test_the_evaluations_cleanup_deletes_sessions_then_the_workspace(backend):
    sdk = backend.sdk()
    for index in range(3):
        _post_each(sdk, f"s-clean-{index}", ["synthetic"])
    client = backend.raw()
    if backend.api_key:
        client.headers["Authorization"] = f"Bearer {backend.api_key}"
    assert delete_workspace(client, backend.workspace) == []
    listed = client.post(f"/v3/workspaces/{backend.workspace}/sessions/list", json={})
    assert listed.json()["items"] == []
    assert delete_workspace(client, backend.workspace) == []  # again: nothing left to do


# ============================================================================================
# Fake-only: validation the server does not do, and inspection
# ============================================================================================


def test_metadata_nesting_is_at_most_five_levels(faked):
    sdk = faked.sdk()
    session = sdk.session("s-depth")
    five = {"a": {"b": {"c": {"d": [1]}}}}
    six = {"a": {"b": {"c": {"d": {"e": [1]}}}}}
    assert session.add_messages([sdk.peer("alice").message("x", metadata=five)])
    with pytest.raises(honcho.UnprocessableEntityError):
        session.add_messages([sdk.peer("alice").message("x", metadata=six)])


@pytest.mark.parametrize(
    "path",
    [
        "/v3/workspaces/ws/sessions/bad.id/messages/list",
        "/v3/workspaces/bad%20ws/sessions/s/messages/list",
        "/v3/workspaces/ws/sessions/s/search",
    ],
)
def test_path_ids_are_validated_and_bodies_checked(faked, path):
    response = faked.raw().post(
        path, json={"unexpected": 1}, headers={"Authorization": f"Bearer {API_KEY}"}
    )
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)


def test_a_422_echoes_what_was_sent(faked):
    """The SDK puts FastAPI's error list, inputs included, into the exception's message."""
    sdk = faked.sdk()
    secret = "confidential cohort text " * 1001
    with pytest.raises(honcho.UnprocessableEntityError) as info:
        sdk.session("s").add_messages([sdk.peer("alice").message(secret)])
    assert secret in str(info.value)
    assert secret in str(info.value.body)


def test_every_route_but_health_needs_the_key(faked):
    client = faked.raw()
    routes = [
        ("POST", "/v3/workspaces", {"id": "ws"}),
        ("POST", "/v3/workspaces/ws/peers", {"id": "p"}),
        ("POST", "/v3/workspaces/ws/sessions", {"id": "s"}),
        ("GET", "/v3/workspaces/ws/sessions/s/peers", None),
        ("GET", "/v3/workspaces/ws/sessions/s/peers/p/config", None),
        ("PUT", "/v3/workspaces/ws/sessions/s/peers/p/config", {"observe_me": False}),
        ("POST", "/v3/workspaces/ws/sessions/s/messages", {"messages": []}),
        ("POST", "/v3/workspaces/ws/sessions/s/messages/list", None),
        ("POST", "/v3/workspaces/ws/sessions/s/search", {"query": "x"}),
        ("POST", "/v3/workspaces/ws/search", {"query": "x"}),
    ]
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": API_KEY}):
        for method, path, body in routes:
            response = client.request(method, path, json=body, headers=headers)
            assert response.status_code == 401, (method, path, headers)
    assert client.get("/health").status_code == 200
    assert _fake(faked).workspaces() == []


def test_unknown_routes_are_404_and_config_put_is_204(faked):
    sdk = faked.sdk()
    sdk.session("s", peers=["alice"])
    client = faked.raw()
    auth = {"Authorization": f"Bearer {API_KEY}"}
    assert client.get("/v3/workspaces/ws/peers/alice/card", headers=auth).status_code == 404
    put = client.put(
        "/v3/workspaces/ws/sessions/s/peers/alice/config", json={"observe_me": False}, headers=auth
    )
    assert (put.status_code, put.content) == (204, b"")
    missing = client.get("/v3/workspaces/ws/sessions/s/peers/carol/config", headers=auth)
    assert missing.status_code == 404


def test_message_ids_are_seeded_nanoids_and_time_comes_from_the_clock():
    now = datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)

    def ids(seed):
        with _fake_backend("fake", FakeHoncho(seed=seed, clock=lambda: now)) as backend:
            sdk = backend.sdk()
            created = sdk.session("s").add_messages(
                [sdk.peer("a").message(str(i)) for i in range(3)]
            )
            assert {m.created_at for m in created} == {now}
            return [m.id for m in created]

    first = ids(7)
    assert first == ids(7)
    assert first != ids(8)
    assert all(
        len(i) == 21
        and set(i) <= set("_-0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
        for i in first
    )


def test_the_request_log_keeps_every_body_but_not_the_key(faked):
    sdk = faked.sdk()
    session = sdk.session("s-log", configuration=CARDS_CONFIG)
    session.add_messages([sdk.peer("alice").message("hi", metadata={"delivery_id": "d"})])
    session.messages(filters={"metadata": {"delivery_id": "d"}}, size=10)
    log = _fake(faked).requests
    assert [r.kind for r in log] == [
        "workspace_create",
        "session_create",
        "peer_create",
        "message_create",
        "message_list",
    ]
    assert log[1].body == {"id": "s-log", "configuration": CARDS_CONFIG}
    assert log[3].body == {
        "messages": [{"content": "hi", "peer_id": "alice", "metadata": {"delivery_id": "d"}}]
    }
    assert log[4].query == {"page": "1", "size": "10"}
    assert log[4].body == {"filters": {"metadata": {"delivery_id": "d"}}}
    assert all(API_KEY.encode() not in r.raw_body for r in log)
    assert all(r.applied and r.fault is None for r in log)


def test_inspection_snapshots(faked):
    sdk = faked.sdk()
    sdk.session(
        "s", configuration=CARDS_CONFIG, peers=[("bot", SessionPeerConfig(observe_me=False))]
    )
    sdk.peer("bot", configuration={"observe_me": False}, metadata={"role": "assistant"})
    fake = _fake(faked)
    [session] = fake.sessions("ws").values()
    assert session.configuration == CARDS_CONFIG
    assert session.peers == {"bot": {"observe_me": False, "observe_others": None}}
    assert fake.peers("ws")["bot"].configuration == {"observe_me": False}
    assert fake.peers("ws")["bot"].metadata == {"role": "assistant"}
    assert fake.messages("ws", "s") == [] and fake.messages("nope") == []


def test_threads_share_one_fake(faked):
    errors: list[BaseException] = []

    def worker(n):
        try:
            sdk = faked.sdk()
            session = sdk.session(f"s{n % 2}")
            for i in range(5):
                session.add_messages([sdk.peer(f"p{n}").message(f"{n}-{i}")])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    stored = _fake(faked).messages("ws")
    assert len(stored) == 30 and len({m.id for m in stored}) == 30
    for n in range(6):  # per-writer order is kept
        mine = [m.content for m in stored if m.peer_id == f"p{n}"]
        assert mine == [f"{n}-{i}" for i in range(5)]


# ============================================================================================
# Fake-only: fault injection, through the MockTransport and over HTTP
# ============================================================================================


def _ready(backend: Backend) -> tuple[honcho.Honcho, honcho.Session]:
    """An SDK whose workspace is ensured and a session to write to."""
    sdk = backend.sdk()
    return sdk, sdk.session("s-fault")


def _taken(fake: FakeHoncho) -> None:
    """Wait until the fake has taken the injected fault (and logged its request).

    A client whose request timed out may give up before the server thread has even read the
    request (on a busy machine): until it has, nothing about the request can be asserted, and
    the next request could take the fault instead.
    """
    assert _until(lambda: fake.pending_faults, 0) == 0


def _write(sdk: honcho.Honcho, session: honcho.Session, text: str) -> list[honcho.Message]:
    return session.add_messages([honcho.MessageCreateParams(peer_id="alice", content=text)])


def test_fail_next_answers_a_status_and_applies_nothing(faked):
    sdk, session = _ready(faked)
    fake = _fake(faked)
    fake.fail_next(2, status=503, kind="message_create")
    for _ in range(2):
        with pytest.raises(honcho.ServerError) as info:
            _write(sdk, session, "x")
        assert info.value.status == 503
    assert fake.pending_faults == 0
    assert _stored(faked, "s-fault") == []
    _write(sdk, session, "x")
    assert _stored(faked, "s-fault") == ["x"]
    assert [(r.outcome, r.fault, r.applied) for r in fake.requests[-3:]] == [
        (503, "fail", False),
        (503, "fail", False),
        (201, None, True),
    ]


def test_fail_next_429_carries_retry_after(faked):
    sdk, session = _ready(faked)
    _fake(faked).fail_next(status=429, retry_after=7, kind="message_create")
    with pytest.raises(honcho.RateLimitError) as info:
        _write(sdk, session, "x")
    assert info.value.retry_after == 7.0


def test_faults_target_a_route_kind(faked):
    sdk, session = _ready(faked)
    fake = _fake(faked)
    fake.fail_next(kind="message_list")
    _write(sdk, session, "x")  # not a list: untouched
    assert fake.pending_faults == 1
    with pytest.raises(honcho.ServerError):
        session.messages()
    assert fake.pending_faults == 0


def test_an_untargeted_fault_hits_the_sdks_first_request(faked):
    """The SDK POSTs /v3/workspaces once per client before anything else."""
    fake = _fake(faked)
    fake.fail_next()
    sdk = faked.sdk()
    with pytest.raises(honcho.ServerError):
        sdk.peer("alice")
    assert fake.requests[0].kind == "workspace_create"
    sdk.peer("alice")  # the SDK ensures the workspace again, since it failed
    assert [r.kind for r in fake.requests] == [
        "workspace_create",
        "workspace_create",
        "peer_create",
    ]


def test_timeout_next_raises_timeout_and_applies_nothing(faked):
    sdk, session = _ready(faked)
    fake = _fake(faked)
    fake.timeout_next(kind="message_create")
    with faked.hurried(), pytest.raises(honcho.TimeoutError):
        _write(sdk, session, "x")  # the message create, alone: the rest was sent by `_ready`
    _taken(fake)
    assert _stored(faked, "s-fault") == []
    assert fake.requests[-1].outcome == "timeout"
    _write(sdk, session, "y")
    assert _stored(faked, "s-fault") == ["y"]


@pytest.mark.parametrize(
    ("status", "raised"),
    [
        (500, honcho.ServerError),
        (502, honcho.ServerError),
        ("disconnect", honcho.ConnectionError),
        ("timeout", honcho.TimeoutError),
    ],
)
def test_commit_then_fail_stores_the_message(faked, status, raised):
    sdk, session = _ready(faked)
    alice = sdk.peer("alice")  # created now: only the message create is faulted (and hurried)
    fake = _fake(faked)
    fake.commit_then_fail_next(status=status, kind="message_create")
    hurry = faked.hurried() if status == "timeout" else contextlib.nullcontext()
    with hurry, pytest.raises(raised):
        session.add_messages([alice.message("card", metadata={"delivery_id": "d-42"})])
    _taken(fake)
    assert _stored(faked, "s-fault") == ["card"]
    assert fake.requests[-1].applied and fake.requests[-1].fault == "commit_then_fail"
    # The duplicate defence: look before re-sending.
    found = session.messages(filters={"metadata": {"delivery_id": "d-42"}})
    assert [m.content for m in found] == ["card"]


def test_down_refuses_connections_until_it_comes_back(faked):
    sdk, session = _ready(faked)
    fake = _fake(faked)
    _write(sdk, session, "before")
    fake.down = True
    with pytest.raises(honcho.ConnectionError):
        _write(sdk, session, "during")
    with pytest.raises(honcho.ConnectionError):
        faked.sdk().peer("alice")
    fake.down = False
    _write(sdk, session, "after")
    assert _stored(faked, "s-fault") == ["before", "after"]


def test_down_in_mock_mode_is_a_connect_error(mock):
    fake = _fake(mock)
    fake.down = True
    with pytest.raises(httpx.ConnectError):
        mock.raw().get("/health")
    assert fake.requests[-1].outcome == "refused"


def test_commit_then_disconnect_over_mock_transport_is_a_protocol_error(mock):
    fake = _fake(mock)
    fake.commit_then_fail_next(status="disconnect")
    with pytest.raises(httpx.RemoteProtocolError):
        mock.raw().post(
            "/v3/workspaces", json={"id": "ws"}, headers={"Authorization": "Bearer test-key"}
        )
    assert fake.workspaces() == ["ws"]


def test_negative_fault_count_is_an_error():
    with pytest.raises(ValueError, match="negative"):
        FakeHoncho().fail_next(-1)


# ============================================================================================
# Server mode specifics
# ============================================================================================


def test_serve_stops_cleanly():
    fake = FakeHoncho()
    with fake.serve() as base_url:
        assert httpx.get(f"{base_url}/health").json() == {"status": "ok"}
        with pytest.raises(RuntimeError, match="already serving"):
            with fake.serve():
                pass  # pragma: no cover
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/health")
    with fake.serve() as again:  # a fake can serve again after stopping
        assert httpx.get(f"{again}/health").status_code == 200


def test_serving_while_down_refuses_from_the_start():
    fake = FakeHoncho()
    fake.down = True
    with fake.serve() as base_url:
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base_url}/health")
        fake.down = False
        assert httpx.get(f"{base_url}/health").status_code == 200


def test_a_subprocess_can_use_the_served_fake():
    fake = FakeHoncho()
    code = textwrap.dedent(
        """
        import sys
        import honcho

        sdk = honcho.Honcho(api_key="test-key", base_url=sys.argv[1], workspace_id="ws",
                            max_retries=0, timeout=10)
        session = sdk.session("from-child")
        session.add_messages([sdk.peer("child").message("hello from a subprocess")])
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HONCHO_")}
    with fake.serve() as base_url:
        subprocess.run([sys.executable, "-c", code, base_url], check=True, timeout=120, env=env)
    assert [m.content for m in fake.messages("ws", "from-child")] == ["hello from a subprocess"]
