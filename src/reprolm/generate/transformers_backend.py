"""Batched generation with transformers (CPU or GPU), left padding."""

from __future__ import annotations

import logging

from reprolm.generate.request import GenerationRequest, cut_at_stop

log = logging.getLogger(__name__)


class TransformersBackend:
    def __init__(self, model_path: str, *, batch_size: int = 16, dtype: str | None = None,
                 device: str | None = None, chat_template: str | None = None):
        import torch

        from reprolm.models.loading import load_causal_lm, load_tokenizer

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.tokenizer = load_tokenizer(model_path, chat_template)
        self.model = load_causal_lm(model_path, dtype=dtype, device=self.device)
        self.batch_size = batch_size

    def _stop_token_ids(self, stop: list[str]) -> list[int]:
        """Stop strings that are single vocabulary tokens (like MLTs) stop by token id."""
        vocab = self.tokenizer.get_vocab()
        return [vocab[s] for s in stop if s in vocab]

    def generate(self, request: GenerationRequest) -> list[list[str]]:
        """``n`` samples for each prompt, in prompt order."""
        import torch

        sampling = request.sampling
        eos_ids = [self.tokenizer.eos_token_id, *self._stop_token_ids(request.stop)]
        settings = {
            "max_new_tokens": sampling.max_new_tokens,
            "eos_token_id": eos_ids,
            "pad_token_id": self.tokenizer.pad_token_id,
            "num_return_sequences": sampling.n,
        }
        if sampling.greedy:
            settings["do_sample"] = False
        else:
            settings.update(do_sample=True, temperature=sampling.temperature,
                            top_p=sampling.top_p, top_k=sampling.top_k or None)
        # Every token id that ends a sample, removed from the decoded text.
        drop = set(eos_ids) | {self.tokenizer.pad_token_id}
        outputs: list[list[str]] = []
        for start in range(0, len(request.prompts), self.batch_size):
            batch = request.prompts[start:start + self.batch_size]
            encoded = self.tokenizer(batch, return_tensors="pt", padding=True,
                                     add_special_tokens=False).to(self.device)
            # Seeded per batch so results do not depend on earlier batches' sampling.
            torch.manual_seed(sampling.seed + start)
            with torch.no_grad():
                generated = self.model.generate(**encoded, **settings)
            new_tokens = generated[:, encoded["input_ids"].shape[1]:]
            texts = []
            for row in new_tokens.tolist():
                kept = []
                for token in row:
                    if token in drop:
                        break
                    kept.append(token)
                text = self.tokenizer.decode(kept, skip_special_tokens=request.skip_special_tokens)
                texts.append(cut_at_stop(text, request.stop))
            outputs += [texts[i:i + sampling.n] for i in range(0, len(texts), sampling.n)]
        return outputs
