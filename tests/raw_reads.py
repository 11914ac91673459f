"""A fitness check: find places where a message's ``.content`` is coerced to text.

ADR 0120, "Guard against raw reads": ``content`` is ``str | list[Part]``, and coercing it to
text silently turns a parts message into ``"[TextPart(...)]"``. Code must read content through
``text_of`` / ``to_parts`` / ``has_structured_parts`` or narrow it with ``isinstance`` first.

Flagged, for ``x.content`` or a name assigned from one (``c = m.content``):
an f-string, ``str()``, ``%`` formatting, ``+`` with a string, ``"".join(...)``, ``json.dumps``.
Not flagged: the same inside an ``if isinstance(<that value>, str ...)`` branch, or after
the value went through any call (the checker, like the ADR's, does not follow values through calls).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Violation", "check_source", "check_tree"]


@dataclass(frozen=True)
class Violation:
    """One raw read: where, and which coercion."""

    path: str
    line: int
    kind: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: message content coerced to text via {self.kind}"


def _is_stringy(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.JoinedStr
    )


def _narrows_to_str(test: ast.AST) -> list[str]:
    """Expressions (as ast dumps) that ``isinstance(expr, str | (str, ...))`` narrows to str."""
    found: list[str] = []
    for node in ast.walk(test):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            kinds = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if "str" in kinds:
                found.append(ast.dump(node.args[0]))
    return found


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.violations: list[Violation] = []
        self.tainted: list[set[str]] = [set()]  # per function scope
        self.narrowed: list[str] = []

    # --- what counts as raw content -------------------------------------------------------
    def _is_content(self, node: ast.AST) -> bool:
        if ast.dump(node) in self.narrowed:
            return False
        if isinstance(node, ast.Attribute) and node.attr == "content":
            return True
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value == "content"
        ):
            return True
        return isinstance(node, ast.Name) and node.id in self.tainted[-1]

    def _flag(self, node: ast.AST, kind: str) -> None:
        self.violations.append(Violation(self.path, getattr(node, "lineno", 0), kind))

    # --- scopes ---------------------------------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self.tainted.append(set())
        self.generic_visit(node)
        self.tainted.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            if isinstance(target, ast.Name):
                if self._is_content(node.value):
                    self.tainted[-1].add(target.id)
                else:
                    self.tainted[-1].discard(target.id)

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        narrowed = _narrows_to_str(node.test)
        self.narrowed.extend(narrowed)
        for stmt in node.body:
            self.visit(stmt)
        del self.narrowed[len(self.narrowed) - len(narrowed) :]
        for stmt in node.orelse:
            self.visit(stmt)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self.visit(node.test)
        narrowed = _narrows_to_str(node.test)
        self.narrowed.extend(narrowed)
        self.visit(node.body)
        del self.narrowed[len(self.narrowed) - len(narrowed) :]
        self.visit(node.orelse)

    # --- coercions ------------------------------------------------------------------------
    def visit_FormattedValue(self, node: ast.FormattedValue) -> None:
        if self._is_content(node.value):
            self._flag(node, "an f-string")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Mod) and _is_stringy(node.left):
            values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            if any(self._is_content(v) for v in values):
                self._flag(node, "% formatting")
        if isinstance(node.op, ast.Add) and (
            (self._is_content(node.left) and _is_stringy(node.right))
            or (self._is_content(node.right) and _is_stringy(node.left))
        ):
            self._flag(node, "+ with a string")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        args = [*node.args, *(k.value for k in node.keywords)]
        if isinstance(func, ast.Name) and func.id in {"str", "repr", "format"}:
            if any(self._is_content(a) for a in node.args):
                self._flag(node, f"{func.id}()")
        elif isinstance(func, ast.Attribute):
            if func.attr == "join" and any(self._is_content(a) for a in node.args):
                self._flag(node, "str.join")
            elif (
                func.attr in {"dumps", "dump"}
                and isinstance(func.value, ast.Name)
                and func.value.id == "json"
                and any(self._is_content(a) for a in args)
            ):
                self._flag(node, "json.dumps")
            elif (
                func.attr == "format"
                and _is_stringy(func.value)
                and any(self._is_content(a) for a in args)
            ):
                self._flag(node, "str.format")
        self.generic_visit(node)


def check_tree(tree: ast.AST, path: str = "<string>") -> list[Violation]:
    """The raw reads in a parsed module."""
    checker = _Checker(path)
    checker.visit(tree)
    return checker.violations


def check_source(source: str, path: str = "<string>") -> list[Violation]:
    """The raw reads in a module's source text."""
    return check_tree(ast.parse(source), path)


def check_package(root: Path) -> list[Violation]:
    """The raw reads in every ``.py`` file under ``root``."""
    found: list[Violation] = []
    for file in sorted(root.rglob("*.py")):
        found.extend(
            check_source(file.read_text(encoding="utf-8"), str(file.relative_to(root.parent)))
        )
    return found
