"""The README's Python examples run as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_python_examples_run(monkeypatch, capsys):
    monkeypatch.setenv("CLUSTERSIM_CATALOG", "")
    monkeypatch.setenv("CLUSTERSIM_MODELS", "")
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert blocks, "the README has Python examples"
    for block in blocks:
        exec(compile(block, str(README), "exec"), {})
    assert capsys.readouterr().out.strip()
