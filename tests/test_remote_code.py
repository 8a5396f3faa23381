"""Checkpoints that bring their own modelling code (InternLM2 and other models transformers
does not know): their code runs only where the config opted in at download
(``base_models.*.hub.trust_remote_code``), and the opt-in travels with what is made from
them (an ExPO extrapolation)."""

from __future__ import annotations

import json
import random

import pytest

from reprolm.data import fixture_world
from reprolm.generate import SamplingParams, complete, make_backend, make_request
from reprolm.merge.extrapolate import extrapolate
from reprolm.models.loading import REMOTE_CODE_MARKER, load_causal_lm, trusts_remote_code
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer

CONFIGURATION = '''from transformers import LlamaConfig


class TinyCustomConfig(LlamaConfig):
    model_type = "tiny_custom"
'''
MODELING = '''from transformers import LlamaForCausalLM

from .configuration_tiny_custom import TinyCustomConfig


class TinyCustomForCausalLM(LlamaForCausalLM):
    config_class = TinyCustomConfig
'''


def _custom_checkpoint(folder, seed: int, trusted: bool):
    """A tiny Llama saved as a model type of its own, its classes in the folder's files."""
    rng = random.Random(0)
    tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 30) for _ in range(60)], 300)
    model = build_tiny_model({"architecture": "llama", "hidden_size": 16, "num_layers": 1, "num_heads": 2,
                              "intermediate_size": 32, "max_positions": 128}, tokenizer, seed=seed)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type="tiny_custom", architectures=["TinyCustomForCausalLM"],
                  auto_map={"AutoConfig": "configuration_tiny_custom.TinyCustomConfig",
                            "AutoModelForCausalLM": "modeling_tiny_custom.TinyCustomForCausalLM"})
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_tiny_custom.py").write_text(CONFIGURATION)
    (folder / "modeling_tiny_custom.py").write_text(MODELING)
    if trusted:
        (folder / REMOTE_CODE_MARKER).write_text("test\n")
    return folder


def test_a_checkpoints_own_code_runs_only_where_the_config_opted_in(tmp_path):
    untrusted = _custom_checkpoint(tmp_path / "untrusted", seed=0, trusted=False)
    assert not trusts_remote_code(untrusted)
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_causal_lm(str(untrusted))
    trusted = _custom_checkpoint(tmp_path / "trusted", seed=0, trusted=True)
    assert type(load_causal_lm(str(trusted))).__name__ == "TinyCustomForCausalLM"
    backend = make_backend("transformers", str(trusted))
    prompt = backend.tokenizer.apply_chat_template([{"role": "user", "content": "Hello."}], tokenize=False,
                                                   add_generation_prompt=True)
    (texts,) = complete(backend, make_request(backend.tokenizer, [prompt], SamplingParams(max_new_tokens=4)))
    assert len(texts) == 1


def test_an_extrapolation_carries_the_code_and_the_opt_in(tmp_path):
    sft = _custom_checkpoint(tmp_path / "sft", seed=0, trusted=True)
    aligned = _custom_checkpoint(tmp_path / "aligned", seed=1, trusted=True)
    extrapolate(sft, aligned, 0.5, tmp_path / "expo")
    out = tmp_path / "expo"
    assert {"configuration_tiny_custom.py", "modeling_tiny_custom.py", REMOTE_CODE_MARKER} <= {p.name for p in out.iterdir()}
    assert type(load_causal_lm(str(out))).__name__ == "TinyCustomForCausalLM"
