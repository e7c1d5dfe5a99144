"""The operator's lifecycle of cards: edit one, remove experiments, and their audit trail.

Over the one `Store` and its rooms, on either backend:

- `edit_card` changes descriptive fields (title, summary, source label, tags, columns) without
  the original file. It is conditional on the card's revision (`card_revision`: a digest of
  the card without its index status, so the indexer marking it never counts as a change): the
  caller names the revision it decided on, and under the commit lock (a bucket: a conditional
  replace, decided again when it lost) a card of another revision is refused with
  `EditConflict`, never overwritten. Identity fields are refused: they made the experiment id.
- `remove_experiments` writes an audit line (`audit/<time>-<nonce>`, created, never
  replaced: append-only by construction; who, when, what, never card text) and a retirement
  marker (`retired/<experiment_id>`, which the host's searches use to drop the experiment's
  Honcho copy), then removes the card: locally under the commit lock with its name logged
  first (`_card_log`), so a catalog sees it gone. The bytes stay until `gc` finds no card
  naming them.

A crash between the steps leaves the audit line and the marker with the card still there:
running `rm` again finishes it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import msgspec

from cards import canonical_json, parse_experiment_id
from cards.errors import CardInvalid, EditConflict, InvalidInput
from cas._retirement import RETIRED
from cas._room import Room, require_room, retry_lost_writes
from cas._store import Store
from fsedge import utc_now

if TYPE_CHECKING:
    from cards import ExperimentCardV1, Limits

AUDIT = "audit"
_REVISION = re.compile(r"[0-9a-f]{12,64}")  # a revision, or its first characters as printed


class CardEdit(msgspec.Struct, frozen=True, kw_only=True):
    """What an operator changes on a card; None or empty leaves a field as it is.

    `columns` replaces the column names (an empty tuple clears them); tags are added and
    removed one by one, so two edits of different tags compose.
    """

    title: str | None = None
    summary: str | None = None
    source: str | None = None
    add_tags: tuple[str, ...] = ()
    remove_tags: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None

    @property
    def empty(self) -> bool:
        """Whether the edit changes nothing at all."""
        return self == CardEdit()


class Edited(msgspec.Struct, frozen=True):
    """An edit's outcome: the card as written, its revisions before and after, what changed."""

    card: ExperimentCardV1
    before: str
    revision: str
    changed: tuple[str, ...]


class Removed(msgspec.Struct, frozen=True):
    """One removed experiment: its object, whether another card still names it, the audit key."""

    experiment_id: str
    artifact_id: str
    bytes: int
    object_shared: bool
    audit_key: str


def card_revision(card: ExperimentCardV1) -> str:
    """A digest of everything on the card but its index status (64 hex characters)."""
    document = msgspec.to_builtins(card)
    del document["index"]
    return hashlib.sha256(canonical_json(document)).hexdigest()


def edit_card(
    store: Store,
    experiment_id: str,
    edit: CardEdit,
    *,
    if_revision: str,
    now: datetime | None = None,
) -> Edited:
    """Apply `edit` to the card, only if the card is still at revision `if_revision`.

    `if_revision` may be the first 12 or more characters of the revision (as printed).

    Raises:
        InvalidId: `experiment_id` is malformed.
        InvalidInput: a value breaks the card's rules or the configured bounds, a tag to
            remove is not on the card, or `if_revision` is not a revision.
        ExperimentNotFound: there is no such card.
        EditConflict: the card is at another revision now (nothing was written).
        StoreIOError: the store failed, or the card kept changing (retryable).
    """
    from cas._results import check_writable

    check_writable(store.read_only)
    exp_id = parse_experiment_id(experiment_id)
    if _REVISION.fullmatch(if_revision) is None:
        raise InvalidInput("a revision is 12 to 64 lowercase hex characters, as an edit prints it")
    when = now or utc_now()
    with store._opened(create=False) as opened:
        room = require_room(opened)

        def attempt() -> Edited | None:
            with room.locked():
                card, version = room.cards.read_versioned(exp_id)
                before = card_revision(card)
                if not before.startswith(if_revision):
                    raise EditConflict(
                        f"experiment {exp_id} changed since revision {if_revision[:12]} "
                        f"(it is at {before[:12]} now); nothing was written: look at it again "
                        "(`artmem show`) and repeat the edit if it still applies",
                        revision=before,
                    )
                updated = apply_edit(card, edit, store.limits, when)
                if updated is card:
                    return Edited(card, before, before, ())
                if not room.cards.write(updated, version):
                    return None
                return Edited(updated, before, card_revision(updated), _changed(card, updated))

        return retry_lost_writes(attempt)


def apply_edit(
    card: ExperimentCardV1, edit: CardEdit, limits: Limits, now: datetime
) -> ExperimentCardV1:
    """`card` with `edit` applied (validated, a new index revision); `card` itself if equal.

    Raises:
        InvalidInput: a value breaks the card's rules or `limits`, or a tag to remove is absent.
    """
    from cards import IndexState, IndexStatus
    from cards.build import with_changes

    missing = [tag for tag in edit.remove_tags if tag not in card.tags]
    if missing:
        raise InvalidInput(
            f"the card has no tag {missing[0]!r} to remove (its tags: {', '.join(card.tags)})"
        )
    tags = [tag for tag in card.tags if tag not in edit.remove_tags]
    tags += [tag for tag in dict.fromkeys(edit.add_tags) if tag not in tags]
    fields: dict[str, object] = {"tags": tags}
    for name in ("title", "summary", "source"):
        value = getattr(edit, name)
        if value is not None:
            fields[name] = value
    if edit.columns is not None:
        fields["columns"] = list(edit.columns)
    _check_bounds(fields, limits)
    if all(getattr(card, name) == value for name, value in fields.items()):
        return card
    index = card.index
    if index.state is not IndexState.DISABLED:
        index = IndexStatus(state=IndexState.PENDING, updated_at=now)
    try:
        return with_changes(
            card, {**fields, "updated_at": max(now, card.created_at), "index": index}
        )
    except CardInvalid as exc:
        raise InvalidInput(exc.message.replace("invalid experiment card", "invalid edit")) from exc


def _check_bounds(fields: dict[str, object], limits: Limits) -> None:
    texts = {name: value for name, value in fields.items() if isinstance(value, str)}
    lists = {name: value for name, value in fields.items() if isinstance(value, list)}
    bounds = {"title": limits.title_chars, "summary": limits.summary_chars}
    each = {
        "tags": (limits.tags, limits.tag_chars),
        "columns": (limits.columns, limits.column_chars),
    }
    for name, text in texts.items():
        if name in bounds and len(text) > bounds[name]:
            raise InvalidInput(f"{name} exceeds the configured bound of {bounds[name]} characters")
    for name, values in lists.items():
        count, chars = each[name]
        if len(values) > count or any(len(str(v)) > chars for v in values):
            raise InvalidInput(
                f"{name}: at most {count} of at most {chars} characters each (the configured bound)"
            )


def _changed(before: ExperimentCardV1, after: ExperimentCardV1) -> tuple[str, ...]:
    names = ("title", "summary", "source", "tags", "columns")
    return tuple(name for name in names if getattr(before, name) != getattr(after, name))


# -- removal ----------------------------------------------------------------------------------


def remove_experiments(
    store: Store, experiment_ids: Sequence[str], *, who: str, now: datetime | None = None
) -> list[Removed]:
    """Remove the experiments' cards, each after its audit line and retirement marker.

    Every id must name a card before anything is removed (one typo removes nothing). The
    objects stay: `gc` reclaims those no card names any more.

    Raises:
        InvalidId: an id is malformed.
        ExperimentNotFound: an id names no card of this project (nothing was removed).
        StoreIOError: the store failed (what was removed before stays removed, and audited).
    """
    from cas._results import check_writable

    check_writable(store.read_only)
    exp_ids = list(dict.fromkeys(parse_experiment_id(e) for e in experiment_ids))
    when = now or utc_now()
    with store._opened(create=False) as opened:
        room = require_room(opened)
        cards = {exp_id: room.cards.read(exp_id) for exp_id in exp_ids}  # all exist, or none go
        remaining: dict[str, int] = {}
        for read in room.cards.scan():
            card = read.card
            if card is not None and not isinstance(card, Exception):
                aid = card.artifact.artifact_id
                remaining[aid] = remaining.get(aid, 0) + 1
        removed = []
        for exp_id, card in cards.items():
            audit_key = _remove_one(room, card, who, when)
            aid = card.artifact.artifact_id
            remaining[aid] = remaining.get(aid, 1) - 1
            removed.append(Removed(exp_id, aid, card.artifact.bytes, remaining[aid] > 0, audit_key))
        return removed


def _remove_one(room: Room, card: ExperimentCardV1, who: str, when: datetime) -> str:
    line = {
        "action": "rm",
        "at": when.isoformat(),
        "who": who,
        "experiment_id": card.experiment_id,
        "artifact_id": card.artifact.artifact_id,
        "bytes": card.artifact.bytes,
    }
    body = canonical_json(line) + b"\n"
    audit_key = f"{AUDIT}/{when.strftime('%Y%m%dT%H%M%S.%fZ')}-{secrets.token_hex(8)}"
    room.keys.create(audit_key, body)
    room.keys.create(f"{RETIRED}/{card.experiment_id}", body)  # present already: retired before
    with room.locked():  # locally, its name is logged first (`CardFiles.delete`)
        room.cards.delete(card.typed_experiment_id)
    return audit_key
