"""The PEFT LoRA adapter format, owned in one place (torch-free).

The registry (at registration), the runtime engines (at load) and the trainers (merges) all
read adapters through this package, so an adapter the registry accepts is one every engine
loads, and a refusal carries the same messages everywhere:

- `parse_config` / `read_config`: ``adapter_config.json`` with every field validated
  (`storage.lora.config`, `storage.lora.fields`);
- `check_adapter`: config + tensor entries (a manifest) + backbone shapes -> `AdapterLayout`
  (per-module rank, alpha, scale), or `AdapterFormatError` with every problem
  (`storage.lora.adapter`);
- `ModulePattern`: the subset of regular expressions PEFT configs use, matched in linear
  time without ``re`` (`storage.lora.pattern`); `PatternTable`: PEFT's first-match lookup
  of rank/alpha pattern keys, indexed (`storage.lora.lookup`).

See docs/CONTRACTS.md section 1 for the rules.
"""

from storage.errors import AdapterFormatError
from storage.lora.adapter import (
    FLOAT_DTYPES,
    PEFT_PREFIX,
    WEIGHTS_FILE,
    AdapterLayout,
    LoraModule,
    backbone_shapes,
    check_adapter,
    is_module_name,
    lora_key,
    split_key,
)
from storage.lora.config import (
    MAX_ALPHA,
    MAX_CONFIG_BYTES,
    MAX_KEY_SHAPES,
    MAX_PATTERN_KEYS,
    MAX_RANK,
    MAX_TARGETS,
    MAX_VARIABLE_PATTERNS,
    LoraConfig,
    config_size_problem,
    parse_config,
    read_config,
)
from storage.lora.fields import CONFIG_FILE, OFF_FIELDS, SAFE_INITS
from storage.lora.lookup import PatternTable
from storage.lora.pattern import MAX_PATTERN_CHARS, ModulePattern, PatternError

__all__ = [
    "CONFIG_FILE",
    "FLOAT_DTYPES",
    "MAX_ALPHA",
    "MAX_CONFIG_BYTES",
    "MAX_KEY_SHAPES",
    "MAX_PATTERN_CHARS",
    "MAX_PATTERN_KEYS",
    "MAX_RANK",
    "MAX_TARGETS",
    "MAX_VARIABLE_PATTERNS",
    "OFF_FIELDS",
    "PEFT_PREFIX",
    "SAFE_INITS",
    "WEIGHTS_FILE",
    "AdapterFormatError",
    "AdapterLayout",
    "LoraConfig",
    "LoraModule",
    "ModulePattern",
    "PatternError",
    "PatternTable",
    "backbone_shapes",
    "check_adapter",
    "config_size_problem",
    "is_module_name",
    "lora_key",
    "parse_config",
    "read_config",
    "split_key",
]
