"""Load checkpoints (local folders or hub ids) with one set of rules for every stage."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoModelForCausalLM, AutoTokenizer

from reprolm.models.tokenizer import CHAT_TEMPLATE

# Written into a downloaded checkpoint whose config says ``hub.trust_remote_code: true``
# (and carried into what is made from it): only then may its own modelling code run.
REMOTE_CODE_MARKER = "reprolm_trusts_remote_code"


def trusts_remote_code(path) -> bool:
    """Whether a checkpoint folder's own code (``auto_map``: InternLM2 and the like) may run:
    only where the config opted in for its download."""
    return (Path(str(path)) / REMOTE_CODE_MARKER).is_file()


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
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch_dtype(dtype), device_map=device_map(), trust_remote_code=trusts_remote_code(path)
    )
    return model.eval()


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
