"""Generation: one request type, backends chosen by name (vLLM imported only when chosen)."""

from __future__ import annotations

from reprolm.generate.request import GenerationRequest, SamplingParams

BACKENDS = ("transformers", "vllm")


def make_backend(name: str, model_path: str, **options):
    if name == "transformers":
        from reprolm.generate.transformers_backend import TransformersBackend

        options.pop("tensor_parallel_size", None)
        return TransformersBackend(model_path, **options)
    if name == "vllm":
        from reprolm.generate.vllm_backend import VLLMBackend

        options.pop("batch_size", None)
        options.pop("device", None)
        return VLLMBackend(model_path, **options)
    raise ValueError(f"unknown generation backend {name!r}; choose from {BACKENDS}")


__all__ = ["BACKENDS", "GenerationRequest", "SamplingParams", "make_backend"]
