"""The raw-read guard: every read of message / part ``.content`` in loom_nb goes through an approved use."""

from __future__ import annotations

from pathlib import Path

import pytest

import loom_nb
from tests.raw_reads import allowances, check_package, check_source

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
    "str.format": 'def f(m):\n    return "{}".format(m.content)\n',
    "print": "def f(m):\n    print(m.content)\n",
    "logging": "import logging\ndef f(m):\n    logging.info('said %s', m.content)\n",
    "a logger method": "def f(log, m):\n    log.warning(m.content)\n",
    "+= onto a string": 'def f(ms):\n    s = ""\n    for m in ms:\n        s += m.content\n    return s\n',
    "walrus": "def f(m):\n    if (c := m.content):\n        print(c)\n",
    "walrus as an argument": "def f(m):\n    return len(c := m.content)\n",
    "join over a generator": 'def f(xs):\n    return "\\n".join(x.content for x in xs)\n',
    "join over a list comprehension": 'def f(xs):\n    return "\\n".join([x.content for x in xs])\n',
    "match class capture": "def f(m):\n    match m:\n        case Message(content=c):\n            print(c)\n",
    "match mapping capture": 'def f(d):\n    match d:\n        case {"content": c}:\n            return c.upper()\n',
    "iterated": "def f(m):\n    for part in m.content:\n        print(part)\n",
    "indexed": "def f(m):\n    return m.content[0]\n",
    "len()": "def f(m):\n    return len(m.content)\n",
    "a str method": "def f(m):\n    return m.content.strip()\n",
    "returned": "def f(m):\n    return m.content\n",
    "an unapproved helper": "def f(m):\n    return render(m.content)\n",
    "or-default": 'def f(m):\n    x = m.content or ""\n    return x\n',
    "narrowing of another value": "def f(m, n):\n    if isinstance(n.content, str):\n        return m.content.upper()\n",
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_planted_violation_is_caught(name: str) -> None:
    """Each kind of raw read planted in a snippet is reported with its line."""
    violations = check_source(PLANTED[name])
    assert len(violations) >= 1, name
    assert all(v.line >= 2 for v in violations)


CLEAN = {
    "text_of": 'from loom_nb.content import text_of\ndef f(m):\n    return f"said: {text_of(m.content)}"\n',
    "to_parts": "def f(m):\n    for part in to_parts(m.content):\n        print(part)\n",
    "has_structured_parts": "def f(m):\n    return str(has_structured_parts(m.content))\n",
    "isinstance narrowing": 'def f(m):\n    if isinstance(m.content, str):\n        return "said: " + m.content\n    return ""\n',
    "else branch of a narrowing": "def f(m):\n    if isinstance(m.content, str):\n        return 0\n    else:\n        return len(m.content)\n",
    "guard clause": "def f(m):\n    if isinstance(m.content, str):\n        return m.content\n    for part in m.content:\n        print(part)\n",
    "negated guard clause": "def f(ms):\n    for m in ms:\n        if not isinstance(m.content, list):\n            continue\n        print(m.content[0])\n",
    "assert narrowing": "def f(m):\n    assert isinstance(m.content, list)\n    return m.content[0]\n",
    "type() is narrowing": "def f(m):\n    c = m.content\n    if type(c) is str:\n        return c.upper()\n    return None\n",
    "conditional expression": 'def f(m):\n    return m.content if isinstance(m.content, str) else ""\n',
    "and-narrowing": "def f(m):\n    return not isinstance(m.content, str) and any(p for p in m.content)\n",
    "comprehension narrowing": "def f(ms):\n    return [p for m in ms if isinstance(m.content, list) for p in m.content]\n",
    "match subject": "def f(m):\n    match m.content:\n        case str() as s:\n            return s.upper()\n    return None\n",
    "match narrowed capture": "def f(m):\n    match m:\n        case Message(content=str() as s):\n            return s.upper()\n    return None\n",
    "reassigned variable": 'def f(m):\n    c = m.content\n    c = "x"\n    return f"{c}"\n',
    "non-content attribute": 'def f(m):\n    return f"{m.role}" + str(m.text)\n',
    "passed on as content=": "def f(m):\n    return Message(role='user', content=m.content)\n",
    "a content key": "def f(m):\n    return {'role': m.role, 'content': m.content}\n",
    "compared": "def f(a, b):\n    return a.content == b.content\n",
    "truth test": "def f(m):\n    if m.content:\n        return 1\n    return 0\n",
    "truth test in a condition": "def f(s, m):\n    if s == 'ok' or not m.content:\n        return 1\n    return 0\n",
    "copied to a content target": "def f(out, m):\n    out['content'] = m.content\n",
    "explicit allowance": "def f(r):\n    return r.content.strip()  # raw-content: LlmResponse.content is str\n",
}


@pytest.mark.parametrize("name", sorted(CLEAN))
def test_legitimate_reads_pass(name: str) -> None:
    """Reads through the helpers, after a narrowing, union-preserving or allowed are not reported."""
    assert check_source(CLEAN[name]) == []


def test_an_allowance_needs_a_reason() -> None:
    """A bare '# raw-content:' comment allows nothing."""
    assert check_source("def f(r):\n    return r.content.strip()  # raw-content:\n") != []
    assert allowances("x = 1  # raw-content: why\n") == {1: "why"}


def test_loom_nb_source_has_no_raw_reads() -> None:
    """loom_nb's own modules read message content only through approved uses (AST over the whole package)."""
    root = Path(loom_nb.__file__).parent
    violations = check_package(root)
    assert violations == [], "\n".join(map(str, violations))


def test_every_allowance_in_loom_nb_is_a_reviewed_one() -> None:
    """The package's allowances are few, each with a reason (a new one shows up here for review)."""
    root = Path(loom_nb.__file__).parent
    found = {
        f"{file.relative_to(root)}:{line}": reason
        for file in sorted(root.rglob("*.py"))
        for line, reason in allowances(file.read_text(encoding="utf-8")).items()
    }
    assert all(found.values())
    reviewed = {"LlmResponse.content is str", "httpx.Response.content is bytes"}
    assert set(found.values()) <= reviewed, found
    assert len(found) <= 12, found
