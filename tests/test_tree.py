"""tree.Tree: folders under a root walked and made from descriptors, refusing links and files in the way."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from initializers.common.errors import FetchError
from initializers.destination.tree import Tree


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    (tmp_path / "root").mkdir()
    return Tree(str(tmp_path / "root"))


def test_missing_folders_are_made_and_files_made_from_their_descriptor_land_there(tree: Tree, tmp_path: Path):
    with tree.folder("a/b/c") as fd:
        os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd))
    assert (tmp_path / "root" / "a" / "b" / "c" / "f").is_file()
    with pytest.raises(FileNotFoundError), tree.folder("x/y", create=False):
        pass
    assert not (tmp_path / "root" / "x").exists()


@pytest.mark.parametrize("where", ["a", "a/b"])
def test_a_link_on_the_way_is_refused_naming_it_and_nothing_is_made_beyond_it(tree: Tree, tmp_path: Path, where: str):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "root" / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "root" / where).symlink_to(elsewhere)
    with pytest.raises(FetchError, match="is a symbolic link") as refused, tree.folder("a/b/c"):
        pass
    assert str(tmp_path / "root" / where) in str(refused.value)
    assert list(elsewhere.iterdir()) == []


def test_a_link_loop_and_a_file_in_the_way_are_refused(tree: Tree, tmp_path: Path):
    (tmp_path / "root" / "loop").symlink_to("loop")
    (tmp_path / "root" / "file").write_bytes(b"")
    with pytest.raises(FetchError, match="loop' is a symbolic link"), tree.folder("loop/x"):
        pass
    in_the_way = r"cannot create folder .*file': a file of that name is in the way"
    with pytest.raises(FetchError, match=in_the_way), tree.folder("file/x"):
        pass


def test_a_file_entry_may_be_absent_or_a_file_never_a_link_or_a_folder(tree: Tree, tmp_path: Path):
    root = tmp_path / "root"
    (root / "file").write_bytes(b"")
    (root / "link").symlink_to(root / "file")
    (root / "folder").mkdir()
    with tree.folder("") as fd:
        tree.check_file_entry(fd, "absent")
        tree.check_file_entry(fd, "file")
        with pytest.raises(FetchError, match="link' is a symbolic link"):
            tree.check_file_entry(fd, "link")
        with pytest.raises(FetchError, match="folder': a folder of that name is in the way"):
            tree.check_file_entry(fd, "folder")


def test_folders_past_the_kept_open_limit_are_closed_after_use(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("initializers.destination.tree.MOST_KEPT_OPEN", 3)  # the root and two more
    before = open_descriptors()
    for name in ("a", "b", "c", "a"):
        with tree.folder(f"{name}/sub"):
            pass
    assert open_descriptors() == before + 2  # "a" and "a/sub" kept (the limit reached), the others closed once used
    tree.close()
    assert open_descriptors() == before - 1  # the root's too


def test_the_stale_file_sweep_removes_unlisted_files_and_empty_folders_and_never_follows_a_link(
    tree: Tree, tmp_path: Path
):
    root, outside = tmp_path / "root", tmp_path / "outside"
    outside.mkdir()
    (outside / "precious").write_text("not ours")
    (root / "shard-0" / "old").mkdir(parents=True)
    (root / "shard-0" / "part-0.parquet").write_text("kept")
    (root / "shard-0" / "old" / "part-9.parquet").write_text("stale")
    (root / "shard-0" / "into-outside").symlink_to(outside)  # a link to a folder, planted in a folder we own
    (root / "shard-0" / "to-precious").symlink_to(outside / "precious")
    (root / "shard-1").symlink_to(outside)  # a top-level folder swapped for a link
    (root / "notes").mkdir()
    (root / "notes" / "mine.txt").write_text("the user's")
    with tree.folder("shard-0/old"):  # kept open, as a run leaves the folders it wrote in
        pass

    removed = tree.remove_unlisted("shard-*", {"shard-0/part-0.parquet"})

    assert sorted(removed) == ["shard-0/old/part-9.parquet", "shard-0/to-precious"]
    assert not (root / "shard-0" / "old").exists()
    assert (root / "shard-0" / "part-0.parquet").read_text() == "kept"
    assert (outside / "precious").read_text() == "not ours"  # neither link was followed
    assert (root / "shard-0" / "into-outside").is_symlink() and (root / "shard-1").is_symlink()
    assert (root / "notes" / "mine.txt").exists()
    with tree.folder("shard-0/old") as fd:  # made afresh, not the removed folder's stale descriptor
        os.close(os.open("new", os.O_WRONLY | os.O_CREAT, 0o666, dir_fd=fd))
    assert (root / "shard-0" / "old" / "new").is_file()
