"""Field types whose OpenAPI schema states what the server accepts, so that every request the
document calls valid is one the services accept (schemathesis's positive-data check).

The services keep their own checks and messages (`registry.names`, `check_digest`, the
request bodies' NUL check); these types only make the document say the same: names and
digests by pattern, and no NUL character in any string of a request body, nested JSON
included (PostgreSQL cannot store one).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema, model_validator
from typing_extensions import TypeAliasType

from registry.names import NAME_RE, NODE_ID_MAX, NODE_ID_PATTERN
from registry.services.tags import KEY, MAX_TAGS, MAX_VALUE
from storage.header import DTYPE_SIZES

NUL_FREE = r"^[^\u0000]*$"
SHA256 = "^[0-9a-f]{64}$"
DTYPES: dict[str, Any] = {"enum": sorted(DTYPE_SIZES)}  # storage.header's dtypes
TENSOR_NAME = r"^[^\u0000-\u001f\u007f]+$"  # storage.header.check_tensor_name

NulFree = Annotated[str, Field(pattern=NUL_FREE)]
Sha256Str = Annotated[str, Field(json_schema_extra={"pattern": SHA256})]
NameStr = Annotated[str, Field(json_schema_extra={"pattern": NAME_RE.pattern})]
NodeIdStr = Annotated[
    str, Field(max_length=NODE_ID_MAX, json_schema_extra={"pattern": NODE_ID_PATTERN})
]

TagKey = Annotated[str, Field(json_schema_extra={"pattern": KEY.pattern})]
Tags = Annotated[
    dict[str, str],
    WithJsonSchema(
        {
            "type": "object",
            "propertyNames": {"pattern": KEY.pattern},
            "additionalProperties": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_VALUE,
                "pattern": NUL_FREE,
            },
            "maxProperties": MAX_TAGS,
        }
    ),
]
TAG_FILTER = KEY.pattern.removesuffix("$") + rf"=[^\u0000]{{1,{MAX_VALUE}}}$"
TagFilter = Annotated[str, Field(json_schema_extra={"pattern": TAG_FILTER})]
"""`key=value` as `GET /adapters?tag=` takes it."""

JsonValue = TypeAliasType(
    "JsonValue",
    "NulFree | int | float | bool | None | list[JsonValue] | JsonObject",
)
"""Any JSON value whose strings (and keys) hold no NUL."""
JsonObject = Annotated[
    dict[str, JsonValue], Field(json_schema_extra={"propertyNames": {"pattern": NUL_FREE}})
]


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def nul_free_strings(schema: dict[str, Any]) -> None:
    """Give every plain string of a model's JSON schema the NUL-free pattern (in place):
    properties, items, dict keys and values, and the branches of a union."""
    if schema.get("type") == "string" and not {"pattern", "enum", "const", "format"} & set(schema):
        schema["pattern"] = NUL_FREE
    if schema.get("type") == "object" and "additionalProperties" in schema:
        schema.setdefault("propertyNames", {"pattern": NUL_FREE})
    for key in ("properties", "patternProperties"):
        for sub in schema.get(key, {}).values():
            nul_free_strings(sub)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            nul_free_strings(schema[key])
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key, []):
            nul_free_strings(sub)


def node_id_for_node_tokens(schema: dict[str, Any]) -> None:
    """TokenCreate's schema: NUL-free strings, and a ``node_id`` only with role ``node``."""
    nul_free_strings(schema)
    schema["if"] = {"properties": {"role": {"not": {"const": "node"}}}}
    schema["then"] = {"properties": {"node_id": {"type": "null"}}}


def one_subject(schema: dict[str, Any]) -> None:
    """EvaluationCreate's schema: NUL-free strings, and exactly one of ``library_digest`` and
    ``adapter_id`` given (null is not given), as the registry requires."""
    nul_free_strings(schema)
    digest = "library_digest"
    schema["oneOf"] = [
        {"required": [digest], "properties": {digest: {"type": "string", "pattern": SHA256}}},
        {"required": ["adapter_id"], "properties": {"adapter_id": {"type": "integer"}}},
    ]


class In(BaseModel):
    """Request bodies: unknown fields and NUL characters are refused."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra=lambda schema, _cls: nul_free_strings(schema)
    )

    @model_validator(mode="before")
    @classmethod
    def _no_nul(cls, data: Any) -> Any:
        if has_nul(data):
            raise ValueError("strings must not contain NUL characters")
        return data
