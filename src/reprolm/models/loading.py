"""Load checkpoints (local folders or hub ids) with one set of rules for every stage."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from reprolm.models.tokenizer import CHAT_TEMPLATE
from reprolm.paths import REMOTE_CODE_MARKER

# What peft saves a LoRA adapter folder with (a recipe's ``peft.save: adapter``).
ADAPTER_CONFIG = "adapter_config.json"


def adapter_base(path) -> str | None:
    """The checkpoint a LoRA adapter folder was trained on (``None`` for a full checkpoint)."""
    config = Path(str(path)) / ADAPTER_CONFIG
    if not config.is_file():
        return None
    return json.loads(config.read_text())["base_model_name_or_path"]


def trusts_remote_code(path) -> bool:
    """Whether a checkpoint folder's own code (``auto_map``: InternLM2 and the like) may run:
    only where the config opted in for its download (for an adapter, its base's)."""
    return (Path(str(adapter_base(path) or path)) / REMOTE_CODE_MARKER).is_file()


def from_pretrained(model_class, path: str, base: str | None = None, tokenizer: str | None = None, **kwargs):
    """``model_class.from_pretrained(path)``, and for a LoRA adapter folder its base with the
    adapter merged in: a plain model, as fast as a full checkpoint. The base is the one the
    adapter records unless ``base`` names another folder. A base whose vocabulary the
    finetune grew (added tokens) is grown to the adapter's tokenizer (or ``tokenizer``'s) first."""
    base = base or adapter_base(path)
    remote_code = (Path(str(base)) / REMOTE_CODE_MARKER).is_file() if base else trusts_remote_code(path)
    model = model_class.from_pretrained(base or path, trust_remote_code=remote_code, **kwargs)
    if base is None:
        return model
    from peft import PeftModel

    vocabulary = len(AutoTokenizer.from_pretrained(tokenizer or path, trust_remote_code=remote_code))
    if model.get_input_embeddings().weight.shape[0] != vocabulary:
        model.resize_token_embeddings(vocabulary)
    return PeftModel.from_pretrained(model, path).merge_and_unload()


def load_tokenizer(path: str, chat_template: str | None = None):
    """The checkpoint's tokenizer, left-padded for batched generation.

    Base models without a chat template get ``chat_template`` (or the project's simple
    one), so instruction prompts and training text always go through a template.
    """
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trusts_remote_code(path))
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

    return {
        None: torch.float32,
        "auto": "auto",
        "float32": torch.float32,
        "bfloat16": torch.bfloat16,
        "float16": torch.float16,
    }[name]


def visible_gpus() -> int:
    """The GPUs this process may use: those SLURM granted the job (CUDA_VISIBLE_DEVICES)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def device_map(gpus: int | None = None):
    """``from_pretrained``'s placement: the CPU without GPUs, GPU 0 with one, and with more
    the layers spread over all of them (accelerate's balanced map), so that a model too large
    for one GPU (a 70B judge) runs on the GPUs its rule was granted."""
    gpus = visible_gpus() if gpus is None else gpus
    if gpus == 0:
        return None
    return {"": 0} if gpus == 1 else "auto"


def input_device(model):
    """Where a placed model takes its inputs: the device of its input embeddings."""
    return model.get_input_embeddings().weight.device


def load_causal_lm(path: str, dtype: str | None = None):
    """An inference model on the job's GPUs (or the CPU), in ``dtype``."""
    return from_pretrained(AutoModelForCausalLM, path, dtype=torch_dtype(dtype), device_map=device_map()).eval()


def generation_eos_ids(path: str) -> list[int]:
    """The EOS ids in the checkpoint's generation config (instruct models often list their
    end-of-turn token there; an adapter's are its base's), or none when it has no generation
    config."""
    from transformers import GenerationConfig

    try:
        eos = GenerationConfig.from_pretrained(adapter_base(path) or path).eos_token_id
    except OSError:
        return []
    if eos is None:
        return []
    return [eos] if isinstance(eos, int) else list(eos)
