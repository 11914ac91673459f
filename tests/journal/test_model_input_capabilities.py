"""The model step's hash covers the provider's declared capabilities as they are at each call.

``model_input`` reuses the previous step's dump of the capabilities when their patterns are the
same bytes (part of ``ModelBase.rest_key``); a pattern list changed in place since, another object
with other patterns, or a subclass (whose dump is its own code) is dumped again.
"""

from __future__ import annotations

from typing import Any

from loom_nb.capabilities import Capabilities
from loom_nb.content import LlmRequest, Message
from loom_nb.journal._requests import ModelBase, model_input

FIRST = [Message(role="user", content="hi")]
GROWN = [*FIRST, Message(role="assistant", content="hello"), Message(role="user", content="more")]


def _two_steps(first: Any, second: Any) -> tuple[ModelBase, ModelBase, str]:
    """The bases of two steps on ``first`` then ``second`` capabilities, and the second's hash."""
    one = model_input(LlmRequest(messages=FIRST), None, 0, first)
    two = model_input(LlmRequest(messages=GROWN), one.base, 1, second)
    return one.base, two.base, two.input_hash


def _fresh_hash(capabilities: Any) -> str:
    """The second step's hash computed with no previous step to reuse anything from."""
    return model_input(LlmRequest(messages=GROWN), None, 1, capabilities).input_hash


def test_the_same_patterns_reuse_the_dump_and_hash_as_a_fresh_dump() -> None:
    caps = Capabilities(image=["image/png"], file=["application/pdf"])
    one, two, digest = _two_steps(caps, Capabilities(image=["image/png"], file=["application/pdf"]))
    assert two.declared is one.declared  # equal patterns in another object: not dumped again
    assert digest == _fresh_hash(caps)


def test_a_pattern_list_changed_in_place_is_dumped_again() -> None:
    caps = Capabilities(image=["image/png"])
    one = model_input(LlmRequest(messages=FIRST), None, 0, caps)
    caps.image.append("image/jpeg")  # frozen model, mutable list
    two = model_input(LlmRequest(messages=GROWN), one.base, 1, caps)
    assert two.base.declared == {"image": ["image/png", "image/jpeg"], "audio": [], "file": []}
    assert two.input_hash == _fresh_hash(Capabilities(image=["image/png", "image/jpeg"]))
    assert two.input_hash != _fresh_hash(Capabilities(image=["image/png"]))


def test_other_capabilities_hash_differently() -> None:
    _, _, digest = _two_steps(Capabilities(image=["image/*"]), Capabilities())
    assert digest == _fresh_hash(Capabilities())
    assert digest != _fresh_hash(Capabilities(image=["image/*"]))


class _Dumped(Capabilities):
    """A subclass whose dump says more than its patterns."""

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        return {**super().model_dump(**kwargs), "note": "mine"}


def test_a_subclass_and_a_str_subclass_pattern_are_dumped_every_call() -> None:
    one, two, digest = _two_steps(_Dumped(), _Dumped())
    assert one.rest_key is None  # no bytes to compare: nothing is reused
    assert two.declared == {
        **Capabilities().model_dump(),
        "note": "mine",
    }
    assert digest == _fresh_hash(_Dumped()) != _fresh_hash(Capabilities())

    class Loud(str):
        pass

    caps = Capabilities(image=["image/png"])
    caps.image[0] = Loud("image/png")  # not an exact str: no bytes to compare
    base = model_input(LlmRequest(messages=FIRST), None, 0, caps).base
    assert base.rest_key is None
    assert base.declared == {
        "image": ["image/png"],
        "audio": [],
        "file": [],
    }


def test_no_capabilities_object_hashes_as_none() -> None:
    one, two, digest = _two_steps(None, None)
    assert one.declared is None
    assert two.declared is None
    assert two.rest_key == one.rest_key  # no capabilities: the same key, reused
    assert digest == _fresh_hash(None) != _fresh_hash(Capabilities())
