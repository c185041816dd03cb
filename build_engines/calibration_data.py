"""fp8 / int4 calibration data made here, so that no quantizer reaches a model hub.

Both GPU quantizers read calibration text through `datasets.load_dataset`, and both resolve a
local directory before the hub (datasets `dataset_module_factory`: `os.path.isdir(path)` comes
before any remote look-up):

- ModelOpt 0.37.0's hf_ptq.py (the PyTorch flow) takes only the names of its
  SUPPORTED_DATASET_CONFIG; `cnn_dailymail` is `load_dataset(path="cnn_dailymail", name="3.0.0",
  split="train", streaming=True)` and its text is each sample's `article`
  (modelopt/torch/utils/dataset_utils.py at 0.37.0 L62-65, L109-123): a relative path, so run from the
  directory that holds `cnn_dailymail/`, it loads that directory;
- TensorRT-LLM's quantize.py (the engine flow) passes `--calib_dataset` to
  `get_calib_dataloader`, whose `"cnn_dailymail" in dataset_name_or_dir` branch calls
  `load_dataset(dataset_name_or_dir, name="3.0.0", split="train")` and takes `article`.

So one directory named `cnn_dailymail`, holding `train.jsonl` (one `{"article", "text"}` object a
line) and a README.md whose dataset-card YAML declares the config `3.0.0` with that train split,
serves both: hf_ptq.py as `--dataset cnn_dailymail` run in its parent, quantize.py as
`--calib_dataset <dir>`.  (`text` is the column quantize.py reads from any other local directory.)

The text is the kit's own calibration text (build_engines/fidelity/texts.py: Python standard-
library sources, never the evaluation text), cut into articles of about cnn_dailymail's length.
What calibrating on it instead of cnn_dailymail costs in accuracy is not measured: that needs a
GPU and cnn_dailymail itself (docs/gpu-deployment.md, "Calibration data").

Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from build_engines.fidelity.texts import calibration_texts

DATASET_NAME = "cnn_dailymail"  # the name hf_ptq.py knows and the directory both quantizers load
CONFIG_NAME = "3.0.0"  # the config both upstream loaders ask for
SPLIT_FILE = "train.jsonl"
COLUMNS = ("article", "text")  # hf_ptq.py's cnn_dailymail preprocess; quantize.py's other local directories
ARTICLE_CHARS = 2500  # about 512 tokens or more each (both quantizers cut samples at 512 tokens by default)
DEFAULT_ROWS = 512  # the calib_size both flows use by default
CARD = f"""---
configs:
- config_name: "{CONFIG_NAME}"
  data_files:
  - split: train
    path: {SPLIT_FILE}
---
# Calibration text made by the Triton + TensorRT-LLM kit

Not cnn_dailymail: Python standard-library sources (build_engines/fidelity/texts.py), laid out so
that `load_dataset("{DATASET_NAME}", name="{CONFIG_NAME}", split="train")` run from the parent
directory loads this directory instead of the hub (build_engines/calibration_data.py).
"""


class CalibrationDataError(ValueError):
    pass


@dataclass(frozen=True)
class CalibrationDataset:
    directory: Path  # .../cnn_dailymail
    rows: int
    sha256: str  # of train.jsonl
    sources: tuple[str, ...]  # the texts it was cut from

    def describe(self) -> dict:
        return {
            "directory": str(self.directory),
            "rows": self.rows,
            "sha256": self.sha256,
            "config": CONFIG_NAME,
            "sources": list(self.sources),
        }


def articles(limit: int = DEFAULT_ROWS, chars: int = ARTICLE_CHARS) -> tuple[list[str], list[str]]:
    """(up to `limit` articles of about `chars` characters, cut at line ends; the texts' names)."""
    out, names = [], []
    for source in calibration_texts():
        names.append(source.name)
        piece: list[str] = []
        size = 0
        for line in source.text.splitlines(keepends=True):
            piece.append(line)
            size += len(line)
            if size >= chars:
                out.append("".join(piece).strip())
                piece, size = [], 0
                if len(out) >= limit:
                    return out, names
        if size > chars // 4:
            out.append("".join(piece).strip())
    return out[:limit], names


def write_calibration_dataset(parent: Path, rows: int = DEFAULT_ROWS) -> CalibrationDataset:
    """Write `parent/cnn_dailymail/` (README.md + train.jsonl); the same bytes for the same Python."""
    texts, names = articles(rows)
    if len(texts) < rows:
        raise CalibrationDataError(f"the kit's calibration texts make {len(texts)} articles, fewer than {rows}")
    directory = parent / DATASET_NAME
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "README.md").write_text(CARD)
    body = "".join(json.dumps({c: t for c in COLUMNS}) + "\n" for t in texts)
    (directory / SPLIT_FILE).write_text(body)
    return CalibrationDataset(
        directory, len(texts), "sha256:" + hashlib.sha256(body.encode()).hexdigest(), tuple(names)
    )


def check_calibration_dataset(directory: Path, rows: int = DEFAULT_ROWS) -> CalibrationDataset:
    """What the quantizers will read, checked without `datasets`: the directory's name, the card's
    config and split, and at least `rows` lines each with a non-empty article and text."""
    if directory.name != DATASET_NAME:
        raise CalibrationDataError(
            f"'calib_dataset' {directory}: the directory must be named {DATASET_NAME!r} (hf_ptq.py takes only "
            "that name, and quantize.py reads 'article' from a directory only under that name)"
        )
    card, split = directory / "README.md", directory / SPLIT_FILE
    for path in (card, split):
        if not path.is_file():
            raise CalibrationDataError(f"{path} is missing: make it with build_engines.calibration_data")
    if f'config_name: "{CONFIG_NAME}"' not in card.read_text() or f"path: {SPLIT_FILE}" not in card.read_text():
        raise CalibrationDataError(f"{card} does not declare config {CONFIG_NAME!r} with the train split {SPLIT_FILE}")
    body = split.read_text()
    lines = body.splitlines()
    for number, line in enumerate(lines, 1):
        row = json.loads(line)
        if any(not isinstance(row.get(c), str) or not row[c].strip() for c in COLUMNS):
            raise CalibrationDataError(f"{split}:{number}: needs non-empty {list(COLUMNS)}")
    if len(lines) < rows:
        raise CalibrationDataError(f"{split} has {len(lines)} rows; the calibration takes {rows}")
    return CalibrationDataset(directory, len(lines), "sha256:" + hashlib.sha256(body.encode()).hexdigest(), ())


def main(argv: list[str]) -> int:
    """`python3 -m build_engines.calibration_data PARENT [ROWS]`: write PARENT/cnn_dailymail/."""
    if not 1 <= len(argv) <= 2:
        print("usage: python3 -m build_engines.calibration_data PARENT_DIR [ROWS]")
        return 2
    made = write_calibration_dataset(Path(argv[0]), int(argv[1]) if len(argv) == 2 else DEFAULT_ROWS)
    print(json.dumps(made.describe(), indent=2))
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
