"""Evaluate z3 terms on many concrete assignments at once, with numpy.

The bounded refinement check (refinement.py) evaluates the per-entry model's guards and
post-states on hundreds of thousands of concrete (state, call) pairs. `z3.substitute` and
`z3.simplify` take about a millisecond per term and pair; walking each term once with numpy arrays
as the values of its constants takes microseconds per pair. The walk follows z3's own operators
(And, Or, Not, Implies, If, =, Distinct, <, <=, >, >=, +, -, unary -, *) on integers and booleans
and refuses any other operator, so its value is z3's. `z3_value` is z3's own evaluation of one
assignment, used to confirm what the arrays say.
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Mapping

import numpy as np
import z3


def _and(*values: Any) -> Any:
    return reduce(np.logical_and, values, True)


def _or(*values: Any) -> Any:
    return reduce(np.logical_or, values, False)


def _distinct(*values: Any) -> Any:
    pairs = [np.not_equal(a, b) for i, a in enumerate(values) for b in values[i + 1 :]]
    return _and(*pairs)


def _implies(premise: Any, conclusion: Any) -> Any:
    return np.logical_or(np.logical_not(premise), conclusion)


def _add(*values: Any) -> Any:
    return reduce(np.add, values)


def _sub(first: Any, *rest: Any) -> Any:
    return reduce(np.subtract, rest, first)


def _mul(*values: Any) -> Any:
    return reduce(np.multiply, values)


_NAMES: dict[int, str] = {
    z3.Z3_OP_AND: "_and",
    z3.Z3_OP_OR: "_or",
    z3.Z3_OP_NOT: "np.logical_not",
    z3.Z3_OP_IMPLIES: "_implies",
    z3.Z3_OP_ITE: "np.where",
    z3.Z3_OP_EQ: "np.equal",
    z3.Z3_OP_DISTINCT: "_distinct",
    z3.Z3_OP_LE: "np.less_equal",
    z3.Z3_OP_LT: "np.less",
    z3.Z3_OP_GE: "np.greater_equal",
    z3.Z3_OP_GT: "np.greater",
    z3.Z3_OP_ADD: "_add",
    z3.Z3_OP_SUB: "_sub",
    z3.Z3_OP_UMINUS: "np.negative",
    z3.Z3_OP_MUL: "_mul",
}


class CompiledTerms:
    """A list of z3 terms turned once into one numpy program; calling it with arrays (or scalars)
    for the constants' names returns the terms' values, each subterm computed once."""

    def __init__(self, terms: list[Any]) -> None:
        self._lines: list[str] = []
        self._names: dict[int, str] = {}
        self._kept: list[z3.ExprRef] = []  # z3 reuses the id of a freed term
        outputs = [self._name(term) for term in terms]
        body = "\n".join(f"    {line}" for line in self._lines)
        source = f"def program(values):\n{body}\n    return ({', '.join(outputs)},)\n"
        namespace = {"np": np, "_and": _and, "_or": _or, "_implies": _implies, "_distinct": _distinct,
                     "_add": _add, "_sub": _sub, "_mul": _mul}
        exec(compile(source, "<array_eval>", "exec"), namespace)
        self._program = namespace["program"]

    def __call__(self, values: Mapping[str, Any]) -> tuple[Any, ...]:
        return self._program(values)

    def _name(self, term: Any) -> str:
        if not z3.is_expr(term):
            return repr(term)
        key = term.get_id()
        if key in self._names:
            return self._names[key]
        self._kept.append(term)
        if z3.is_true(term) or z3.is_false(term):
            name = repr(z3.is_true(term))
        elif z3.is_int_value(term):
            name = repr(term.as_long())
        elif term.decl().kind() == z3.Z3_OP_UNINTERPRETED and term.num_args() == 0:
            name = f"values[{term.decl().name()!r}]"
        else:
            operator = _NAMES.get(term.decl().kind())
            if operator is None:
                raise ValueError(f"array_eval cannot evaluate {term.decl().name()} in {term}")
            arguments = ", ".join(self._name(child) for child in term.children())
            name = f"t{len(self._lines)}"
            self._lines.append(f"{name} = {operator}({arguments})")
        self._names[key] = name
        return name


def z3_value(term: Any, values: Mapping[str, Any]) -> Any:
    """z3's own value of `term` (int or bool) with each named constant set to a Python value."""
    if not z3.is_expr(term):
        return term
    pairs = []
    for constant in _constants(term):
        value = values[constant.decl().name()]
        pairs.append((constant, z3.BoolVal(bool(value)) if z3.is_bool(constant) else z3.IntVal(int(value))))
    result = z3.simplify(z3.substitute(term, *pairs)) if pairs else z3.simplify(term)
    if z3.is_true(result) or z3.is_false(result):
        return z3.is_true(result)
    return result.as_long()


def _constants(term: z3.ExprRef) -> list[z3.ExprRef]:
    found: dict[int, z3.ExprRef] = {}
    seen: set[int] = set()
    stack = [term]
    while stack:
        node = stack.pop()
        if node.get_id() in seen:
            continue
        seen.add(node.get_id())
        if z3.is_const(node) and node.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found[node.get_id()] = node
        stack.extend(node.children())
    return list(found.values())
