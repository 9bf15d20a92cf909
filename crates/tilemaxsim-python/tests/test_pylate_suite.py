"""PyLate's own tests, run with `tilemaxsim.integrations.pylate.patch()` applied: the files of
its sdist (pylate 1.6.0, pinned by hash) that need no model download, plus the doctests of
`pylate/scores/colbert.py`, in a pytest of their own whose conftest patches PyLate before any
test module imports it. The sdist is read from `TILEMAXSIM_PYLATE_SDIST` (a machine without
network carries it), else downloaded once into `target/sdist/` by pip."""

import hashlib
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("pylate")

VERSION = "1.6.0"
SHA256 = "fe8aaa649d47f56c2b95183df9b910500f4257cf3c0c7cf353223c48a0059a0c"
# The sdist's tests that run on random tensors (the rest load models from the Hugging Face hub).
FILES = ["tests/test_colbert_scores.py", "tests/test_scores_lik.py", "tests/test_scores_flash.py"]
REPO = Path(__file__).resolve().parents[3]

CONFTEST = """
import pytest
from tilemaxsim.integrations import pylate as dropin

dropin.patch()


@pytest.fixture(autouse=True)
def _still_patched():
    import pylate.scores as scores

    assert scores.colbert_scores is dropin.colbert_scores
    yield
"""


def _sdist() -> Path:
    given = os.environ.get("TILEMAXSIM_PYLATE_SDIST")
    path = Path(given) if given else REPO / "target" / "sdist" / f"pylate-{VERSION}.tar.gz"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--disable-pip-version-check",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"pylate=={VERSION}",
                "-d",
                str(path.parent),
            ],
            check=True,
        )
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert digest == SHA256, f"{path}: sha256 {digest}, expected pylate {VERSION}'s {SHA256}"
    return path


def test_pylate_own_tests_pass_patched(tmp_path):
    with tarfile.open(_sdist()) as tar:
        for name in FILES:
            member = tar.getmember(f"pylate-{VERSION}/{name}")
            data = tar.extractfile(member)
            assert data is not None, f"{name}: not a file in the sdist"
            (tmp_path / Path(name).name).write_bytes(data.read())
    (tmp_path / "conftest.py").write_text(CONFTEST)
    import pylate.scores.colbert as module

    # The doctests of PyLate's scoring module run against the patched module globals too.
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-rs",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        *(str(tmp_path / Path(n).name) for n in FILES),
        "--doctest-modules",
        module.__file__,
    ]
    run = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    # Every file collected and ran: the passed count covers at least the CPU gating tests.
    summary = out.strip().splitlines()[-1]
    assert "passed" in summary and "error" not in summary, out
