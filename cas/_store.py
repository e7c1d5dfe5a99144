"""One project's content-addressed store: record, resolve, and card access.

Commit protocol of a record (spec §28.3): stream into a locked stage in `tmp/`, fsync, then under
the project lock check quotas, publish the chunk manifest and the object (hard link, so an existing
object is never overwritten: that is deduplication), fsync the directory, and write the card
atomically. Object plus card is the local commit; a crash before the card leaves at most an
unreferenced object that `fsck` reports, never a card pointing at nothing.

Quota bound: quotas are checked under the project lock at commit time, when the object's size and
the card count are exact, so committed usage never exceeds the limits (overshoot 0). Staging files
in `tmp/` do occupy disk before that check: at most the sum of the in-flight permitted writes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import portalocker

from cards import (
    ArtifactId,
    ArtifactRefV1,
    CardMetadata,
    ExperimentCardV1,
    ExperimentId,
    Freshness,
    IndexState,
    IndexStatus,
    Limits,
    ProjectId,
    QueryFingerprint,
    artifact_id_for_digest,
    dump_card,
    experiment_id,
    freshness,
    freshness_warning,
    parse_artifact_id,
    parse_card,
    parse_experiment_id,
    parse_project_id,
    parse_session_id,
)
from cards.errors import (
    ArtifactError,
    ArtifactTooLarge,
    CardInvalid,
    ExperimentNotFound,
    IntegrityError,
    InvalidInput,
    ObjectMissing,
    PathEscape,
    QuotaExceeded,
    SourceMissing,
    StoreIOError,
)
from cards.model import ARTIFACT_SCHEMA_VERSION, CARD_SCHEMA_VERSION
from cards.policy import DEFAULT_LIMITS, UNKNOWN_SOURCE_VERSION
from cas import _fs
from cas._chunks import CHUNK_BYTES, ChunkManifest
from cas._ingest import Digests, copy_and_hash, open_export
from cas._layout import CARD_SUFFIX, CHUNKS_SUFFIX, LOCK, OBJECTS, ProjectLayout
from cas._progress import Progress
from cas._verify import PROCESS_CACHE, IntegrityMode, VerificationCache, file_identity, sha256_fd

MAX_CARD_BYTES = 1 << 20
PRODUCER = "artmem 0.1.0"
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Who asked for a record: supplied by the host, never by the model or kernel."""

    session_id: str
    root_agent_id: str | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True, slots=True)
class Recorded:
    """The outcome of a record: the committed card and what happened on the way."""

    card: ExperimentCardV1
    deduplicated: bool
    card_created: bool
    card_updated: bool
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Resolved:
    """A verified artifact: `path` is handed out only after size and SHA-256 are proven."""

    path: str
    card: ExperimentCardV1
    freshness: Freshness
    verified_at: datetime
    hashed: bool
    warnings: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CardProblem:
    """A card file that could not be used, named by its file name and an error code only."""

    name: str
    code: str


CardStamp = tuple[int, int, int]  # (inode, size, mtime_ns) of a card file


@dataclass(frozen=True, slots=True)
class CardRead:
    """One card file as `read_cards` found it: the card, or why it could not be used.

    `card` is None when the file was unchanged since the stamp the caller already had.
    """

    name: str
    stamp: CardStamp | None
    card: ExperimentCardV1 | ArtifactError | None


@dataclass(frozen=True, slots=True)
class CardScan:
    """Every valid card of a project, and the ones skipped."""

    cards: tuple[ExperimentCardV1, ...]
    problems: tuple[CardProblem, ...]


@dataclass(frozen=True, slots=True)
class Usage:
    """Committed usage of a project, as quotas count it."""

    objects: int
    bytes: int
    cards: int


class ProjectStore:
    """The content-addressed store of one project below the configured artifact root."""

    def __init__(
        self,
        artifact_root: str,
        project_id: str,
        *,
        limits: Limits = DEFAULT_LIMITS,
        integrity: IntegrityMode = IntegrityMode.CACHED,
        initial_index_state: IndexState = IndexState.DISABLED,
        clock: Clock = utc_now,
        cache: VerificationCache = PROCESS_CACHE,
    ) -> None:
        if not os.path.isabs(artifact_root):
            raise InvalidInput("the artifact root must be an absolute path")
        self.artifact_root = artifact_root
        self.layout = ProjectLayout.for_project(parse_project_id(project_id))
        self.limits = limits
        self.integrity = integrity
        self._initial_index_state = initial_index_state
        self._clock = clock
        self._cache = cache

    @property
    def project_id(self) -> ProjectId:
        """The project this store serves."""
        return self.layout.project_id

    def local_path(self, parts: Sequence[str]) -> str:
        """The absolute path of `parts` (a layout path) below this project's directory."""
        return os.path.join(self.artifact_root, *self.layout.root, *parts)

    # -- record -----------------------------------------------------------------------------

    def record(
        self,
        rlm_root: str,
        provenance: Provenance,
        metadata: CardMetadata,
        source_path: str,
        progress: Progress | None = None,
    ) -> Recorded:
        """Copy a kernel export into the store and commit its card (spec §29.1 steps 1–4).

        Raises:
            InvalidInput: metadata exceeds the configured bounds.
            PathRejected: the source is outside the caller's exports, a symlink, not a regular
                file, or hard-linked (subclasses say which).
            SourceMissing: the source does not exist.
            SourceChanged: the source changed while it was streamed.
            ArtifactTooLarge: the source exceeds the per-artifact limit.
            QuotaExceeded: the project's byte or card quota would be exceeded.
            StoreIOError: the store could not be written.
        """
        metadata.check(self.limits)
        session = parse_session_id(provenance.session_id)
        with open_export(rlm_root, session, source_path) as src:
            limit = self.limits.artifact_bytes
            if src.size > limit:
                raise ArtifactTooLarge(
                    f"the artifact is larger than the {limit}-byte limit", limit=limit
                )
            if progress is not None:
                progress.start(src.size)
            with self._project(create=True) as project_fd:
                tmp_fd = _fs.make_dirs(project_fd, self.layout.tmp_dir)
                try:
                    with _fs.staged(tmp_fd, "object") as stage:
                        digests = _stream(src.fd, stage.fd, limit, progress)
                        src.check_unchanged(digests.size)
                        with self._locked(project_fd):
                            return self._commit(
                                project_fd, tmp_fd, stage, digests, metadata, provenance
                            )
                finally:
                    os.close(tmp_fd)

    def _commit(
        self,
        project_fd: int,
        tmp_fd: int,
        stage: _fs.Staged,
        digests: Digests,
        metadata: CardMetadata,
        provenance: Provenance,
    ) -> Recorded:
        artifact_id = artifact_id_for_digest(digests.sha256)
        exp_id = experiment_id(
            self.project_id,
            artifact_id,
            QueryFingerprint(metadata.query_fingerprint),
            metadata.source_version,
        )
        existing = self._existing_card(project_fd, exp_id)
        if existing is None:
            self._check_card_quota(project_fd)
        manifest = ChunkManifest(digests.size, CHUNK_BYTES, digests.chunk_digests).encode()
        present = self._object_size(project_fd, artifact_id) == digests.size
        if not present:
            self._check_byte_quota(project_fd, digests.size)
        obj_dir = _fs.make_dirs(project_fd, self.layout.object_dir(artifact_id))
        try:
            _publish_manifest(obj_dir, tmp_fd, artifact_id, manifest)
            if not present:
                _publish_object(obj_dir, stage, artifact_id)
        finally:
            os.close(obj_dir)
        now = self._clock()
        card = self._card(
            existing, exp_id, artifact_id, digests, manifest, metadata, provenance, now
        )
        if card is not existing:
            cards_fd = _fs.make_dirs(project_fd, self.layout.cards_dir)
            try:
                _fs.atomic_write(cards_fd, exp_id + CARD_SUFFIX, dump_card(card), tmp_fd, "card")
            finally:
                os.close(cards_fd)
        return Recorded(
            card=card,
            deduplicated=present,
            card_created=existing is None,
            card_updated=existing is not None and card is not existing,
            warnings=_record_warnings(card, present),
        )

    def _card(
        self,
        existing: ExperimentCardV1 | None,
        exp_id: ExperimentId,
        artifact_id: ArtifactId,
        digests: Digests,
        manifest: bytes,
        metadata: CardMetadata,
        provenance: Provenance,
        now: datetime,
    ) -> ExperimentCardV1:
        descriptive = _descriptive(metadata)
        if existing is not None:
            current = {name: getattr(existing, name) for name in descriptive}
            current["media_type"] = existing.artifact.media_type
            if current == {**descriptive, "media_type": metadata.media_type}:
                return existing
            return _updated(existing, descriptive, metadata.media_type, now)
        artifact = ArtifactRefV1(
            schema_version=ARTIFACT_SCHEMA_VERSION,
            artifact_id=artifact_id,
            sha256=digests.sha256.hex(),
            bytes=digests.size,
            media_type=metadata.media_type,
            created_at=now,
        )
        return ExperimentCardV1(
            schema_version=CARD_SCHEMA_VERSION,
            experiment_id=exp_id,
            artifact=artifact,
            chunk_manifest_sha256=hashlib.sha256(manifest).hexdigest(),
            query_fingerprint=metadata.query_fingerprint,
            source_version=metadata.source_version,
            project_id=self.project_id,
            session_id=provenance.session_id,
            root_agent_id=provenance.root_agent_id,
            tool_call_id=provenance.tool_call_id,
            producer=PRODUCER,
            created_at=now,
            updated_at=now,
            index=IndexStatus(state=self._initial_index_state, updated_at=now),
            title=metadata.title,
            summary=metadata.summary,
            source=metadata.source,
            tags=list(metadata.tags),
            columns=list(metadata.columns),
            shape=None if metadata.shape is None else list(metadata.shape),
        )

    # -- resolve ----------------------------------------------------------------------------

    def resolve(
        self,
        experiment_id: str,
        current_source_version: str | None = None,
        progress: Progress | None = None,
    ) -> Resolved:
        """Prove an experiment's bytes intact and hand out their path (spec §30.2).

        Raises:
            InvalidId: `experiment_id` is malformed.
            InvalidInput: `current_source_version` is malformed.
            ExperimentNotFound: the project has no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
            ObjectMissing: the card's object is not in the store.
            IntegrityError: the object's size or SHA-256 differs from the card.
        """
        exp_id = parse_experiment_id(experiment_id)
        _check_version(current_source_version)
        with self._project(create=False) as project_fd:
            card = self._read_card(project_fd, exp_id)
            verified_at, hashed = self._verify(project_fd, card, progress)
        state = freshness(card.source_version, current_source_version)
        warning = freshness_warning(state)
        path = self.local_path(self.layout.object_path(card.typed_artifact_id))
        return Resolved(
            path=path,
            card=card,
            freshness=state,
            verified_at=verified_at,
            hashed=hashed,
            warnings=(warning,) if warning else (),
        )

    def _verify(
        self, project_fd: int, card: ExperimentCardV1, progress: Progress | None
    ) -> tuple[datetime, bool]:
        artifact_id = card.typed_artifact_id
        try:
            fd = _fs.open_file_beneath(project_fd, self.layout.object_path(artifact_id))
        except SourceMissing as exc:
            raise ObjectMissing("the experiment's artifact is missing from the store") from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size != card.artifact.bytes:
                raise IntegrityError("the stored artifact's size differs from its card")
            key = file_identity(self.layout.key, artifact_id, st)
            cached = None if self.integrity is IntegrityMode.ALWAYS else self._cache.get(key)
            if cached is not None:
                return cached, False
            if progress is not None:
                progress.start(st.st_size)
            digest, length = sha256_fd(fd, progress)
            after = file_identity(self.layout.key, artifact_id, os.fstat(fd))
            if digest.hex() != card.artifact.sha256 or length != st.st_size or after != key:
                raise IntegrityError("the stored artifact's SHA-256 differs from its card")
        finally:
            os.close(fd)
        verified_at = self._clock()
        self._cache.put(key, verified_at)
        return verified_at, True

    # -- cards ------------------------------------------------------------------------------

    def load_card(self, experiment_id: str) -> ExperimentCardV1:
        """Read and validate one card of this project.

        Raises:
            InvalidId: `experiment_id` is malformed.
            ExperimentNotFound: there is no such card.
            CardInvalid: the card is malformed, unsupported, or belongs elsewhere.
        """
        exp_id = parse_experiment_id(experiment_id)
        with self._project(create=False) as project_fd:
            return self._read_card(project_fd, exp_id)

    def scan_cards(self) -> CardScan:
        """Read every card; malformed, unsupported or misplaced ones are skipped and counted."""
        cards: list[ExperimentCardV1] = []
        problems: list[CardProblem] = []
        for read in self.read_cards():
            if isinstance(read.card, ExperimentCardV1):
                cards.append(read.card)
            elif read.card is not None:
                problems.append(CardProblem(name=read.name, code=str(read.card.code)))
        return CardScan(cards=tuple(cards), problems=tuple(problems))

    def read_cards(self, unchanged: Mapping[str, CardStamp] | None = None) -> Iterator[CardRead]:
        """Every card file, in name order, read through one directory descriptor.

        Files whose stamp (inode, size, mtime) equals `unchanged[name]` are yielded without
        being read again (`card` is None); a bad file yields its error instead of a card.
        """
        try:
            with self._project(create=False) as project_fd:
                try:
                    cards_fd = _fs.open_dir_beneath(project_fd, self.layout.cards_dir)
                except (SourceMissing, PathEscape):
                    return
                try:
                    for name in sorted(os.listdir(cards_fd)):
                        if name.endswith(CARD_SUFFIX):
                            yield self._read_entry(cards_fd, name, (unchanged or {}).get(name))
                finally:
                    os.close(cards_fd)
        except ExperimentNotFound:
            return

    def _read_entry(self, cards_fd: int, name: str, known: CardStamp | None) -> CardRead:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            exp_id = parse_experiment_id(name.removesuffix(CARD_SUFFIX))
            fd = os.open(name, flags, dir_fd=cards_fd)
        except InvalidInput as exc:
            return CardRead(name, None, exc)
        except OSError as exc:
            return CardRead(name, None, CardInvalid(f"the card cannot be opened: {exc.strerror}"))
        try:
            st = os.fstat(fd)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp == known:
                return CardRead(name, stamp, None)
            if not stat.S_ISREG(st.st_mode):
                return CardRead(name, stamp, CardInvalid("the card is not a regular file"))
            raw = _fs.read_small(fd, MAX_CARD_BYTES, st.st_size)
            return CardRead(name, stamp, self._checked(parse_card(raw), exp_id))
        except (CardInvalid, StoreIOError) as exc:
            return CardRead(name, stamp, exc)  # stamped: a bad file is counted once, not per look
        finally:
            os.close(fd)

    def set_index_status(self, experiment_id: str, status: IndexStatus) -> ExperimentCardV1:
        """Atomically replace a card's index status.

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the stored card is invalid.
            StoreIOError: the card could not be written.
        """
        return self.update_index_status(experiment_id, lambda card: status)

    def update_index_status(
        self, experiment_id: str, decide: Callable[[ExperimentCardV1], IndexStatus | None]
    ) -> ExperimentCardV1:
        """Read a card under the commit lock and replace its index status with `decide(card)`.

        `decide` sees the card as it is now (a concurrent re-record cannot slip in between) and
        returns None to leave it unchanged. This is the indexer's only write to cards.

        Raises:
            ExperimentNotFound: there is no such card.
            CardInvalid: the stored card is invalid.
            StoreIOError: the card could not be written.
        """
        exp_id = parse_experiment_id(experiment_id)
        with self._project(create=False) as project_fd, self._locked(project_fd):
            card = self._read_card(project_fd, exp_id)
            status = decide(card)
            if status is None or status == card.index:
                return card
            updated = _revalidate(card, {"index": status.model_dump()})
            tmp_fd = _fs.make_dirs(project_fd, self.layout.tmp_dir)
            cards_fd = _fs.open_dir_beneath(project_fd, self.layout.cards_dir)
            try:
                _fs.atomic_write(cards_fd, exp_id + CARD_SUFFIX, dump_card(updated), tmp_fd, "card")
            finally:
                os.close(cards_fd)
                os.close(tmp_fd)
            return updated

    def has_object(self, artifact_id: str) -> bool:
        """Whether an object of the recorded size could be there (a stat, not a verification)."""
        try:
            with self._project(create=False) as project_fd:
                return self._object_size(project_fd, parse_artifact_id(artifact_id)) is not None
        except ExperimentNotFound:
            return False

    def usage(self) -> Usage:
        """Committed objects, their bytes, and cards of this project."""
        try:
            with self._project(create=False) as project_fd:
                return self._usage(project_fd)
        except ExperimentNotFound:
            return Usage(objects=0, bytes=0, cards=0)

    # -- internals --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _project(self, *, create: bool) -> Iterator[int]:
        if create:
            try:
                os.makedirs(self.artifact_root, mode=_fs.DIR_MODE, exist_ok=True)
            except OSError as exc:
                raise StoreIOError(f"cannot create the artifact root: {exc.strerror}") from exc
        try:
            root_fd = _fs.open_dir(self.artifact_root)
        except SourceMissing as exc:
            raise ExperimentNotFound("nothing has been recorded in this store yet") from exc
        try:
            if create:
                project_fd = _fs.make_dirs(root_fd, self.layout.root)
            else:
                try:
                    project_fd = _fs.open_dir_beneath(root_fd, self.layout.root)
                except SourceMissing as exc:
                    raise ExperimentNotFound("this project has recorded nothing yet") from exc
        finally:
            os.close(root_fd)
        try:
            yield project_fd
        finally:
            os.close(project_fd)

    @contextlib.contextmanager
    def _locked(self, project_fd: int) -> Iterator[None]:
        """The project's commit lock: serialises quota checks, publication and card writes."""
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(LOCK, flags, _fs.FILE_MODE, dir_fd=project_fd)
        try:
            portalocker.lock(fd, portalocker.LockFlags.EXCLUSIVE)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _read_card(self, project_fd: int, exp_id: ExperimentId) -> ExperimentCardV1:
        try:
            fd = _fs.open_file_beneath(project_fd, self.layout.card_path(exp_id))
        except SourceMissing as exc:
            raise ExperimentNotFound("no experiment with that id in this project") from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise CardInvalid("the card is not a regular file")
            card = parse_card(_fs.read_small(fd, MAX_CARD_BYTES))
        finally:
            os.close(fd)
        return self._checked(card, exp_id)

    def _checked(self, card: ExperimentCardV1, exp_id: ExperimentId) -> ExperimentCardV1:
        if card.experiment_id != exp_id or card.project_id != self.project_id:
            raise CardInvalid("the card does not belong at this place in this project")
        return card

    def _existing_card(self, project_fd: int, exp_id: ExperimentId) -> ExperimentCardV1 | None:
        try:
            return self._read_card(project_fd, exp_id)
        except ExperimentNotFound:
            return None
        except CardInvalid as exc:
            if exc.code == CardInvalid.code:
                return None  # a corrupt card at our own identity is healed by rewriting it
            raise  # an unsupported (newer) card is never overwritten

    def _usage(self, project_fd: int) -> Usage:
        objects, total = self._object_usage(project_fd)
        return Usage(objects=objects, bytes=total, cards=self._count_cards(project_fd))

    def _object_usage(self, project_fd: int) -> tuple[int, int]:
        """How many objects the project holds, and their bytes."""
        objects = total = 0
        for shard in _fs.list_dir_beneath(project_fd, (OBJECTS,)):
            try:
                shard_fd = _fs.open_dir_beneath(project_fd, (OBJECTS, shard))
            except (SourceMissing, PathEscape):
                continue
            try:
                for entry in os.scandir(shard_fd):
                    if entry.name.startswith("art_") and not entry.name.endswith(CHUNKS_SUFFIX):
                        objects += 1
                        total += entry.stat(follow_symlinks=False).st_size
            finally:
                os.close(shard_fd)
        return objects, total

    def _object_size(self, project_fd: int, artifact_id: ArtifactId) -> int | None:
        """The size of a stored object, or None if there is no regular file at its name."""
        try:
            obj_dir = _fs.open_dir_beneath(project_fd, self.layout.object_dir(artifact_id))
        except SourceMissing:
            return None
        try:
            st = os.stat(artifact_id, dir_fd=obj_dir, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(obj_dir)
        return st.st_size if stat.S_ISREG(st.st_mode) else None

    def _check_card_quota(self, project_fd: int) -> None:
        count = self._count_cards(project_fd)
        limit = self.limits.cards_per_project
        if count >= limit:
            raise QuotaExceeded(f"the project already holds {limit} cards", limit=limit)

    def _count_cards(self, project_fd: int) -> int:
        names = _fs.list_dir_beneath(project_fd, self.layout.cards_dir)
        return sum(1 for name in names if name.endswith(CARD_SUFFIX))

    def _check_byte_quota(self, project_fd: int, size: int) -> None:
        used = self._object_usage(project_fd)[1]
        limit = self.limits.project_bytes
        if used + size > limit:
            raise QuotaExceeded(
                f"recording {size} bytes would exceed the project's {limit}-byte quota "
                f"({used} bytes used)",
                limit=limit,
            )


def _stream(src_fd: int, dst_fd: int, limit: int, progress: Progress | None) -> Digests:
    try:
        return copy_and_hash(src_fd, dst_fd, limit=limit, progress=progress)
    except OSError as exc:
        raise StoreIOError(f"cannot write the object: {exc.strerror}") from exc


def _publish_manifest(obj_dir: int, tmp_fd: int, artifact_id: ArtifactId, manifest: bytes) -> None:
    name = artifact_id + CHUNKS_SUFFIX
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=obj_dir)
    except FileNotFoundError:
        pass
    else:
        try:
            if _fs.read_small(fd, len(manifest) + 1) == manifest:
                return
        except StoreIOError:
            pass
        finally:
            os.close(fd)
    _fs.atomic_write(obj_dir, name, manifest, tmp_fd, "chunks")


def _publish_object(obj_dir: int, stage: _fs.Staged, artifact_id: ArtifactId) -> None:
    """Make the stage read-only and durable, then link it into place.

    Only a new object pays this fsync; a deduplicated record never gets here.
    """
    try:
        os.fchmod(stage.fd, _fs.OBJECT_MODE)
        os.fsync(stage.fd)
        if not stage.commit_link(obj_dir, artifact_id):
            # A wrong-sized file holds our name: it is corrupt, and our bytes are proven.
            stage.commit_replace(obj_dir, artifact_id)
    except OSError as exc:
        raise StoreIOError(f"cannot publish the object: {exc.strerror}") from exc


def _descriptive(metadata: CardMetadata) -> dict[str, object]:
    return {
        "title": metadata.title,
        "summary": metadata.summary,
        "source": metadata.source,
        "tags": list(metadata.tags),
        "columns": list(metadata.columns),
        "shape": None if metadata.shape is None else list(metadata.shape),
    }


def _updated(
    existing: ExperimentCardV1, descriptive: dict[str, object], media_type: str, now: datetime
) -> ExperimentCardV1:
    index = existing.index
    if index.state is not IndexState.DISABLED:
        # New descriptive text is a new projection revision: it must be indexed again.
        index = IndexStatus(state=IndexState.PENDING, updated_at=now)
    artifact = existing.artifact.model_dump() | {"media_type": media_type}
    changes = {**descriptive, "artifact": artifact, "updated_at": now, "index": index.model_dump()}
    return _revalidate(existing, changes)


def _revalidate(card: ExperimentCardV1, changes: dict[str, object]) -> ExperimentCardV1:
    """A copy of `card` with `changes`, validated again (model_copy would skip validation)."""
    document = card.model_dump() | changes
    return ExperimentCardV1.model_validate(document, strict=False)


def _record_warnings(card: ExperimentCardV1, deduplicated: bool) -> tuple[str, ...]:
    warnings = []
    if deduplicated:
        warnings.append("deduplicated: these exact bytes were already stored in this project")
    if card.source_version == UNKNOWN_SOURCE_VERSION:
        warnings.append("source_version is 'unknown': freshness will be unverifiable")
    return tuple(warnings)


def _check_version(value: str | None) -> None:
    if value is None:
        return
    if not value or len(value) > 200 or not value.isprintable():
        raise InvalidInput("current_source_version must be 1-200 printable characters")
