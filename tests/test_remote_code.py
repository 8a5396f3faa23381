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
from reprolm.models.loading import load_causal_lm, trusts_remote_code
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer
from reprolm.paths import REMOTE_CODE_MARKER

CONFIGURATION = """from transformers import LlamaConfig


class TinyCustomConfig(LlamaConfig):
    model_type = "tiny_custom"
"""
MODELING = """from transformers import LlamaForCausalLM

from .configuration_tiny_custom import TinyCustomConfig


class TinyCustomForCausalLM(LlamaForCausalLM):
    config_class = TinyCustomConfig
"""


def _plain_checkpoint(folder, seed: int):
    rng = random.Random(0)
    tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 30) for _ in range(60)], 300)
    model = build_tiny_model(
        {
            "architecture": "llama",
            "hidden_size": 16,
            "num_layers": 1,
            "num_heads": 2,
            "intermediate_size": 32,
            "max_positions": 128,
        },
        tokenizer,
        seed=seed,
    )
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _custom_checkpoint(folder, seed: int, trusted: bool):
    """A tiny Llama saved as a model type of its own, its classes in the folder's files."""
    _plain_checkpoint(folder, seed)
    config = json.loads((folder / "config.json").read_text())
    config.update(
        model_type="tiny_custom",
        architectures=["TinyCustomForCausalLM"],
        auto_map={
            "AutoConfig": "configuration_tiny_custom.TinyCustomConfig",
            "AutoModelForCausalLM": "modeling_tiny_custom.TinyCustomForCausalLM",
        },
    )
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
    # The custom class runs the same weights: it answers as the plain Llama they came from.
    plain = _plain_checkpoint(tmp_path / "plain", seed=0)
    answers = []
    for folder in (trusted, plain):
        backend = make_backend("transformers", str(folder))
        prompt = backend.tokenizer.apply_chat_template(
            [{"role": "user", "content": "Hello."}], tokenize=False, add_generation_prompt=True
        )
        answers.append(complete(backend, make_request(backend.tokenizer, [prompt], SamplingParams(max_new_tokens=6))))
    assert answers[0] == answers[1] and answers[0][0][0]


def test_vllm_and_lm_eval_are_told_to_trust_only_an_opted_in_checkpoint(tmp_path, monkeypatch):
    """vLLM (GPU only: a recording stand-in, named as such) and lm-eval (real, on the CPU)."""
    import sys
    import types

    from reprolm.score.lm_eval_bridge import language_model

    trusted = _custom_checkpoint(tmp_path / "trusted", seed=0, trusted=True)
    plain = _plain_checkpoint(tmp_path / "plain", seed=0)
    seen = []
    vllm_stand_in = types.ModuleType("vllm")
    vllm_stand_in.LLM = lambda **kwargs: seen.append(kwargs)
    monkeypatch.setitem(sys.modules, "vllm", vllm_stand_in)
    make_backend("vllm", str(trusted))
    make_backend("vllm", str(plain))
    assert [call["trust_remote_code"] for call in seen] == [True, False]
    lm = language_model(str(trusted), batch_size=1)
    assert type(lm.model).__name__ == "TinyCustomForCausalLM"


def test_an_extrapolation_carries_the_code_and_the_opt_in(tmp_path):
    sft = _custom_checkpoint(tmp_path / "sft", seed=0, trusted=True)
    aligned = _custom_checkpoint(tmp_path / "aligned", seed=1, trusted=True)
    extrapolate(sft, aligned, 0.5, tmp_path / "expo")
    out = tmp_path / "expo"
    assert {"configuration_tiny_custom.py", "modeling_tiny_custom.py", REMOTE_CODE_MARKER} <= {
        p.name for p in out.iterdir()
    }
    assert type(load_causal_lm(str(out))).__name__ == "TinyCustomForCausalLM"


def test_the_download_takes_code_only_with_the_opt_in(tmp_path, monkeypatch):
    """The hub cannot be reached here: a recording stand-in for ``snapshot_download`` copies
    what the asked patterns match from a local folder playing the hub repository."""
    import fnmatch
    import os
    import shutil

    import huggingface_hub

    from reprolm.models.base import download_base_model

    hub_repo = _custom_checkpoint(tmp_path / "hub_repo", seed=0, trusted=False)
    asked = []

    def snapshot_download_stand_in(repo_id, revision, local_dir, allow_patterns):
        asked.append((repo_id, revision, list(allow_patterns)))
        os.makedirs(local_dir, exist_ok=True)  # as snapshot_download does
        for file in hub_repo.iterdir():
            if any(fnmatch.fnmatch(file.name, pattern) for pattern in allow_patterns):
                shutil.copy2(file, f"{local_dir}/{file.name}")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download_stand_in)
    download_base_model({"path": "org/custom", "revision": "1" * 40}, str(tmp_path / "without"))
    without = {p.name for p in (tmp_path / "without").iterdir()}
    assert "config.json" in without and not any(name.endswith(".py") for name in without)
    assert REMOTE_CODE_MARKER not in without and not trusts_remote_code(tmp_path / "without")
    download_base_model({"path": "org/custom", "revision": "2" * 40, "trust_remote_code": True}, str(tmp_path / "with"))
    assert {"configuration_tiny_custom.py", "modeling_tiny_custom.py", REMOTE_CODE_MARKER} <= {
        p.name for p in (tmp_path / "with").iterdir()
    }
    assert type(load_causal_lm(str(tmp_path / "with"))).__name__ == "TinyCustomForCausalLM"
    assert asked[1][:2] == ("org/custom", "2" * 40) and "*.py" in asked[1][2] and "*.py" not in asked[0][2]
