"""The architecture holds: import-linter contracts (.importlinter) and one idea per module."""

import configparser
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 500


def test_import_contracts_are_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "0 broken" in result.stdout


def test_no_module_holds_more_than_one_idea():
    sizes = {
        path.relative_to(ROOT).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "src").rglob("*.py")
    }
    assert {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def _contract(name: str) -> configparser.SectionProxy:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    return config[f"importlinter:contract:{name}"]


def test_no_package_imports_itself_in_a_circle():
    """The acyclic contract covers every package of clustersim, and forgives only the imports it names."""
    contract = _contract("acyclic")
    assert contract["type"] == "acyclic_siblings" and contract["ancestors"].split() == ["clustersim"]
    ignored = [line.strip() for line in contract["ignore_imports"].splitlines() if line.strip()]
    assert [line for line in ignored if not line.startswith("#")] == [
        "clustersim.workload.hf_limits -> clustersim.workload.hf",
    ]


def test_the_acyclic_contract_finds_a_cycle_hidden_by_an_import_at_the_bottom(tmp_path: Path):
    """cli.fabric and fabric_step once imported each other, the cycle hidden by an import at the end
    of the module; the contract names such a pair."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("X = 1\n\nfrom pkg.b import Y  # noqa: E402\n")
    (package / "b.py").write_text("from pkg.a import X\n\nY = X\n")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = pkg\n\n[importlinter:contract:acyclic]\nname = acyclic\n"
        "type = acyclic_siblings\nancestors =\n    pkg\n"
    )
    lint_imports = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "No cycles are allowed in pkg" in result.stdout
