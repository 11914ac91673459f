"""The ``loom-nb`` command: one argparse tree, each command group in its own module.

A command module exposes ``register(subparsers)``, adding its parser(s) with
``set_defaults(handler=...)``; a handler takes the parsed namespace and returns an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from loom_nb.errors import LoomError

__all__ = ["build_parser", "main"]

# Each module registers its own subcommands; the order is the order of `loom-nb --help`.
_COMMAND_MODULES: tuple[str, ...] = (
    "loom_nb.cli.demo",
    "loom_nb.cli.store",
    "loom_nb.cli.journal",
    "loom_nb.cli.chat",
    "loom_nb.cli.map",
)


def build_parser() -> argparse.ArgumentParser:
    """The full ``loom-nb`` parser, with every command group registered."""
    parser = argparse.ArgumentParser(
        prog="loom-nb",
        description="loom_nb: multimodal LLM runs that are guarded, journaled and replayable.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        module = importlib.import_module(name)
        register: Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]
        register = module.register
        register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``loom-nb``; a ``LoomError`` prints its code and message (no traceback) and exits 1."""
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except LoomError as exc:
        print(f"loom-nb: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("loom-nb: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
