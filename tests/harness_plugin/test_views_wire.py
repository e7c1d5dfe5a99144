"""The CLI's views are exactly the wire contract's JSON, though the CLI never loads pydantic.

`_views` builds plain dicts; the tools validate them into `cards.wire` models, and the CLI
prints them as they are. For any card, the dict must be what the wire model validates and
dumps back unchanged: same keys, same values, same defaults.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel
from strategies import build_card, metadata_fields

from cards import Freshness, IndexState, wire
from cards.policy import HitSource
from cas import Recorded, Resolved, SearchHit
from harness_plugin import _views

_WHEN = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)


def _round_trips(model: type[BaseModel], view: dict[str, object]) -> None:
    assert model.model_validate(view).model_dump(mode="json") == view


@given(fields=metadata_fields, deduplicated=st.booleans(), queued=st.booleans())
def test_a_record_view_is_the_wire_record_result(fields, deduplicated, queued):
    card = build_card(fields)
    recorded = Recorded(
        card=card,
        deduplicated=deduplicated,
        card_created=not deduplicated,
        card_updated=False,
        warnings=("a warning",),
        changed=("title",),
    )
    state = IndexState.QUEUED if queued else None
    _round_trips(
        wire.RecordResult, _views.record_result(recorded, honcho_queued=queued, state=state)
    )


@given(fields=metadata_fields, freshness=st.sampled_from(list(Freshness)))
def test_a_resolve_view_is_the_wire_resolve_result(fields, freshness):
    card = build_card(fields)
    resolved = Resolved(
        path="/objects/x",
        manifest_path="/objects/x.chunks",
        card=card,
        freshness=freshness,
        verified_at=_WHEN,
        hashed=True,
        warnings=(),
    )
    _round_trips(wire.ResolveResult, _views.resolve_result(resolved))


@given(
    fields=metadata_fields,
    score=st.floats(min_value=0, max_value=1),
    exact=st.lists(st.sampled_from(["experiment_id", "artifact_id", "sha256"]), max_size=3),
    available=st.booleans(),
)
def test_a_hit_view_is_the_wire_search_hit(fields, score, exact, available):
    hit = SearchHit(card=build_card(fields), score=score, exact=tuple(exact))
    _round_trips(wire.SearchHit, _views.local_hit(hit, available_locally=available))


@given(text=st.text(min_size=1, max_size=900) | st.none(), source=st.sampled_from(list(HitSource)))
def test_a_remote_only_hit_view_is_the_wire_search_hit(text, source):
    view = _views.search_hit(
        None,
        experiment_id="exp_x",
        artifact_id="art_x",
        score=0.5,
        exact=(),
        source=source,
        available_locally=False,
        remote_text=text,
    )
    _round_trips(wire.SearchHit, view)
