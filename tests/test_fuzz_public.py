"""Strict inputs (issue 17): random JSON and random parts into every public callable and the CLI.

The callables are enumerated from ``loom_nb.__all__`` when the test runs, so a name any branch
adds is fuzzed too. Each call gets arguments bound to its signature (required parameters always,
optional ones sometimes), drawn from random JSON, random parts and messages, and odd scalars. A
``LoomError`` is the right answer to bad input; anything else (``TypeError``, ``KeyError``,
pydantic's bare ``ValidationError``, ``AttributeError``...) is counted against the callable, and
the count must be 0. Exception classes and protocols are not entry points and are left out.

The test runs in a scratch working directory and draws strings without path separators or dots,
so a callable that creates files (a store, a journal) can only create them there.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import io
import os
import string
from pathlib import Path
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import loom_nb
from loom_nb import cli
from loom_nb.errors import LoomError
from tests import strategies as ls

SAFE_TEXT = st.text(
    alphabet=st.characters(exclude_characters="/\\.~:\x00", exclude_categories=("Cs",)),
    max_size=12,
)
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | SAFE_TEXT,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(SAFE_TEXT, children, max_size=3)
    ),
    max_leaves=6,
)
VALUES = (
    JSON
    | ls.parts
    | ls.messages
    | st.lists(ls.parts, max_size=2)
    | st.sampled_from([b"bytes", bytearray(b"x"), object(), (), frozenset(), 1j, ..., len])
)
FUZZ = settings(
    max_examples=int(os.environ.get("LOOM_FUZZ_EXAMPLES", "25")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
CALL_TIMEOUT = 5.0


def _is_entry_point(value: object) -> bool:
    if inspect.isclass(value):
        if issubclass(value, BaseException):
            return False
        return not (
            Protocol in getattr(value, "__mro__", ()) or getattr(value, "_is_protocol", False)
        )
    return inspect.isfunction(value) or inspect.iscoroutinefunction(value)


PUBLIC = sorted(name for name in loom_nb.__all__ if _is_entry_point(getattr(loom_nb, name)))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch working directory; no API keys and no backend URLs from the environment."""
    monkeypatch.chdir(tmp_path)
    for key in list(os.environ):
        if key.endswith("_API_KEY") or key.startswith("LOOM_"):
            monkeypatch.delenv(key)
    return tmp_path


def _parameters(target: Any) -> list[inspect.Parameter] | None:
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    return [
        p
        for p in signature.parameters.values()
        if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]


def _call(target: Any, args: list[Any], kwargs: dict[str, Any]) -> None:
    """Call ``target`` (awaiting a coroutine, with a timeout); close what it returns if it can."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        result = target(*args, **kwargs)
        if inspect.isawaitable(result):
            asyncio.run(asyncio.wait_for(_awaited(result), CALL_TIMEOUT))
        else:
            close = getattr(result, "close", None)
            if callable(close) and not inspect.iscoroutinefunction(close):
                with contextlib.suppress(Exception):
                    close()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _bare(exc: BaseException) -> bool:
    """Whether ``exc`` is an exception bad input must not produce."""
    return not isinstance(exc, LoomError | TimeoutError | KeyboardInterrupt)


@pytest.mark.parametrize("name", PUBLIC)
def test_public_callable_raises_only_loom_errors_for_bad_input(name: str, scratch: Path) -> None:
    """Random JSON, parts and odd values bound to the signature: 0 bare exceptions."""
    bare = bare_exceptions(getattr(loom_nb, name))
    assert bare == [], f"{name}: {len(bare)} bare exceptions, first: {bare[:3]}"


def test_the_fuzz_covers_every_public_name_and_counts_what_it_should(scratch: Path) -> None:
    """Every public function and class is fuzzed, and a function that leaks a KeyError is counted."""
    assert len(PUBLIC) >= 50
    assert {"Message", "text_of", "to_parts", "collect_stream", "Capabilities"} <= set(PUBLIC)

    def leaky(value: Any) -> Any:
        return value["key"]

    assert bare_exceptions(leaky) != []


def bare_exceptions(target: Any) -> list[str]:
    """The non-LoomError exceptions ``target`` raised for random arguments bound to its signature."""
    params = _parameters(target)
    if params is None:
        return [f"{target!r} has no inspectable signature"]
    bare: list[str] = []

    @FUZZ
    @given(st.data())
    def run(data: st.DataObject) -> None:
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        positional = True  # every earlier positional parameter was passed by position
        for param in params:
            required = param.default is inspect.Parameter.empty
            pos_only = param.kind is inspect.Parameter.POSITIONAL_ONLY
            if not (required or pos_only) and not data.draw(st.booleans(), label=param.name):
                positional = positional and param.kind is inspect.Parameter.KEYWORD_ONLY
                continue
            value = data.draw(VALUES, label=param.name)
            if param.kind is not inspect.Parameter.KEYWORD_ONLY and positional:
                args.append(value)
            else:
                kwargs[param.name] = value
                positional = False
        try:
            _call(target, args, kwargs)
        except BaseException as exc:  # counting them is the point
            if _bare(exc):
                bare.append(f"{type(exc).__name__}: {exc}"[:300])

    run()
    return bare


CLI_TOKENS = st.sampled_from(
    [
        "store",
        "journal",
        "put",
        "ls",
        "gc",
        "show",
        "export",
        "page",
        "import",
        "--store",
        "--journal",
        "--ttl",
        "--tenant",
        "--json",
        "--reclaim-orphans",
        "--help",
        "-h",
        "x",
        "0",
        "-1",
        "7d",
        "run",
        "sha256:" + "0" * 64,
    ]
) | st.text(alphabet=string.ascii_letters + string.digits + "-_=", max_size=10)


@settings(
    max_examples=int(os.environ.get("LOOM_FUZZ_EXAMPLES", "25")) * 4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(argv=st.lists(CLI_TOKENS, max_size=6))
def test_cli_raises_nothing_bare_for_random_argv(argv: list[str], scratch: Path) -> None:
    """loom_nb.cli.main with random argv returns an exit code or exits through argparse, nothing else."""
    if argv[:1] == ["demo"]:
        return  # the demo is a real run with its own tests
    code: object
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            code = cli.main(argv)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        code = exc.code if exc.code is not None else 0
    assert code in (0, 1, 2), code


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: loom_nb.text_of(None), loom_nb.ContentValidationError),
        (lambda: loom_nb.to_parts(5), loom_nb.ContentValidationError),
        (lambda: loom_nb.has_structured_parts([1]), loom_nb.ContentValidationError),
        (lambda: asyncio.run(loom_nb.collect_stream(None)), loom_nb.ConfigurationError),
        (lambda: loom_nb.Capabilities(image=["png"]), loom_nb.ContentValidationError),
        (lambda: loom_nb.Message.model_validate({"role": "tool"}), loom_nb.ContentValidationError),
        (lambda: loom_nb.Message.model_validate_json("{"), loom_nb.ContentValidationError),
        (lambda: loom_nb.TextPart(text=5), loom_nb.ContentValidationError),
        (lambda: loom_nb.assistant_message_of({}), loom_nb.ContentValidationError),
        (lambda: loom_nb.OpenAIProvider(None), loom_nb.ConfigurationError),  # type: ignore[arg-type]
    ],
    ids=[
        "text_of(None)",
        "to_parts(5)",
        "has_structured_parts([1])",
        "collect_stream(None)",
        "Capabilities(image=['png'])",
        "Message.model_validate",
        "Message.model_validate_json",
        "TextPart(text=5)",
        "assistant_message_of({})",
        "OpenAIProvider(None)",
    ],
)
def test_the_issues_examples_raise_typed_errors(call: Any, error: type[Exception]) -> None:
    """Each example of issue 17 raises the typed error, with a code, that also keeps the old base."""
    with pytest.raises(error) as caught:
        call()
    assert isinstance(caught.value, LoomError)
    assert caught.value.code


def test_model_validate_errors_still_look_like_pydantic_to_pydantic_callers() -> None:
    """From model_validate the error is also pydantic's ValidationError (same errors()) and a ValueError."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        loom_nb.Message.model_validate({"role": "user", "content": [{"type": "nope"}]})
    assert isinstance(caught.value, loom_nb.ContentValidationError)
    assert isinstance(caught.value, ValueError)
    assert caught.value.errors()
    assert caught.value.details["field"].startswith("content")


@settings(
    max_examples=int(os.environ.get("LOOM_FUZZ_EXAMPLES", "25")) * 2,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
@given(
    args=st.lists(VALUES, max_size=12),
    kwargs=st.dictionaries(
        st.sampled_from(["index", "kind", "status", "usage", "cost", "result", "zzz"]),
        VALUES,
        max_size=3,
    ),
)
def test_chat_turn_refuses_garbage_of_any_shape(args: list[Any], kwargs: dict[str, Any]) -> None:
    """ChatTurn with any number of garbage arguments (none, too many, unknown names) is a LoomError."""
    with pytest.raises(loom_nb.ContentValidationError) as caught:
        loom_nb.ChatTurn(*args, **kwargs)
    assert caught.value.code == "invalid_chat_turn"
    assert "A ChatTurn is built by Chat" in caught.value.message  # the remedy
    assert isinstance(caught.value, TypeError)  # callers catching TypeError keep working


def test_chat_turn_takes_its_fields_and_names_the_bad_one() -> None:
    """A well-formed ChatTurn builds (and replaces); a wrong field is named in the refusal."""
    import dataclasses

    turn = loom_nb.ChatTurn(0, "chat", 0, "completed", None, loom_nb.Usage(), None, 0)
    assert dataclasses.replace(turn, index=2).index == 2
    with pytest.raises(loom_nb.ContentValidationError, match="status is one of"):
        dataclasses.replace(turn, status="done")
    with pytest.raises(loom_nb.ContentValidationError, match="cost is a finite Decimal"):
        dataclasses.replace(turn, cost=-1)


@pytest.mark.parametrize(
    "method", ["__call__", "run", "approve", "decide", "decline", "undo", "fork", "stop"]
)
def test_chat_methods_raise_only_loom_errors_for_bad_input(method: str, scratch: Path) -> None:
    """A Chat's methods, given random arguments, refuse them with LoomErrors only."""
    chat = loom_nb.Chat(
        loom_nb.ScriptedProvider([{"text": "x"}] * 400), journal=loom_nb.Journal(), id="fuzz"
    )
    bare = bare_exceptions(getattr(chat, method))
    assert bare == [], f"chat.{method}: {len(bare)} bare exceptions, first: {bare[:3]}"
