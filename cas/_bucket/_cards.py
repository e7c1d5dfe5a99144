"""Card objects of one bucket project: `cards/<experiment_id>.json`, under conditional writes.

A new card is created with `If-None-Match: *`; an update replaces exactly the version read
(`If-Match` on its ETag, in the form the service accepts: `_probe`). A lost condition is never
an overwrite: the caller re-reads and decides again. A 412 on the very version that is still
there is no lost race but the service refusing the condition's form: the capabilities are
probed again, and without a working conditional replace the update is refused
(`BackendUnsupported`), never retried as if another writer had won.

A card is used only if it parses, has a supported schema version, and names this project and
the experiment id of its key, as on disk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeVar

from cards import ExperimentCardV1, ExperimentId, dump_card, parse_card, parse_experiment_id
from cards.errors import (
    BackendUnsupported,
    CardInvalid,
    ExperimentNotFound,
    InvalidInput,
    StoreIOError,
)
from cas._bucket._client import BucketClient, Conflict, Head
from cas._bucket._keys import BucketKeys
from cas._cardfiles import MAX_CARD_BYTES, CardRead, CardStamp
from cas._layout import CARD_SUFFIX

if TYPE_CHECKING:
    from cas._bucket._probe import Capabilities

    Probe = Callable[[bool], Capabilities]  # the store's capabilities; True: probe again

MAX_ATTEMPTS = 8  # conditional writes lost in a row before a retryable error

T = TypeVar("T")


class BucketCards:
    """The cards of one project in a bucket."""

    def __init__(self, client: BucketClient, keys: BucketKeys, probe: Probe | None = None) -> None:
        self._client = client
        self._keys = keys
        self._probe = probe

    def read(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1, str]:
        """One card and its ETag.

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
        """
        try:
            got = self._client.get(self._keys.card(exp_id), MAX_CARD_BYTES)
        except StoreIOError as exc:
            if "larger" in exc.message:
                raise CardInvalid("the card file is larger than a card may be") from exc
            raise
        if got is None:
            raise ExperimentNotFound("no experiment with that id in this project")
        raw, etag = got
        return self._checked(parse_card(raw), exp_id), etag

    def find(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1 | None, str | None]:
        """The usable card at `exp_id` and the ETag of what holds its key.

        A corrupt card gives (None, its ETag): replacing exactly that version heals it.

        Raises:
            UnsupportedVersion: a card of a newer schema holds the key (never overwritten).
        """
        try:
            return self.read(exp_id)
        except ExperimentNotFound:
            return None, None
        except CardInvalid as exc:
            if exc.code != CardInvalid.code:
                raise
        head = self._client.head(self._keys.card(exp_id))
        return None, None if head is None else head.etag

    def write(self, card: ExperimentCardV1, etag: str | None) -> bool:
        """Create the card (`etag` None) or replace the version `etag`; False if that lost.

        Raises:
            BackendUnsupported: the service has no conditional create, or replace (see the
                module docstring).
            StoreIOError: the bucket failed.
        """
        key, body = self._keys.card(card.typed_experiment_id), dump_card(card)
        if etag is None:
            self._capabilities(False).require_create()
            try:
                self._client.put(key, body, create=True)
            except Conflict:
                return False
            return True
        self._capabilities(False).require_replace()
        for refresh in (True, False):
            try:
                self._client.put(key, body, if_match=etag)
                return True
            except Conflict:
                if not self._still(key, etag):
                    return False  # another writer won: the caller reads and decides again
            if refresh:  # the service refused its own current version: ask it again
                self._capabilities(True).require_replace()
        raise BackendUnsupported(
            "replace_if_version",
            "the bucket's service refused If-Match on a card's current version in every ETag "
            "form; the card was not changed",
        )

    def _capabilities(self, refresh: bool) -> Capabilities:
        if self._probe is None:
            raise StoreIOError("this bucket view cannot write cards")
        return self._probe(refresh)

    def _still(self, key: str, etag: str) -> bool:
        head = self._client.head(key)
        return head is not None and head.etag.strip('"') == etag.strip('"')

    def listing(self) -> list[Head]:
        """Every card key (valid or not), in name order."""
        return [h for h in self._client.listing(self._keys.cards) if h.key.endswith(CARD_SUFFIX)]

    def count(self) -> int:
        """How many card keys there are (each holds a quota slot)."""
        return len(self.listing())

    def scan(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order, stamped (size, ETag); unchanged stamps are not fetched."""
        known = unchanged or {}
        for head in self.listing():
            name = head.key.removeprefix(self._keys.cards)
            stamp: CardStamp = (head.size, head.etag)
            if known.get(name) == stamp:
                yield CardRead(name, stamp, None)
                continue
            try:
                exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
            except InvalidInput as exc:
                yield CardRead(name, None, exc)
                continue
            try:
                card, etag = self.read(exp_id)
            except ExperimentNotFound:
                continue  # removed since the listing
            except CardInvalid as exc:
                yield CardRead(name, stamp, exc)
                continue
            yield CardRead(name, (head.size, etag), card)

    def _checked(self, card: ExperimentCardV1, exp_id: ExperimentId) -> ExperimentCardV1:
        if card.experiment_id != exp_id or card.project_id != self._keys.layout.project_id:
            raise CardInvalid("the card does not belong at this place in this project")
        return card


def retried(attempt: Callable[[], T | None]) -> T:
    """Run `attempt` until it returns a value (None: a conditional write lost; read again).

    Raises:
        StoreIOError: (retryable) the card kept changing under other writers.
    """
    for _ in range(MAX_ATTEMPTS):
        result = attempt()
        if result is not None:
            return result
    raise StoreIOError(
        f"the card changed under other writers {MAX_ATTEMPTS} times in a row; try again"
    )
