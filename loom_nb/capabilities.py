"""Capability declarations, fail closed (ADR 0120 decision 6).

A provider declares the media types it accepts per modality; absent means text and tool calls
only. ``assert_request_supported`` refuses anything undeclared before any resolution or I/O.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Capabilities"]


class Capabilities(BaseModel):
    """Media types a provider accepts, per modality, as patterns: ``image/png``, ``image/*``, ``*``.

    ``Capabilities()`` is text-only (text and tool calls).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    image: list[str] = Field(default_factory=list)
    """Image media-type patterns accepted (``image/*``)."""
    audio: list[str] = Field(default_factory=list)
    """Audio media-type patterns accepted (``audio/wav``, ``audio/mpeg``)."""
    file: list[str] = Field(default_factory=list)
    """Document media-type patterns accepted (``application/pdf``)."""
