"""Tiny causal language models of several families, built from a config and a tokenizer."""

from __future__ import annotations

from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerBase

# Our config keys map onto the same names in every supported family.
ARCHITECTURES = ("llama", "qwen2", "gpt_neox", "mistral")


def build_tiny_model(spec: dict, tokenizer: PreTrainedTokenizerBase, seed: int):
    """A randomly initialised model; ``spec`` names the family and its sizes."""
    import torch

    architecture = spec["architecture"]
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture {architecture!r} not supported; choose from {ARCHITECTURES}")
    config = AutoConfig.for_model(
        architecture,
        vocab_size=len(tokenizer),
        hidden_size=spec["hidden_size"],
        num_hidden_layers=spec["num_layers"],
        num_attention_heads=spec["num_heads"],
        intermediate_size=spec["intermediate_size"],
        max_position_embeddings=spec["max_positions"],
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=spec.get("tie_word_embeddings", True),
    )
    if architecture in ("llama", "qwen2", "mistral"):
        config.num_key_value_heads = spec.get("num_kv_heads", spec["num_heads"])
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config)
