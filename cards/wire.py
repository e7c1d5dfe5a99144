"""The tools' arguments: what a model may send, validated strictly, with their JSON Schemas.

pydantic models, each tool's JSON Schema generated from the model that validates it (its
structured `errors()` name the field that failed). Arguments forbid unknown fields, so an
argument naming a project, session, root, destination, peer or delivery id is rejected by the
schema itself: scope always comes from the host's caller. What the tools send back is
`cards.results`.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from cards.card import CardMetadata, parse_metadata
from cards.model import Label, MetadataFields
from cards.policy import DEFAULT_LIMITS

_IN = ConfigDict(extra="forbid", frozen=True, strict=True)
MAX_SOURCE_PATH_CHARS = 4096
MAX_QUERY_CHARS = 1000


class RecordArgs(MetadataFields):
    """Record a file the kernel wrote in its session's exports/ directory."""

    model_config = _IN

    source_path: Annotated[str, Field(min_length=1, max_length=MAX_SOURCE_PATH_CHARS)] = Field(
        description="absolute, or relative to $RLM_SESSION_DIR/exports/"
    )

    def metadata(self) -> CardMetadata:
        """The card metadata of these arguments; fields the caller omitted stay unset.

        A re-record keeps a card's values for unset optional fields (see `cards.build`).
        """
        return parse_metadata(self.model_dump(exclude={"source_path"}, exclude_unset=True))


class ResolveArgs(BaseModel):
    """Resolve an experiment of this project to verified bytes."""

    model_config = _IN

    experiment_id: Annotated[str, Field(min_length=1, max_length=64)]
    current_source_version: Label | None = None


class SearchArgs(BaseModel):
    """Search this project's experiment cards (local, and Honcho when configured)."""

    model_config = _IN

    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    limit: Annotated[int, Field(ge=1, le=DEFAULT_LIMITS.search_results)] = 10


class StatusArgs(BaseModel):
    """No arguments."""

    model_config = _IN
