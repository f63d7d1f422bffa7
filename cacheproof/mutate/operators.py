"""Mutation operators: one small change to a module's source per mutant, found on its syntax tree.

Each operator looks at one kind of node and proposes replacements for it:

- comparison: one comparison operator turned into its neighbour (`<` `<=`, `>` `>=`, `==` `!=`,
  `is` `is not`, `in` `not in`);
- arithmetic: one binary or augmented operator (`+` `-`, `*` `//`, `/` `*`, `%` `//`);
- boolean: `and` `or` swapped, a `not` dropped;
- constant: an int n made n + 1 (0 and 1 also the other one), True and False swapped;
- removed statement: an expression statement, assignment, augmented assignment, `del`, `raise` or
  `assert` replaced by `pass`; `break` and `continue` swapped;
- swapped call: `min` `max`, `any` `all`, `append` `appendleft`, `pop` `popleft` swapped, or the
  first two positional arguments of a call exchanged when they are written differently.

Never mutated, as equivalent by construction or outside the program's behaviour: strings (log and
error text), docstrings, type annotations, the body of `if TYPE_CHECKING:`, logging, warnings and
print calls (and the making of a logger), imports, and `pass`. A mutant's source differs from the original
only in the text of the node it changes (the rest keeps its comments and layout), so its diff shows
exactly the change. A replacement that does not compile, or that yields the same text as the
original, is no mutant.
"""

from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from typing import Callable, Iterator

COMPARISON = "comparison"
ARITHMETIC = "arithmetic"
BOOLEAN = "boolean"
CONSTANT = "constant"
REMOVED_STATEMENT = "removed statement"
SWAPPED_CALL = "swapped call"
OPERATORS = (COMPARISON, ARITHMETIC, BOOLEAN, CONSTANT, REMOVED_STATEMENT, SWAPPED_CALL)

_COMPARISON_SWAPS: dict[type, type] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_ARITHMETIC_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_CALL_SWAPS = {"min": "max", "max": "min", "any": "all", "all": "any", "append": "appendleft",
               "appendleft": "append", "pop": "popleft", "popleft": "pop"}
_REMOVABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.Delete, ast.Raise, ast.Assert)
_QUIET_CALLEES = frozenset({"print", "warn", "debug", "info", "warning", "error", "exception", "critical", "log",
                            "warning_once", "info_once", "debug_once"})
"""Calls that only say something to people (a logger's methods, warnings.warn, print): never mutated."""
_LOGGER_FACTORIES = frozenset({"getLogger", "init_logger"})


@dataclass(frozen=True)
class Mutant:
    """One change to a module's source: its number in the module's full list (stable for the same
    source), the operator, the line it changes, a one-line description, and the mutated source."""

    number: int
    operator: str
    line: int
    description: str
    source: str

    def diff(self, original: str, path: str) -> str:
        """The unified diff of this mutant against `original`, both named `path`."""
        return "".join(difflib.unified_diff(
            original.splitlines(keepends=True), self.source.splitlines(keepends=True),
            fromfile=f"a/{path}", tofile=f"b/{path}", n=2,
        ))


@dataclass(frozen=True)
class _Change:
    operator: str
    node: ast.AST
    replacement: str
    description: str


def mutants(source: str) -> list[Mutant]:
    """Every mutant of `source` (a module's text), in the order of the nodes they change, numbered
    from 1; a SyntaxError of the source itself is raised."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode()))
    encoded = source.encode()
    found: list[Mutant] = []
    seen: set[str] = {source}
    for change in _changes(tree):
        node = change.node
        start = offsets[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = offsets[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        text = (encoded[:start] + change.replacement.encode() + encoded[end:]).decode()
        if text in seen or not _compiles(text):
            continue
        seen.add(text)
        found.append(Mutant(len(found) + 1, change.operator, node.lineno, change.description, text))  # type: ignore[attr-defined]
    return found


def _compiles(text: str) -> bool:
    try:
        compile(text, "<mutant>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _changes(tree: ast.Module) -> Iterator[_Change]:
    for node in _mutable_nodes(tree):
        for propose in _PROPOSERS:
            yield from propose(node)


def _mutable_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes of `tree` in source order, leaving out what is never mutated (see the module)."""
    for node in _children(tree):
        yield from _walk(node)


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)) or _is_docstring(node) or _type_checking(node) \
            or _for_people(node):
        return
    yield node
    for child in _children(node):
        yield from _walk(child)


def _for_people(node: ast.AST) -> bool:
    """A log, warning or print call, the statement that makes one, or the making of a logger."""
    value = node.value if isinstance(node, (ast.Expr, ast.Assign)) else node
    if not isinstance(value, ast.Call):
        return False
    name = _callee_name(value)
    return name in _LOGGER_FACTORIES if isinstance(node, ast.Assign) else name in _QUIET_CALLEES


def _children(node: ast.AST) -> Iterator[ast.AST]:
    for field, value in ast.iter_fields(node):
        if field in ("annotation", "returns", "type_comment", "type_params"):
            continue
        items = value if isinstance(value, list) else [value]
        for item in items:
            if isinstance(item, ast.AST) and hasattr(item, "lineno"):
                yield item
            elif isinstance(item, (ast.arguments, ast.comprehension, ast.keyword, ast.match_case)):
                yield from _children(item)


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")


def _callee_name(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    if isinstance(call.func, ast.Attribute):
        return call.func.attr
    return None


def _with(node: ast.AST, **fields: object) -> ast.AST:
    """A copy of `node` with `fields` replaced (the children are shared, never changed)."""
    copy = type(node)(**{name: getattr(node, name) for name in node._fields})
    for name, value in fields.items():
        setattr(copy, name, value)
    return copy


def _comparisons(node: ast.AST) -> Iterator[_Change]:
    if not isinstance(node, ast.Compare):
        return
    for index, op in enumerate(node.ops):
        swapped = _COMPARISON_SWAPS.get(type(op))
        if swapped is None:
            continue
        ops = [*node.ops[:index], swapped(), *node.ops[index + 1:]]
        yield _Change(COMPARISON, node, ast.unparse(_with(node, ops=ops)),
                      f"{_op_text(op)} -> {_op_text(swapped())}")


def _arithmetic(node: ast.AST) -> Iterator[_Change]:
    if isinstance(node, (ast.BinOp, ast.AugAssign)):
        swapped = _ARITHMETIC_SWAPS.get(type(node.op))
        if swapped is not None and not (isinstance(node, ast.BinOp) and _is_text(node.left)):
            yield _Change(ARITHMETIC, node, ast.unparse(_with(node, op=swapped())),
                          f"{_op_text(node.op)} -> {_op_text(swapped())}")


def _is_text(node: ast.AST) -> bool:
    """A string literal or f-string (`%` formatting, `+` joining text): not arithmetic."""
    return isinstance(node, ast.JoinedStr) or isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))


def _booleans(node: ast.AST) -> Iterator[_Change]:
    if isinstance(node, ast.BoolOp):
        swapped = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield _Change(BOOLEAN, node, ast.unparse(_with(node, op=swapped)),
                      f"{_op_text(node.op)} -> {_op_text(swapped)}")
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield _Change(BOOLEAN, node, f"({ast.unparse(node.operand)})", "not dropped")


def _constants(node: ast.AST) -> Iterator[_Change]:
    if not isinstance(node, ast.Constant):
        return
    value = node.value
    if isinstance(value, bool):
        yield _Change(CONSTANT, node, repr(not value), f"{value} -> {not value}")
    elif isinstance(value, int):
        others = [value + 1] + ([1 - value] if value in (0, 1) and 1 - value != value + 1 else [])
        for other in others:
            yield _Change(CONSTANT, node, repr(other), f"{value} -> {other}")


def _statements(node: ast.AST) -> Iterator[_Change]:
    if isinstance(node, _REMOVABLE) and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
        yield _Change(REMOVED_STATEMENT, node, "pass", f"{type(node).__name__.lower()} removed")
    elif isinstance(node, ast.Break):
        yield _Change(REMOVED_STATEMENT, node, "continue", "break -> continue")
    elif isinstance(node, ast.Continue):
        yield _Change(REMOVED_STATEMENT, node, "break", "continue -> break")


def _calls(node: ast.AST) -> Iterator[_Change]:
    if not isinstance(node, ast.Call):
        return
    name = _callee_name(node)
    if name in _CALL_SWAPS:
        other = _CALL_SWAPS[name]
        func = ast.Name(id=other) if isinstance(node.func, ast.Name) else _with(node.func, attr=other)
        yield _Change(SWAPPED_CALL, node, ast.unparse(_with(node, func=func)), f"{name}() -> {other}()")
    first_two = node.args[:2]
    if len(first_two) == 2 and not any(isinstance(arg, ast.Starred) for arg in first_two) \
            and ast.unparse(first_two[0]) != ast.unparse(first_two[1]):
        args = [node.args[1], node.args[0], *node.args[2:]]
        yield _Change(SWAPPED_CALL, node, ast.unparse(_with(node, args=args)),
                      f"{name or 'call'}(): first two arguments exchanged")


_PROPOSERS: tuple[Callable[[ast.AST], Iterator[_Change]], ...] = (
    _comparisons, _arithmetic, _booleans, _constants, _statements, _calls,
)

_OP_TEXT = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is",
    ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
    ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.And: "and", ast.Or: "or",
}


def _op_text(op: ast.AST) -> str:
    return _OP_TEXT[type(op)]


def spread(found: list[Mutant], limit: int | None) -> list[Mutant]:
    """At most `limit` of `found`, evenly spread over the module (the same ones for the same source):
    the first, then every (len / limit)-th; all of them when limit is None or not smaller."""
    if limit is None or limit >= len(found):
        return list(found)
    return [found[index * len(found) // limit] for index in range(limit)]
