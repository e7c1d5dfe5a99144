"""`Store`: what the host asks of one project's store, whichever backend holds the bytes.

Two implementations: `ProjectStore` (a local directory, the default) and the bucket store
(`cas._bucket`, an S3-compatible bucket with a verified local cache). The host (`harness_plugin`,
`indexer`) annotates with this protocol only, so either can be configured.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # annotations only: naming the protocol loads no card model
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from cards import CardMetadata, ExperimentCardV1, IndexStatus, Limits, ProjectId
    from cas._card_log import LogMark
    from cas._cardfiles import CardChanges, CardRead, CardScan, CardStamp
    from cas._fsck import FsckReport
    from cas._layout import ProjectLayout
    from cas._progress import Progress
    from cas._results import Located, Provenance, Recorded, Resolved, Usage


class Store(Protocol):
    """One project's store: record, resolve, locate, cards and usage (see `ProjectStore`)."""

    limits: Limits
    layout: ProjectLayout

    @property
    def project_id(self) -> ProjectId:
        """The project this store serves."""
        ...

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute local path of `parts` (a layout path) for this project."""
        ...

    def record(
        self,
        rlm_root: str,
        provenance: Provenance,
        metadata: CardMetadata,
        source_path: str,
        progress: Progress | None = None,
    ) -> Recorded:
        """Copy a kernel export into the store and commit its card."""
        ...

    def resolve(
        self,
        experiment_id: str,
        current_source_version: str | None = None,
        progress: Progress | None = None,
    ) -> Resolved:
        """Prove an experiment's bytes intact and hand out a local path to them."""
        ...

    def locate(self, experiment_id: str, current_source_version: str | None = None) -> Located:
        """A card, its freshness, and its bytes as a slice reads them."""
        ...

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card of this project."""
        ...

    def load_cards(self, experiment_ids: Sequence[str]) -> list[ExperimentCardV1 | None]:
        """Read and validate several cards; None for an absent or unusable one."""
        ...

    def scan_cards(self) -> CardScan:
        """Read every card; unusable ones are skipped and counted."""
        ...

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card, in name order; cards whose stamp equals `unchanged[name]` are not read."""
        ...

    def cards_version(self) -> str | None:
        """A token that changes whenever a card changes; None: unknown, look at the cards."""
        ...

    def update_index_status(
        self, experiment_id: str, decide: Callable[[ExperimentCardV1], IndexStatus | None]
    ) -> ExperimentCardV1:
        """Replace a card's index status with `decide(card)`, deciding on the current card."""
        ...

    def set_index_status(self, experiment_id: str, status: IndexStatus) -> ExperimentCardV1:
        """Replace a card's index status."""
        ...

    def has_object(self, artifact_id: str) -> bool:
        """Whether the object's name is stored (not a verification)."""
        ...

    def read_changed_cards(
        self, since: LogMark | None, known: Mapping[str, CardStamp]
    ) -> CardChanges:
        """The cards changed since the card log mark `since` (a bucket: every card, listed)."""
        ...

    def usage(self) -> Usage:
        """Committed objects, their bytes, and cards of this project."""
        ...

    def check(self, *, repair: bool = False, progress: Progress | None = None) -> FsckReport:
        """Verify every object and card, find leftovers; with `repair`, fix what is safe."""
        ...
