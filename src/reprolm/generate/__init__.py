"""Generation: one request type, backends chosen by name (vLLM imported only when chosen)."""

from __future__ import annotations

from reprolm.generate.request import GenerationRequest, SamplingParams, complete, make_request
from reprolm.generate.transformers_backend import TransformersBackend
from reprolm.generate.vllm_backend import VLLMBackend
from reprolm.registry import Registry

BACKENDS = Registry("generation backend")


@BACKENDS.register("transformers")
def _transformers(model_path: str, **options):
    options.pop("tensor_parallel_size", None)
    return TransformersBackend(model_path, **options)


@BACKENDS.register("vllm")
def _vllm(model_path: str, **options):
    options.pop("batch_size", None)
    return VLLMBackend(model_path, **options)


def make_backend(name: str, model_path: str, **options):
    return BACKENDS.get(name)(model_path, **options)


__all__ = ["BACKENDS", "GenerationRequest", "SamplingParams", "complete", "make_backend", "make_request"]
