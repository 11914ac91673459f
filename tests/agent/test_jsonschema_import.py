"""The agent layer imports jsonschema without its costly format grammars, and changes no format check."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from loom_nb.agent._jsonschema import DEFERRED

SAMPLES = {
    "iri": ["http://example.com/\u00fc", "not an iri", "", "http://[::1]:80/a?b#c"],
    "iri-reference": ["a/b", "\\\\bad", "#frag"],
    "uri": ["a:b", "ab", "http://x/y z"],
    "uri-reference": ["a/b", "http://x/y z"],
    "date-time": ["2020-01-01T00:00:00Z", "x", "2020-01-01t00:00:00+01:00"],
    "time": ["10:00:00Z", "25:00:00Z"],
    "hostname": ["example.com", "-bad-"],
    "duration": ["P1D", "PT1H30M", "P", "1D", "PT", "P1Y2M3DT4H5M6S", "P1.5D", 5],
    "uri-template": ["http://x/{a}", "http://x/{a", "{+path}/x"],
}
DRAFT3_SAMPLES = {"color": ["red", "#fff", "#FFFFFF", "not-a-color", "#ggg", 3]}
"""Formats only draft 3 checks (CSS colours, webcolors), through its own format checker."""

_REPORT = """
import json, sys
fc = jsonschema.Draft202012Validator.FORMAT_CHECKER
checks = {{f: [fc.conforms(v, f) for v in vs] for f, vs in {samples!r}.items()}}
fc3 = jsonschema.Draft3Validator.FORMAT_CHECKER
checks.update({{f: [fc3.conforms(v, f) for v in vs] for f, vs in {draft3!r}.items()}})
errors = {{}}
for value in ("P", "1D", "x"):
    try:
        fc.check(value, "duration")
    except jsonschema.FormatError as exc:
        cause = exc.cause.__cause__ or exc.cause  # a stand-in's error is raised from the real one
        errors[value] = [type(cause).__name__, isinstance(exc.cause, ValueError), str(exc.cause)]
loaded = sorted(name for name in {deferred!r} if name in sys.modules)
print(json.dumps({{
    "loaded": loaded, "checkers": sorted(fc.checkers), "checks": checks, "errors": errors,
}}))
"""


def _run(prelude: str) -> dict[str, object]:
    code = prelude + _REPORT.format(
        deferred=sorted(DEFERRED), samples=SAMPLES, draft3=DRAFT3_SAMPLES
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_agent_import_leaves_format_grammars_unbuilt_and_checks_unchanged() -> None:
    """After ``import loom_nb.agent`` no deferred format package is loaded; the format checker
    jsonschema registers has the same formats, with the same answers, as a plain import's."""
    ours = _run(
        "import sys\nimport loom_nb.agent\n"
        f"assert not [n for n in {sorted(DEFERRED)!r} if n in sys.modules], sorted(sys.modules)\n"
        "assert 'lark' not in sys.modules and 'arrow' not in sys.modules\n"
        "import jsonschema\n"
    )
    plain = _run("import jsonschema\n")
    assert ours["checkers"] == plain["checkers"]
    assert ours["checks"] == plain["checks"]
    # A failed duration check's cause is a ValueError with the real one's message (and from it).
    assert ours["errors"] == plain["errors"]
    assert "duration" not in plain["checkers"] or len(plain["errors"]) == 3
    installed = [n for n in sorted(DEFERRED) if importlib.util.find_spec(n) is not None]
    # The checks that use a deferred package loaded it, for real, on their first call.
    assert ours["loaded"] == plain["loaded"] == installed


@pytest.mark.skipif(
    importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax not installed"
)
def test_a_later_import_of_a_deferred_package_gets_the_real_one() -> None:
    """Once jsonschema is in, importing a deferred package by name gives the real module."""
    code = (
        "import loom_nb.agent, rfc3987_syntax\n"
        "assert hasattr(rfc3987_syntax, '__path__') and rfc3987_syntax.is_valid_syntax('iri', 'a:b')\n"
        "import jsonschema\n"
        "assert jsonschema.Draft202012Validator.FORMAT_CHECKER.conforms('a:b', 'iri')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
