"""The cards of one project: `cards/<experiment_id>.json` keys, through the storage seam.

`CardReads` reads, writes and scans them on any backend (`Backend`): a new card is created
only if absent, an update replaces exactly the version read (a lost condition is never an
overwrite: the store reads and decides again), a scan lists the keys and skips the ones whose
stamp (size, version) the caller already has. The local directory's faster cards extend it
(`_local_cards.CardFiles`: directory stamps and the card log). A card is used only if it parses,
carries a supported schema version, and names this project and the experiment id of its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

import msgspec

from cards import ExperimentId, parse_experiment_id
from cards.errors import (
    ArtifactError,
    CardInvalid,
    ExperimentNotFound,
    InvalidInput,
    ObjectMissing,
)
from cas._backend import Backend, Entry
from cas._layout import CARD_SUFFIX, CARDS, ProjectLayout

if TYPE_CHECKING:  # the card models load with the first card parsed, not with the store
    from cards import ExperimentCardV1, ProjectId
    from cas._card_log import LogMark

MAX_CARD_BYTES = 1 << 20
_PREFIX = f"{CARDS}/"
# What tells a card file's version without reading it, compared for equality only: locally
# (inode, size, mtime_ns); a bucket backend may use (size, etag).
CardStamp = tuple[int | str, ...]


class CardProblem(msgspec.Struct, frozen=True):
    """A card file that could not be used, named by its file name and an error code only."""

    name: str
    code: str


class CardRead(msgspec.Struct, frozen=True):
    """One card file as a scan found it: the card, or why it could not be used.

    `card` is None when the file was unchanged since the stamp the caller already had.
    """

    name: str
    stamp: CardStamp | None
    card: ExperimentCardV1 | ArtifactError | None


class CardChanges(msgspec.Struct, frozen=True):
    """The card files that may have changed since a log mark, read; and every name present.

    `names` holds every card file name there is now (a name known before and missing from it
    is gone). `mark` is the log position the reads are true of (None: no log to follow);
    `logged` whether the log chose the files (False: every file was listed and stat'ed).
    """

    reads: tuple[CardRead, ...]
    names: frozenset[str]
    mark: LogMark | None
    logged: bool

    @classmethod
    def scanned(cls, reads: Iterable[CardRead], mark: LogMark | None) -> CardChanges:
        """What a list and stat of every card file found (`CardFiles.scan`): every name read."""
        done = tuple(reads)
        return cls(done, frozenset(read.name for read in done), mark, logged=False)


class CardScan(msgspec.Struct, frozen=True):
    """Every valid card of a project, and the ones skipped."""

    cards: tuple[ExperimentCardV1, ...]
    problems: tuple[CardProblem, ...]

    @classmethod
    def of(cls, reads: Iterator[CardRead]) -> CardScan:
        """Split reads into usable cards and problems."""
        cards: list[ExperimentCardV1] = []
        problems: list[CardProblem] = []
        for read in reads:
            if isinstance(read.card, ArtifactError):
                problems.append(CardProblem(name=read.name, code=str(read.card.code)))
            elif read.card is not None:
                cards.append(read.card)
        return cls(cards=tuple(cards), problems=tuple(problems))


class CardReads:
    """One project's cards read through its keys (`backend`), validated on every read."""

    def __init__(self, backend: Backend, layout: ProjectLayout) -> None:
        self._backend = backend
        self._layout = layout

    def read(self, exp_id: ExperimentId) -> ExperimentCardV1:
        """One card (see `read_versioned`)."""
        return self.read_versioned(exp_id)[0]

    def read_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1, str]:
        """One card and the version of what holds its key (one bounded read).

        Raises:
            ExperimentNotFound: there is no such card (no regular file or key holds it).
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            StoreIOError: the backend failed.
        """
        try:
            got = self._backend.read(card_key(exp_id), 0, MAX_CARD_BYTES + 1)
        except ObjectMissing as exc:
            raise ExperimentNotFound("no experiment with that id in this project") from exc
        if len(got.data) > MAX_CARD_BYTES:
            raise CardInvalid("the card file is larger than a card may be")
        return checked_card(_parse(got.data), exp_id, self._layout.project_id), got.version

    def find_versioned(self, exp_id: ExperimentId) -> tuple[ExperimentCardV1 | None, str | None]:
        """The usable card at `exp_id` and the version of what holds its key.

        A corrupt card gives (None, its version): replacing exactly that version heals it.

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
        entry = self._backend.stat(card_key(exp_id))
        return None, None if entry is None else entry.version

    def read_many(self, exp_ids: Sequence[ExperimentId]) -> list[ExperimentCardV1 | None]:
        """Each card; None for an absent or unusable one (the caller's index is behind)."""
        return [self._usable(exp_id) for exp_id in exp_ids]

    def _usable(self, exp_id: ExperimentId) -> ExperimentCardV1 | None:
        try:
            return self.read(exp_id)
        except (ExperimentNotFound, CardInvalid):
            return None

    def write(self, card: ExperimentCardV1, version: str | None) -> bool:
        """Create the card (`version` None) or replace exactly `version`; False if that lost.

        Raises:
            BackendUnsupported: the backend cannot create, or replace, conditionally.
            StoreIOError: the backend failed.
        """
        from cards.card import dump_card

        key, body = card_key(card.typed_experiment_id), dump_card(card)
        if version is None:
            return self._backend.create(key, body) is not None
        return self._backend.replace(key, body, version) is not None

    def delete(self, exp_id: ExperimentId) -> None:
        """Remove a card (absent: nothing to do)."""
        self._backend.delete(card_key(exp_id))

    def version(self) -> str | None:
        """A token that changes whenever a card changes; None: unknown, look at the cards."""
        return None

    def count(self) -> int:
        """How many card keys there are (valid or not: each holds a quota slot)."""
        return len(self._listing())

    def scan(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order, stamped (size, version); unchanged stamps are not read."""
        known = unchanged or {}
        for entry in self._listing():
            name = entry.key.removeprefix(_PREFIX)
            stamp: CardStamp = (entry.size, entry.version)
            if known.get(name) == stamp:
                yield CardRead(name, stamp, None)
                continue
            try:
                exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
                card, version = self.read_versioned(exp_id)
            except ExperimentNotFound:
                continue  # removed since the listing
            except (InvalidInput, CardInvalid) as exc:
                yield CardRead(name, stamp if isinstance(exc, CardInvalid) else None, exc)
                continue
            yield CardRead(name, (entry.size, version), card)

    def changes(self, since: LogMark | None, known: Mapping[str, CardStamp]) -> CardChanges:
        """Every card, stamped: without a card log, one listing says what changed."""
        return CardChanges.scanned(self.scan(known), None)

    def _listing(self) -> list[Entry]:
        return [e for e in self._backend.list(_PREFIX) if e.key.endswith(CARD_SUFFIX)]


def card_key(exp_id: ExperimentId) -> str:
    """The key of a card below its project (the same on every backend)."""
    return f"{CARDS}/{exp_id}{CARD_SUFFIX}"


def checked_card(
    card: ExperimentCardV1, exp_id: ExperimentId, project_id: ProjectId
) -> ExperimentCardV1:
    """`card`, if it is the card of `exp_id` in `project_id` (its file's name and place).

    Raises:
        CardInvalid: it names another experiment or project.
    """
    if card.experiment_id != exp_id or card.project_id != project_id:
        raise CardInvalid("the card does not belong at this place in this project")
    return card


def _parse(raw: bytes) -> ExperimentCardV1:
    """`cards.parse_card`, whose models load at the first card read."""
    from cards.card import parse_card

    return parse_card(raw)
