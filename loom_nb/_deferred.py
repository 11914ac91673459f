"""Import a third-party package with some of its own imports standing in until first used.

Some dependencies import, at once, packages they need only for an optional feature loom_nb never
uses on the way: ``jsonschema`` every package of its format checks (one builds forty Earley
parsers when imported), ``genai_prices`` the HTTP client of its price auto-update (which loom_nb
never starts). ``import_deferring(package, deferred)`` imports ``package`` with each package named
in ``deferred`` in ``sys.modules`` as a stand-in module, and takes the stand-ins out again once
``package`` is imported; from then on an ``import`` of those packages gets the real ones.

A stand-in loads the real package on the first attribute asked of it (and hands back the real
attribute, each time: a patch of the real package shows through). ``Deferred.function`` names a
function the importer takes by name at import (``from X import f``): the stand-in has one that
imports the real package on its first call and calls the real function. ``Deferred.error`` names
an exception class the importer reads at import (a check's ``except`` clause): the stand-in has
a ``ValueError`` subclass of that name, and its function raises it from the real package's
exception of that name, so the importer's ``except`` still catches it, with the same message.
A package already imported, or not installed, is left alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Deferred", "import_deferring"]


@dataclass(frozen=True)
class Deferred:
    """What the importer takes from a stood-in package at import (nothing, by default)."""

    function: str | None = None
    """A function imported by name (``from X import function``)."""
    error: str | None = None
    """A ``ValueError`` subclass read at import; ``function`` raises it from the real one."""


def import_deferring(package: str, deferred: Mapping[str, Deferred]) -> types.ModuleType:
    """``package``, imported with the packages of ``deferred`` standing in until first used."""
    loaded = sys.modules.get(package)
    if loaded is not None:
        return loaded
    stand_ins: dict[str, types.ModuleType] = {}
    for name, what in deferred.items():
        if name in sys.modules or importlib.util.find_spec(name) is None:
            continue
        stand_ins[name] = sys.modules[name] = _stand_in(name, what)
    try:
        return importlib.import_module(package)
    finally:
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]


def _real(name: str, stand_in: types.ModuleType) -> types.ModuleType:
    """The real package ``name`` (imported now if need be, never the stand-in)."""
    if sys.modules.get(name) is stand_in:
        del sys.modules[name]
    return importlib.import_module(name)


def _stand_in(name: str, what: Deferred) -> types.ModuleType:
    module = types.ModuleType(name, f"Stands in for {name} until it is first used.")
    error = None
    if what.error is not None:
        error = type(what.error, (ValueError,), {"__module__": name})
        module.__dict__[what.error] = error
    if what.function is not None:
        module.__dict__[what.function] = _deferred_function(name, module, what, error)

    def __getattr__(attribute: str) -> Any:
        if attribute.startswith("__"):  # what the import system probes (__path__ ...): not there
            raise AttributeError(attribute)
        return getattr(_real(name, module), attribute)

    module.__dict__["__getattr__"] = __getattr__
    return module


def _deferred_function(
    name: str, module: types.ModuleType, what: Deferred, error: type[ValueError] | None
) -> Callable[..., Any]:
    function = str(what.function)

    def deferred(*args: Any, **kwargs: Any) -> Any:
        package = _real(name, module)
        real: Callable[..., Any] = getattr(package, function)
        if error is None:
            return real(*args, **kwargs)
        try:
            return real(*args, **kwargs)
        except getattr(package, str(what.error)) as exc:  # the class the importer catches
            raise error(*exc.args) from exc

    deferred.__name__ = deferred.__qualname__ = function
    deferred.__module__ = name
    return deferred
