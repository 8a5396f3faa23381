"""The generation contract: one request type that every backend receives, and one way back
from sampled token ids to text.

A request carries prompts already rendered and tokenised (``reprolm.models.chat``: one BOS
where the model expects one), the token ids that end a sample (EOS, the model's other EOS
ids, the chat template's end of turn, and tokens a prompt set adds such as MLTs) and the
sampling settings. Backends return token ids; ``decode_samples`` cuts each at its first
stop id and decodes, and ``ran_to_limit`` tells the samples that never stopped, the same for
every backend.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from reprolm.models.chat import PROMPT_BOS, stop_token_ids


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 means no top-k cut
    # OpenAI-style penalties over the tokens sampled so far (vLLM's definition).
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    n: int = 1
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    """``prompts`` keeps each prompt's text for the records; backends read
    ``prompt_token_ids``. ``skip_special_tokens=False`` keeps special tokens such as MLTs
    in the decoded text (a stop token never is)."""

    prompts: list[str]
    prompt_token_ids: list[list[int]]
    sampling: SamplingParams
    stop_token_ids: list[int] = field(default_factory=list)
    skip_special_tokens: bool = True

    def describe(self) -> dict:
        return {
            "n_prompts": len(self.prompts),
            "sampling": asdict(self.sampling),
            "stop_token_ids": list(self.stop_token_ids),
            "skip_special_tokens": self.skip_special_tokens,
        }


def make_request(
    tokenizer,
    prompts: list[str],
    sampling: SamplingParams,
    *,
    generation_eos=None,
    stop_tokens: list[str] = (),
    skip_special_tokens: bool = True,
    prompt_bos: str = "one",
) -> GenerationRequest:
    """A request for ``prompts`` (text through the chat template), tokenised once here.
    ``generation_eos``: the model's generation-config EOS id(s); ``stop_tokens``: further
    special tokens that end a sample; ``prompt_bos``: how the text becomes ids
    (:data:`reprolm.models.chat.PROMPT_BOS`)."""
    if prompt_bos not in PROMPT_BOS:
        raise ValueError(f"prompt_bos: {prompt_bos!r} is not one of {sorted(PROMPT_BOS)}")
    encode = PROMPT_BOS[prompt_bos]
    return GenerationRequest(
        prompts=list(prompts),
        prompt_token_ids=[encode(tokenizer, text) for text in prompts],
        sampling=sampling,
        stop_token_ids=stop_token_ids(tokenizer, generation_eos, list(stop_tokens)),
        skip_special_tokens=skip_special_tokens,
    )


def decode_samples(tokenizer, request: GenerationRequest, samples: list[list[list[int]]]) -> list[list[str]]:
    """Each sample's ids up to (not including) its first stop id, decoded."""
    stops = set(request.stop_token_ids)
    texts = []
    for prompt_samples in samples:
        decoded = []
        for ids in prompt_samples:
            end = next((i for i, token in enumerate(ids) if token in stops), len(ids))
            decoded.append(tokenizer.decode(ids[:end], skip_special_tokens=request.skip_special_tokens))
        texts.append(decoded)
    return texts


def ran_to_limit(request: GenerationRequest, samples: list[list[list[int]]]) -> list[list[bool]]:
    """Whether each sample ran to ``max_new_tokens``: no stop id among its ids and at least
    ``max_new_tokens`` of them. A backend may keep or drop the stop id that ended a sample
    (vLLM's) and pad a batch after it (transformers'): either way a sample that stopped has
    a stop id or fewer ids."""
    stops = set(request.stop_token_ids)
    limit = request.sampling.max_new_tokens
    return [[len(ids) >= limit and stops.isdisjoint(ids) for ids in prompt_samples] for prompt_samples in samples]


def complete_with_limits(engine, request: GenerationRequest) -> tuple[list[list[str]], list[list[bool]]]:
    """``n`` texts for each prompt, in prompt order, from any backend, and for each whether
    it ran to ``max_new_tokens`` (``ran_to_limit``)."""
    samples = engine.generate(request)
    if len(samples) != len(request.prompts):
        raise RuntimeError(f"backend returned {len(samples)} prompts' samples for {len(request.prompts)} prompts")
    return decode_samples(engine.tokenizer, request, samples), ran_to_limit(request, samples)


def complete(engine, request: GenerationRequest) -> list[list[str]]:
    """``n`` texts for each prompt, in prompt order, from any backend."""
    return complete_with_limits(engine, request)[0]
