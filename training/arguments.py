"""Command-line flags from an ``Args`` dataclass, with the docstring under each field as help.

The training scripts keep cleanrl's shape: every knob is a field of one ``Args``
dataclass with a docstring under it, read top to bottom before the code. This module
turns such a class into ``argparse`` flags (``--field-name``; booleans as
``--flag/--no-flag``; tuples as space-separated lists, a fixed-length tuple such as
``tuple[float, float, float]`` taking exactly that many), so the docstrings are also the
``--help`` text and no knob is defined twice. A class's ``__post_init__`` checks values
that need more than a type (``ValueError``); ``parse_args`` turns its message into
argparse's usage error, so a bad value fails at the command line, not minutes into a run.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import itertools
import textwrap
import types
import typing
from collections.abc import Sequence
from typing import Any, Literal, TypeVar

__all__ = ["ReportTo", "field_docs", "parse_args"]

T = TypeVar("T")

ReportTo = Literal["none", "tensorboard", "wandb"]
"""Where a trainer reports metrics (the integrations the training extras install)."""


def field_docs(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of ``cls`` (its docstring).

    Dataclass bases count too (options several scripts share, ``vera_env.training.resume.RunOptions``);
    a field declared again below takes its class's docstring.
    """
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls: type) -> dict[str, str]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs: dict[str, str] = {}
    for node, after in itertools.pairwise(body):
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[node.target.id] = " ".join(after.value.value.split())
    return docs


def _scalar(kind: Any) -> Any:
    """The element parser of a (possibly optional) field type."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    if typing.get_origin(kind) in (typing.Union, types.UnionType) and len(args) == 1:
        return _scalar(args[0])
    if typing.get_origin(kind) is typing.Literal:
        return str
    if kind in (int, float, str):
        return kind
    raise TypeError(f"unsupported Args field type {kind!r}")


def _choices(kind: Any) -> tuple[Any, ...] | None:
    """The values a ``Literal`` field type allows (``None`` for any other type).

    Handing them to argparse makes a typo fail at the command line, naming the valid
    values, instead of deep inside the environment's validation minutes into a run.
    """
    return typing.get_args(kind) if typing.get_origin(kind) is typing.Literal else None


def _default(f: dataclasses.Field[Any]) -> Any:
    """A field's default, calling its factory when it has one."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    raise TypeError(f"Args field {f.name!r} has no default")


def parse_args(cls: type[T], argv: Sequence[str] | None = None, *, prog: str | None = None) -> T:
    """Build ``cls`` from command-line flags (``argv``; default ``sys.argv[1:]``).

    ``prog`` names the command in usage and error lines (``vera-env train grpo``).

    ``Literal`` fields, and tuples of them, accept only their values.

    Raises:
        SystemExit: Unknown or malformed flags, a value a ``Literal`` field does not
            allow (argparse's own message, listing the valid choices), or a
            ``ValueError`` from ``cls``'s ``__post_init__`` (its message as the error).
    """
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    parser = argparse.ArgumentParser(prog=prog, description=(cls.__doc__ or "").strip().splitlines()[0]
                                     if cls.__doc__ else None)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        kind = hints[f.name]
        flag = "--" + f.name.replace("_", "-")
        default = _default(f)
        help_text = f"{docs.get(f.name, '')} (default: {default!r})"
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                                help=help_text)
        elif typing.get_origin(kind) is tuple:
            elements = typing.get_args(kind)
            fixed = Ellipsis not in elements
            parser.add_argument(flag, nargs=len(elements) if fixed else "*",
                                type=_scalar(elements[0]), default=default,
                                choices=_choices(elements[0]), help=help_text)
        else:
            parser.add_argument(flag, type=_scalar(kind), default=default,
                                choices=_choices(kind), help=help_text)
    values = vars(parser.parse_args(argv))
    try:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items()})
    except ValueError as exc:
        parser.error(str(exc))
