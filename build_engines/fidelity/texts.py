"""The texts a fidelity report and an int4 calibration use: all ship with Python itself, so
nothing is downloaded and every machine (this one, CI, the GPU image) has the same bytes.

- Evaluation: `pydoc_data/topics.py`, the file as it is (Python's language-reference topics,
  English prose with code).  Never used for calibration.
- Calibration (int4 only): other standard-library modules' source files (docstrings and code),
  in a fixed order.  Same general domain, different text.
- Greedy prompts: fixed chat questions, answered through the checkpoint's chat template.
"""

from __future__ import annotations

import hashlib
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

EVAL_TEXT_MODULE = "pydoc_data/topics.py"
# Standard-library files whose text calibrates int4 compression (not the evaluation text).
CALIBRATION_MODULES = (
    "argparse.py",
    "difflib.py",
    "textwrap.py",
    "statistics.py",
    "fractions.py",
    "decimal.py",
    "calendar.py",
    "logging/__init__.py",
    "email/message.py",
    "http/client.py",
    "json/decoder.py",
    "typing.py",
    "dataclasses.py",
    "functools.py",
    "collections/__init__.py",
    "inspect.py",
    "subprocess.py",
    "pathlib.py",
    "zipfile.py",
    "unittest/case.py",
    "asyncio/events.py",
    "random.py",
    "string.py",
    "shutil.py",
    "tarfile.py",
    "turtle.py",
)

GREEDY_PROMPTS = (
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain gravity to a child.",
    "List three colors.",
    "Write a Python function that reverses a string.",
    "Tell me a story about a brave knight.",
    "What are the benefits of regular exercise?",
    "Summarize the plot of Romeo and Juliet in two sentences.",
    "How does a rainbow form?",
    "Give me three tips for learning a new language.",
    "What is the difference between a list and a tuple in Python?",
    "Describe the water cycle.",
    "Write a short email asking a colleague for a meeting.",
    "Why do cats purr?",
    "Explain what a neural network is in simple terms.",
    "What should I pack for a weekend camping trip?",
    "Translate 'good morning' into Spanish and French.",
    "What causes the seasons on Earth?",
    "Suggest a name for a small bakery.",
    "How do I make a cup of tea?",
)


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


@dataclass(frozen=True)
class SourceText:
    name: str  # what the report names it by
    path: Path
    text: str

    @property
    def sha256(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def describe(self) -> dict[str, str]:
        return {
            "name": self.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "python": ".".join(map(str, sys.version_info[:3])),
        }


def evaluation_text() -> SourceText:
    path = stdlib_dir() / EVAL_TEXT_MODULE
    return SourceText(
        f"Python {sys.version_info[0]}.{sys.version_info[1]} stdlib {EVAL_TEXT_MODULE}",
        path,
        path.read_text(encoding="utf-8"),
    )


def calibration_texts() -> list[SourceText]:
    root = stdlib_dir()
    texts = [
        SourceText(f"stdlib {name}", root / name, (root / name).read_text(encoding="utf-8"))
        for name in CALIBRATION_MODULES
        if (root / name).is_file()
    ]
    if any(t.path.name == Path(EVAL_TEXT_MODULE).name for t in texts):  # never calibrate on the evaluation text
        raise AssertionError("calibration texts include the evaluation text")
    return texts


def windows(n_tokens: int, window: int, stride: int) -> list[tuple[int, int, int]]:
    """Sliding windows over n_tokens: (start, end, first_scored).  The first window scores every
    position but its first; later ones only the `stride` new tokens at their end, each with
    window - stride tokens of context (Hugging Face's and llama.cpp's perplexity scheme).
    A token t is scored as the prediction made at position t - 1, so a window's first token is
    never scored (with stride == window, each window's first token goes unscored)."""
    if not 0 < stride <= window:
        raise ValueError(f"need 0 < stride ({stride}) <= window ({window})")
    out, start = [], 0
    while start + window <= n_tokens:
        out.append((start, start + window, start + max(1, window - stride) if start else 1))
        start += stride
    return out
