"""What a store's backend opens for a call (`Room`), and the two rules every room follows.

`Store` (`_store`) does everything over a `Room`: a project opened for one call, with its
keys (`Backend`), its cards over them and its commit lock (a bucket has none). A room that
does not exist yet holds no experiment (`require_room`); a conditional card write that lost is
decided again, a bounded number of times (`retry_lost_writes`).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict, TypeVar

from cards.errors import ExperimentNotFound, StoreIOError

if TYPE_CHECKING:
    from cards import CardMetadata, IndexState, Limits
    from cas._backend import Backend
    from cas._cardfiles import CardReads
    from cas._ingest import ExportSource
    from cas._progress import Progress
    from cas._results import Provenance
    from cas._verify import Clock, IntegrityMode, VerificationCache

MAX_ATTEMPTS = 8  # conditional card writes lost in a row before a retryable error

T = TypeVar("T")


class Room(Protocol):
    """One project, open for a call: its keys, its cards, and its commit lock."""

    @property
    def keys(self) -> Backend:
        """The project's keys (`LocalBackend`, `BucketBackend`)."""
        ...

    @property
    def cards(self) -> CardReads:
        """The project's cards over its keys (locally `CardFiles`: stamps and the card log)."""
        ...

    def locked(self) -> AbstractContextManager[None]:
        """The commit lock (a bucket has none: its writes are conditional)."""
        ...


class Recording(NamedTuple):
    """A record under way: the opened export, and what the host said of it."""

    src: ExportSource
    provenance: Provenance
    metadata: CardMetadata
    progress: Progress | None


class Options(TypedDict, total=False):
    """How a store behaves, whatever its backend (`Store.__init__`)."""

    limits: Limits
    integrity: IntegrityMode
    initial_index_state: IndexState
    clock: Clock
    cache: VerificationCache
    require_owner: bool
    read_only: bool


def require_room(room: Room | None) -> Room:
    """`room`, which must exist to hold the experiment asked for.

    Raises:
        ExperimentNotFound: the project has recorded nothing yet.
    """
    if room is None:
        raise ExperimentNotFound("this project has recorded nothing yet")
    return room


def retry_lost_writes(attempt: Callable[[], T | None]) -> T:
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
