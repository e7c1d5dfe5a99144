"""Prior results in a notebook on the host: search, list, resolve, show and slice, read-only.

A scientist in Jupyter (outside an RLM kernel) opens the project's store (a local directory or
a bucket) through the configuration file the `artmem` CLI uses, and gets tables back as
`pyarrow.Table`s:

    >>> from harness_plugin.notebook import open_store
    >>> store = open_store()  # $ARTMEM_CONFIG; the project of the working directory
    >>> hit = store.search("response by cohort")[0]
    >>> hit.card.title
    'Treatment response by cohort'
    >>> exp = hit.card.experiment_id
    >>> store.show(exp).table.num_rows
    6
    >>> table = store.read_slice(exp, columns=["cohort", "response"], where="response > 0.5")
    >>> table.to_pylist()
    [{'cohort': 'b', 'response': 0.75}, {'cohort': 'c', 'response': 0.875}]
    >>> store.resolve(exp).path.startswith("/")  # the verified bytes, for another reader
    True

`store.to_pandas(exp, ...)` and `store.to_polars(exp, ...)` return the same slice as a pandas or
polars DataFrame where that library is installed; neither is needed otherwise.

Why here: the composition root (ARCHITECTURE.md) is what knows configuration and projects. Why
read-only: a notebook is a reader beside the harness; it never creates, writes or locks a file
(a `read_only` store keeps even its verification proofs in memory), so a session of calls leaves
the store exactly as it was. On a bucket nothing is written to the bucket; `resolve` fills the
host's verified local cache, as the CLI's does, and `show` and `read_slice` fetch only the
chunks they read. The checks are the CLI's: the card's scope, then `resolve` proves
the object's SHA-256 (or trusts a verification record the CLI wrote for its exact file
identity), and `show` and `read_slice` prove every chunk they read against the manifest the card
binds, in the bounded child of `cas.slicing`. Search is the local catalog (exact ids and BM25);
nothing here loads Honcho, the indexer, the outbox or the store's ingest code.
"""

from __future__ import annotations

import importlib
import os
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict, Unpack

import msgspec

from cards import (
    ExperimentCardV1,
    Freshness,
    InvalidInput,
    ObjectMissing,
    UnsupportedMediaType,
    freshness_verdict,
)
from cas import LocalCatalog, Resolved, SearchHit, Store
from harness_plugin import _shortids
from harness_plugin._stores import build_store
from harness_plugin.config import Config, load_config

if TYPE_CHECKING:
    import pyarrow as pa

    from cas.slicing import SliceLimits, SliceRequest, SliceSource, TableInfo
    from harness_plugin.ui import Preview

UNAVAILABLE = "the bytes are not in the store (quarantined or lost); record the original again"


PREVIEW_LIMIT = 1_000  # rows `preview` reads: its charts are their distribution


class SliceTruncated(UserWarning):
    """A slice stopped at its row limit or byte budget: more rows may match."""


class StaleResult(UserWarning):
    """A result's source version differs from the current one, or cannot be compared."""


class TypeWidened(UserWarning):
    """A CSV column was read with a wider type than its first block suggested, and why."""


class ReadOptions(TypedDict, total=False):
    """`read_slice`'s keyword options, which `to_pandas` and `to_polars` pass on."""

    current_source_version: str | None
    csv_types: Mapping[str, str] | None
    csv_nulls: Sequence[str] | None
    csv_decimal: str | None
    csv_encoding: str | None


@dataclass(frozen=True, slots=True)
class Shown:
    """What `show` tells: the card, its freshness, and the table's schema and sizes if a table.

    `table` is None when the bytes are not a table slicing reads (`note` says so) or are not
    in the store (`available_locally` is then False).
    """

    card: ExperimentCardV1
    freshness: Freshness
    warnings: tuple[str, ...]
    available_locally: bool
    table: TableInfo | None
    note: str | None

    def _repr_html_(self) -> str:
        from harness_plugin.ui import card_html

        return card_html(self.card, freshness=str(self.freshness), info=self.table)


def open_store(
    project: str | None = None, *, config: str | None = None, cwd: str | None = None
) -> NotebookStore:
    """Open a configured project's store for reading, as the CLI picks it.

    Args:
        project: a configured project id; by default the project whose root holds `cwd`.
        config: the configuration file; by default `$ARTMEM_CONFIG`.
        cwd: the directory that names the project; by default the working directory.

    Raises:
        ConfigError: no configuration was named, or it is unreadable or invalid.
        UnknownProject: `project` is not configured, or no project root holds `cwd`.
    """
    loaded = load_config(config)
    project_id = loaded.project_for(cwd or os.getcwd(), project, naming="pass project=ID")
    return NotebookStore(loaded, build_store(loaded, project_id, read_only=True))


class NotebookStore:
    """One project's results, read-only; experiment ids may be unique prefixes (`exp_k3lmqz2a`)."""

    def __init__(self, config: Config, store: Store) -> None:
        """Use `open_store`; `store` should be `read_only`."""
        self._store = store
        self._state_root = config.state_root
        self._limits: SliceLimits = config.slice.resolve()
        self._managed = config.managed_roots

    @property
    def project_id(self) -> str:
        """The project this store reads."""
        return self._store.project_id

    def search(self, query: str, limit: int | None = None) -> list[SearchHit]:
        """Cards matching `query` (exact ids, then BM25 over titles, summaries, tags, columns).

        Raises:
            InvalidInput: `limit` is outside 1 and the configured maximum.
        """
        bound = self._store.limits.search_results
        limit = bound if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= bound:
            raise InvalidInput(f"limit must be an integer between 1 and {bound}")
        # The catalog the CLI and worker save; read-only here (the notebook writes nothing).
        catalog = LocalCatalog.open(self._store, self._state_root, save=False)
        from harness_plugin.ui import SearchHits  # a list that Jupyter shows as a table

        return SearchHits(catalog.search(query, limit))

    def list(
        self,
        *,
        tags: Sequence[str] = (),
        source: str | None = None,
        since: datetime | None = None,
        media_type: str | None = None,
    ) -> list[ExperimentCardV1]:
        """The project's cards, newest first; each given condition must hold (all `tags`)."""
        cards = [
            card
            for card in self._store.scan_cards().cards
            if all(tag in card.tags for tag in tags)
            and (source is None or card.source == source)
            and (since is None or card.created_at >= since)
            and (media_type is None or card.artifact.media_type == media_type)
        ]
        return sorted(cards, key=lambda c: (c.created_at, c.experiment_id), reverse=True)

    def card(self, experiment_id: str) -> ExperimentCardV1:
        """One card of the project.

        Raises:
            InvalidId: `experiment_id` is malformed or a prefix of no card (`AmbiguousId`: of
                more than one).
            ExperimentNotFound: there is no such card.
            CardInvalid: the card is malformed or belongs elsewhere.
        """
        return self._store.load_card(self._expand(experiment_id))

    def resolve(self, experiment_id: str, current_source_version: str | None = None) -> Resolved:
        """Prove the experiment's bytes intact (size and SHA-256) and return their path.

        Raises:
            InvalidId: `experiment_id` is malformed, or a prefix of no or several cards.
            ExperimentNotFound: there is no such card.
            ObjectMissing: the bytes are not in the store.
            IntegrityError: the bytes differ from the card.
        """
        resolved = self._store.resolve(self._expand(experiment_id), current_source_version)
        _warn_stale(resolved.warnings)
        return resolved

    def show(self, experiment_id: str, current_source_version: str | None = None) -> Shown:
        """The card and, for a table, its schema, rows and sizes from its footer.

        Raises:
            InvalidId: `experiment_id` is malformed, or a prefix of no or several cards.
            ExperimentNotFound: there is no such card.
            TableUnreadable: the bytes are intact but not a readable table of their type.
            LimitExceeded: the footer exceeds a slicing bound (`TableTooLarge`, `SliceTimeout`).
            IntegrityError: a chunk read differs from the card's manifest.
        """
        from cas.slicing import describe

        exp_id = self._expand(experiment_id)
        try:
            located = self._store.locate(exp_id, current_source_version)
        except ObjectMissing:
            card = self._store.load_card(exp_id)
            state, notes = freshness_verdict(card.source_version, current_source_version)
            return Shown(card, state, notes, False, None, UNAVAILABLE)
        shown = Shown(located.card, located.freshness, located.warnings, True, None, None)
        try:
            info = describe(located.source, limits=self._limits)
        except UnsupportedMediaType as exc:
            return replace(shown, note=exc.message)
        return replace(shown, table=info)

    def preview(
        self, experiment_id: str, columns: Sequence[str] | None = None, where: str | None = None
    ) -> Preview:
        """The first rows of a table result (bounded as `read_slice`), charted in Jupyter."""
        from harness_plugin.ui import Preview

        with warnings.catch_warnings():  # a preview is the first rows: more is no news
            warnings.simplefilter("ignore", SliceTruncated)
            rows = self.read_slice(experiment_id, columns, where, limit=PREVIEW_LIMIT)
        return Preview(rows)

    def read_slice(
        self,
        experiment_id: str,
        columns: Sequence[str] | None = None,
        where: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        *,
        current_source_version: str | None = None,
        csv_types: Mapping[str, str] | None = None,
        csv_nulls: Sequence[str] | None = None,
        csv_decimal: str | None = None,
        csv_encoding: str | None = None,
    ) -> pa.Table:
        """Chosen columns and matching rows of a table result: every matching row by default.

        This is an operator's own read, so the bounds on what reaches a model (`[slice]
        max_rows`, `max_bytes`) do not cut it: a slice beyond them is streamed by the bounded
        child into a temporary Parquet file (as `artmem slice --out`), within the export bounds
        (`export_max_rows`, `export_max_bytes`, `export_max_seconds`), and read from there.

        A CSV or TSV is read with the column types, null tokens, decimal mark and encoding its
        card declares (`artmem record --csv-type/--csv-null/--csv-decimal/--csv-encoding`);
        `csv_types` ({column: type}), `csv_nulls`, `csv_decimal` (`","` reads 1,5 as 1.5) and
        `csv_encoding` (`"cp1252"`) override them for this read (checked as the CLI checks its
        flags).

        Warns `SliceTruncated` when a bound stopped the read before the rows asked for, and
        `StaleResult` when the result's freshness is in doubt against `current_source_version`.

        Raises:
            InvalidId: `experiment_id` is malformed, or a prefix of no or several cards.
            InvalidInput: the request is malformed (`FilterSyntaxError`, `FilterTypeError`,
                `UnknownColumn`, `UnsupportedMediaType` say what).
            LimitExceeded: the request or the table exceeds a slicing bound.
            TableUnreadable: the bytes are intact but not a readable table.
            ObjectMissing: the bytes are not in the store.
            IntegrityError: a chunk read differs from the card's manifest.
        """
        from cards.table_read import table_read
        from cas.slicing import SliceRequest, read_slice

        request = SliceRequest(
            columns=None if columns is None else tuple(columns),
            where=where,
            limit=limit,
            offset=offset,
            table_read=table_read(csv_types, csv_nulls, csv_decimal, csv_encoding),
        )
        located = self._store.locate(self._expand(experiment_id), current_source_version)
        _warn_stale(located.warnings)
        fits = limit is not None and limit <= self._limits.max_rows
        if limit is None:
            request = msgspec.structs.replace(request, limit=self._limits.max_rows)
        if fits or limit is None:
            result = read_slice(located.source, request, limits=self._limits)
            if not result.truncated or (result.rows == limit and fits):
                return _noted(result.table, result.notes, result.truncated_reason, True)
        request = msgspec.structs.replace(request, limit=limit)  # past the in-memory bounds
        return self._read_through_file(located.source, request)

    def _read_through_file(self, source: SliceSource, request: SliceRequest) -> pa.Table:
        """Every row `request` asks for, streamed into a temporary Parquet file and read back."""
        import pyarrow.parquet as pq

        from cas.slicing import export_slice

        with tempfile.TemporaryDirectory(prefix="artmem-read-") as scratch:
            path = os.path.join(scratch, "rows.parquet")
            result = export_slice(
                source, request, path, "parquet", limits=self._limits, outside=self._managed
            )
            table = pq.read_table(path, use_threads=False)
        if not result.columns:  # Parquet keeps no row count without a column: a count only
            import pyarrow as pa

            table = pa.table({"n": pa.nulls(result.rows)}).select([])
        asked = request.limit is not None and result.rows == request.limit
        return _noted(table, result.notes, result.truncated_reason, asked)

    def to_pandas(
        self,
        experiment_id: str,
        columns: Sequence[str] | None = None,
        where: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        **options: Unpack[ReadOptions],
    ) -> object:
        """`read_slice` as a `pandas.DataFrame` (pandas is imported only here).

        Raises:
            ModuleNotFoundError: pandas is not installed (nothing is read).
            ArtifactError: as `read_slice` raises.
        """
        importlib.import_module("pandas")
        return self.read_slice(experiment_id, columns, where, limit, offset, **options).to_pandas()

    def to_polars(
        self,
        experiment_id: str,
        columns: Sequence[str] | None = None,
        where: str | None = None,
        limit: int | None = None,
        offset: int = 0,
        **options: Unpack[ReadOptions],
    ) -> object:
        """`read_slice` as a `polars.DataFrame` (polars is imported only here).

        Raises:
            ModuleNotFoundError: polars is not installed (nothing is read).
            ArtifactError: as `read_slice` raises.
        """
        polars = importlib.import_module("polars")
        return polars.from_arrow(
            self.read_slice(experiment_id, columns, where, limit, offset, **options)
        )

    def _expand(self, experiment_id: str) -> str:
        return _shortids.expand(self._store, experiment_id)


def _warn_stale(notes: Sequence[str]) -> None:
    for note in notes:
        warnings.warn(note, StaleResult, stacklevel=3)


def _noted(table: pa.Table, notes: Sequence[str], reason: str | None, asked: bool) -> pa.Table:
    """`table`, once its notes are warned, and `SliceTruncated` if a bound cut it short."""
    for note in notes:
        warnings.warn(note, TypeWidened, stacklevel=4)
    if reason is not None and not asked:
        message = (
            f"stopped at the {reason} after {table.num_rows} rows: more rows may match; narrow "
            "`where`, page with `offset`, or raise the [slice] export bounds"
        )
        warnings.warn(message, SliceTruncated, stacklevel=4)
    return table
