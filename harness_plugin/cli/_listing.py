"""`list` and `export`: the experiments at a glance, and their verified bytes copied out."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from collections.abc import Iterator, Sequence

from cards import ExperimentCardV1, InvalidInput
from cards.errors import IntegrityError
from cas import Store
from fsedge import SHARED_FILE_MODE, write_new
from harness_plugin import _views
from harness_plugin._views import human_size, iso

CHUNK_BYTES = 1 << 20
SHORT_ID_CHARS = 12
_PREFIX = "exp_"
_SUFFIXES = {
    "application/vnd.apache.parquet": ".parquet",
    "application/vnd.apache.arrow.file": ".arrow",
    "application/vnd.apache.arrow.stream": ".arrows",
    "text/csv": ".csv",
    "text/tab-separated-values": ".tsv",
    "application/json": ".json",
    "application/jsonl": ".jsonl",
    "application/x-ndjson": ".jsonl",
    "text/plain": ".txt",
    "image/png": ".png",
    "application/x-npy": ".npy",
}


# -- list ---------------------------------------------------------------------------------


def list_view(store: Store, wanted: _views.ListFilter) -> dict[str, object]:
    """The project's matching experiments, newest first, with skipped cards counted."""
    scan = store.scan_cards()
    cards = sorted(
        (card for card in scan.cards if wanted.admits(card)),
        key=lambda card: (card.created_at, card.experiment_id),
        reverse=True,
    )
    titles = Counter(card.title for card in cards)
    seen: set[str] = set()
    experiments: list[dict[str, object]] = []
    for card in cards:
        newest = card.title not in seen
        seen.add(card.title)
        entry = _entry(card, available=store.has_object(card.artifact.artifact_id))
        entry["same_title"] = titles[card.title]
        entry["newest_of_title"] = newest
        experiments.append(entry)
    return {"experiments": experiments, "skipped_cards": len(scan.problems)}


def _entry(card: ExperimentCardV1, *, available: bool) -> dict[str, object]:
    return {
        "experiment_id": card.experiment_id,
        "artifact_id": card.artifact.artifact_id,
        "title": card.title,
        "source": card.source,
        "source_version": card.source_version,
        "tags": list(card.tags),
        "media_type": card.artifact.media_type,
        "bytes": card.artifact.bytes,
        "shape": None if card.shape is None else list(card.shape),
        "created_at": iso(card.created_at),
        "available_locally": available,
    }


def list_lines(view: dict[str, object]) -> list[str]:
    """`list` for a person: one line per experiment; card text is quoted as data."""
    experiments = view["experiments"]
    assert isinstance(experiments, list)
    lines = [_line(entry) for entry in experiments] or ["no experiments match"]
    skipped = view["skipped_cards"]
    if skipped:
        lines.append(f"({skipped} unreadable cards were skipped; run `artmem fsck`)")
    return lines


def _line(entry: dict[str, object]) -> str:
    created = str(entry["created_at"])
    experiment_id = str(entry["experiment_id"])
    shape = entry["shape"]
    shown = "×".join(map(str, shape)) if isinstance(shape, list) and shape else "-"
    size = human_size(int(str(entry["bytes"])))
    line = (
        f"{created[:10]} {created[11:16]}  "
        f"{experiment_id[len(_PREFIX) : len(_PREFIX) + SHORT_ID_CHARS]}  "
        f"{entry['media_type']}  {size}  {shown}  {entry['title']!r}"
    )
    if int(str(entry["same_title"])) > 1 and entry["newest_of_title"]:
        line += " (newest)"
    if not entry["available_locally"]:
        line += "  [not available locally]"
    return line


# -- export -------------------------------------------------------------------------------


def export(
    store: Store, experiment_id: str, dest: str, *, force: bool, outside: Sequence[str] = ()
) -> dict[str, object]:
    """Copy an experiment's verified bytes to `dest`, atomically, hashing what is written.

    `dest`'s directory must lie outside every directory in `outside` (the store's roots).
    A `dest` that is a directory receives `<experiment_id><suffix of its media type>`.

    Raises:
        PathRejected: `dest` is inside one of `outside`.
        InvalidInput: `dest` exists and `force` is not set.
        IntegrityError: the bytes copied differ from the card's size or SHA-256 (no file left).
        StoreIOError: `dest` could not be written.
        (and what `ProjectStore.resolve` raises)
    """
    resolved = store.resolve(experiment_id)
    artifact = resolved.card.artifact
    if os.path.isdir(dest):  # a file named after the experiment, inside it
        dest = os.path.join(dest, experiment_id + _SUFFIXES.get(artifact.media_type, ""))
        if os.path.isdir(dest):
            raise InvalidInput(f"the destination is a directory: {dest}")
    exists = os.path.lexists(dest)
    if exists and not force:
        raise InvalidInput(f"the destination exists: {dest} (pass --force to replace it)")
    chunks = _checked_chunks(resolved.path, artifact.sha256, artifact.bytes)
    try:
        write_new(dest, chunks, replace=exists, outside=outside, mode=SHARED_FILE_MODE)
    except IsADirectoryError as exc:
        raise InvalidInput(f"the destination {exc.strerror}") from None
    except FileExistsError:
        raise InvalidInput(
            f"the destination appeared meanwhile: {dest} (pass --force to replace it)"
        ) from None
    return {
        "experiment_id": resolved.card.experiment_id,
        "path": os.path.abspath(dest),
        "bytes": artifact.bytes,
        "sha256": artifact.sha256,
    }


def export_lines(view: dict[str, object]) -> list[str]:
    """`export` for a person."""
    size = human_size(int(str(view["bytes"])))
    return [
        f"exported {view['experiment_id']}",
        f"  path    {view['path']}",
        f"  bytes   {size} (SHA-256 verified while copying)",
        f"  sha256  {view['sha256']}",
    ]


def _checked_chunks(path: str, sha256: str, size: int) -> Iterator[bytes]:
    """The file's bytes in 1 MiB chunks; after the last, raise unless they hash to `sha256`."""
    digest = hashlib.sha256()
    total = 0
    with open(path, "rb") as source:
        while chunk := source.read(CHUNK_BYTES):
            digest.update(chunk)
            total += len(chunk)
            yield chunk
    if total != size or digest.hexdigest() != sha256:
        raise IntegrityError(
            "the exported bytes differ from the card's size or SHA-256 (the object changed "
            "while it was copied); nothing was written; run `artmem fsck`"
        )
