"""The label-selector string grammar of k8s.io/apimachinery/pkg/labels (selector.go): lexer, parser, matcher.

`a=b,c!=d,e in (x,y),f notin (z),g,!h,n>1` parses to requirements; anything labels.Parse refuses raises
ValueError with upstream's message, which kube-apiserver answers as a 400 BadRequest. Pure: no I/O.
Label key and value syntax (IsQualifiedName, IsValidLabelValue) is not checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Labels = dict[str, str]
SPECIAL = "=!(),><"
SYMBOLS = ("!=", "==", "!", "(", ")", ",", "=", ">", "<")  # longest first: the lexer is greedy
KEYWORDS = ("in", "notin")
IDENT, END = "identifier", "end"
OPERATORS = {"in": "in", "notin": "notin", "=": "=", "==": "==", "!=": "!=", ">": "gt", "<": "lt"}


@dataclass(frozen=True, slots=True)
class Token:
    kind: str  # IDENT, END, a keyword, or the symbol itself
    text: str


def lex(text: str) -> list[Token]:
    """Lexer.Lex until the end of the string: whitespace separates, special symbols cut identifiers."""
    tokens: list[Token] = []
    at = 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at == len(text):
            return tokens + [Token(END, "")]
        if text[at] in SPECIAL:
            symbol = next(s for s in SYMBOLS if text.startswith(s, at))
            tokens.append(Token(symbol, symbol))
            at += len(symbol)
            continue
        start = at
        while at < len(text) and text[at] not in SPECIAL and text[at] not in " \t\r\n":
            at += 1
        word = text[start:at]
        tokens.append(Token(word if word in KEYWORDS else IDENT, word))


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str  # in, notin, =, ==, !=, gt, lt, exists, !
    values: frozenset[str]

    def matches(self, labels: Labels) -> bool:
        """Requirement.Matches."""
        present, value = self.key in labels, labels.get(self.key, "")
        if self.operator in ("in", "=", "=="):
            return present and value in self.values
        if self.operator in ("notin", "!="):
            return not present or value not in self.values
        if self.operator in ("exists", "!"):
            return present == (self.operator == "exists")
        return present and _compare(self.operator, value, next(iter(self.values)))


def _compare(operator: str, label: str, bound: str) -> bool:
    try:
        have = int(label)
    except ValueError:
        return False
    return have > int(bound) if operator == "gt" else have < int(bound)


class Parser:
    """Parser.parse: a recursive descent over the lexed tokens, with upstream's error messages."""

    def __init__(self, text: str) -> None:
        self.tokens, self.at = lex(text), 0

    def peek(self, *, values: bool = True) -> Token:
        token = self.tokens[self.at]
        return Token(IDENT, token.text) if values and token.kind in KEYWORDS else token

    def take(self, *, values: bool = True) -> Token:
        token = self.peek(values=values)
        self.at += token.kind != END
        return token

    def parse(self) -> list[Requirement]:
        out: list[Requirement] = []
        while True:
            token = self.peek()
            if token.kind == END:
                return out
            if token.kind not in (IDENT, "!"):
                raise ValueError(f"found '{token.text}', expected: !, identifier, or 'end of string'")
            try:
                out.append(self.requirement())
            except ValueError as e:
                raise ValueError(f"unable to parse requirement: {e}") from e
            after = self.take()
            if after.kind == END:
                return out
            if after.kind != ",":
                raise ValueError(f"found '{after.text}', expected: ',' or 'end of string'")
            if self.peek().kind not in (IDENT, "!"):
                raise ValueError(f"found '{self.peek().text}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        negated = self.peek().kind == "!"
        if negated:
            self.take()
        key = self.take()
        if key.kind != IDENT:
            raise ValueError(f"found '{key.text}', expected: identifier")
        if negated or self.peek().kind in (END, ","):
            return Requirement(key.text, "!" if negated else "exists", frozenset())
        operator = self.take(values=False)
        if operator.kind not in OPERATORS:
            raise ValueError(f"found '{operator.text}', expected: in, notin, =, ==, !=, exists, !, gt, lt")
        op = OPERATORS[operator.kind]
        values = self.value_set() if op in ("in", "notin") else self.exact_value()
        if op in ("gt", "lt") and not _is_int(next(iter(values))):
            raise ValueError("for 'Gt', 'Lt' operators, the value must be an integer")
        return Requirement(key.text, op, values)

    def exact_value(self) -> frozenset[str]:
        if self.peek().kind in (END, ","):
            return frozenset({""})
        token = self.take()
        if token.kind != IDENT:
            raise ValueError(f"found '{token.text}', expected: identifier")
        return frozenset({token.text})

    def value_set(self) -> frozenset[str]:
        opened = self.take()
        if opened.kind != "(":
            raise ValueError(f"found '{opened.text}' expected: '('")
        first = self.peek()
        if first.kind == ")":
            self.take()
            return frozenset({""})
        if first.kind not in (IDENT, ","):
            raise ValueError(f"found '{first.text}', expected: ',', ')' or identifier")
        values = self.identifiers()
        if self.take().kind != ")":
            raise ValueError(f"found '{first.text}', expected: ')'")
        return values

    def identifiers(self) -> frozenset[str]:
        """parseIdentifiersList: `(a,b)`, and the empty value for `(,`, `,)` and `,,`."""
        found: set[str] = set()
        while True:
            token = self.take()
            if token.kind == IDENT:
                found.add(token.text)
                if self.peek().kind == ")":
                    return frozenset(found)
                if self.peek().kind != ",":
                    raise ValueError(f"found '{self.peek().text}', expected: ',' or ')'")
            elif token.kind == ",":
                found |= {""} if not found or self.peek().kind in (")", ",") else set()
                if self.peek().kind == ")":
                    return frozenset(found)
                if self.peek().kind == ",":
                    self.take()
            else:
                raise ValueError(f"found '{token.text}', expected: ',', or identifier")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def parse(text: str) -> Callable[[Labels], bool]:
    """labels.Parse: a predicate on a label map; ValueError with upstream's message when it refuses."""
    requirements = Parser(text).parse()
    return lambda labels: all(r.matches(labels) for r in requirements)
