"""The README's Python quick start, run as written (in a scratch folder, on whatever device this
machine has: it picks CUDA when torch sees a GPU, else the CPU)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[3] / "README.md"


def quick_start() -> str:
    text = README.read_text()
    after = text.split("This quick start runs as written", 1)[1]
    block = re.search(r"```python\n(.*?)```", after, re.S)
    assert block, "no python block after the quick start's sentence"
    return block.group(1)


def test_readme_quick_start_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(quick_start(), "README.md quick start", "exec"), scope)
    assert scope["s"].shape == (2, 10) and (tmp_path / "plaid2.safetensors").exists()
    assert "top-200 reranked" in scope["two_stage"].device
