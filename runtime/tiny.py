"""A tiny random llama backbone and PEFT adapters, built locally in well under a second.

Tests, the demo and examples use these instead of downloaded weights: a byte-level BPE
tokenizer trained on a few lines (ChatML special tokens, the project's chat template) and a
randomly initialised 2-layer llama. Deterministic for a given seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from runtime.chat import CHAT_TEMPLATE, IM_END, IM_START

SPECIAL_TOKENS = ["<|endoftext|>", IM_START, IM_END]
DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")

_CORPUS = [
    "The agent plans the research, searches the knowledge base and writes the report.",
    '<tool_call>\n{"name": "load_lora", "arguments": {"capability": "plan"}}\n</tool_call>',
    '<tool_call>\n{"name": "offload_lora", "arguments": {}}\n</tool_call>',
    '<tool_response>\n{"ok": true, "active": "search"}\n</tool_response>',
    "system user assistant tool search write plan code query results answer evidence.",
    "Step 1: find sources. Step 2: read them. Step 3: write a cited summary. 0123456789",
    "What is the capital of France? Paris is the capital of France.",
]


def build_tokenizer(vocab_size: int = 384) -> Any:  # a PreTrainedTokenizerFast
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=IM_END, pad_token="<|endoftext|>"
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tiny_backbone(path: Path, seed: int = 0, hidden_size: int = 64, layers: int = 2) -> Path:
    """Write a random llama backbone (safetensors) and its tokenizer into `path`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = build_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.convert_tokens_to_ids(IM_END),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    # Widen the default init so that outputs differ visibly between tokens and adapters.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.2)
    path = Path(path)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def build_tiny_adapter(
    backbone: Path,
    path: Path,
    seed: int,
    rank: int = 4,
    alpha: int = 8,
    targets: Sequence[str] = DEFAULT_TARGETS,
) -> Path:
    """Write a PEFT LoRA adapter with random, non-zero A and B (so it changes outputs)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(backbone)
    config = LoraConfig(
        r=rank, lora_alpha=alpha, target_modules=list(targets), init_lora_weights=False
    )
    torch.manual_seed(seed)
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, p in peft_model.named_parameters():
            if "lora_" in name:
                p.normal_(0.0, 0.3)
    peft_model.save_pretrained(str(path))
    return Path(path)
