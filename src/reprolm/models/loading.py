"""Load checkpoints (local folders or hub ids) with one set of rules for every stage."""

from __future__ import annotations

from transformers import AutoModelForCausalLM, AutoTokenizer

from reprolm.models.tokenizer import CHAT_TEMPLATE


def load_tokenizer(path: str, chat_template: str | None = None):
    """The checkpoint's tokenizer, left-padded for batched generation.

    Base models without a chat template get ``chat_template`` (or the project's simple
    one), so instruction prompts and training text always go through a template.
    """
    tokenizer = AutoTokenizer.from_pretrained(path)
    # transformers keeps whether the hub was offline at load time and would save it into
    # tokenizer_config.json: checkpoints' bytes (and hashes) would then depend on HF_HUB_OFFLINE.
    tokenizer.init_kwargs.pop("local_files_only", None)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    elif not tokenizer.chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def torch_dtype(name: str | None):
    import torch

    return {None: torch.float32, "auto": "auto", "float32": torch.float32,
            "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def load_causal_lm(path: str, dtype: str | None = None, device: str = "cpu"):
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch_dtype(dtype))
    return model.to(device).eval()


def generation_eos_ids(path: str) -> list[int]:
    """The EOS ids in the checkpoint's generation config (instruct models often list their
    end-of-turn token there), or none when it has no generation config."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(path).eos_token_id
    except OSError:
        return []
    if eos is None:
        return []
    return [eos] if isinstance(eos, int) else list(eos)
