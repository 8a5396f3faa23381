"""ExPO extrapolation on real tiny checkpoints: exactness, the formula per tensor, dtypes,
sharding, and refusal of incompatible pairs."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM

from reprolm.config import overlays
from reprolm.data.fixture_world import passage, question
from reprolm.merge.extrapolate import INDEX_FILE, IncompatibleCheckpoints, extrapolate
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer

SPEC = {
    "architecture": "llama",
    "hidden_size": 32,
    "num_layers": 2,
    "num_heads": 2,
    "intermediate_size": 64,
    "max_positions": 128,
}


def _tokenizer(seed: int, vocab_size: int = 300):
    rng = random.Random(seed)
    return train_bpe_tokenizer(
        [passage(rng, 30) for _ in range(100)] + [question(rng) for _ in range(100)], vocab_size=vocab_size
    )


def _checkpoint(folder: Path, seed: int, *, tokenizer=None, dtype=torch.float32, **spec) -> Path:
    tokenizer = tokenizer or _tokenizer(0)
    model = build_tiny_model({**SPEC, **spec}, tokenizer, seed=seed).to(dtype)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    index = json.loads((folder / INDEX_FILE).read_text())["weight_map"] if (folder / INDEX_FILE).exists() else None
    files = sorted(set(index.values())) if index else ["model.safetensors"]
    return {name: tensor for file in files for name, tensor in load_file(folder / file).items()}


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("expo")
    return _checkpoint(root / "sft", seed=1), _checkpoint(root / "aligned", seed=2)


def test_alpha_zero_gives_the_aligned_weights_exactly(pair, tmp_path):
    sft, aligned = pair
    summary = extrapolate(sft, aligned, 0.0, tmp_path / "out")
    merged, original = _weights(tmp_path / "out"), _weights(aligned)
    assert merged.keys() == original.keys() and summary["extrapolated_tensors"] == len(original)
    assert all(torch.equal(merged[name], original[name]) for name in original)
    ids = torch.tensor([[3, 5, 7, 11]])
    logits = [AutoModelForCausalLM.from_pretrained(path)(ids).logits for path in (tmp_path / "out", aligned)]
    assert torch.equal(*logits)


def test_formula_holds_tensor_by_tensor_and_moves_away_from_sft(pair, tmp_path):
    sft, aligned = pair
    extrapolate(sft, aligned, 0.5, tmp_path / "out")
    merged, theta_sft, theta_aligned = _weights(tmp_path / "out"), _weights(sft), _weights(aligned)
    for name, value in theta_aligned.items():
        expected = value + 0.5 * (value - theta_sft[name])
        torch.testing.assert_close(merged[name], expected, rtol=0, atol=1e-6)
    # Extrapolation moves 1.5x as far from the SFT model as the aligned one is.
    name = "model.embed_tokens.weight"
    distance = (merged[name] - theta_sft[name]).norm() / (theta_aligned[name] - theta_sft[name]).norm()
    assert distance.item() == pytest.approx(1.5, rel=1e-5)


# The float32 arithmetic runs over blocks of rows (bounded memory at a 128k vocabulary):
# whole tensors, blocks of several rows, and one row at a time give the same bits.
@pytest.mark.parametrize("block_elements", [1 << 24, 100, 1])
def test_bf16_aligned_model_stays_bf16_with_float32_arithmetic(tmp_path, block_elements):
    sft = _checkpoint(tmp_path / "sft", seed=1)
    aligned = _checkpoint(tmp_path / "aligned", seed=2, dtype=torch.bfloat16)
    extrapolate(sft, aligned, 2.0, tmp_path / "out", block_elements=block_elements)
    merged, theta_sft, theta_aligned = _weights(tmp_path / "out"), _weights(sft), _weights(aligned)
    for name, value in theta_aligned.items():
        assert merged[name].dtype == torch.bfloat16
        expected = (value.float() + 2.0 * (value.float() - theta_sft[name].float())).to(torch.bfloat16)
        assert torch.equal(merged[name], expected), name


def test_small_shards_give_the_same_model(pair, tmp_path):
    sft, aligned = pair
    one = extrapolate(sft, aligned, 0.3, tmp_path / "one")
    many = extrapolate(sft, aligned, 0.3, tmp_path / "many", max_shard_bytes=8_000)
    assert one["shards"] == 1 and many["shards"] > 3
    single, sharded = _weights(tmp_path / "one"), _weights(tmp_path / "many")
    assert all(torch.equal(single[name], sharded[name]) for name in single)
    AutoModelForCausalLM.from_pretrained(tmp_path / "many")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"hidden_size": 64, "num_heads": 4}, "config.json 'hidden_size': 64 in .* but 32 in"),
        (
            {"intermediate_size": 96},
            "tensor 'model.layers.0.mlp.down_proj.weight': shape \\[32, 96\\] in .* but \\[32, 64\\]",
        ),
    ],
)
def test_incompatible_architectures_are_refused_naming_the_first_mismatch(pair, tmp_path, change, message):
    other = _checkpoint(tmp_path / "other", seed=1, **change)
    with pytest.raises(IncompatibleCheckpoints, match=message):
        extrapolate(other, pair[1], 0.5, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.tmp-*"))


def test_a_different_vocabulary_of_the_same_size_is_refused(pair, tmp_path):
    other = _checkpoint(tmp_path / "other", seed=1, tokenizer=_tokenizer(seed=9))
    with pytest.raises(IncompatibleCheckpoints, match="vocabulary: token .* has id"):
        extrapolate(other, pair[1], 0.5, tmp_path / "out")


def test_config_names_each_model_its_reference_and_refuses_unknown_ones():
    import yaml

    from reprolm.checks import check_config
    from reprolm.config.lookups import expo_reference_dir
    from reprolm.errors import ConfigError
    from reprolm.paths import split_expo

    repo = Path(__file__).resolve().parents[1]
    schema_file = repo / "workflow/schemas/config.schema.yaml"
    paper = yaml.safe_load((repo / "config/paper.yaml").read_text())
    assert expo_reference_dir(paper, "zephyr_7b_beta", "pretrained") == "resources/models/mistral_7b_sft_beta"
    default = overlays.load(repo / "config/config.yaml", repo)
    assert expo_reference_dir(default, "tiny_llama", "sft") == "resources/models/tiny_llama"
    assert split_expo("vanilla+expo2.5") == ("vanilla", 2.5) and split_expo("vanilla") == ("vanilla", None)
    # An extrapolated model is asked for lengths the way the recipe it extrapolates is.
    from reprolm.config.lookups import length_prompt

    assert (
        length_prompt(default, "ruler+expo0.5") == "mlt"
        and length_prompt(default, "pretrained+expo0.3") == "instruction"
    )
    default["ruler"]["recipes"] = ["ruler", "ruler+expo0.5"]
    with pytest.raises(ConfigError, match="extrapolation.references has no entry for recipe 'ruler'"):
        check_config(default, schema_file)
    paper["extrapolation"]["models"].append("zephyr_7b_sft_full/pretrained+expo0.3")
    with pytest.raises(
        ConfigError, match="extrapolation.base_references has no entry for base model 'zephyr_7b_sft_full'"
    ):
        check_config(paper, schema_file)
