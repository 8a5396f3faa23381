"""One generation request type, shared by every backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class SamplingParams:
    max_new_tokens: int
    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0
    top_k: int = 0  # 0 means no top-k cut
    n: int = 1
    seed: int = 0

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass(frozen=True)
class GenerationRequest:
    """Prompts are final strings (chat template applied); ``stop`` strings end a sample
    and are not part of its text. ``skip_special_tokens=False`` keeps special tokens such
    as MLTs in the text (EOS and padding are always removed)."""

    prompts: list[str]
    sampling: SamplingParams
    stop: list[str] = field(default_factory=list)
    skip_special_tokens: bool = True

    def describe(self) -> dict:
        return {"n_prompts": len(self.prompts), "sampling": asdict(self.sampling),
                "stop": list(self.stop), "skip_special_tokens": self.skip_special_tokens}


def cut_at_stop(text: str, stop: list[str]) -> str:
    """Text up to the earliest stop string."""
    cut = len(text)
    for string in stop:
        position = text.find(string)
        if position != -1:
            cut = min(cut, position)
    return text[:cut]
