"""Deterministic synthetic workloads: chat prompts with fixed output lengths."""

from __future__ import annotations

import random
from dataclasses import dataclass

from client import ChatMessage, SamplingParams

TOPICS = [
    "a dragon",
    "the sea",
    "a robot",
    "music",
    "a city at night",
    "winter",
    "a cat",
    "the moon",
    "coffee",
    "a train journey",
    "bees",
    "a library",
    "rain",
    "chess",
    "a volcano",
    "friendship",
    "a lighthouse",
    "bread",
]


@dataclass(frozen=True)
class Job:
    messages: tuple[ChatMessage, ...]
    sampling: SamplingParams


def fixed_length_jobs(count: int, output_tokens: int, seed: int = 0) -> list[Job]:
    """`count` distinct prompts (no prefix-cache hits) that each generate exactly
    `output_tokens` tokens (min_tokens = max_tokens), greedy."""
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        prompt = f"Request {i}-{rng.randrange(10**6)}: write a long, detailed story about {topic}."
        jobs.append(
            Job(
                (ChatMessage("user", prompt),),
                SamplingParams(max_tokens=output_tokens, min_tokens=output_tokens, temperature=0.0),
            )
        )
    return jobs
