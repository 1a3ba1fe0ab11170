"""Build every installable package into one folder (`make dist`; tests/server/test_dist.py
installs them).

    python scripts/build_dist.py [--out dist]

- memoryd: the server's wheel and sdist;
- memoryd-client: the Python client's wheel and sdist;
- memoryd-model-bge-small: the embedded model's wheel (the server depends on it; `make install`
  has put its files in place);
- @memoryd/client: the TypeScript client's npm tarball, compiled by its own `prepack`.

Python packages are built with the environment's setuptools (`python -m build --no-isolation`),
so nothing is downloaded. Prints the files it wrote, one a line.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON_PACKAGES = (
    (ROOT, ("--sdist", "--wheel")),
    (ROOT / "clients" / "python", ("--sdist", "--wheel")),
    (ROOT / "packages" / "memoryd-model-bge-small", ("--wheel",)),
)
TYPESCRIPT = ROOT / "clients" / "typescript"


def build(out: Path) -> list[Path]:
    """Build everything into `out` (emptied first); the files written."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    for folder, kinds in PYTHON_PACKAGES:
        # setuptools keeps build/ between builds: a file since removed from the tree (a renamed
        # migration) would still be in the wheel.
        shutil.rmtree(folder / "build", ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "build", "--no-isolation", *kinds, "--outdir", str(out), "."],
            cwd=folder,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    npm = shutil.which("npm")
    if npm is None:
        sys.exit("npm is not installed: it packs the TypeScript client")
    if not (TYPESCRIPT / "node_modules").is_dir():
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=TYPESCRIPT, check=True)
    subprocess.run(
        [npm, "pack", "--pack-destination", str(out)],
        cwd=TYPESCRIPT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return sorted(out.iterdir())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist")
    for path in build(parser.parse_args().out.resolve()):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
