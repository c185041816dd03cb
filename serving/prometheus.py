"""Read Prometheus text exposition (Triton's /metrics) into plain numbers."""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Sample:
    name: str
    labels: tuple[tuple[str, str], ...]
    value: float


def parse(text: str) -> list[Sample]:
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if m:
            labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
            samples.append(Sample(m.group(1), labels, float(m.group(3))))
    return samples


def scrape(url: str, timeout_s: float = 5.0) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return parse(r.read().decode())


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """Sum of the samples named `name` whose labels include `labels` (0 if none)."""
    wanted = set(labels.items())
    return sum(s.value for s in samples if s.name == name and wanted <= set(s.labels))
