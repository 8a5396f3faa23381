"""Where a reward model's scalar is read: at the answer's end of turn (``paper``), or as GEM's
evaluation_reward.py reads it (``original``): the chat rendered with add_generation_prompt=True
after the answer, right-padded, the value head read at the last attended token, i.e. at the
last token of an extra, empty assistant header. A tiny randomly initialised reward model."""

from __future__ import annotations

import random

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from reprolm.data.fixture_world import passage, question
from reprolm.models.tokenizer import train_bpe_tokenizer
from reprolm.score.judges import RewardModelJudge, make_judge

CHATS = [
    [{"role": "user", "content": "Describe the blue door."}, {"role": "assistant", "content": "It is blue and old."}],
    [
        {"role": "user", "content": "What does the miller repair on Sundays?"},
        {"role": "assistant", "content": "The miller repairs the old piano and the blue door on Sundays."},
    ],
]


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    rng = random.Random(0)
    tokenizer = train_bpe_tokenizer([passage(rng, 30) for _ in range(80)] + [question(rng) for _ in range(80)], 300)
    # Weights of a large scale, so that the rewards read at two positions differ visibly.
    config = AutoConfig.for_model(
        "llama",
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        num_labels=1,
        initializer_range=0.5,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    torch.nn.init.normal_(model.score.weight, std=1.0)
    folder = tmp_path_factory.mktemp("rm")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder, model, tokenizer


def original_rewards(model, tokenizer, chats) -> list[float]:
    """The original's read-out written out: one right-padded batch rendered with a generation
    prompt, the value head over every position, read where the attention mask's cumulative
    sum first reaches its maximum (evaluation_reward.py's forward_value_fn)."""
    tokenizer.padding_side = "right"
    inputs = tokenizer.apply_chat_template(
        chats, padding="longest", add_generation_prompt=True, return_dict=True, return_tensors="pt"
    )
    with torch.no_grad():
        hidden = model.model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
        values = model.score(hidden).squeeze(-1)
    last = inputs["attention_mask"].cumsum(dim=1).argmax(dim=1)
    return values.gather(1, last.unsqueeze(1)).squeeze(1).tolist()


def values_at_every_token(model, ids: list[int]) -> list[float]:
    with torch.no_grad():
        hidden = model.model(input_ids=torch.tensor([ids])).last_hidden_state
        return model.score(hidden)[0, :, 0].tolist()


def test_original_reads_the_reward_after_an_extra_assistant_header(reward_model):
    folder, model, tokenizer = reward_model
    original = RewardModelJudge(str(folder), batch_size=2, compat="original").score(CHATS)
    assert original == pytest.approx(original_rewards(model, tokenizer, CHATS), abs=1e-5)
    paper = RewardModelJudge(str(folder), batch_size=2).score(CHATS)
    for chat, at_header, at_answer in zip(CHATS, original, paper, strict=True):
        rendered = tokenizer.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
        assert rendered.endswith("<|eos|>\n<|assistant|>\n")
        ids = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_dict=True)["input_ids"]
        answer_end = len(tokenizer.apply_chat_template(chat, return_dict=True)["input_ids"])
        values = values_at_every_token(model, ids)
        # Today's read-out is the value at the answer's end of turn, the original's two
        # tokens later, at the header's last token: different numbers.
        assert at_answer == pytest.approx(values[answer_end - 1], abs=1e-5)
        assert at_header == pytest.approx(values[-1], abs=1e-5)
        assert abs(at_header - at_answer) > 0.05


def test_the_judge_config_chooses_the_read_out_and_the_protocol_says_which(reward_model):
    folder, _, _ = reward_model
    original = make_judge({"kind": "reward_model", "compat": "original"}, {"judge_model": str(folder)})
    paper = make_judge({"kind": "reward_model"}, {"judge_model": str(folder)})
    assert original.protocol == RewardModelJudge.protocol + "; read after an extra assistant header"
    assert paper.protocol == RewardModelJudge.protocol
    with pytest.raises(ValueError, match="^reward model compat: unknown reward read-out 'last'"):
        RewardModelJudge(str(folder), compat="last")
