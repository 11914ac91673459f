"""Inline sizes from base64 length arithmetic: equal to decoding for valid data, still refusing malformed data."""

from __future__ import annotations

import base64
import binascii

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loom_nb.agent._results import _inline_size, inline_bytes_of
from loom_nb.content import DataSource, ImagePart, Message
from loom_nb.errors import GuardError, OversizedInlinePartError
from loom_nb.guard._checks import b64_decoded_size, inline_size, is_standard_base64

PROPERTY = settings(max_examples=300, deadline=None)
# Mostly base64 characters and padding, some others: near-misses are what the check must refuse.
NEAR_BASE64 = st.text(
    alphabet=st.sampled_from(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/==-_ \n.é٣"
    ),
    max_size=24,
)


def strict_decode(data: str) -> bytes | None:
    try:
        return binascii.a2b_base64(data.encode("ascii"), strict_mode=True)
    except ValueError:
        return None


@PROPERTY
@given(st.binary(max_size=2000))
def test_arithmetic_size_equals_the_decoded_length(raw: bytes) -> None:
    data = base64.b64encode(raw).decode("ascii")
    assert is_standard_base64(data)
    assert b64_decoded_size(data) == len(base64.b64decode(data)) == len(raw)
    assert inline_size(data, len(raw), "here") == len(raw)


@PROPERTY
@given(NEAR_BASE64)
def test_validity_check_agrees_with_strict_decoding(data: str) -> None:
    decoded = strict_decode(data)
    valid = decoded is not None and len(data) % 4 == 0
    assert is_standard_base64(data) is valid
    if valid:
        assert decoded is not None
        assert b64_decoded_size(data) == len(decoded) == inline_size(data, 10_000, "here")
    else:
        with pytest.raises(GuardError) as caught:
            inline_size(data, 10_000, "here")
        assert caught.value.code == "bad_base64"


@pytest.mark.parametrize("data", ["QUI=", "QQ==", "QUJD", ""])
def test_padding_counts(data: str) -> None:
    assert b64_decoded_size(data) == len(base64.b64decode(data))


@pytest.mark.parametrize("data", ["QQ=A", "A===", "====", "QQ==QQ==", "QUJD\nREVG", "ab-_", "é==="])
def test_malformed_base64_of_a_valid_length_is_still_refused(data: str) -> None:
    with pytest.raises(GuardError) as caught:
        inline_size(data, 10_000, "messages[0].content[0]")
    assert caught.value.code == "bad_base64"
    assert "messages[0].content[0]" in str(caught.value)


def test_the_cap_is_exact_one_byte_over_is_refused() -> None:
    data = base64.b64encode(b"x" * 10).decode()  # 16 characters, "==" padded, 10 bytes
    assert inline_size(data, 10, "p") == 10
    with pytest.raises(OversizedInlinePartError) as caught:
        inline_size(data, 9, "p")
    assert caught.value.code == "oversized_inline"
    assert "10 bytes" in str(caught.value)


def test_agent_accounting_uses_the_same_sizes() -> None:
    def image(data: str) -> ImagePart:
        return ImagePart(media_type="image/png", source=DataSource(data=data))

    valid = base64.b64encode(b"12345").decode()
    assert _inline_size(image(valid)) == 5
    assert _inline_size(image("QQ=A")) == -1  # a tool's malformed result is still refused
    transcript = [Message(role="user", content=[image(valid), image(valid)])]
    assert inline_bytes_of(transcript) == 10
