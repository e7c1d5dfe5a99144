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

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from cards import ExperimentCardV1, dump_card, parse_experiment_id
from cards.errors import CardInvalid, ExperimentNotFound, InvalidInput
from cas._backend import Entry
from cas._cardfiles import CardChanges, CardRead, CardReads, CardStamp, card_key
from cas._layout import CARD_SUFFIX, CARDS

if TYPE_CHECKING:
    from cas._card_log import LogMark

_PREFIX = f"{CARDS}/"


class BucketCards(CardReads):
    """The cards of one project in a bucket (`backend` holds the project's keys)."""

    def write(self, card: ExperimentCardV1, etag: str | None) -> bool:
        """Create the card (`etag` None) or replace the version `etag`; False if that lost.

        Raises:
            BackendUnsupported: the service has no conditional create, or replace.
            StoreIOError: the bucket failed.
        """
        key, body = card_key(card.typed_experiment_id), dump_card(card)
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
