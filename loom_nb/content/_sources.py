"""Where a media part's bytes are: a content address in the store (a ref) or inline base64.

The base models of the content package live here too (frozen, strict about unknown fields,
optional fields left out of the serialized form while unset), below the parts and below the
media helpers that build parts from bytes, so both can import them without a circle.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import (
    ConfigDict,
    Field,
    StrictInt,
    field_validator,
)

from loom_nb._strict import StrictModel

__all__ = [
    "ADDRESS_PATTERN",
    "ContentRef",
    "DataSource",
    "MediaSource",
    "RefSource",
    "omitted_when_none",
]

ADDRESS_PATTERN = re.compile(r"sha256:[0-9a-f]{64}")
"""A content address: the algorithm tag and the lowercase hex digest of the bytes."""


class _Model(StrictModel):
    """Frozen, strict about unknown fields; the base of every content value (bad input: ContentValidationError)."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _is_none(value: object) -> bool:
    return value is None


def omitted_when_none() -> Any:
    """A field defaulting to None that is left out of the serialized form while None.

    The field's ``exclude_if`` is checked inside pydantic's serializer, so a model with such fields
    serializes at the speed of one without them (a ``model_serializer(mode="wrap")`` that deleted
    the keys afterwards called back into Python for every part of every message dumped).
    """
    return Field(default=None, exclude_if=_is_none)


class ContentRef(_Model):
    """A claim-check for bytes in the content store."""

    address: str
    """``sha256:<64 lowercase hex>`` of the bytes."""
    size: Annotated[StrictInt, Field(ge=0)] | None = omitted_when_none()
    """Declared size in bytes, checked against the blob when it is resolved; absent if unknown."""

    @field_validator("address")
    @classmethod
    def _check_address(cls, value: str) -> str:
        if not ADDRESS_PATTERN.fullmatch(value):
            raise ValueError("an address looks like 'sha256:' followed by 64 lowercase hex digits")
        return value


class RefSource(_Model):
    """Media held in the content store, named by address (resolved just before the provider call)."""

    kind: Literal["ref"] = "ref"
    """Discriminator: always ``"ref"``."""
    ref: ContentRef
    """The address (and optionally the size) of the blob."""


class DataSource(_Model):
    """Media carried inline as base64 (capped by the guard: MAX_INLINE_BYTES per part)."""

    kind: Literal["data"] = "data"
    """Discriminator: always ``"data"``."""
    data: str
    """The bytes, base64-encoded (standard alphabet, padded)."""


MediaSource: TypeAlias = Annotated[RefSource | DataSource, Field(discriminator="kind")]
