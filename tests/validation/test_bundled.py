"""The ground truth shipped inside the package is a byte-for-byte copy of ``../shared/validation``.

Beside a checkout with the shared folder, every bundled file must equal its counterpart and the set
of files must be the same; without it (a fresh clone), the bundled files must read. Never a skip.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.validation.cases import bundled_case_files, bundled_dir, read_cases

SHARED = Path(__file__).resolve().parents[3] / "shared" / "validation"


def _shipped(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix == ".jsonl" or p.name == "README.md"}


def check_bundled_copy(shared: Path) -> str:
    """Compare the bundled files with ``shared`` where it exists, else read them; says which it did."""
    bundled = _shipped(bundled_dir())
    assert "README.md" in bundled and len(bundled) > 1
    if shared.is_dir():
        expected = _shipped(shared)
        assert sorted(bundled) == sorted(expected), "bundled and shared ground-truth files differ in name"
        changed = sorted(name for name in expected if bundled[name] != expected[name])
        assert not changed, f"copy {shared} into {bundled_dir()} again: {changed} differ"
        return "compared"
    for path in bundled_case_files():
        assert read_cases(path), path
    return "read"


def test_bundled_ground_truth_matches_the_shared_copy() -> None:
    assert check_bundled_copy(SHARED) == ("compared" if SHARED.is_dir() else "read")


def test_without_the_shared_folder_the_bundled_files_read(tmp_path: Path) -> None:
    assert check_bundled_copy(tmp_path / "no-shared-here") == "read"


def test_a_stale_copy_is_caught(tmp_path: Path) -> None:
    for name, data in _shipped(bundled_dir()).items():
        (tmp_path / name).write_bytes(data)
    assert check_bundled_copy(tmp_path) == "compared"
    (tmp_path / "memory.jsonl").write_bytes(b"\n")
    with pytest.raises(AssertionError, match=r"memory\.jsonl"):
        check_bundled_copy(tmp_path)
    (tmp_path / "memory.jsonl").unlink()
    with pytest.raises(AssertionError, match="differ in name"):
        check_bundled_copy(tmp_path)
