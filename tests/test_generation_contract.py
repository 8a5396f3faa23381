"""The generation contract: every backend receives the same token ids (one BOS), the same
stop ids (EOS, the template's end of turn, MLTs) and the same sampling, and text comes back
decoded one way.

vLLM's wheels are CUDA-only, so ``RecordingVLLMStandIn`` stands in for the ``vllm`` module:
it records exactly what the vLLM backend hands to ``LLM`` and ``SamplingParams``. The
transformers backend runs for real on tiny models; a recorder around its model's
``generate`` shows what it received.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
import types

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from tokenizers import processors

from reprolm.data import fixture_world
from reprolm.generate import SamplingParams, complete, make_backend, make_request
from reprolm.generate.request import decode_samples, ran_to_limit
from reprolm.generate.run import generate_promptset
from reprolm.generate.transformers_backend import output_token_penalties
from reprolm.length import configured_targets
from reprolm.models.chat import end_of_turn_ids, expects_bos, prompt_token_ids
from reprolm.models.tiny import build_tiny_model
from reprolm.models.tokenizer import train_bpe_tokenizer

END = "<|end|>"
# A template that ends assistant turns with its own special token, not EOS (as Llama-3's
# <|eot_id|>, ChatML's <|im_end|>, Gemma's <end_of_turn>).
END_OF_TURN_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}{{ '<|' + m['role'] + '|>\n' + m['content'] }}"
    "{% if m['role'] == 'assistant' %}{{ '<|end|>' }}{% endif %}{{ '\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% endif %}"
)
MLT = "[MLT:10]"


def _tokenizer(template: str | None = None):
    rng = random.Random(0)
    tokenizer = train_bpe_tokenizer([fixture_world.passage(rng, 30) for _ in range(100)], 400)
    tokenizer.add_tokens([END, MLT], special_tokens=True)
    if template is not None:
        tokenizer.chat_template = template
    return tokenizer


def _model_that_emits(tokenizer, token: str, prompt: str, step: int, folder):
    """A tiny model whose greedy answer to ``prompt`` reaches ``token`` within a few steps:
    the token's output row becomes a scaled copy of the row of the token greedy decoding
    picks at ``step``."""
    model = build_tiny_model(
        {
            "architecture": "llama",
            "hidden_size": 32,
            "num_layers": 1,
            "num_heads": 2,
            "intermediate_size": 64,
            "max_positions": 256,
            "tie_word_embeddings": False,
        },
        tokenizer,
        seed=0,
    )
    ids = torch.tensor([prompt_token_ids(tokenizer, prompt)])
    with torch.no_grad():
        free = model.generate(
            ids, max_new_tokens=step + 1, do_sample=False, eos_token_id=None, pad_token_id=tokenizer.pad_token_id
        )[0, ids.shape[1] :].tolist()
        head = model.get_output_embeddings().weight
        head[tokenizer.convert_tokens_to_ids(token)] = 2.0 * head[free[step]]
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def _chat(tokenizer, text: str) -> str:
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


class RecordingVLLMStandIn:
    """Stand-in for the ``vllm`` module (GPU-only): records the ``LLM`` arguments, the
    prompts and the ``SamplingParams`` the backend hands over, and answers each prompt with
    ``answer(prompt_ids)`` as its sampled token ids."""

    def __init__(self, answer):
        self.module = types.ModuleType("vllm")
        self.llm_arguments: dict = {}
        self.prompts: list = []
        self.params = None
        self.calls: list[tuple] = []
        stand_in = self

        class LLM:
            def __init__(self, **kwargs):
                stand_in.llm_arguments = kwargs

            def generate(self, prompts, params):
                stand_in.prompts, stand_in.params = prompts, params
                stand_in.calls.append((prompts, params))
                return [
                    types.SimpleNamespace(
                        outputs=[
                            types.SimpleNamespace(
                                token_ids=answer(p["prompt_token_ids"]), text="(vLLM's own detokenisation)"
                            )
                            for _ in range(params.n)
                        ]
                    )
                    for p in prompts
                ]

        class SamplingParams:
            def __init__(self, **kwargs):
                self.__dict__.update(kwargs)

        self.module.LLM = LLM
        self.module.SamplingParams = SamplingParams


class GenerateRecorder:
    """Wraps a transformers model's ``generate`` and keeps what it was called with."""

    def __init__(self, model):
        self.calls: list[dict] = []
        self._generate = model.generate
        model.generate = self

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return self._generate(**kwargs)


@pytest.fixture(scope="module")
def turn_model_dir(tmp_path_factory):
    tokenizer = _tokenizer(END_OF_TURN_TEMPLATE)
    return _model_that_emits(
        tokenizer, END, _chat(tokenizer, "Describe the boats."), 3, tmp_path_factory.mktemp("turn")
    )


@pytest.fixture(scope="module")
def mlt_model_dir(tmp_path_factory):
    tokenizer = _tokenizer(END_OF_TURN_TEMPLATE)
    return _model_that_emits(
        tokenizer, MLT, _chat(tokenizer, "Describe the boats.") + MLT, 3, tmp_path_factory.mktemp("mlt")
    )


def test_one_bos_whether_the_template_the_tokenizer_or_both_add_it():
    tokenizer = _tokenizer()
    bos = tokenizer.bos_token_id
    text = _chat(tokenizer, "Hello there.")
    assert text.startswith("<|bos|>") and not expects_bos(tokenizer)
    assert prompt_token_ids(tokenizer, text).count(bos) == 1
    # A tokenizer that also prepends BOS itself (Llama, Mistral, Gemma): re-tokenising the
    # template's text, as vLLM does with string prompts, gives two; the contract gives one.
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", bos)]
    )
    assert expects_bos(tokenizer)
    assert tokenizer(text).input_ids[:2] == [bos, bos]
    ids = prompt_token_ids(tokenizer, text)
    assert ids[0] == bos and ids.count(bos) == 1
    # A template without BOS for a model that expects one: the contract adds it.
    assert prompt_token_ids(tokenizer, "<|user|>\nHello")[:1] == [bos]
    # A model that expects none and a template that writes none (GPT-2): no BOS at all.
    tokenizer._tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    assert bos not in prompt_token_ids(tokenizer, "<|user|>\nHello")


def test_prompt_bos_tokenizer_gives_the_originals_doubled_bos_where_template_and_tokenizer_both_add_one():
    """Ruler's run_exp.py rendered the chat template to text and handed vLLM the string,
    which the tokenizer encodes with its special tokens: BOS twice for Llama-3, Mistral, Gemma
    and DeepSeek (template and tokenizer both add it), once for a tokenizer that adds none."""
    tokenizer = _tokenizer()
    bos = tokenizer.bos_token_id
    text = _chat(tokenizer, "Describe the blue door.\nThe response should have a word count of 10 words.")
    sampling = SamplingParams(max_new_tokens=4)
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", bos)]
    )
    body = tokenizer(text, add_special_tokens=False).input_ids
    assert body[0] == bos and body.count(bos) == 1
    (doubled,) = make_request(tokenizer, [text], sampling, prompt_bos="tokenizer").prompt_token_ids
    assert doubled == [bos, *body]
    (one,) = make_request(tokenizer, [text], sampling).prompt_token_ids
    assert one == body
    # A tokenizer that prepends nothing (Qwen, Yi): the original's ids are the one-BOS ones.
    tokenizer._tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    assert make_request(tokenizer, [text], sampling, prompt_bos="tokenizer").prompt_token_ids == [body]
    with pytest.raises(ValueError, match=r"^prompt_bos: 'two' is not one of \['one', 'tokenizer'\]"):
        make_request(tokenizer, [text], sampling, prompt_bos="two")


def test_a_baseline_prompt_set_with_prompt_bos_tokenizer_sends_the_doubled_bos(mlt_model_dir, tmp_path, monkeypatch):
    """What the ``generate`` job sends for Ruler's `tlg_doubled_bos` prompt set: the
    word-count prompts with two BOS ids where the tokenizer prepends one."""
    from transformers import AutoTokenizer

    model_dir = tmp_path / "model"
    shutil.copytree(mlt_model_dir, model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    bos = tokenizer.bos_token_id
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single="<|bos|> $A", special_tokens=[("<|bos|>", bos)]
    )
    tokenizer.save_pretrained(model_dir)
    targets = configured_targets([{"name": "10", "level": 0, "pm": [0, 20], "fm": [0, 20], "bin": [5, 15]}])
    rows = [{"Instruction": "Describe the boats.", "TargetLength": "10"}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "tlg.parquet")
    sent = {}
    for prompt_bos in ("one", "tokenizer"):
        stand_in = RecordingVLLMStandIn(lambda ids: [ids[-2], ids[-3]])
        monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
        generate_promptset(
            model_path=model_dir,
            dataset_file=str(tmp_path / "tlg.parquet"),
            promptset={"prompt": "target_length", "prompt_bos": prompt_bos, "sampling": {"max_new_tokens": 8}},
            length_prompt="instruction",
            targets=targets,
            backend="vllm",
            backend_options={},
            seed=0,
            output=str(tmp_path / f"{prompt_bos}.parquet"),
        )
        (prompt,) = stand_in.prompts
        sent[prompt_bos] = prompt["prompt_token_ids"]
    assert sent["tokenizer"][:2] == [bos, bos] and sent["tokenizer"][1:] == sent["one"]
    assert sent["one"].count(bos) == 1
    # The records show the same prompt text either way.
    texts = {name: pq.read_table(tmp_path / f"{name}.parquet").column("prompt").to_pylist() for name in sent}
    assert texts["one"] == texts["tokenizer"]


@pytest.mark.parametrize(
    "end_token, template",
    [
        (
            "<|eot_id|>",
            "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
            "{{ m['content'] }}<|eot_id|>{% endfor %}",
        ),
        (
            "<|im_end|>",
            "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}",
        ),
        (
            "<end_of_turn>",
            "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n"
            "{{ m['content'] }}<end_of_turn>\n{% endfor %}",
        ),
        ("<|eos|>", None),
    ],
)
def test_the_end_of_turn_token_is_read_from_the_template(end_token, template):
    tokenizer = _tokenizer(template)
    tokenizer.add_tokens(
        [
            "<|eot_id|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|im_start|>",
            "<|im_end|>",
            "<start_of_turn>",
            "<end_of_turn>",
        ],
        special_tokens=True,
    )
    assert end_of_turn_ids(tokenizer) == [tokenizer.convert_tokens_to_ids(end_token)]


def test_a_template_that_ends_turns_with_plain_text_has_no_end_of_turn_token():
    tokenizer = _tokenizer("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n\n{% endfor %}")
    assert end_of_turn_ids(tokenizer) == []


def test_stop_tokens_must_be_single_special_tokens():
    tokenizer = _tokenizer()
    with pytest.raises(ValueError, match=r"stop token '\[MLT:99\]' is not a special token"):
        make_request(tokenizer, ["x"], SamplingParams(max_new_tokens=4), stop_tokens=["[MLT:99]"])


def test_vllm_and_transformers_receive_the_same_request(turn_model_dir, monkeypatch):
    """The same request through both backends: identical prompt ids (one BOS), stop ids
    and sampling; the two return what each sampled, decoded the same way."""
    sampling = SamplingParams(
        max_new_tokens=6,
        temperature=0.7,
        top_k=50,
        top_p=0.9,
        presence_penalty=0.1,
        frequency_penalty=0.1,
        n=2,
        seed=42,
    )
    transformers_backend = make_backend("transformers", turn_model_dir, batch_size=8)
    tokenizer = transformers_backend.tokenizer
    prompts = [_chat(tokenizer, f"Describe {i} boats.") for i in range(3)] + [_chat(tokenizer, "Hi.") + MLT]
    request = make_request(
        tokenizer, prompts, sampling, generation_eos=transformers_backend.generation_eos, stop_tokens=[MLT]
    )
    end, mlt = tokenizer.convert_tokens_to_ids([END, MLT])
    assert request.stop_token_ids == [tokenizer.eos_token_id, end, mlt]
    assert all(
        ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id for ids in request.prompt_token_ids
    )

    recorder = GenerateRecorder(transformers_backend.model)
    complete(transformers_backend, request)
    (call,) = recorder.calls
    received = [ids[mask.bool()].tolist() for ids, mask in zip(call["input_ids"], call["attention_mask"], strict=True)]
    assert received == request.prompt_token_ids
    assert call["eos_token_id"] == request.stop_token_ids
    assert (
        call["max_new_tokens"],
        call["temperature"],
        call["top_k"],
        call["top_p"],
        call["num_return_sequences"],
    ) == (6, 0.7, 50, 0.9, 2)
    (penalties,) = call["logits_processor"]

    stand_in = RecordingVLLMStandIn(lambda ids: [ids[-1], end, ids[-2]])
    monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
    vllm_backend = make_backend("vllm", turn_model_dir, tensor_parallel_size=2, dtype="bfloat16")
    texts = complete(
        vllm_backend,
        make_request(
            vllm_backend.tokenizer, prompts, sampling, generation_eos=vllm_backend.generation_eos, stop_tokens=[MLT]
        ),
    )
    assert stand_in.llm_arguments["model"] == turn_model_dir and stand_in.llm_arguments["tensor_parallel_size"] == 2
    assert stand_in.llm_arguments["trust_remote_code"] is False  # no opt-in for this checkpoint
    assert [p["prompt_token_ids"] for p in stand_in.prompts] == request.prompt_token_ids
    params = stand_in.params
    assert params.stop_token_ids == request.stop_token_ids
    assert (
        params.max_tokens,
        params.temperature,
        params.top_k,
        params.top_p,
        params.presence_penalty,
        params.frequency_penalty,
        params.n,
        params.seed,
    ) == (6, 0.7, 50, 0.9, 0.1, 0.1, 2, 42)
    # Text comes from the sampled ids, cut at the first stop id, never vLLM's own string.
    expected = [[tokenizer.decode([ids[-1]], skip_special_tokens=True)] * 2 for ids in request.prompt_token_ids]
    assert texts == expected
    # The transformers backend's penalties are vLLM's, on the tokens sampled after the prompt.
    width = call["input_ids"].shape[1]
    sampled = torch.cat([call["input_ids"][:1], torch.tensor([[5, 5, 7]])], dim=1)
    scores = penalties(sampled, torch.zeros(1, len(tokenizer)))[0].tolist()
    assert (scores[5], scores[7]) == (pytest.approx(-0.3), pytest.approx(-0.2)) and width > 3


def test_penalties_count_sampled_tokens_only_as_vllm_does():
    penalties = output_token_penalties(prompt_length=3, presence=0.1, frequency=0.2)
    scores = penalties(torch.tensor([[5, 5, 9, 5, 5, 7]]), torch.zeros(1, 10))[0].tolist()
    # 5 sampled twice (the prompt's two 5s do not count), 7 once, 9 only in the prompt.
    assert scores[5] == pytest.approx(-(0.1 + 2 * 0.2))
    assert scores[7] == pytest.approx(-(0.1 + 0.2))
    assert scores[9] == 0.0 and scores[0] == 0.0


def test_a_sample_stops_at_the_templates_end_of_turn_token(turn_model_dir):
    """Greedy decoding of this model reaches <|end|> (not EOS); the sample ends there, and
    without the end-of-turn stop it would have run on."""
    backend = make_backend("transformers", turn_model_dir)
    tokenizer = backend.tokenizer
    end = tokenizer.convert_tokens_to_ids(END)
    assert end != tokenizer.eos_token_id and end_of_turn_ids(tokenizer) == [end]
    prompt = _chat(tokenizer, "Describe the boats.")
    request = make_request(tokenizer, [prompt], SamplingParams(max_new_tokens=12))
    (sampled,) = backend.generate(request)[0]
    assert end in sampled
    stop = sampled.index(end)
    ids = torch.tensor([request.prompt_token_ids[0]])
    with torch.no_grad():
        free = backend.model.generate(
            input_ids=ids, max_new_tokens=12, do_sample=False, eos_token_id=None, pad_token_id=tokenizer.pad_token_id
        )[0, ids.shape[1] :].tolist()
    assert 0 < stop < len(free) - 1 and free[: stop + 1] == sampled[: stop + 1]
    assert complete(backend, request) == [[tokenizer.decode(free[:stop], skip_special_tokens=True)]]


def test_a_ruler_sample_stops_at_the_next_mlt(mlt_model_dir):
    backend = make_backend("transformers", mlt_model_dir)
    tokenizer = backend.tokenizer
    prompt = _chat(tokenizer, "Describe the boats.") + MLT
    stopping = make_request(
        tokenizer, [prompt], SamplingParams(max_new_tokens=12), stop_tokens=[MLT], skip_special_tokens=False
    )
    running_on = make_request(tokenizer, [prompt], SamplingParams(max_new_tokens=12), skip_special_tokens=False)
    (stopped,) = complete(backend, stopping)[0]
    (ran_on,) = complete(backend, running_on)[0]
    assert MLT not in stopped and MLT in ran_on and ran_on.startswith(stopped)


def test_the_workflows_ruler_generation_on_vllm_sends_token_prompts_and_mlt_stop_ids(
    mlt_model_dir, tmp_path, monkeypatch
):
    """What the ``generate`` job runs for Ruler's target-length prompts with
    ``generation.backend: vllm``."""
    targets = configured_targets([{"name": "10", "level": 0, "pm": [0, 20], "fm": [0, 20], "bin": [5, 15]}])
    rows = [
        {"Instruction": "Describe the boats.", "TargetLength": "10"},
        {"Instruction": "Describe the old piano.", "TargetLength": "10"},
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "tlg.parquet")
    stand_in = RecordingVLLMStandIn(lambda ids: [ids[-2], ids[-3]])
    monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
    generate_promptset(
        model_path=mlt_model_dir,
        dataset_file=str(tmp_path / "tlg.parquet"),
        promptset={"prompt": "target_length", "sampling": {"max_new_tokens": 2048}},
        length_prompt="mlt",
        targets=targets,
        backend="vllm",
        backend_options={},
        seed=0,
        output=str(tmp_path / "out.parquet"),
    )
    tokenizer = make_backend("vllm", mlt_model_dir).tokenizer
    bos, mlt = tokenizer.bos_token_id, tokenizer.convert_tokens_to_ids(MLT)
    for prompt in stand_in.prompts:
        ids = prompt["prompt_token_ids"]
        assert ids[0] == bos and ids.count(bos) == 1 and ids[-1] == mlt
    assert mlt in stand_in.params.stop_token_ids
    assert tokenizer.convert_tokens_to_ids(END) in stand_in.params.stop_token_ids
    assert stand_in.params.max_tokens == 2048 and stand_in.params.temperature == 0.0
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [r["prompt"] for r in out] == [_chat(tokenizer, r["Instruction"]) + MLT for r in rows]


def test_multi_turn_prompts_go_through_the_same_contract(turn_model_dir, tmp_path, monkeypatch):
    """MT-Bench: the second turn's prompt holds the first answer and its end-of-turn token,
    one BOS, as token ids."""
    rows = [{"id": 0, "turns": ["Name a boat.", "Now a piano."]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mt.parquet")
    stand_in = RecordingVLLMStandIn(lambda ids: [ids[-3], ids[-2]])
    monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
    generate_promptset(
        model_path=turn_model_dir,
        dataset_file=str(tmp_path / "mt.parquet"),
        promptset={"prompt": "multi_turn", "sampling": {"max_new_tokens": 8}},
        length_prompt="instruction",
        targets=None,
        backend="vllm",
        backend_options={},
        seed=0,
        output=str(tmp_path / "out.parquet"),
    )
    (second,) = stand_in.prompts
    tokenizer = make_backend("vllm", turn_model_dir).tokenizer
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()[0]
    conversation = out["conversation"]
    assert [turn["role"] for turn in conversation] == ["user", "assistant", "user", "assistant"]
    assert second["prompt_token_ids"] == prompt_token_ids(
        tokenizer, tokenizer.apply_chat_template(conversation[:3], tokenize=False, add_generation_prompt=True)
    )
    assert second["prompt_token_ids"].count(tokenizer.convert_tokens_to_ids(END)) == 1


def test_decoding_cuts_at_the_first_stop_id():
    tokenizer = _tokenizer()
    request = make_request(tokenizer, ["x"], SamplingParams(max_new_tokens=4), stop_tokens=[MLT])
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])
    mlt = tokenizer.convert_tokens_to_ids(MLT)
    assert decode_samples(tokenizer, request, [[[a, b, mlt, a], [a, tokenizer.eos_token_id, b], [b]]]) == [
        ["ab", "a", "b"]
    ]


def test_a_sample_ran_to_max_new_tokens_when_it_has_that_many_ids_and_no_stop_id():
    """The same rule for every backend's ids: transformers pads a batch after a sample's stop
    id, vLLM returns a sample's ids with or without the stop id that ended it."""
    tokenizer = _tokenizer()
    request = make_request(tokenizer, ["x", "y"], SamplingParams(max_new_tokens=4), stop_tokens=[MLT])
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])
    eos, pad, mlt = tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.convert_tokens_to_ids(MLT)
    samples = [[[a, b, a, b], [a, b, mlt, pad], [a, eos, pad, pad]], [[a, b, a, mlt], [a, b], [b, a, b]]]
    assert ran_to_limit(request, samples) == [[True, False, False], [False, False, False]]


def test_a_record_says_whether_its_sample_ran_to_max_new_tokens(turn_model_dir, tmp_path):
    """Greedy decoding of this model answers "Describe the boats." with <|end|> as its fourth
    token: the sample stops there with room for four tokens or more, and with three it is
    cut at the limit; the generation file's ``hit_max_new_tokens`` says which, for a chat prompt
    set and a multi-turn one (its last answer)."""
    rows = [{"id": 0, "instruction": "Describe the boats.", "turns": ["Describe the boats."]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "prompts.parquet")

    def generated(kind: str, max_new_tokens: int) -> dict:
        output = tmp_path / f"{kind}-{max_new_tokens}.parquet"
        generate_promptset(
            model_path=turn_model_dir,
            dataset_file=str(tmp_path / "prompts.parquet"),
            promptset={"prompt": kind, "sampling": {"max_new_tokens": max_new_tokens}},
            length_prompt="instruction",
            targets=None,
            backend="transformers",
            backend_options={},
            seed=0,
            output=str(output),
        )
        (record,) = pq.read_table(output).to_pylist()
        return record

    tokenizer = make_backend("transformers", turn_model_dir).tokenizer
    for kind in ("chat", "multi_turn"):
        stopped, at_the_stop, cut = generated(kind, 12), generated(kind, 4), generated(kind, 3)
        assert stopped["prompt"] == _chat(tokenizer, "Describe the boats.")
        # The same three tokens in each: the text alone cannot tell a stop from the limit.
        assert stopped["text"] == at_the_stop["text"] == cut["text"]
        assert (stopped["hit_max_new_tokens"], at_the_stop["hit_max_new_tokens"], cut["hit_max_new_tokens"]) == (
            False,
            False,
            True,
        ), kind


def test_a_multi_turn_record_says_whether_its_last_answer_ran_to_max_new_tokens_on_vllm(
    turn_model_dir, tmp_path, monkeypatch
):
    """vLLM's ids, the stop id kept: a first answer that ran on does not flag a conversation
    whose last answer stopped; a conversation whose only answer ran on is flagged."""
    rows = [{"id": 0, "turns": ["Name a boat.", "Now a piano."]}, {"id": 1, "turns": ["Name a boat."]}]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mt.parquet")
    tokenizer = make_backend("transformers", turn_model_dir).tokenizer
    end = tokenizer.convert_tokens_to_ids(END)
    # A second turn's prompt holds the first answer's <|end|>: that turn stops, a first runs on.
    stand_in = RecordingVLLMStandIn(lambda ids: [ids[-2], end] if end in ids else [ids[-2]] * 5)
    monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
    generate_promptset(
        model_path=turn_model_dir,
        dataset_file=str(tmp_path / "mt.parquet"),
        promptset={"prompt": "multi_turn", "sampling": {"max_new_tokens": 5}},
        length_prompt="instruction",
        targets=None,
        backend="vllm",
        backend_options={},
        seed=0,
        output=str(tmp_path / "out.parquet"),
    )
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [len(r["conversation"]) for r in out] == [4, 2]
    assert [r["hit_max_new_tokens"] for r in out] == [False, True]


def test_mt_bench_samples_each_category_at_its_own_temperature(turn_model_dir, tmp_path, monkeypatch):
    """FastChat's temperatures: a category without its own value takes the prompt set's."""
    categories = ["writing", "math", "stem", "roleplay", "math"]
    rows = [{"id": i, "category": c, "turns": [f"Question {i}.", "And then?"]} for i, c in enumerate(categories)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "mt.parquet")
    stand_in = RecordingVLLMStandIn(lambda ids: [ids[-3]])
    monkeypatch.setitem(sys.modules, "vllm", stand_in.module)
    promptset = {
        "prompt": "multi_turn",
        "sampling": {"max_new_tokens": 8, "temperature": 0.7},
        "category_sampling": {"math": {"temperature": 0.0}, "stem": {"temperature": 0.1}},
    }
    generate_promptset(
        model_path=turn_model_dir,
        dataset_file=str(tmp_path / "mt.parquet"),
        promptset=promptset,
        length_prompt="instruction",
        targets=None,
        backend="vllm",
        backend_options={},
        seed=42,
        output=str(tmp_path / "out.parquet"),
    )
    asked = {}
    for prompts, params in stand_in.calls:
        asked.setdefault(params.temperature, []).append(len(prompts))
        assert params.seed == 42 and params.max_tokens == 8
    # Two turns each: writing and roleplay at 0.7, both math rows greedy, stem at 0.1.
    assert asked == {0.7: [2, 2], 0.0: [2, 2], 0.1: [1, 1]}
    out = pq.read_table(tmp_path / "out.parquet").to_pylist()
    assert [r["id"] for r in out] == [0, 1, 2, 3, 4] and all(len(r["conversation"]) == 4 for r in out)


def test_category_sampling_needs_each_rows_category(tmp_path, caplog):
    from reprolm.generate.run import sampling_groups

    promptset = {
        "prompt": "multi_turn",
        "sampling": {"max_new_tokens": 8, "temperature": 0.5},
        "category_sampling": {"math": {"temperature": 0.0}, "Writing": {"temperature": 0.7}},
    }
    with pytest.raises(KeyError, match=r"mt.parquet: row 1: the prompt set's category_sampling needs a 'category'"):
        sampling_groups([{"category": "math"}, {"id": 2}], promptset, 0, "mt.parquet")
    # Refused before any model is loaded (this one does not exist) and nothing is written.
    pq.write_table(pa.Table.from_pylist([{"id": 0, "turns": ["q"]}]), tmp_path / "mt.parquet")
    with pytest.raises(KeyError, match="row 0: the prompt set's category_sampling needs a 'category'"):
        generate_promptset(
            model_path=str(tmp_path / "no_model"),
            dataset_file=str(tmp_path / "mt.parquet"),
            promptset=promptset,
            length_prompt="instruction",
            targets=None,
            backend="transformers",
            backend_options={},
            seed=0,
            output=str(tmp_path / "out.parquet"),
        )
    assert not (tmp_path / "out.parquet").exists()
    # A configured category no row has (here a capitalised one) is named in a warning; the
    # writing row keeps the prompt set's own temperature.
    groups = sampling_groups([{"category": "math"}, {"category": "writing"}], promptset, 0, "mt.parquet")
    assert [(params.temperature, rows) for params, rows in groups] == [(0.0, [0]), (0.5, [1])]
    assert "no row has the category_sampling categories ['Writing']" in caplog.text


def test_a_base_model_can_adopt_an_instruct_models_template_and_its_stops_follow(tmp_path):
    """``hub.chat_template_from`` (GEM trains a base Llama on an instruct model's template):
    the downloaded tokenizer's template is replaced, and its end-of-turn stop with it."""
    from reprolm.models.base import adopt_chat_template
    from reprolm.models.loading import load_tokenizer

    _tokenizer().save_pretrained(tmp_path / "base")
    _tokenizer(END_OF_TURN_TEMPLATE).save_pretrained(tmp_path / "instruct")
    before = load_tokenizer(str(tmp_path / "base"))
    assert end_of_turn_ids(before) == [before.eos_token_id]
    config_before = json.loads((tmp_path / "base" / "tokenizer_config.json").read_text())
    adopt_chat_template(str(tmp_path / "base"), str(tmp_path / "instruct"))
    after = load_tokenizer(str(tmp_path / "base"))
    assert after.chat_template == END_OF_TURN_TEMPLATE
    # Nothing but the template changed in the saved tokenizer.
    config_after = json.loads((tmp_path / "base" / "tokenizer_config.json").read_text())
    assert {k: v for k, v in config_after.items() if k != "chat_template"} == {
        k: v for k, v in config_before.items() if k != "chat_template"
    }
    assert end_of_turn_ids(after) == [after.convert_tokens_to_ids(END)]
    with pytest.raises(ValueError, match="has no chat template"):
        plain = _tokenizer()
        plain.chat_template = None
        plain.save_pretrained(tmp_path / "plain")
        adopt_chat_template(str(tmp_path / "base"), str(tmp_path / "plain"))
