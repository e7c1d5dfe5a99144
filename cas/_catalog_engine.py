"""The tantivy edge: the only module that imports `tantivy`; one index of one project's cards.

One document per indexed card. The exact values (experiment id, artifact id, query fingerprint,
casefolded tags, source version) are indexed as 64-bit keys of (kind, value). One text field
holds the descriptive words, English-stemmed: title and tags twice, summary, columns and source
once, so a title or tag word counts twice in tantivy's BM25 (k1 = 1.2, b = 0.75) as it always
did here. Text is NFKC-normalised
and casefolded in Python first ("Straße" finds "STRASSE"). Fast fields: `updated` (microseconds)
and `rank` (the experiment id's first 60 bits, in string order) break ties: the most recently
updated card first, then the smaller experiment id. Only the experiment id is stored (bytes).

A person's text never becomes query syntax: queries are built term by term from the analyser's
tokens (at most `MAX_QUERY_TOKENS`), and a word ending in `*` also matches the first
`MAX_EXPANSIONS` indexed words it begins. Every tantivy failure (an error, or a Rust panic on a
damaged file) is translated into `CatalogDamaged` here; the catalog then rebuilds from the cards.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import tantivy
import xxhash

from cards.errors import StoreIOError

if TYPE_CHECKING:
    from cards.card import ExperimentCardV1

__all__ = ["FORMAT", "CatalogDamaged", "Engine", "normalized", "order_key", "words"]

# Bumped whenever the schema or what goes into a document changes: an index of another format or
# tantivy version is rebuilt, never read.
FORMAT = f"artmem-catalog 8, {getattr(tantivy, '__version__', 'tantivy ?')}"
MAX_QUERY_TOKENS = 32
MAX_PREFIXES = 4
MAX_EXPANSIONS = 64
# Beyond this many hits that tie at the limit, the order among them is the index's own.
MAX_TIED = 10_000
# Hits' experiment ids kept for the searcher they were read from (~300 bytes each): reading
# one from tantivy's store and checking it costs ~4 µs, a fifth of a 20-hit query's own Python.
MAX_IDS = 4096
_WRITER_HEAP = 32_000_000  # tantivy's floor is 15 MB per thread
# A build writes 100,000 cards as one segment within this (two at 32 MB): a search of that
# index took 0.95 of the time, for ~30 MB more peak memory (the build's CPU time: 0.98).
BUILD_HEAP = 128_000_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
# The experiment id's base32 alphabet, in string order, as base-32 digits (for `int(_, 32)`).
_DIGITS = str.maketrans("234567abcdefghijklmnopqrstuvwxyz", "0123456789abcdefghijklmnopqrstuv")
_PREFIX = re.compile(r"([^\W_]+)\*")
_EXPERIMENT_ID = re.compile(r"exp_[a-z2-7]{52}")
# Exact values are indexed as 64-bit hashes of (kind, value), a sixth of their text's size;
# a hit is confirmed against its card file, so a collision could only drop it.
_EXACT = ("experiment_id", "artifact_id", "query_fingerprint", "tag", "source_version")


class CatalogDamaged(StoreIOError):
    """The index could not be read or written as tantivy wrote it (the catalog rebuilds)."""


def _analyzer() -> tantivy.TextAnalyzer:
    builder = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
    builder = builder.filter(tantivy.Filter.remove_long(64)).filter(tantivy.Filter.lowercase())
    return builder.filter(tantivy.Filter.stemmer("english")).build()


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_bytes_field("id", stored=True)  # only read back: found by its `exact` key
    builder.add_unsigned_field("exact", indexed=True)
    builder.add_text_field("text", tokenizer_name="en_stem", index_option="freq")
    builder.add_integer_field("updated", fast=True)
    builder.add_unsigned_field("rank", fast=True)
    return builder.build()


_ANALYZER = _analyzer()
_SCHEMA = _schema()


def normalized(text: str) -> str:
    """NFKC-normalised and casefolded, as every indexed and queried word is."""
    if not text.isascii():  # ASCII text is already in NFKC
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def _exact_key(kind: str, value: str) -> int:
    return xxhash.xxh3_64_intdigest(f"{kind}\0{value}".encode())


def _any_of(queries: list[tantivy.Query]) -> tantivy.Query:
    """A disjunction; one query alone as itself (a term query is about twice as fast alone).

    Term queries, not `term_set_query`: on 100,000 cards the set query took 0.42 ms where the
    disjunction of its terms takes 0.007 ms.
    """
    if len(queries) == 1:
        return queries[0]
    return tantivy.Query.boolean_query([(tantivy.Occur.Should, query) for query in queries])


def _id_query(experiment_id: str) -> tantivy.Query:
    # A query, not `delete_documents_by_term`: tantivy-py makes that term an i64, never found.
    return tantivy.Query.term_query(_SCHEMA, "exact", _exact_key(_EXACT[0], experiment_id))


def words(text: str) -> list[str]:
    """The indexed words of `text`: normalised, split on non-alphanumerics, stemmed."""
    return list(_ANALYZER.analyze(normalized(text)))


def order_key(card: ExperimentCardV1) -> tuple[int, int]:
    """(updated in microseconds, rank): the newer first, then the smaller experiment id."""
    updated = (card.updated_at - _EPOCH) // _MICROSECOND
    return updated, int(card.experiment_id[4:16].translate(_DIGITS), 32)


@contextlib.contextmanager
def _translated(doing: str) -> Iterator[None]:
    """Any tantivy failure as `CatalogDamaged`; a Rust panic arrives as a BaseException."""
    try:
        yield
    except (ValueError, OSError, RuntimeError) as exc:
        raise CatalogDamaged(f"the catalog index could not be {doing}: {exc}") from exc
    except BaseException as exc:
        if type(exc).__name__ != "PanicException":
            raise
        raise CatalogDamaged(f"the catalog index could not be {doing}") from exc


def _trim() -> None:
    """Hand the writer's freed heap back to the system.

    tantivy indexes on a thread of its own; glibc gives each such thread a malloc arena and
    keeps what was freed in it, so without this every write would leave up to its heap
    (`_WRITER_HEAP`) behind in a long-lived process.
    """
    import ctypes

    trim = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only
    if trim is not None:
        trim(0)


class Engine:
    """One tantivy index (a directory, or in memory): documents, commits and ranked lookups."""

    def __init__(self, index: tantivy.Index) -> None:
        index.register_tokenizer("en_stem", _ANALYZER)
        # Reloaded by us only (after our commits; another writer's head opens a new Engine): the
        # default watches meta.json from a thread of its own, and took its lock file in a
        # directory being replaced (the forged-files test failed with ENOTEMPTY under load).
        index.config_reader(reload_policy="Manual")
        self._index = index
        # One searcher and its hits' ids, replaced together: a search reads both once, so a
        # reload by another thread (a record in the worker) never mixes two index versions.
        self._view = _View(index.searcher(), {})

    @classmethod
    def create(cls, path: str | None = None) -> Engine:
        """A new empty index in the existing empty directory `path`, or in memory.

        Raises:
            CatalogDamaged: it could not be created.
        """
        with _translated("created"):
            return cls(tantivy.Index(_SCHEMA, path=path, reuse=False))

    @classmethod
    def open(cls, path: str) -> Engine:
        """The index in `path` (the caller has checked its files are the ones we wrote).

        Raises:
            CatalogDamaged: tantivy could not open it.
        """
        with _translated("opened"):
            return cls(tantivy.Index.open(path))

    def __len__(self) -> int:
        return int(self._view.searcher.num_docs)

    def reload(self) -> None:
        """See the index's latest commit."""
        with _translated("reloaded"):
            self._index.reload()
            self._view = _View(self._index.searcher(), {})

    @contextlib.contextmanager
    def writing(self, heap: int = _WRITER_HEAP) -> Iterator[Writer]:
        """A writer for the block, committed (and merged) at its end; rolled back on error.

        `heap` bounds the memory tantivy buffers documents in before it writes a segment. The
        caller holds the catalog's lock: tantivy allows one writer per index.

        Raises:
            CatalogDamaged: the index could not be written.
        """
        with _translated("written"):
            writer = self._index.writer(heap_size=heap, num_threads=1)
        try:
            yield Writer(writer)
            with _translated("committed"):
                writer.commit()
                writer.wait_merging_threads()  # a one-shot process must not leave merges half-done
        except BaseException:
            with contextlib.suppress(Exception):
                writer.rollback()
            raise
        finally:
            del writer
            _trim()
        self.reload()

    def ranked(self, text: str, limit: int) -> list[tuple[str, float, bool]]:
        """(experiment id, score, exact) of the best `limit` hits.

        First the newest cards `text` names exactly (score 1.0), then the best BM25 hits of the
        rest, scored against the best BM25 hit of all (exact ones included), so in (0, 1]. One
        search of the words: the exact hits it finds are skipped, never searched for again.
        """
        view = self._view
        with _translated("searched"):
            exact = [view.id(address) for _, address in view.top(self._exact_query(text), limit)]
            hits = [(key, 1.0, True) for key in exact]
            words = self._words_query(view.searcher, text) if len(hits) < limit else None
            found = [] if words is None else view.top(words, limit, by_score=True)
            for score, address in found:
                if len(hits) == limit:
                    break
                key = view.id(address)
                if key not in exact:
                    hits.append((key, min(float(score) / float(found[0][0]), 1.0), False))
            return hits

    def _exact_query(self, text: str) -> tantivy.Query:
        probes = (text, text, text, text.casefold(), text)
        keys = sorted({_exact_key(kind, probe) for kind, probe in zip(_EXACT, probes, strict=True)})
        return _any_of([tantivy.Query.term_query(_SCHEMA, "exact", key) for key in keys])

    def _words_query(self, searcher: tantivy.Searcher, text: str) -> tantivy.Query | None:
        """Each distinct stemmed word of `text` a term, each `word*` its expansions; or None."""
        folded = normalized(text)
        terms = list(dict.fromkeys(_ANALYZER.analyze(folded)))[:MAX_QUERY_TOKENS]
        for word in list(dict.fromkeys(_PREFIX.findall(folded)))[:MAX_PREFIXES]:
            for prefix in {word, *_ANALYZER.analyze(word)}:
                found = searcher.terms_with_prefix("text", prefix, limit=MAX_EXPANSIONS)
                terms += [term for term, _ in found if term not in terms]
        if not terms:
            return None
        return _any_of([tantivy.Query.term_query(_SCHEMA, "text", term) for term in terms])

    def has(self, experiment_id: str) -> bool:
        """Whether a card of this experiment id is indexed."""
        query = _id_query(experiment_id)
        with _translated("searched"):
            return bool(self._view.searcher.search(query, 1, count=False).hits)

    def all_ids(self) -> dict[str, int]:
        """Every indexed experiment id and its `updated` (for `fsck`: one pass over the index)."""
        view = self._view
        with _translated("read"):
            count = int(view.searcher.num_docs)
            if not count:
                return {}
            hits = view.searcher.search(tantivy.Query.all_query(), count, count=False).hits
            addresses = [address for _, address in hits]
            updated = view.searcher.fast_field_values("updated", addresses)
            return {
                view.id(address): int(value or 0)
                for address, value in zip(addresses, updated, strict=True)
            }


class _View:
    """One searcher of the index, and the experiment ids of the hits read through it."""

    __slots__ = ("ids", "searcher")

    def __init__(self, searcher: tantivy.Searcher, ids: dict[tuple[int, int], str]) -> None:
        self.searcher = searcher
        self.ids = ids  # the searcher's document -> experiment id, at most MAX_IDS

    def top(
        self, query: tantivy.Query, limit: int, *, by_score: bool = False
    ) -> list[tuple[float, tantivy.DocAddress]]:
        """The best `limit` hits by (score or recency, recency, smaller id).

        Fetches twice as many as asked, and one more: at 100,000 cards `limit + 1` left a tie at
        the limit in 69 of 100 one-word queries (a second search costs 100%), twice as many in
        none, and four times as many cost a query 3-9% more. While the last one fetched ties with
        the limit's, more are fetched (up to `MAX_TIED`), so every tied hit is ordered by recency
        and id.
        """
        order = None if by_score else "updated"
        fetch = max(limit, min(2 * limit, MAX_TIED)) + 1
        while True:
            hits = self.searcher.search(query, fetch, count=False, order_by_field=order).hits
            if len(hits) < fetch or hits[limit - 1][0] != hits[-1][0] or fetch >= MAX_TIED:
                break
            fetch = min(fetch * 4, MAX_TIED)
        if not hits:
            return []
        floor = hits[min(limit, len(hits)) - 1][0]
        hits = [hit for hit in hits if hit[0] >= floor]  # the rest cannot reach the limit
        if len({key for key, _ in hits}) < len(hits):  # ties: recency, then the smaller id
            addresses = [address for _, address in hits]
            updated = self.searcher.fast_field_values("updated", addresses)
            ranks = self.searcher.fast_field_values("rank", addresses)
            keyed = sorted(
                zip(hits, updated, ranks, strict=True),
                key=lambda item: (-item[0][0], -(item[1] or 0), item[2] or 0),
            )
            hits = [hit for hit, _, _ in keyed]
        return hits[:limit]

    def id(self, address: tantivy.DocAddress) -> str:
        key = (address.segment_ord, address.doc)
        known = self.ids.get(key)
        if known is not None:
            return known
        raw = self.searcher.doc(address).get_first("id")
        value = raw.decode("ascii", "replace") if isinstance(raw, bytes) else ""
        if not _EXPERIMENT_ID.fullmatch(value):
            raise CatalogDamaged("the catalog index holds a document that is not a card's")
        if len(self.ids) < MAX_IDS:
            self.ids[key] = value
        return value


class Writer:
    """Adds and deletes documents inside `Engine.writing`."""

    def __init__(self, writer: tantivy.IndexWriter) -> None:
        self._writer = writer

    def put(self, card: ExperimentCardV1) -> None:
        """Index `card`, replacing any document of its experiment id."""
        self.delete(card.experiment_id)
        self.add(card)

    def add(self, card: ExperimentCardV1) -> None:
        """Index `card`, known to have no document yet (a new index: no delete to look up)."""
        updated, rank = order_key(card)
        heavy = normalized("\n".join([card.title, *card.tags]))
        body = normalized("\n".join([card.summary, *card.columns, card.source]))
        keys = {
            _exact_key("experiment_id", card.experiment_id),
            _exact_key("artifact_id", card.artifact.artifact_id),
            _exact_key("query_fingerprint", card.query_fingerprint),
            _exact_key("source_version", card.source_version),
            *(_exact_key("tag", tag.casefold()) for tag in card.tags),
        }
        fields: dict[str, object] = {
            "id": card.experiment_id.encode("ascii"),
            "exact": list(keys),
            "text": [heavy, heavy, body],
            "updated": updated,
            "rank": rank,
        }
        with _translated("written"):
            self._writer.add_document(tantivy.Document.from_dict(fields, _SCHEMA))

    def delete(self, experiment_id: str) -> None:
        """Remove the document of `experiment_id`, if any."""
        with _translated("written"):
            self._writer.delete_documents_by_query(_id_query(experiment_id))
