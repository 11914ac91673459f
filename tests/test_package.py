"""Package-level contracts: the public API table, lazy loading of heavy layers, error codes."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

import loom_nb
from loom_nb import errors


def _modules_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


HEAVY = {"ipywidgets", "IPython", "anywidget", "traitlets"}


@pytest.mark.parametrize(
    "statement",
    [
        "import loom_nb",
        "import loom_nb.guard",
        "import loom_nb.content",
        "import loom_nb.capabilities",
        "from loom_nb import guard_request, Message, LlmRequest",
    ],
)
def test_core_imports_neither_widgets_nor_ipython(statement: str) -> None:
    """Importing the core loads no ipywidgets, IPython or anywidget (the notebook layer is lazy)."""
    loaded = _modules_after(statement)
    assert not {m.split(".")[0] for m in loaded} & HEAVY


@pytest.mark.parametrize(
    "statement", ["import loom_nb.guard", "import loom_nb.content", "import loom_nb"]
)
def test_guard_and_content_do_not_import_httpx(statement: str) -> None:
    """DESIGN.md: `import loom_nb.guard` must not import httpx either."""
    assert "httpx" not in _modules_after(statement)


def test_all_is_sorted_and_matches_the_export_table() -> None:
    """__all__ is sorted and is exactly the lazy export table."""
    assert loom_nb.__all__ == sorted(loom_nb.__all__)
    assert set(loom_nb.__all__) == set(loom_nb._EXPORTS)


@pytest.mark.parametrize("name", sorted(loom_nb._EXPORTS))
def test_every_public_name_resolves_and_is_documented(name: str) -> None:
    """Each public name imports from the module the table names and has a docstring."""
    value = getattr(loom_nb, name)
    module = importlib.import_module(loom_nb._EXPORTS[name])
    assert getattr(module, name) is value
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{name} has no docstring"


def test_unknown_attribute_is_an_attribute_error() -> None:
    """A name outside the table raises AttributeError, as a module should."""
    with pytest.raises(AttributeError):
        _ = loom_nb.no_such_name  # type: ignore[attr-defined]


def _error_classes() -> list[type[errors.LoomError]]:
    return [
        obj
        for obj in vars(errors).values()
        if inspect.isclass(obj) and issubclass(obj, errors.LoomError)
    ]


def test_error_codes_are_stable_unique_and_documented() -> None:
    """Every LoomError subclass has its own code and a docstring, and is in the module tree."""
    classes = _error_classes()
    codes = [cls.default_code for cls in classes]
    assert len(codes) == len(set(codes))
    for cls in classes:
        assert cls.__doc__
        assert cls.__name__ in (errors.__doc__ or "")
        assert cls.__name__ in errors.__all__


def test_error_carries_code_message_and_details() -> None:
    """A raised LoomError exposes code, message and structured details, and can override code."""
    exc = errors.GuardError("bad part", code="orphan_tool_result", message_index=2)
    assert exc.code == "orphan_tool_result"
    assert exc.details == {"message_index": 2}
    assert str(exc) == "bad part"
    assert "orphan_tool_result" in repr(exc)
    assert isinstance(errors.UnsupportedModalityError("x"), errors.GuardError)
    provider = errors.ProviderError("x", status=429, error_type="rate_limit_error", retryable=True)
    assert (provider.status, provider.error_type, provider.retryable) == (
        429,
        "rate_limit_error",
        True,
    )


def test_every_public_name_is_documented_in_the_readme() -> None:
    """The README's API reference names every public name, so the two cannot drift apart."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    reference = readme.split("## API reference", 1)[1]
    missing = [n for n in loom_nb.__all__ if not re.search(rf"`{re.escape(n)}`", reference)]
    assert missing == [], f"add these to the README's API reference: {missing}"


def test_the_display_bundles_load_without_the_widgets() -> None:
    """The display functions import no ipywidgets or anywidget until a live view is made."""
    loaded = _modules_after("import loom_nb.widgets._display")
    assert not {m.split(".")[0] for m in loaded} & {"ipywidgets", "anywidget", "traitlets"}
