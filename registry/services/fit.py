"""Does a PEFT LoRA adapter fit a backbone? The registry's side of `storage.lora`.

`storage.lora.check_adapter` owns the format (every config field, tensor names, shapes
against the backbone's manifest); this module reads the config blob within its size limit
and turns an `AdapterFormatError` into the 422 ``incompatible_adapter`` whose detail lists
the same problems an engine would report: ``{"message", "problems": [str]}``.
"""

from __future__ import annotations

from registry.errors import IncompatibleAdapterError
from storage import AdapterFormatError, BlobStore, Manifest
from storage.lora import AdapterLayout, backbone_shapes, check_adapter, config_size_problem


def refusal(problems: list[str]) -> IncompatibleAdapterError:
    count = len(problems)
    message = f"adapter cannot be loaded on this backbone ({count} problem(s))"
    return IncompatibleAdapterError({"message": message, "problems": problems})


def read_config(store: BlobStore, digest: str) -> bytes:
    """The bytes of ``adapter_config.json``, refused before reading when too large."""
    problem = config_size_problem(store.size(digest))
    if problem is not None:
        raise refusal([problem])
    return store.get(digest)


def check_fit(config: bytes, adapter: Manifest, backbone: Manifest) -> AdapterLayout:
    """The adapter's layout, or ``IncompatibleAdapterError`` listing every problem."""
    try:
        return check_adapter(config, adapter, backbone_shapes(backbone))
    except AdapterFormatError as exc:
        raise refusal(exc.problems) from exc
