"""Module-name patterns: the part of Python's regular expressions that PEFT configs use.

PEFT reads a string ``target_modules`` as a regular expression (``re.fullmatch(pattern,
module)``) and every key of ``rank_pattern`` / ``alpha_pattern`` as one too
(``re.match(rf"(.*\\.)?({key})$", module)``). Python's backtracking ``re`` can take
exponential time on a publisher's pattern, so nothing here ever hands one to ``re``. A pattern
is accepted only in this subset, parsed here and matched by a position automaton (Glushkov)
simulated over bit sets, linear in the name's length:

- literal characters ``A-Z a-z 0-9 _ -`` and the escaped dot ``\\.``;
- ``.`` (any character but a newline) and ``.*`` (any run of them);
- groups of alternatives ``(q|k|v)_proj`` (no nesting, no quantifier after a group) and
  top-level alternation ``q_proj|v_proj``;
- a leading ``^`` and a trailing ``$``, only without top-level alternation.

Everything else (``+ ? { } [ ] \\d``, nested groups, ...) is refused with a message that says
so. Within the subset the verdicts are Python's: ``fullmatch`` is ``re.fullmatch`` and
``suffix_match`` is PEFT's rank/alpha-pattern lookup.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import dataclass

LITERALS = frozenset(string.ascii_letters + string.digits + "_-")
MAX_PATTERN_CHARS = 256
ANY = ""  # the test of a position that takes any character except a newline
_CACHE_LIMIT = 1 << 15  # cached automaton steps per pattern


class PatternError(ValueError):
    """A pattern outside the supported subset; the message says where and why."""


# -- syntax tree ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Char:
    test: str  # one literal character, or ANY


@dataclass(frozen=True)
class _Star:
    item: _Char


@dataclass(frozen=True)
class _Seq:
    items: tuple[_Node, ...]


@dataclass(frozen=True)
class _Alt:
    options: tuple[_Node, ...]


@dataclass(frozen=True)
class _Opt:
    item: _Node


_Node = _Char | _Star | _Seq | _Alt | _Opt


class _Parser:
    """Recursive descent over `source[pos:end]`; groups do not nest, so depth stays <= 2."""

    def __init__(self, source: str, start: int, end: int) -> None:
        self.source = source
        self.pos = start
        self.end = end
        self.top_level_alternation = False

    def fail(self, why: str, at: int | None = None) -> PatternError:
        where = self.pos if at is None else at
        return PatternError(f"pattern {self.source!r}: {why} (at position {where})")

    def alternatives(self, in_group: bool) -> _Node:
        options = [self.sequence(in_group)]
        while self.pos < self.end and self.source[self.pos] == "|":
            self.pos += 1
            options.append(self.sequence(in_group))
        if len(options) == 1:
            return options[0]
        self.top_level_alternation |= not in_group
        return _Alt(tuple(options))

    def sequence(self, in_group: bool) -> _Node:
        items: list[_Node] = []
        while self.pos < self.end and self.source[self.pos] not in "|)":
            items.append(self.item(in_group))
        if not items:
            raise self.fail("empty alternative")
        return items[0] if len(items) == 1 else _Seq(tuple(items))

    def item(self, in_group: bool) -> _Node:
        at, c = self.pos, self.source[self.pos]
        self.pos += 1
        if c in LITERALS:
            return _Char(c)
        if c == "\\":
            if self.source[self.pos : self.pos + 1] != ".":
                raise self.fail("only the escape \\. is supported", at)
            self.pos += 1
            return _Char(".")
        if c == ".":
            if self.source[self.pos : self.pos + 1] == "*":
                self.pos += 1
                return _Star(_Char(ANY))
            return _Char(ANY)
        if c == "(":
            return self.group(in_group)
        if c == "*":
            raise self.fail("'*' is supported only as '.*'", at)
        raise self.fail(f"{c!r} is outside the supported subset", at)

    def group(self, in_group: bool) -> _Node:
        if in_group:
            raise self.fail("nested groups are not supported", self.pos - 1)
        node = self.alternatives(in_group=True)
        if self.pos >= self.end or self.source[self.pos] != ")":
            raise self.fail("unbalanced '('")
        self.pos += 1
        return node


def _parse(source: str) -> tuple[_Node, bool]:
    """(syntax tree, anchored at the start) of `source`, or PatternError."""
    if not source:
        raise PatternError("pattern is empty")
    if len(source) > MAX_PATTERN_CHARS:
        raise PatternError(f"pattern is longer than {MAX_PATTERN_CHARS} characters")
    anchored = source.startswith("^")
    end = len(source) - 1 if source.endswith("$") and not source.endswith("\\$") else len(source)
    parser = _Parser(source, 1 if anchored else 0, end)
    tree = parser.alternatives(in_group=False)
    if parser.pos != end:
        raise parser.fail("unbalanced ')'")
    if parser.top_level_alternation and (anchored or end < len(source)):
        raise PatternError(f"pattern {source!r}: '^' and '$' are not supported with top-level '|'")
    return tree, anchored


# -- automaton ------------------------------------------------------------------------------


class _Automaton:
    """Glushkov automaton: one state per character position, transitions as bit sets."""

    def __init__(self, tree: _Node) -> None:
        self.tests: list[str] = []
        self.follow: list[int] = []
        first, last, nullable = self._build(tree)
        start = len(self.tests)  # a virtual start state whose successors are `first`
        self.follow.append(first)
        self.start = 1 << start
        self.last = last
        self.nullable = nullable
        self.any = sum(1 << i for i, t in enumerate(self.tests) if t == ANY)
        self.by_char: dict[str, int] = {}
        for i, t in enumerate(self.tests):
            if t != ANY:
                self.by_char[t] = self.by_char.get(t, 0) | (1 << i)
        self.cache: dict[tuple[int, str], int] = {}

    def _build(self, node: _Node) -> tuple[int, int, bool]:
        """(first positions, last positions, nullable) of `node`; fills `follow`."""
        if isinstance(node, _Char):
            self.tests.append(node.test)
            self.follow.append(0)
            bit = 1 << (len(self.tests) - 1)
            return bit, bit, False
        if isinstance(node, _Star):
            first, last, _ = self._build(node.item)
            self._link(last, first)
            return first, last, True
        if isinstance(node, _Opt):
            first, last, _ = self._build(node.item)
            return first, last, True
        if isinstance(node, _Alt):
            parts = [self._build(option) for option in node.options]
            first, last = _union(p[0] for p in parts), _union(p[1] for p in parts)
            return first, last, any(p[2] for p in parts)
        return self._build_seq(node)

    def _build_seq(self, node: _Seq) -> tuple[int, int, bool]:
        first, last, nullable = 0, 0, True
        for item in node.items:
            f, la, n = self._build(item)
            self._link(last, f)
            first |= f if nullable else 0
            last = (last | la) if n else la
            nullable = nullable and n
        return first, last, nullable

    def _link(self, sources: int, targets: int) -> None:
        for i in _bits(sources):
            self.follow[i] |= targets

    def step(self, state: int, char: str) -> int:
        key = (state, char)
        found = self.cache.get(key)
        if found is not None:
            return found
        reach = _union(self.follow[i] for i in _bits(state))
        allowed = self.by_char.get(char, 0) | (self.any if char != "\n" else 0)
        result = reach & allowed
        if len(self.cache) < _CACHE_LIMIT:
            self.cache[key] = result
        return result

    def fullmatch(self, text: str) -> bool:
        state, cache = self.start, self.cache
        for char in text:
            found = cache.get((state, char))
            state = self.step(state, char) if found is None else found
            if not state:
                return False
        return bool(state & self.last) or (state == self.start and self.nullable)


def _bits(mask: int) -> list[int]:
    out = []
    while mask:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


def _union(masks: Iterable[int]) -> int:
    total = 0
    for mask in masks:
        total |= mask
    return total


# -- public ---------------------------------------------------------------------------------

# PEFT's rank/alpha lookup `(.*\.)?(key)$`: an optional prefix that ends with a literal dot
_PREFIX = _Opt(_Seq((_Star(_Char(ANY)), _Char("."))))


@dataclass(frozen=True)
class FixedShape:
    """A pattern of one length without alternatives: literal runs at fixed offsets ('.' between
    them takes any character)."""

    size: int
    runs: tuple[tuple[int, str], ...]

    def fits(self, text: str) -> bool:
        """`text` of this size, without newlines, matches."""
        return all(text.startswith(run, offset) for offset, run in self.runs)


class ModulePattern:
    """A validated pattern of the subset; `fullmatch` and `suffix_match` in linear time."""

    __slots__ = ("_automata", "_tree", "anchored", "fixed", "source")

    def __init__(self, source: str) -> None:
        self._tree, self.anchored = _parse(source)
        self.source = source
        self.fixed = _fixed(self._tree)
        self._automata: dict[bool, _Automaton] = {}  # on first use; fixed shapes rarely need one

    def _automaton(self, suffix: bool) -> _Automaton:
        suffix = suffix and not self.anchored
        found = self._automata.get(suffix)
        if found is None:
            tree = _Seq((_PREFIX, self._tree)) if suffix else self._tree
            found = self._automata[suffix] = _Automaton(tree)
        return found

    def __repr__(self) -> str:
        return f"ModulePattern({self.source!r})"

    @property
    def variable(self) -> bool:
        """Has '.*' or alternatives: matched by the automaton, not by fixed-offset compares."""
        return self.fixed is None

    def fullmatch(self, name: str) -> bool:
        """``re.fullmatch(source, name) is not None``."""
        fixed = self.fixed
        if fixed is not None and "\n" not in name:
            return len(name) == fixed.size and fixed.fits(name)
        return self._automaton(suffix=False).fullmatch(name)

    def suffix_match(self, name: str) -> bool:
        """PEFT's ``re.match(rf"(.*\\.)?({source})$", name) is not None``."""
        name = name.removesuffix("\n")  # `$` also matches before a final newline
        if self.anchored:
            return self.fullmatch(name)
        fixed = self.fixed
        if fixed is not None and "\n" not in name:
            size = len(name) - fixed.size
            if size < 0 or (size > 0 and name[size - 1] != "."):
                return False
            return fixed.fits(name[size:])
        return self._automaton(suffix=True).fullmatch(name)


def _fixed(tree: _Node) -> FixedShape | None:
    """The fast form of a pattern made of characters only; None for '.*' or alternatives."""
    items = tree.items if isinstance(tree, _Seq) else (tree,)
    tests = [item.test for item in items if isinstance(item, _Char)]
    if len(tests) != len(items):
        return None
    runs: list[tuple[int, str]] = []
    for offset, test in enumerate(tests):
        if test == ANY:
            continue
        if runs and runs[-1][0] + len(runs[-1][1]) == offset:
            runs[-1] = (runs[-1][0], runs[-1][1] + test)
        else:
            runs.append((offset, test))
    return FixedShape(len(tests), tuple(runs))
