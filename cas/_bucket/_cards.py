"""Card objects of one bucket project: `cards/<experiment_id>.json`, through the storage seam.

A new card is created only if absent (`Backend.create`); an update replaces exactly the
version read (`Backend.replace`: `If-Match` on its ETag, in the form the service accepts). A
lost condition is never an overwrite: the store re-reads and decides again (`retry_lost_writes`). A
service without a working conditional replace has its card updates refused
(`BackendUnsupported`), never retried as if another writer had won.

A card is used only if it parses, has a supported schema version, and names this project and
the experiment id of its key, as on disk.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from cards import ExperimentCardV1, ExperimentId, dump_card, parse_card, parse_experiment_id
from cards.errors import CardInvalid, ExperimentNotFound, InvalidInput, ObjectMissing
from cas._backend import Backend, Entry
from cas._cardfiles import MAX_CARD_BYTES, CardChanges, CardRead, CardStamp, checked_card
from cas._layout import CARD_SUFFIX, CARDS, ProjectLayout

if TYPE_CHECKING:
    from cas._card_log import LogMark

_PREFIX = f"{CARDS}/"


class BucketCards:
    """The cards of one project in a bucket (`backend` holds the project's keys)."""

    def __init__(self, backend: Backend, layout: ProjectLayout) -> None:
        self._backend = backend
        self._layout = layout

    def read(self, exp_id: ExperimentId) -> ExperimentCardV1:
        """One card (see `read_versioned`)."""
        return self.read_versioned(exp_id)[0]

    def read_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1, str]:
        """One card and its ETag (one ranged GET, bounded).

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
        """
        try:
            got = self._backend.read(_key(exp_id), 0, MAX_CARD_BYTES + 1)
        except ObjectMissing as exc:
            raise ExperimentNotFound("no experiment with that id in this project") from exc
        if len(got.data) > MAX_CARD_BYTES:
            raise CardInvalid("the card file is larger than a card may be")
        return checked_card(parse_card(got.data), exp_id, self._layout.project_id), got.version

    def find_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1 | None, str | None]:
        """The usable card at `exp_id` and the ETag of what holds its key.

        A corrupt card gives (None, its ETag): replacing exactly that version heals it.

        Raises:
            UnsupportedVersion: a card of a newer schema holds the key (never overwritten).
        """
        try:
            return self.read_versioned(exp_id)
        except ExperimentNotFound:
            return None, None
        except CardInvalid as exc:
            if exc.code != CardInvalid.code:
                raise
        entry = self._backend.stat(_key(exp_id))
        return None, None if entry is None else entry.version

    def read_many(self, exp_ids: Sequence[ExperimentId]) -> list[ExperimentCardV1 | None]:
        """Each card (one GET each); None for an absent or unusable one."""
        return [self._usable(exp_id) for exp_id in exp_ids]

    def _usable(self, exp_id: ExperimentId) -> ExperimentCardV1 | None:
        try:
            return self.read(exp_id)
        except (ExperimentNotFound, CardInvalid):
            return None

    def write(self, card: ExperimentCardV1, etag: str | None) -> bool:
        """Create the card (`etag` None) or replace the version `etag`; False if that lost.

        Raises:
            BackendUnsupported: the service has no conditional create, or replace.
            StoreIOError: the bucket failed.
        """
        key, body = _key(card.typed_experiment_id), dump_card(card)
        if etag is None:
            return self._backend.create(key, body) is not None
        return self._backend.replace(key, body, etag) is not None

    def listing(self) -> list[Entry]:
        """Every card key (valid or not), in name order."""
        return [e for e in self._backend.list(_PREFIX) if e.key.endswith(CARD_SUFFIX)]

    def count(self) -> int:
        """How many card keys there are (each holds a quota slot)."""
        return len(self.listing())

    def scan(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order, stamped (size, ETag); unchanged stamps are not fetched."""
        known = unchanged or {}
        for entry in self.listing():
            name = entry.key.removeprefix(_PREFIX)
            stamp: CardStamp = (entry.size, entry.version)
            if known.get(name) == stamp:
                yield CardRead(name, stamp, None)
                continue
            try:
                exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
            except InvalidInput as exc:
                yield CardRead(name, None, exc)
                continue
            try:
                card, etag = self.read_versioned(exp_id)
            except ExperimentNotFound:
                continue  # removed since the listing
            except CardInvalid as exc:
                yield CardRead(name, stamp, exc)
                continue
            yield CardRead(name, (entry.size, etag), card)

    def changes(self, since: LogMark | None, known: Mapping[str, CardStamp]) -> CardChanges:
        """Every card, stamped: a bucket keeps no card log, so one listing says what changed."""
        return CardChanges.scanned(self.scan(known), None)


def _key(exp_id: ExperimentId) -> str:
    return f"{_PREFIX}{exp_id}{CARD_SUFFIX}"
