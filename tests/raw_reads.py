"""A fitness check: every read of a message's or part's ``.content`` goes through an approved use.

ADR 0120, "Guard against raw reads": ``content`` is ``str | list[Part]`` (a tool result's is
``str | list[...]`` too), and code that treats it as one of the two silently misbehaves on the
other: printed, logged, ``+=``-ed, joined or iterated, a parts message becomes
``"[TextPart(...)]"`` or a string becomes its characters. Listing forbidden coercions always misses
the next one, so the check is turned around, as the ADR does: a ``.content`` read (and any name
bound from one, by ``=``, ``:=``, or a ``match`` capture) is allowed only

- as the argument of an approved helper: ``text_of``, ``to_parts``, ``has_structured_parts``,
  ``plain_text`` (refuses anything but a string), or of ``isinstance`` / ``type``;
- where it has been narrowed: inside ``if isinstance(<it>, ...)`` (and its ``else``), after
  ``if [not] isinstance(<it>, ...): <return/raise/continue/break>``, after
  ``assert isinstance(<it>, ...)``, on the right of ``isinstance(<it>, ...) and ...``, in either
  branch of ``... if isinstance(<it>, ...) else ...``, and as the subject of ``match``;
- in a union-preserving position: compared (``==``, ``is``, ``in``), tested for truth
  (``if it:``, ``not it``), passed on as ``content=`` or as the value of a ``"content"`` key,
  assigned to a plain name (which is then checked the same way) or to a ``.content`` /
  ``["content"]`` target;
- or on a line carrying an explicit, reviewed allowance: ``# raw-content: <reason>`` (for example
  where the object is an ``LlmResponse``, whose ``content`` is always ``str``).

Anything else (a print, a log call, an f-string, ``+=``, ``len()``, ``for ... in``, a subscript,
a return, any other call) is reported. Like the ADR's checker it does not follow values through
arbitrary calls; unlike it, it cannot see types, which is what the allowance comment is for.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["APPROVED", "Violation", "allowances", "check_package", "check_source", "check_tree"]

APPROVED = frozenset(
    {"text_of", "to_parts", "has_structured_parts", "plain_text", "isinstance", "type"}
)
"""Functions a content value may be handed to as it is."""

_ALLOWANCE = re.compile(r"#\s*raw-content:\s*(\S.*)$")
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


@dataclass(frozen=True)
class Violation:
    """One raw read: where, and in what position."""

    path: str
    line: int
    kind: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: raw read of .content ({self.kind}); pass it to "
            "text_of / to_parts / has_structured_parts, narrow it with isinstance, or mark the "
            "line '# raw-content: <reason>'"
        )


def allowances(source: str) -> dict[int, str]:
    """Line -> reason of every ``# raw-content: <reason>`` comment in ``source``."""
    found: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT and (match := _ALLOWANCE.search(token.string)):
            found[token.start[0]] = match.group(1).strip()
    return found


def _narrowing(test: ast.AST) -> str | None:
    """The subject ``test`` narrows: ``[not] isinstance(E, ...)`` or ``type(E) is [not] T``."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _narrowing(test.operand)
    if (
        isinstance(test, ast.Call)
        and isinstance(test.func, ast.Name)
        and test.func.id == "isinstance"
        and len(test.args) == 2
    ):
        return ast.dump(test.args[0])
    if (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Call)
        and isinstance(test.left.func, ast.Name)
        and test.left.func.id == "type"
        and len(test.left.args) == 1
        and all(isinstance(op, ast.Is | ast.IsNot | ast.Eq | ast.NotEq) for op in test.ops)
    ):
        return ast.dump(test.left.args[0])
    return None


def _positive(test: ast.AST) -> list[str]:
    """Subjects narrowed where ``test`` is true (narrowing conjuncts)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return [s for value in test.values for s in _positive(value)]
    subject = _narrowing(test)
    return [subject] if subject else []


def _negative(test: ast.AST) -> list[str]:
    """Subjects narrowed where ``test`` is false (narrowing disjuncts)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return [s for value in test.values for s in _negative(value)]
    subject = _narrowing(test)
    return [subject] if subject else []


def _exits(body: Sequence[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], _EXITS)


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str, allowed: dict[int, str]) -> None:
        self.path = path
        self.allowed = allowed
        self.violations: list[Violation] = []
        self.tracked: list[set[str]] = [set()]  # names bound from a content read, per function
        self.narrowed: list[str] = []  # ast dumps of narrowed expressions
        self.parents: dict[ast.AST, ast.AST] = {}

    # -- what is a content read ---------------------------------------------------------------
    def _is_read(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "content":
            return isinstance(node.ctx, ast.Load)
        return (
            isinstance(node, ast.Name)
            and isinstance(node.ctx, ast.Load)
            and node.id in self.tracked[-1]
        )

    def _narrowed(self, node: ast.AST) -> bool:
        return ast.dump(node) in self.narrowed

    def _use(self, node: ast.AST) -> str | None:
        """None when the read at ``node`` is in an allowed position, else what the position is."""
        parent = self.parents.get(node)
        if isinstance(parent, ast.NamedExpr) and parent.value is node:
            return self._use(parent)  # the walrus's value goes where the walrus goes
        if isinstance(parent, ast.Call) and node in parent.args:
            func = parent.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            return None if name in APPROVED else f"passed to {name or 'a call'}()"
        if isinstance(parent, ast.keyword):
            return None if parent.arg == "content" else f"passed as {parent.arg or '**'}="
        if isinstance(parent, ast.Dict) and node in parent.values:
            key = parent.keys[parent.values.index(node)]  # type: ignore[arg-type]
            if isinstance(key, ast.Constant) and key.value == "content":
                return None
            return "a dict value"
        if isinstance(parent, ast.Compare):
            return None
        if isinstance(parent, ast.BoolOp) and self._tested(parent):
            return None  # "if a or m.content:" tests its truth
        if isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not):
            return None
        if isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert) and parent.test is node:
            return None
        if isinstance(parent, ast.Match) and parent.subject is node:
            return None
        if isinstance(parent, ast.Assign | ast.AnnAssign) and parent.value is node:
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if all(isinstance(t, ast.Name) or _is_content_target(t) for t in targets):
                return None
            return "unpacked by assignment"
        return _describe(parent)

    def _tested(self, node: ast.AST) -> bool:
        """Whether ``node``'s value is only tested for truth (through and / or / not)."""
        parent = self.parents.get(node)
        while isinstance(parent, ast.BoolOp) or (
            isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.Not)
        ):
            node, parent = parent, self.parents.get(parent)
        if isinstance(parent, ast.UnaryOp):
            return False
        return isinstance(parent, ast.If | ast.While | ast.IfExp | ast.Assert) and (
            parent.test is node
        )

    def _check(self, node: ast.AST) -> None:
        if not self._is_read(node) or self._narrowed(node):
            return
        kind = self._use(node)
        line = getattr(node, "lineno", 0)
        if kind is not None and line not in self.allowed:
            self.violations.append(Violation(self.path, line, kind))

    # -- walking --------------------------------------------------------------------------------
    def run(self, tree: ast.AST) -> None:
        for parent in ast.walk(tree):
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        self.visit(tree)

    def _block(self, body: Sequence[ast.stmt]) -> None:
        """Visit statements in order; a narrowing established by one lasts to the block's end."""
        mark = len(self.narrowed)
        for stmt in body:
            self.visit(stmt)
            if isinstance(stmt, ast.If) and _exits(stmt.body):
                self.narrowed.extend(_negative(stmt.test))
            elif (isinstance(stmt, ast.If) and _exits(stmt.orelse)) or isinstance(stmt, ast.Assert):
                self.narrowed.extend(_positive(stmt.test))
        del self.narrowed[mark:]

    def generic_visit(self, node: ast.AST) -> None:
        self._check(node)
        for field, value in ast.iter_fields(node):
            if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                self._block(value)
            elif isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)
            del field

    def _with_narrowing(self, subjects: list[str], nodes: Iterator[ast.AST]) -> None:
        self.narrowed.extend(subjects)
        for node in nodes:
            self.visit(node)
        del self.narrowed[len(self.narrowed) - len(subjects) :]

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.tracked.append(set())
        saved, self.narrowed = self.narrowed, []
        for decorator in node.decorator_list:
            self.visit(decorator)
        self.visit(node.args)
        self._block(node.body)
        self.narrowed = saved
        self.tracked.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self.tracked.append(set())
        self.generic_visit(node)
        self.tracked.pop()

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self.narrowed.extend(_positive(node.test))
        self._block(node.body)
        del self.narrowed[len(self.narrowed) - len(_positive(node.test)) :]
        negative = _negative(node.test)
        self.narrowed.extend(negative)
        self._block(node.orelse)
        del self.narrowed[len(self.narrowed) - len(negative) :]

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        subjects = _positive(node.test) + _negative(node.test)
        self._with_narrowing(subjects, iter([node.body, node.orelse]))

    def visit_BoolOp(self, node: ast.BoolOp) -> None:
        self._check(node)
        pushed = 0
        for value in node.values:
            self.visit(value)
            subjects = _positive(value) if isinstance(node.op, ast.And) else _negative(value)
            self.narrowed.extend(subjects)
            pushed += len(subjects)
        del self.narrowed[len(self.narrowed) - pushed :]

    def _comprehension(self, node: ast.AST, results: list[ast.expr]) -> None:
        """Generators in order: a narrowing ``if`` of one covers the later generators and the result."""
        pushed = 0
        for generator in node.generators:  # type: ignore[attr-defined]
            self.visit(generator.iter)
            self.visit(generator.target)
            for condition in generator.ifs:
                self.visit(condition)
                subjects = _positive(condition)
                self.narrowed.extend(subjects)
                pushed += len(subjects)
        for result in results:
            self.visit(result)
        del self.narrowed[len(self.narrowed) - pushed :]

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, [node.elt])

    visit_SetComp = visit_ListComp  # type: ignore[assignment]
    visit_GeneratorExp = visit_ListComp  # type: ignore[assignment]

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, [node.key, node.value])

    def visit_Match(self, node: ast.Match) -> None:
        self.visit(node.subject)
        subject = ast.dump(node.subject)
        for case in node.cases:
            self._bind_captures(case.pattern)
            self.narrowed.append(subject)
            if case.guard is not None:
                self.visit(case.guard)
            self._block(case.body)
            self.narrowed.pop()

    def _bind_captures(self, pattern: ast.pattern) -> None:
        """Names a pattern binds to a raw content value: ``Message(content=c)``, ``{"content": c}``."""
        pairs: list[tuple[object, ast.pattern]] = []
        if isinstance(pattern, ast.MatchClass):
            pairs = list(zip(pattern.kwd_attrs, pattern.kwd_patterns, strict=True))
        elif isinstance(pattern, ast.MatchMapping):
            pairs = [
                (k.value if isinstance(k, ast.Constant) else None, p)
                for k, p in zip(pattern.keys, pattern.patterns, strict=True)
            ]
        for key, sub in pairs:
            if (
                key == "content"
                and isinstance(sub, ast.MatchAs)
                and sub.pattern is None
                and sub.name
            ):
                self.tracked[-1].add(sub.name)
        for child in ast.walk(pattern):
            if child is not pattern and isinstance(child, ast.MatchClass | ast.MatchMapping):
                self._bind_captures(child)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        self._track(node.targets, node.value)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.generic_visit(node)
        if node.value is not None:
            self._track([node.target], node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self._track([node.target], node.value)

    def _track(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        for target in targets:
            if isinstance(target, ast.Name):
                allowed = getattr(value, "lineno", 0) in self.allowed
                if self._is_read(value) and not self._narrowed(value) and not allowed:
                    self.tracked[-1].add(target.id)
                else:
                    self.tracked[-1].discard(target.id)


def _is_content_target(target: ast.AST) -> bool:
    if isinstance(target, ast.Attribute):
        return target.attr == "content"
    return (
        isinstance(target, ast.Subscript)
        and isinstance(target.slice, ast.Constant)
        and target.slice.value == "content"
    )


def _describe(parent: ast.AST | None) -> str:
    names = {
        ast.FormattedValue: "an f-string",
        ast.BinOp: "an operator",
        ast.AugAssign: "augmented assignment",
        ast.For: "iterated",
        ast.AsyncFor: "iterated",
        ast.comprehension: "iterated",
        ast.Subscript: "indexed",
        ast.Return: "returned",
        ast.Yield: "yielded",
        ast.Starred: "unpacked",
        ast.Attribute: "an attribute of it",
        ast.Expr: "a bare expression",
    }
    for kind, label in names.items():
        if isinstance(parent, kind):
            return label
    return type(parent).__name__ if parent is not None else "unknown"


def check_tree(
    tree: ast.AST, path: str = "<string>", allowed: dict[int, str] | None = None
) -> list[Violation]:
    """The raw reads in a parsed module (lines in ``allowed`` are exempt)."""
    checker = _Checker(path, allowed or {})
    checker.run(tree)
    return sorted(checker.violations, key=lambda v: v.line)


def check_source(source: str, path: str = "<string>") -> list[Violation]:
    """The raw reads in a module's source text, honouring its ``# raw-content:`` allowances."""
    return check_tree(ast.parse(source), path, allowances(source))


def check_package(root: Path) -> list[Violation]:
    """The raw reads in every ``.py`` file under ``root``."""
    found: list[Violation] = []
    for file in sorted(root.rglob("*.py")):
        found.extend(
            check_source(file.read_text(encoding="utf-8"), str(file.relative_to(root.parent)))
        )
    return found
