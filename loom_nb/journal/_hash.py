"""``hash_request``: a stable identity for a model request, for VCR-style matching of recordings.

The hash is ``sha256:`` and the hex digest of the request's canonical JSON (the
``model_dump(mode="json")`` form with sorted keys, compact separators and UTF-8 kept). Nothing
in it depends on the process, the Python version, dict insertion order or the hash seed, so a
recording committed next to a notebook keeps matching everywhere. Two golden hashes in the tests
(a string-content request and a parts request) pin the serialization: a change to the content
model that moves either one breaks every committed recording and must be deliberate.
"""

from __future__ import annotations

import hashlib
from typing import Any

from loom_nb.content import LlmRequest, canonical_json, parse_request

__all__ = ["hash_request"]


def hash_request(request: LlmRequest | dict[str, Any]) -> str:
    """``"sha256:<hex>"`` of the request's canonical JSON; a dict is validated as a request first.

    Bad input raises ``ContentValidationError`` naming the field.
    """
    model = parse_request(request)
    digest = hashlib.sha256(canonical_json(model).encode("utf-8")).hexdigest()
    return f"sha256:{digest}"
