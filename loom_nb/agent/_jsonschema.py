"""``jsonschema``, imported without building the grammars of format checks nobody has run yet.

Importing ``jsonschema`` imports, at once, every optional package its ``FormatChecker`` can use.
One of them, ``rfc3987_syntax`` (installed with ``jsonschema[format-nongpl]``, which Jupyter
brings along), builds some forty Earley parsers from a Lark grammar when it is imported: most of
a second on a laptop, paid by the first ``Chat`` turn of every kernel although loom_nb validates
tool inputs without a format checker (``format`` is an annotation there, as JSON Schema 2020-12
says by default) and never checks an ``iri``.

So ``import_jsonschema`` imports ``jsonschema`` with those packages standing in as small modules
whose one function jsonschema takes (``from X import f``) imports the real package on its first
call and calls the real function: the checkers jsonschema registers are the same ones, with the
same results, and the grammar is built the first time something checks an ``iri`` (by anyone in
the process, loom_nb or not). Any other name asked of a stand-in loads the real package at once.
``isoduration`` (whose parser imports ``arrow`` and ``dateutil``) is also read at import for the
exception its ``duration`` check raises; its stand-in has a class of that name, a ``ValueError``
like the real one, and its deferred function raises that class from the real package's exception,
so the check catches it and answers as before.
The stand-ins are in ``sys.modules`` only while ``jsonschema`` imports; afterwards an ``import``
of those packages gets the real ones. When ``jsonschema`` is already imported, or a package is
already loaded or not installed, nothing is done for it (``loom_nb._deferred``).
"""

from __future__ import annotations

import types

from loom_nb._deferred import Deferred, import_deferring

__all__ = ["DEFERRED", "ERRORS", "import_jsonschema"]

DEFERRED: dict[str, str] = {
    "rfc3987_syntax": "is_valid_syntax",
    "rfc3986_validator": "validate_rfc3986",
    "rfc3339_validator": "validate_rfc3339",
    "isoduration": "parse_duration",
    "webcolors": "name_to_hex",
    "uri_template": "validate",
}
"""Package -> the function ``jsonschema._format`` calls from it first, for the packages whose
import costs more than the rest of ``jsonschema``'s (grammar builders, their regexes, ``arrow``)."""

ERRORS: dict[str, str] = {"isoduration": "DurationParsingException"}
"""Package -> the exception class (a ``ValueError``) ``jsonschema._format`` reads from it at import."""


def import_jsonschema() -> types.ModuleType:
    """The ``jsonschema`` module, its costly format packages deferred to their first use."""
    return import_deferring(
        "jsonschema",
        {name: Deferred(function, ERRORS.get(name)) for name, function in DEFERRED.items()},
    )
