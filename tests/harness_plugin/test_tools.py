"""The tool surface: registry, schemas, caller scope, and hybrid search under Honcho trouble."""

from __future__ import annotations

import threading

import httpx
import msgspec
import pytest
from conftest import fingerprint
from host_helpers import KEY, caller, environ, export, host_config

from cards import ArtifactError
from harness_plugin._runtime import Runtime
from harness_plugin.worker._caller import Caller, parse_caller
from harness_plugin.worker._tools import ToolHost, registry
from indexer.testing import FakeHoncho

FORBIDDEN_WORDS = (
    "delete",
    "purge",
    "remove",
    "drop",
    "read_file",
    "exec",
    "shell",
    "raw",
    "admin",
)
SCOPE_FIELDS = ("project_id", "project", "session_id", "rlm_root", "destination", "peer_id",
                "delivery_id", "workspace_id", "root")  # fmt: skip


def _record_args(name: str, **extra) -> dict:
    return {
        "source_path": name,
        "title": "Treatment response by cohort",
        "summary": "Aggregate response table.",
        "query_fingerprint": fingerprint(name),
        "source": "trial-warehouse",
        "source_version": "v1",
        "tags": ["cohort"],
        **extra,
    }


@pytest.fixture
def host(tmp_path):
    h = ToolHost(Runtime(host_config(tmp_path), environ=environ()), environ=environ())
    yield h
    h.close()


def _who(tmp_path, **kw) -> Caller:
    return parse_caller(caller(tmp_path, **kw))


@pytest.mark.parametrize("artifact_memory", [False, True])
def test_the_registry_holds_only_safe_tools(artifact_memory):
    names = set(registry(artifact_memory))
    expected = {"memory_search", "memory_status"}
    if artifact_memory:
        expected |= {"memory_artifact_record", "memory_artifact_resolve"}
    assert names == expected
    for name in names:
        assert not any(word in name for word in FORBIDDEN_WORDS)


def test_schemas_are_generated_strict_and_scope_free():
    for tool in registry(True).values():
        described = tool.describe()
        params = described["parameters"]
        assert params.get("additionalProperties") is False
        assert not set(params.get("properties", {})) & set(SCOPE_FIELDS)
        assert "fallible" in described["description"] or tool.name == "memory_status"


@pytest.mark.parametrize("field", SCOPE_FIELDS)
def test_arguments_naming_scope_are_rejected(host, tmp_path, field):
    export(tmp_path, "r.bin", b"x")
    with pytest.raises(ArtifactError) as info:
        host.call("memory_artifact_record", {**_record_args("r.bin"), field: "x"}, _who(tmp_path))
    assert info.value.code == "input.invalid"


def test_nested_content_is_bounded(host, tmp_path):
    export(tmp_path, "r.bin", b"x")
    with pytest.raises(ArtifactError):
        host.call("memory_artifact_record", _record_args("r.bin", tags=["t"] * 21), _who(tmp_path))
    with pytest.raises(ArtifactError):
        host.call("memory_search", {"query": "x" * 1001}, _who(tmp_path))


def test_artifact_tools_are_absent_when_disabled(tmp_path):
    h = ToolHost(Runtime(host_config(tmp_path, artifact_memory=False), environ=environ()))
    try:
        with pytest.raises(ArtifactError) as info:
            h.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
        assert info.value.code == "input.unknown_tool"
    finally:
        h.close()


def test_caller_is_required_and_validated(tmp_path):
    with pytest.raises(ArtifactError) as info:
        parse_caller(None)
    assert info.value.code == "input.invalid_request"
    for bad in ({"session_id": ".."}, {"cwd": "relative"}, {"agent_kind": "god"}, {"extra": 1}):
        with pytest.raises(ArtifactError):
            parse_caller(caller(tmp_path, **bad))


def test_record_search_resolve_through_tools(host, tmp_path):
    data = b"exact result bytes"
    export(tmp_path, "r.bin", data)
    recorded = host.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
    assert recorded["local_saved"] and not recorded["honcho_queued"]
    assert recorded["index_state"] == "disabled"
    found = host.call("memory_search", {"query": "cohort response"}, _who(tmp_path, session="s2"))
    (hit,) = found["hits"]
    assert hit["kind"] == "experiment-card" and hit["origin"] == "local"
    assert hit["trust"] == "untrusted-data" and hit["available_locally"]
    assert found["remote"]["status"] == "disabled" and "fallible" in found["notice"]
    resolved = host.call(
        "memory_artifact_resolve",
        {"experiment_id": hit["experiment_id"], "current_source_version": "v2"},
        _who(tmp_path, session="s2"),
    )
    assert resolved["freshness"] == "stale" and resolved["warnings"]
    with open(resolved["path"], "rb") as handle:
        assert handle.read() == data
    card = host.runtime.stores["trial-analysis"].load_card(hit["experiment_id"])
    assert card.session_id == "s1" and card.tool_call_id == "cell-1:rlm:1"


def test_what_a_tool_returns_is_its_output_struct_and_schema(host, tmp_path):
    """The kernel decodes each reply into the struct the host built it as, and back unchanged;
    the `output` schema lists exactly that struct's fields."""
    export(tmp_path, "r.bin", b"bytes")
    who = _who(tmp_path)
    recorded = host.call("memory_artifact_record", _record_args("r.bin"), who)
    calls = {
        "memory_artifact_record": recorded,
        "memory_search": host.call("memory_search", {"query": "cohort"}, who),
        "memory_artifact_resolve": host.call(
            "memory_artifact_resolve", {"experiment_id": recorded["experiment_id"]}, who
        ),
        "memory_status": host.call("memory_status", {}, who),
    }
    for name, reply in calls.items():
        tool = host.tools[name]
        assert msgspec.to_builtins(msgspec.convert(reply, tool.output_model)) == reply
        schema = tool.describe()["output"]
        fields = msgspec.structs.fields(tool.output_model)
        assert set(schema["properties"]) == {f.encode_name for f in fields}
        assert set(schema["required"]) == {f.encode_name for f in fields if f.required}
        assert schema["additionalProperties"] is False


def test_the_project_comes_from_the_callers_cwd(host, tmp_path):
    export(tmp_path, "r.bin", b"x")
    recorded = host.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
    other = _who(tmp_path, project_dir="other")
    assert host.call("memory_search", {"query": "cohort"}, other)["hits"] == []
    with pytest.raises(ArtifactError) as info:
        host.call("memory_artifact_resolve", {"experiment_id": recorded["experiment_id"]}, other)
    assert info.value.code == "cas.experiment_not_found"
    with pytest.raises(ArtifactError) as info:
        host.call("memory_search", {"query": "x"}, _who(tmp_path, project_dir=".."))
    assert info.value.code == "input.unknown_project"


def test_a_kernel_cannot_record_another_sessions_export(host, tmp_path):
    theirs = export(tmp_path, "r.bin", b"x", session="s2")
    with pytest.raises(ArtifactError) as info:
        host.call("memory_artifact_record", _record_args(str(theirs)), _who(tmp_path))
    assert info.value.code == "cas.path_escape"


def test_status_tool_is_content_free(host, tmp_path):
    export(tmp_path, "r.bin", b"x")
    host.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
    with pytest.raises(ArtifactError):
        host.call("memory_artifact_resolve", {"experiment_id": "exp_" + "a" * 52}, _who(tmp_path))
    status = host.call("memory_status", {}, _who(tmp_path))
    assert status["calls"] == {
        "memory_artifact_record.ok": 1,
        "memory_artifact_resolve.cas.experiment_not_found": 1,
    }
    text = str(status)
    assert "Treatment" not in text and str(tmp_path) not in text and "trial-analysis" not in text


# -- hybrid search with Honcho --------------------------------------------------------------


class GatedTransport(httpx.BaseTransport):
    """Holds search requests until released: a Honcho that is slow, without any sleeping."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.gate = threading.Event()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/search"):
            self.gate.wait(10)
        return self.inner.handle_request(request)


def _honcho_host(tmp_path, transport, **honcho):
    config = host_config(tmp_path, honcho_url="http://honcho.test", **honcho)
    runtime = Runtime(config, environ=environ(), transport=transport)
    return ToolHost(runtime, environ=environ())


def test_local_hits_survive_a_slow_honcho_within_the_deadline(tmp_path):
    fake = FakeHoncho(api_key=KEY)
    gated = GatedTransport(fake.transport())
    h = _honcho_host(tmp_path, gated, search_timeout_s=0.2)
    try:
        export(tmp_path, "r.bin", b"x")
        h.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
        found = h.call("memory_search", {"query": "cohort"}, _who(tmp_path))
        assert found["remote"]["status"] == "timeout"
        assert [hit["origin"] for hit in found["hits"]] == ["local"]
    finally:
        gated.gate.set()
        h.close()


def test_local_hits_survive_honcho_down(tmp_path):
    fake = FakeHoncho(api_key=KEY)
    fake.down = True
    h = _honcho_host(tmp_path, fake.transport())
    try:
        export(tmp_path, "r.bin", b"x")
        recorded = h.call("memory_artifact_record", _record_args("r.bin"), _who(tmp_path))
        assert recorded["honcho_queued"] and recorded["index_state"] == "queued"
        found = h.call("memory_search", {"query": "cohort"}, _who(tmp_path))
        assert found["remote"] == {
            "status": "error",
            "error": "indexer.remote_unavailable",
            "dropped_wrong_project": 0,
        }
        assert len(found["hits"]) == 1
    finally:
        h.close()


def test_merge_labels_sources_and_keeps_exact_local_first(tmp_path):
    fake = FakeHoncho(api_key=KEY)
    h = _honcho_host(tmp_path, fake.transport())
    try:
        ids = []
        for n, words in enumerate(["cohort alpha", "cohort beta", "gamma only"]):
            export(tmp_path, f"r{n}.bin", bytes([n]))
            args = _record_args(f"r{n}.bin", title=f"Result {words}", tags=[f"tag{n}"])
            ids.append(h.call("memory_artifact_record", args, _who(tmp_path))["experiment_id"])
        h.runtime.sync(5)  # cards reach Honcho: its search can now find them too
        found = h.call("memory_search", {"query": "tag2"}, _who(tmp_path))
        assert found["hits"][0]["experiment_id"] == ids[2] and found["hits"][0]["exact"] == ["tag"]
        found = h.call("memory_search", {"query": "cohort"}, _who(tmp_path))
        sources = {hit["experiment_id"]: hit["origin"] for hit in found["hits"]}
        assert sources[ids[0]] == "both" and sources[ids[1]] == "both"
        assert len(found["hits"]) == len(set(sources))  # deduplicated by experiment id
    finally:
        h.close()
