"""Batched generation with transformers (CPU or GPU), left padding, from token ids."""

from __future__ import annotations

import logging

from reprolm.generate.request import GenerationRequest
from reprolm.progress import ProgressCounter

log = logging.getLogger(__name__)


def output_token_penalties(prompt_length: int, presence: float, frequency: float):
    """A logits processor with vLLM's presence and frequency penalties: over the tokens
    sampled so far (not the prompt), ``presence`` once per distinct token and ``frequency``
    per occurrence, before temperature and top-k/top-p as in vLLM."""
    import torch
    from transformers import LogitsProcessor

    class OutputTokenPenalties(LogitsProcessor):
        def __call__(self, input_ids, scores):
            sampled = input_ids[:, prompt_length:]
            if sampled.shape[1] == 0:
                return scores
            counts = torch.zeros_like(scores).scatter_add_(1, sampled, torch.ones_like(sampled, dtype=scores.dtype))
            return scores - frequency * counts - presence * (counts > 0).to(scores.dtype)

    return OutputTokenPenalties()


class TransformersBackend:
    def __init__(
        self, model_path: str, *, batch_size: int = 16, dtype: str | None = None, chat_template: str | None = None
    ):
        from reprolm.models.loading import generation_eos_ids, input_device, load_causal_lm, load_tokenizer

        self.tokenizer = load_tokenizer(model_path, chat_template)
        self.generation_eos = generation_eos_ids(model_path)
        self.model = load_causal_lm(model_path, dtype=dtype)
        self.device = input_device(self.model)
        self.batch_size = batch_size

    def _left_padded(self, prompts: list[list[int]]):
        import torch

        width = max(len(ids) for ids in prompts)
        pad = self.tokenizer.pad_token_id
        input_ids = [[pad] * (width - len(ids)) + ids for ids in prompts]
        mask = [[0] * (width - len(ids)) + [1] * len(ids) for ids in prompts]
        return {
            "input_ids": torch.tensor(input_ids, device=self.device),
            "attention_mask": torch.tensor(mask, device=self.device),
        }

    def generate(self, request: GenerationRequest) -> list[list[list[int]]]:
        """``n`` samples' token ids for each prompt, in prompt order (stop ids and padding
        may follow a sample's end; ``decode_samples`` cuts them)."""
        import torch
        from transformers import LogitsProcessorList

        sampling = request.sampling
        settings = {
            "max_new_tokens": sampling.max_new_tokens,
            "eos_token_id": list(request.stop_token_ids),
            "pad_token_id": self.tokenizer.pad_token_id,
            "num_return_sequences": sampling.n,
        }
        if sampling.greedy:
            settings["do_sample"] = False
        else:
            settings.update(
                do_sample=True, temperature=sampling.temperature, top_p=sampling.top_p, top_k=sampling.top_k or None
            )
        outputs: list[list[list[int]]] = []
        starts = range(0, len(request.prompts), self.batch_size)
        progress = ProgressCounter(f"generating {len(request.prompts)} prompts", len(starts), logger=log)
        for start in starts:
            encoded = self._left_padded(request.prompt_token_ids[start : start + self.batch_size])
            width = encoded["input_ids"].shape[1]
            processors = LogitsProcessorList()
            if sampling.presence_penalty or sampling.frequency_penalty:
                processors.append(output_token_penalties(width, sampling.presence_penalty, sampling.frequency_penalty))
            # Seeded per batch so results do not depend on earlier batches' sampling.
            torch.manual_seed(sampling.seed + start)
            with torch.no_grad():
                generated = self.model.generate(**encoded, **settings, logits_processor=processors)
            rows = generated[:, width:].tolist()
            outputs += [rows[i : i + sampling.n] for i in range(0, len(rows), sampling.n)]
            progress.advance()
        return outputs
