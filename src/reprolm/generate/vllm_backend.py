"""vLLM generation (GPU only). vLLM is imported when this backend is constructed, never
at module import, so CPU machines without vLLM can import the package."""

from __future__ import annotations

from reprolm.generate.request import GenerationRequest


class VLLMBackend:
    def __init__(self, model_path: str, *, tensor_parallel_size: int = 1, dtype: str = "auto",
                 chat_template: str | None = None, gpu_memory_utilization: float = 0.85):
        from vllm import LLM  # GPU only

        self.llm = LLM(model=model_path, tensor_parallel_size=tensor_parallel_size, dtype=dtype,
                       gpu_memory_utilization=gpu_memory_utilization)
        self.tokenizer = self.llm.get_tokenizer()
        if chat_template is not None:
            self.tokenizer.chat_template = chat_template

    def generate(self, request: GenerationRequest) -> list[list[str]]:
        from vllm import SamplingParams

        sampling = request.sampling
        params = SamplingParams(
            n=sampling.n, max_tokens=sampling.max_new_tokens, temperature=sampling.temperature,
            top_p=sampling.top_p, top_k=sampling.top_k or -1, seed=sampling.seed,
            stop=list(request.stop), skip_special_tokens=request.skip_special_tokens,
        )
        results = self.llm.generate(list(request.prompts), params)
        return [[choice.text for choice in result.outputs] for result in results]
