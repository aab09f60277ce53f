"""``adapter_config.json`` of a PEFT LoRA adapter: every field validated, every problem listed.

The field table follows peft 0.22's ``LoraConfig``. A field is one of:

- **core**, parsed into `LoraConfig`: ``peft_type`` ("LORA", required), ``r`` (int in
  1..MAX_RANK, required), ``lora_alpha`` (finite number in (0, MAX_ALPHA], required; PEFT's
  default of 8 is not assumed), ``target_modules`` (a non-empty list of module names, or one
  pattern of the subset in `storage.lora.pattern`; required), ``use_rslora`` (bool),
  ``rank_pattern`` / ``alpha_pattern`` (maps of patterns to ranks / alphas).
- **harmless**: metadata and training-only settings, type-checked and otherwise ignored
  (``task_type``, ``base_model_name_or_path``, ``lora_dropout``, ``init_lora_weights`` when it
  does not rewrite the backbone, ...).
- **off**: a feature that changes what the adapter computes (DoRA, ``fan_in_fan_out``, biases,
  ``modules_to_save``, layer selection, ...). Accepted only at its default (null, false or
  empty, ``bias: "none"``), refused otherwise with the field named.
- **unknown** (a newer peft, a typo): accepted when null, false, zero or empty, the way new
  PEFT features are off by default; refused otherwise, naming the field.

The JSON itself must be an object of at most MAX_CONFIG_BYTES, without NaN/Infinity
constants (the refusal names the field that holds one) or duplicate keys. Patterns cost work
per backbone module, so a config has at most MAX_VARIABLE_PATTERNS with '.*' or '|' and at
most MAX_KEY_SHAPES shapes of other keys per pattern map.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from storage.errors import AdapterFormatError
from storage.lora.fields import label, other_field_problems, say, show
from storage.lora.lookup import PatternTable
from storage.lora.pattern import ModulePattern, PatternError

MAX_CONFIG_BYTES = 1024 * 1024
MAX_RANK = 65536
MAX_ALPHA = 1e6
MAX_TARGETS = 4096  # entries of a target_modules list
MAX_PATTERN_KEYS = 1024  # keys of rank_pattern / alpha_pattern
# patterns with '.*' or '|' (a string target_modules and pattern keys together): each costs
# one automaton run per backbone module; names and dotted paths (what peft and EVA write)
# take the fast path and only count against MAX_PATTERN_KEYS
MAX_VARIABLE_PATTERNS = 8
# distinct shapes (length, '.' positions) of the other pattern keys of one map: the probes
# each module costs (an EVA config of a llama has about 20, of a MoE model about 30)
MAX_KEY_SHAPES = 64
MAX_NAME_CHARS = 256
ALL_LINEAR = "all-linear"


@dataclass(frozen=True)
class LoraConfig:
    """A validated LoRA config; per-module rank, alpha and scale as PEFT computes them."""

    r: int
    alpha: float
    target_modules: frozenset[str] | ModulePattern
    use_rslora: bool
    rank_pattern: PatternTable[int]
    alpha_pattern: PatternTable[float]
    fields: Mapping[str, Any]  # the JSON object as read

    @property
    def target_list(self) -> list[str]:
        """target_modules as stored by the registry: the names, or ``[pattern]``."""
        if isinstance(self.target_modules, ModulePattern):
            return [self.target_modules.source]
        return sorted(self.target_modules)

    def targets(self, module: str) -> bool:
        """PEFT's check: the pattern fullmatches, or a name is the module path or ends it
        after a dot (``key.endswith("." + name)``, as lookups of the path's dotted tails)."""
        if isinstance(self.target_modules, ModulePattern):
            return self.target_modules.fullmatch(module)
        names = self.target_modules
        tails = (module[i + 1 :] for i, c in enumerate(module) if c == ".")
        return module in names or any(tail in names for tail in tails)

    def rank_for(self, module: str) -> int:
        return self.rank_pattern.lookup(module, self.r)

    def alpha_for(self, module: str) -> float:
        return self.alpha_pattern.lookup(module, self.alpha)

    def scale_for(self, module: str) -> float:
        """alpha / r, or alpha / sqrt(r) with rsLoRA, with the module's own rank and alpha."""
        return self.scale(self.rank_for(module), self.alpha_for(module))

    def scale(self, rank: int, alpha: float) -> float:
        return alpha / math.sqrt(rank) if self.use_rslora else alpha / rank


T = TypeVar("T")


# -- reading --------------------------------------------------------------------------------


def parse_config(raw: bytes | str) -> LoraConfig:
    """The validated config, or AdapterFormatError listing every problem."""
    config, problems = read_config(raw)
    if config is None or problems:
        raise AdapterFormatError(problems)
    return config


def read_config(raw: bytes | str) -> tuple[LoraConfig | None, list[str]]:
    """(config, problems): every problem found; config is None when a core field is unusable
    (the fit check still runs on a config whose only problems are refused features)."""
    problems: list[str] = []
    obj = _load(raw, problems)
    if obj is None:
        return None, problems
    config = _core(obj, problems)
    problems.extend(other_field_problems(obj))
    return config, problems


def config_size_problem(size: int) -> str | None:
    """The problem with a config file of `size` bytes, checked before reading it."""
    if size > MAX_CONFIG_BYTES:
        return say(f"larger than {MAX_CONFIG_BYTES} bytes")
    return None


def _load(raw: bytes | str, problems: list[str]) -> dict[str, Any] | None:
    too_large = config_size_problem(len(raw))
    if too_large:
        problems.append(too_large)
        return None
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        obj = json.loads(
            text, parse_constant=_non_finite, parse_float=_float, object_pairs_hook=_no_dupes
        )
    except RecursionError:
        problems.append(say("not valid JSON (nested too deeply)"))
        return None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, duplicates, huge ints
        problems.append(say(f"not valid JSON ({exc})"))
        return None
    if not isinstance(obj, dict):
        problems.append(say("must be a JSON object"))
        return None
    fields = [label(name) for name, value in obj.items() if _holds_non_finite(value)]
    if fields:
        problems.extend(say(f"{f} holds NaN or Infinity, which JSON does not have") for f in fields)
        return None
    return obj


class _NonFinite:
    """Stands in for a NaN/Infinity constant or an overflowing number while parsing, so that
    the refusal can name the field that holds it."""


_NON_FINITE = _NonFinite()


def _non_finite(name: str) -> _NonFinite:
    return _NON_FINITE


def _float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NON_FINITE


def _holds_non_finite(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if item is _NON_FINITE:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _no_dupes(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = Counter(k for k, _ in pairs)
        raise ValueError(f"duplicate keys {sorted(k for k, n in counts.items() if n > 1)}")
    return obj


# -- core fields ----------------------------------------------------------------------------


def _core(obj: Mapping[str, Any], problems: list[str]) -> LoraConfig | None:
    before = len(problems)
    if obj.get("peft_type") != "LORA":
        got = "nothing" if "peft_type" not in obj else show(obj["peft_type"])
        problems.append(say(f'peft_type must be "LORA", got {got}'))
    r = _rank(obj, "r", problems)
    alpha = _alpha(obj, problems)
    rslora = obj.get("use_rslora", False)
    if not isinstance(rslora, bool):
        problems.append(say(f"use_rslora must be true or false, got {show(rslora)}"))
    targets = _targets(obj.get("target_modules"), problems)
    ranks = _pattern_map(obj, "rank_pattern", _rank_value, problems)
    alphas = _pattern_map(obj, "alpha_pattern", _alpha_value, problems)
    _count_variable(targets, ranks, alphas, problems)
    if len(problems) > before or r is None or alpha is None or targets is None:
        return None
    return LoraConfig(r, alpha, targets, bool(rslora), ranks, alphas, obj)


def _count_variable(
    targets: frozenset[str] | ModulePattern | None,
    ranks: PatternTable[int],
    alphas: PatternTable[float],
    problems: list[str],
) -> None:
    for field, table in (("rank_pattern", ranks), ("alpha_pattern", alphas)):
        if table.shape_count > MAX_KEY_SHAPES:
            problems.append(
                say(f"{field}: at most {MAX_KEY_SHAPES} key shapes (lengths and '.' positions of "
                    f"the keys without '.*' or '|'), got {table.shape_count}")
            )  # fmt: skip
    count = ranks.scanned + alphas.scanned + isinstance(targets, ModulePattern)
    if isinstance(targets, ModulePattern) and not targets.variable:
        count -= 1
    if count > MAX_VARIABLE_PATTERNS:
        problems.append(
            say(f"at most {MAX_VARIABLE_PATTERNS} patterns with '.*' or '|' (target_modules, "
                f"rank_pattern and alpha_pattern keys together), got {count}")
        )  # fmt: skip


def _rank_value(value: Any) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_RANK
    return value if ok else None


def _alpha_value(value: Any) -> float | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    ok = math.isfinite(value) and 0 < value <= MAX_ALPHA
    return float(value) if ok else None


RANK_RULE = f"a positive integer (at most {MAX_RANK})"
ALPHA_RULE = f"a finite number in (0, {MAX_ALPHA:g}]"


def _rank(obj: Mapping[str, Any], field: str, problems: list[str]) -> int | None:
    if field not in obj:
        problems.append(say(f"{field} is required, {RANK_RULE}"))
        return None
    rank = _rank_value(obj[field])
    if rank is None:
        problems.append(say(f"{field} must be {RANK_RULE}, got {show(obj[field])}"))
    return rank


def _alpha(obj: Mapping[str, Any], problems: list[str]) -> float | None:
    if "lora_alpha" not in obj:
        problems.append(say(f"lora_alpha is required, {ALPHA_RULE} (no default is assumed)"))
        return None
    alpha = _alpha_value(obj["lora_alpha"])
    if alpha is None:
        problems.append(say(f"lora_alpha must be {ALPHA_RULE}, got {show(obj['lora_alpha'])}"))
    return alpha


def _targets(value: Any, problems: list[str]) -> frozenset[str] | ModulePattern | None:
    if isinstance(value, str):
        return _target_pattern(value, problems)
    rule = f"a list of 1 to {MAX_TARGETS} module names, or one pattern"
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_TARGETS:
        got = "nothing" if value is None else show(value)
        problems.append(say(f"target_modules must be {rule}, got {got}"))
        return None
    bad = [
        say(f"target_modules[{i}] must be a name of 1 to {MAX_NAME_CHARS} characters, "
             f"got {show(name)}")
        for i, name in enumerate(value)
        if not _is_name(name)
    ]  # fmt: skip
    problems.extend(capped(bad, prefix=say("")))
    return None if bad else frozenset(value)


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and 1 <= len(value) <= MAX_NAME_CHARS


def _target_pattern(value: str, problems: list[str]) -> ModulePattern | None:
    if value == ALL_LINEAR:
        problems.append(
            say(f"target_modules {ALL_LINEAR!r} is a training-time shorthand; PEFT's "
                 "save_pretrained writes the module names it chose")
        )  # fmt: skip
        return None
    try:
        return ModulePattern(value)
    except PatternError as exc:
        problems.append(say(f"target_modules: {exc}; give a list of module names instead"))
        return None


def _pattern_map(
    obj: Mapping[str, Any],
    field: str,
    check: Callable[[Any], T | None],
    problems: list[str],
) -> PatternTable[T]:
    value = obj.get(field)
    if value is None:
        return PatternTable()
    if not isinstance(value, dict) or len(value) > MAX_PATTERN_KEYS:
        problems.append(
            say(f"{field} must be an object of at most {MAX_PATTERN_KEYS} module patterns, "
                 f"got {show(value)}")
        )  # fmt: skip
        return PatternTable()
    out: list[tuple[ModulePattern, T]] = []
    bad: list[str] = []
    rule = RANK_RULE if field == "rank_pattern" else ALPHA_RULE
    for key, raw in value.items():
        checked = check(raw)
        if checked is None:
            bad.append(say(f"{field}[{show(key)}] must be {rule}, got {show(raw)}"))
        try:
            pattern = ModulePattern(key)
        except PatternError as exc:
            bad.append(say(f"{field} key: {exc}"))
            continue
        if checked is not None:
            out.append((pattern, checked))
    problems.extend(capped(bad, prefix=say("")))
    return PatternTable(out)


def capped(problems: list[str], limit: int = 5, prefix: str = "") -> list[str]:
    """At most `limit` problems of one kind, then a count of the rest."""
    if len(problems) <= limit:
        return problems
    return [*problems[:limit], f"{prefix}... and {len(problems) - limit} more like these"]
