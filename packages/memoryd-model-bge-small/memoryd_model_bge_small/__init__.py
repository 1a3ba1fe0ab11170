"""bge-small-en-v1.5 as memoryd's embedded embedding model: where its files are, and how to use it.

The weights are BAAI's bge-small-en-v1.5 (MIT), quantised to int8 ONNX. The files are put here by
memoryd's scripts/build_model_package.py, which checks each one against the SHA-256 below.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent

NAME = "bge-small-en-v1.5-int8"
MODEL = HERE / "model.onnx"
VOCABULARY = HERE / "vocab.txt"
DIMENSION = 384
# The sentence vector is the hidden state of the first token ([CLS]), L2-normalised.
POOLING = "cls"
# The model's position embeddings end here; longer inputs are cut.
MAX_TOKENS = 512
# BAAI's instruction for short queries searching passages (bge v1.5 works without it too).
QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
LOWERCASE = True

SHA256 = {
    "model.onnx": "6c9c6101a956d62dfb5e7190c538226c0c5bb9cb27b651234b6df063ee7dbfe4",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
