"""The snapshot helper: a missing snapshot fails and is not written; only the flag writes one."""

from pathlib import Path

import pytest

from tests.snapshots import recorded

FLAG = "CLUSTERSIM_TEST_SNAPSHOT_FLAG"
COMMAND = "python -m pytest tests/x.py"


def test_a_missing_snapshot_fails_naming_the_file_and_the_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(FLAG, raising=False)
    path = tmp_path / "absent.txt"
    with pytest.raises(pytest.fail.Exception) as info:
        recorded(path, "new\n", flag=FLAG, command=COMMAND)
    assert str(path) in str(info.value) and f"{FLAG}=1 {COMMAND}" in str(info.value)
    assert not path.exists()


def test_without_the_flag_a_recorded_snapshot_is_read_and_never_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    path = tmp_path / "snap.txt"
    path.write_text("old\n", encoding="utf-8")
    for value in (None, "0", "yes"):
        if value is None:
            monkeypatch.delenv(FLAG, raising=False)
        else:
            monkeypatch.setenv(FLAG, value)
        assert recorded(path, "new\n", flag=FLAG, command=COMMAND) == "old\n"
    assert path.read_text(encoding="utf-8") == "old\n"


def test_the_flag_writes_the_snapshot_then_reads_it_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(FLAG, "1")
    path = tmp_path / "snap.txt"
    assert recorded(path, "new\n", flag=FLAG, command=COMMAND) == "new\n"
    path.write_text("old\n", encoding="utf-8")
    assert recorded(path, "newer\n", flag=FLAG, command=COMMAND) == "newer\n"
    assert path.read_text(encoding="utf-8") == "newer\n"
