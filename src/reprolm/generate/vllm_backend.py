"""vLLM generation (GPU only). vLLM is imported when this backend is constructed, never
at module import, so CPU machines without vLLM can import the package.

vLLM receives the request's token ids as token prompts (it would otherwise tokenise the
template's text again and add a second BOS) and the request's stop ids; the tokenizer is
the project's, so prompts are rendered exactly as for the transformers backend."""

from __future__ import annotations

from reprolm.generate.request import GenerationRequest

# The share of each GPU's memory vLLM takes for the weights, activations and KV cache.
GPU_MEMORY_UTILIZATION = 0.85


class VLLMBackend:
    def __init__(
        self,
        model_path: str,
        *,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        chat_template: str | None = None,
        gpu_memory_utilization: float = GPU_MEMORY_UTILIZATION,
    ):
        from vllm import LLM  # GPU only

        from reprolm.models.loading import generation_eos_ids, load_tokenizer, trusts_remote_code

        self.tokenizer = load_tokenizer(model_path, chat_template)
        self.generation_eos = generation_eos_ids(model_path)
        self.llm = LLM(
            model=model_path,
            tensor_parallel_size=tensor_parallel_size,
            dtype=dtype,
            gpu_memory_utilization=gpu_memory_utilization,
            trust_remote_code=trusts_remote_code(model_path),
        )

    def generate(self, request: GenerationRequest) -> list[list[list[int]]]:
        from vllm import SamplingParams

        sampling = request.sampling
        params = SamplingParams(
            n=sampling.n,
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k or -1,
            seed=sampling.seed,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
            stop_token_ids=list(request.stop_token_ids),
            skip_special_tokens=request.skip_special_tokens,
        )
        prompts = [{"prompt_token_ids": list(ids)} for ids in request.prompt_token_ids]
        results = self.llm.generate(prompts, params)
        return [[list(choice.token_ids) for choice in result.outputs] for result in results]
