"""The principal as journaled in execution_started: written, read back, and refused when damaged."""

from __future__ import annotations

import pytest

from loom_nb.errors import JournalError
from loom_nb.journal._principal import principal_from_json, principal_to_json
from loom_nb.store import Principal


def test_a_principal_round_trips() -> None:
    """tenant and subject survive to_json and from_json; None stays None."""
    for principal in (Principal(tenant="t"), Principal(tenant="t", subject="u")):
        assert principal_from_json(principal_to_json(principal)) == principal
    assert principal_to_json(None) is None
    assert principal_from_json(None) is None


def test_a_principal_without_a_tenant_is_refused() -> None:
    """Writing an object with no string tenant is invalid_principal; reading one is journal_corrupt."""
    with pytest.raises(JournalError) as info:
        principal_to_json(object())  # type: ignore[arg-type]
    assert info.value.code == "invalid_principal"
    with pytest.raises(JournalError) as info:
        principal_from_json({"subject": "u"})
    assert info.value.code == "journal_corrupt"
