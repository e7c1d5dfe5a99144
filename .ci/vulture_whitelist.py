# ruff: noqa
"""What `vulture` cannot see used: only entry points that a framework or a person calls.

    vulture cards cas fsedge indexer harness_plugin rlm_client .ci/vulture_whitelist.py \
        --min-confidence 60

A name belongs here only if something outside our code reads it: an encoder (struct and model
fields, enum members), pydantic (`model_config`, validators), the standard library
(`http.server` handlers, `io` and `pickle` protocols, PEP 562 hooks), a notebook (`_repr_html_`)
or a person (the notebook API, the fake Honcho's test controls in `indexer.testing`).
"""

_ = object()

# PEP 562: a package's lazy names.
__getattr__
__dir__

# pydantic: a model's configuration and its validators (called by pydantic).
model_config
_._consistent  # cards/remote.py
_._one_source  # harness_plugin/eval/_corpus.py
_._facts_are_said
_._references_resolve
_._session_of_the_harness_session  # indexer/_entry.py
_._derived_from_content

# Fields read by the encoders (msgspec structs, pydantic models), never by attribute here.
JsonValue  # cards/canonical.py: a type alias used in annotations
schema_version
producer  # cards/card.py
local_saved  # cards/results.py
trust
stale_ancestors
dropped_wrong_project
global_context
export_max_rows  # harness_plugin/config/_sections.py: read through `asdict`
export_max_bytes
export_max_seconds
user_rating  # harness_plugin/eval/_telemetry.py: telemetry as the harness writes it
p50
root_call_id  # harness_plugin/worker/_caller.py: the caller the host sends

# Enum members chosen by value (a tool argument, a configuration string).
PREFERENCE  # cards/wire_memory.py NoteKind
DECISION
COMPLETED_ROOT_TURNS  # harness_plugin/config/_memory.py
FIRST_ROOT_STEP

# The standard library calls these: http.server handlers, io and pickle protocols.
daemon_threads
block_on_close
protocol_version
server_version
sys_version
close_connection
_.log_message
_.do_GET
_.do_HEAD
_.do_POST
_.do_PUT
_.do_DELETE
_.do_PATCH
do_POST
do_PUT
do_DELETE
do_PATCH
_.writable
_.seekable
_.persistent_id
_.persistent_load

# A notebook calls `_repr_html_`; people call the notebook API.
_._repr_html_
open_store
_.preview
_.to_polars

# Test support in explicit testing modules (`cards.testing`, not in the wheel; `indexer.testing`).
card_for_bytes
_.fail_next
_.timeout_next
_.commit_then_fail_next
_.clear_requests
_.pending_faults

# What a slice did, on the result a notebook's or a kernel's `read_slice` returns.
_.batches_read  # cas/slicing/_slice.py, cas/slicing/_export.py
