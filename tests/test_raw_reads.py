"""The raw-read guard: message content is never coerced to text in loom_nb's own source."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb
from tests.raw_reads import check_package, check_source

PLANTED = {
    "an f-string": 'def f(m):\n    return f"said: {m.content}"\n',
    "str()": "def f(m):\n    return str(m.content)\n",
    "% formatting": 'def f(m):\n    return "said: %s" % m.content\n',
    "% formatting (tuple)": 'def f(m):\n    return "%s %s" % (m.role, m.content)\n',
    "+ with a string": 'def f(m):\n    return "said: " + m.content\n',
    "+ with a string (right)": 'def f(m):\n    return m.content + "!"\n',
    "str.join": 'def f(ms):\n    return "".join(ms[0].content)\n',
    "json.dumps": "import json\ndef f(m):\n    return json.dumps(m.content)\n",
    "a variable read from .content": 'def f(m):\n    c = m.content\n    return f"{c}"\n',
    "a subscript ['content']": 'def f(d):\n    return str(d["content"])\n',
    "str.format": 'def f(m):\n    return "{}".format(m.content)\n',
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violation_is_caught(name: str) -> None:
    """Each kind of coercion planted in a snippet is reported with its line."""
    violations = check_source(PLANTED[name])
    assert len(violations) == 1, violations
    assert violations[0].line >= 2


CLEAN = {
    "text_of": 'from loom_nb.content import text_of\ndef f(m):\n    return f"said: {text_of(m.content)}"\n',
    "isinstance narrowing": 'def f(m):\n    if isinstance(m.content, str):\n        return "said: " + m.content\n    return ""\n',
    "conditional expression": 'def f(m):\n    return m.content if isinstance(m.content, str) else ""\n',
    "reassigned variable": 'def f(m):\n    c = m.content\n    c = "x"\n    return f"{c}"\n',
    "non-content attribute": 'def f(m):\n    return f"{m.role}" + str(m.text)\n',
    "has_structured_parts": "from loom_nb.content import has_structured_parts\ndef f(m):\n    return str(has_structured_parts(m.content))\n",
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_legitimate_reads_pass(name: str) -> None:
    """Reads through the helpers or after an isinstance narrowing are not reported."""
    assert check_source(CLEAN[name]) == []


def test_loom_nb_source_has_no_raw_reads() -> None:
    """loom_nb's own modules never coerce message content to text."""
    root = Path(loom_nb.__file__).parent
    violations = check_package(root)
    assert violations == [], "\n".join(map(str, violations))
