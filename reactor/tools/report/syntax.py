"""The alerting rules' expressions, parsed into a small tree the local evaluator (evaluation.py) walks.

Pure. Only the part of PromQL the rules render (reactor/tools/rules) is understood: selectors of recorded series
with namespace matchers and a range, `*_over_time` calls, `count by`, number literals, arithmetic and comparison
with a number, vector comparison `on (…) group_left ()`, and `and`/`unless`/`or` with or without `on (…)`. Anything
else raises `Unsupported`: the rule is then asked of Prometheus as it was before (collect.py), never dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import timedelta

from reactor.config.fields import parse_duration


class Unsupported(ValueError):
    """An expression (or a part of one) the local evaluator does not know: ask Prometheus instead."""


@dataclass(frozen=True, slots=True)
class Number:
    value: float
    source: str = field(default="", compare=False)  # the expression's own text (evaluation.py asks for it as is)


@dataclass(frozen=True, slots=True)
class String:
    value: str
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Selector:
    """`name{matchers}` or `name{matchers}[range]`: matchers as (label, operator, value)."""

    name: str
    matchers: tuple[tuple[str, str, str], ...] = ()
    range: timedelta | None = None
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Call:
    function: str
    arguments: tuple[Node, ...]
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Aggregation:
    operator: str
    by: tuple[str, ...]
    argument: Node
    without: bool = False  # `without (…)`: `by` then names the labels dropped
    source: str = field(default="", compare=False)


@dataclass(frozen=True, slots=True)
class Binary:
    """`lhs op rhs`; `on` is None without an `on (…)` clause (set operators then match on every label)."""

    operator: str
    lhs: Node
    rhs: Node
    on: tuple[str, ...] | None = None
    group_left: bool = False
    bool_: bool = False
    source: str = field(default="", compare=False)


Node = Number | String | Selector | Call | Aggregation | Binary

# Binding power of each binary operator, as PromQL's grammar orders them (all left-associative here; `^`, the one
# right-associative operator, is not used by the rules and is refused).
_PRECEDENCE = {"or": 1, "and": 2, "unless": 2, "==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
COMPARISONS = frozenset({"==", "!=", "<=", "<", ">=", ">"})
SET_OPERATORS = frozenset({"and", "unless", "or"})
AGGREGATIONS = frozenset({"sum", "min", "max", "avg", "group", "count", "stddev", "stdvar"})
_TOKEN = re.compile(r"""\s*(?:
    (?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<duration>\[[^\]]*\])
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<op>==|!=|<=|>=|=~|!~|[-+*/%<>=(){},^])
  | (?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
)""", re.VERBOSE)


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    text: str
    start: int
    end: int


def parse(text: str) -> Node:
    """The tree of `text`; `Unsupported` where it leaves the subset above."""
    return _Parser(text, _tokens(text)).expression()


def _tokens(text: str) -> list[_Token]:
    found, at = [], 0
    text = text.rstrip()
    while at < len(text):
        m = _TOKEN.match(text, at)
        if m is None or m.end() == at:
            raise Unsupported(f"cannot read {text[at:at + 20]!r}")
        kind = m.lastgroup
        assert kind is not None
        found.append(_Token(kind, m.group(kind), m.start(kind), m.end()))
        at = m.end()
    return found


class _Parser:
    def __init__(self, text: str, tokens: list[_Token]) -> None:
        self.text = text
        self.tokens = tokens
        self.at = 0

    def expression(self) -> Node:
        node = self._binary(0)
        if self.at != len(self.tokens):
            raise Unsupported(f"unexpected {self.tokens[self.at].text!r}")
        return node

    def _peek(self) -> tuple[str, str]:
        if self.at < len(self.tokens):
            token = self.tokens[self.at]
            return token.kind, token.text
        return "end", ""

    def _take(self, value: str | None = None) -> str:
        kind, text = self._peek()
        if kind == "end" or (value is not None and text != value):
            raise Unsupported(f"expected {value or 'more'}, got {text!r}")
        self.at += 1
        return text

    def _source(self, first: int) -> str:
        """The text of the tokens from `first` to the last one taken."""
        return self.text[self.tokens[first].start:self.tokens[self.at - 1].end]

    def _binary(self, floor: int) -> Node:
        first = self.at
        lhs = self._unary()
        while True:
            operator = self._peek()[1]
            power = _PRECEDENCE.get(operator)
            if power is None or power <= floor:
                return lhs
            self._take()
            bool_ = self._keyword("bool")
            on: tuple[str, ...] | None = None
            if self._keyword("ignoring"):
                raise Unsupported("ignoring (…)")
            if self._keyword("on"):
                on = self._labels()
            group_left = self._keyword("group_left")
            if group_left and self._labels():
                raise Unsupported("group_left with labels")
            if self._peek()[1] == "group_right":
                raise Unsupported("group_right")
            rhs = self._binary(power)
            lhs = Binary(operator, lhs, rhs, on, group_left, bool_, self._source(first))

    def _keyword(self, word: str) -> bool:
        if self._peek() == ("name", word):
            self.at += 1
            return True
        return False

    def _labels(self) -> tuple[str, ...]:
        self._take("(")
        names: list[str] = []
        while self._peek()[1] != ")":
            names.append(self._take())
            if self._peek()[1] == ",":
                self._take()
        self._take(")")
        return tuple(names)

    def _unary(self) -> Node:
        first = self.at
        kind, text = self._peek()
        if text == "(":
            self._take()
            inner = self._binary(0)
            self._take(")")
            return inner
        self._take()
        if kind == "number":
            return Number(float(text), text)
        if kind == "string":
            return String(text[1:-1].replace('\\"', '"').replace("\\\\", "\\"), text)
        if kind != "name":
            raise Unsupported(f"unexpected {text!r}")
        if text in ("NaN", "Inf"):
            return Number(float(text.lower()), text)
        if text in AGGREGATIONS and self._peek()[1] in ("(", "by", "without"):
            return self._aggregation(text, first)
        if self._peek()[1] == "(":
            self._take()
            arguments: list[Node] = []
            while self._peek()[1] != ")":
                arguments.append(self._binary(0))
                if self._peek()[1] == ",":
                    self._take()
            self._take(")")
            return Call(text, tuple(arguments), self._source(first))
        return self._selector(text, first)

    def _aggregation(self, operator: str, first: int) -> Aggregation:
        without = self._peek()[1] == "without"
        by: tuple[str, ...] | None = self._labels() if self._keyword("by") or self._keyword("without") else None
        self._take("(")
        argument = self._binary(0)
        self._take(")")
        if by is None and self._peek()[1] in ("by", "without"):
            without = self._peek()[1] == "without"
            self._take()
            by = self._labels()
        return Aggregation(operator, by or (), argument, without, self._source(first))

    def _selector(self, name: str, first: int) -> Selector:
        matchers: list[tuple[str, str, str]] = []
        if self._peek()[1] == "{":
            self._take()
            while self._peek()[1] != "}":
                label, operator = self._take(), self._take()
                kind, value = self._peek()
                if kind != "string" or operator not in ("=", "!=", "=~", "!~"):
                    raise Unsupported(f"matcher {label}{operator}{value}")
                self._take()
                matchers.append((label, operator, value[1:-1].replace('\\"', '"').replace("\\\\", "\\")))
                if self._peek()[1] == ",":
                    self._take()
            self._take("}")
        window = None
        kind, text = self._peek()
        if kind == "duration":
            self._take()
            if ":" in text:
                raise Unsupported(f"subquery {text}")
            window = parse_duration("range", text[1:-1])
        return Selector(name, tuple(matchers), window, self._source(first))


def ranges(node: Node) -> list[timedelta]:
    """Every range a selector of `node` reads."""
    if isinstance(node, Selector):
        return [node.range] if node.range is not None else []
    return [r for child in children(node) for r in ranges(child)]


def selected(node: Node) -> set[str]:
    """The names of every series `node` reads."""
    if isinstance(node, Selector):
        return {node.name}
    return {name for child in children(node) for name in selected(child)}


def children(node: Node) -> tuple[Node, ...]:
    if isinstance(node, Call):
        return node.arguments
    if isinstance(node, Aggregation):
        return (node.argument,)
    if isinstance(node, Binary):
        return node.lhs, node.rhs
    return ()
