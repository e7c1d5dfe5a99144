"""Where a bucket store lives: the bucket, a key prefix, the endpoint, and the local cache."""

from __future__ import annotations

import os

import msgspec

from cards.errors import InvalidInput

PART_BYTES = 8 << 20  # two manifest chunks per part: parts stay chunk-aligned
MAX_IN_FLIGHT = 8  # parts being sent at once (memory: this many parts, 64 MiB)
STALE_STAGING_AGE_S = 3600  # a staging key older than this belongs to no live record


class BucketSettings(msgspec.Struct, frozen=True):
    """A bucket and prefix holding the store's layout; credentials come from the AWS chain only.

    `cache_root` holds the verified local copies and must be a local absolute path
    (`<state_root>/bucket-cache`).
    """

    bucket: str
    cache_root: str
    prefix: str = ""
    endpoint_url: str | None = None
    region: str | None = None
    part_bytes: int = PART_BYTES
    max_in_flight: int = MAX_IN_FLIGHT
    stale_after_s: int = STALE_STAGING_AGE_S  # fsck: staging keys and uploads older are leftovers
    # Each part declares its SHA-256 as its S3 checksum (proven before it is sent); off for a
    # service that refuses S3 checksums: the whole SHA-256 is then checked before completing.
    part_checksums: bool = True

    def __post_init__(self) -> None:
        if not os.path.isabs(self.cache_root):
            raise InvalidInput("the bucket cache root must be an absolute path")
        if self.prefix.startswith("/") or self.prefix.endswith("/") or "//" in self.prefix:
            raise InvalidInput("the bucket prefix must not start or end with '/' or repeat it")
        if self.part_bytes < 5 << 20 or self.part_bytes % (4 << 20):
            raise InvalidInput("the part size must be a multiple of 4 MiB, at least 8 MiB")
        if not 1 <= self.max_in_flight <= 16:
            raise InvalidInput("the parts in flight must be between 1 and 16")
