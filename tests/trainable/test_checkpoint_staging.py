"""Staged, scratch and local checkpoint directories."""

from __future__ import annotations

import os

import pytest

from fasttune.checkpoint import Checkpoint
from fasttune.trainable._checkpoint_staging import (
    local_directory,
    save_dir,
    scratch_dir,
    staged_dir,
)


def test_staged_dir_replaces_final_only_on_success(tmp_path):
    final = tmp_path / "checkpoint_000001"
    final.mkdir()
    (final / "old.txt").write_text("old")
    with staged_dir(str(final), str(tmp_path)) as staging:
        (tmp_path / staging / "new.txt").write_text("new")
    assert sorted(os.listdir(final)) == ["new.txt"]
    with pytest.raises(RuntimeError), staged_dir(str(final), str(tmp_path)) as staging:
        (tmp_path / staging / "half.txt").write_text("half")
        raise RuntimeError("save failed")
    assert sorted(os.listdir(final)) == ["new.txt"]
    assert sorted(os.listdir(tmp_path)) == ["checkpoint_000001"]  # no staging dir left


def test_save_dir_writes_into_given_or_numbered_directory(tmp_path):
    def write(directory: str) -> None:
        (tmp_path / directory / "state.txt").write_text("s")

    given = tmp_path / "given" / "nested"
    assert save_dir(write, str(given), str(tmp_path), 7) == str(given)
    assert (given / "state.txt").exists()
    numbered = save_dir(write, None, str(tmp_path), 7)
    assert numbered == str(tmp_path / "checkpoint_000007")
    assert os.path.exists(os.path.join(numbered, "state.txt"))


def test_scratch_dir_is_removed_even_after_an_error():
    with pytest.raises(KeyError), scratch_dir("fasttune_test_") as tmp:
        assert os.path.basename(tmp).startswith("fasttune_test_")
        raise KeyError("boom")
    assert not os.path.exists(tmp)


def test_local_directory_accepts_paths_and_checkpoints(tmp_path):
    with local_directory(tmp_path) as local:
        assert local == str(tmp_path)
    (tmp_path / "data.txt").write_text("d")
    with local_directory(Checkpoint.from_directory(str(tmp_path))) as local:
        assert open(os.path.join(local, "data.txt")).read() == "d"
    with pytest.raises(TypeError, match="got int"), local_directory(3):  # type: ignore[arg-type]
        pass
