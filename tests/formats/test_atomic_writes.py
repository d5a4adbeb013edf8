"""Writers replace files whole or not at all, and never a file recfn did not write."""

from __future__ import annotations

import fcntl
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import recfn
from recfn.formats.files import kind_written, write_atomic, written_by_recfn


def small_trace() -> recfn.Trace:
    with recfn.profile() as prof:
        with recfn.record_function("outer"):
            recfn.mark("m")
    return prof.trace


@pytest.mark.parametrize("suffix", [".parquet", ".json", ".json.gz"])
def test_a_foreign_file_is_refused_and_kept(tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"users{suffix}"
    target.write_bytes(b"name,age\nada,36\n")
    with pytest.raises(FileExistsError, match="recfn did not write it"):
        small_trace().save(target)
    assert target.read_bytes() == b"name,age\nada,36\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary left


@pytest.mark.parametrize("suffix", [".parquet", ".json", ".json.gz"])
def test_own_files_are_replaced_and_overwrite_replaces_foreign_ones(
    tmp_path: Path, suffix: str
) -> None:
    target = tmp_path / f"run{suffix}"
    small_trace().save(target)
    assert written_by_recfn(str(target))
    small_trace().save(target)  # ours: replaced without asking
    target.write_bytes(b"not a trace")
    small_trace().save(target, overwrite=True)
    assert recfn.load(target).events == 4


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "run.parquet"
    small_trace().save(target)
    before = target.read_bytes()

    def half_then_fail(temporary: str) -> None:
        Path(temporary).write_bytes(before[:10])
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomic(str(target), half_then_fail)
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.parquet"]


def test_sigkill_while_saving_leaves_the_previous_trace_whole(tmp_path: Path) -> None:
    """The child saves over an existing trace and is killed from inside the writer, after
    half the new content is on disk: the old file must still load exactly."""
    target = tmp_path / "run.parquet"
    small_trace().save(target)
    before = target.read_bytes()
    script = textwrap.dedent(
        f"""
        import os, signal
        import pyarrow.parquet as pq
        import recfn, recfn.formats.io

        real = pq.write_table
        def dying_write(table, where, **kwargs):
            real(table, where, **kwargs)
            with open(where, "r+b") as fh:
                fh.truncate(os.path.getsize(where) // 2)
            os.kill(os.getpid(), signal.SIGKILL)
        pq.write_table = dying_write
        with recfn.profile() as prof:
            with recfn.record_function("new"):
                pass
        prof.save({str(target)!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stderr.decode()
    assert target.read_bytes() == before
    assert recfn.load(target).events == 4


def test_cli_refuses_a_foreign_output_in_one_line_and_force_replaces_it(tmp_path: Path) -> None:
    trace = tmp_path / "run.parquet"
    small_trace().save(trace)
    foreign = tmp_path / "users.json"
    foreign.write_text('{"users": []}')
    cmd = [sys.executable, "-m", "recfn", "convert", str(trace), "-o", str(foreign)]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0
    assert "recfn did not write it" in refused.stderr and "Traceback" not in refused.stderr
    assert foreign.read_text() == '{"users": []}'
    forced = subprocess.run([*cmd, "--force"], capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0, forced.stderr
    assert recfn.load(foreign).events == 4


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_timeline_images_are_recognised_as_ours(tmp_path: Path, suffix: str) -> None:
    trace = tmp_path / "run.parquet"
    small_trace().save(trace)
    image = tmp_path / f"t.{suffix}"
    for _ in range(2):  # the second run replaces recfn's own image without --force
        proc = subprocess.run(
            [sys.executable, "-m", "recfn", "timeline", str(trace), "-o", str(image)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
    assert written_by_recfn(str(image))
    assert not os.path.exists(str(image) + ".part")
    foreign = tmp_path / f"theirs.{suffix}"  # the same kind of file, not recfn's
    foreign.write_bytes(image.read_bytes().replace(b"recfn", b"other"))
    assert not written_by_recfn(str(foreign))


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_temporary_files_of_killed_saves_are_removed_by_the_next_write(
    tmp_path: Path, signum: int
) -> None:
    """A save killed half-way leaves its temporary file; the next write into the folder
    removes it, but never the temporary file of a write under way (which holds it locked)."""
    script = textwrap.dedent(
        f"""
        import os
        import pyarrow.parquet as pq
        import recfn

        real = pq.write_table
        def dying_write(table, where, **kwargs):
            real(table, where, **kwargs)
            os.kill(os.getpid(), {int(signum)})
        pq.write_table = dying_write
        with recfn.profile() as prof:
            with recfn.record_function("new"):
                pass
        prof.save({str(tmp_path / "run.parquet")!r})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=120)
    assert proc.returncode == -signum, proc.stderr.decode()
    (abandoned,) = tmp_path.glob(".run.parquet.*.part.parquet")
    busy = tmp_path / ".other.parquet.abcdefgh.part.parquet"
    busy.write_bytes(b"being written")
    with open(busy, "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as write_atomic holds its own
        small_trace().save(tmp_path / "next.parquet")
        assert not abandoned.exists() and busy.exists()
    assert not (tmp_path / "run.parquet").exists()


@contextmanager
def umask(mask: int) -> Iterator[None]:
    """This process's umask set to `mask` for the block (restored after it)."""
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def test_another_write_in_the_folder_never_takes_a_temporary_not_yet_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two threads write into one folder (a streaming capture's parts): one's sweep for
    abandoned temporary files runs while the other has made its file and not locked it yet.
    The sweep leaves it (it took it: a part of 384 events was lost, FileNotFoundError)."""
    from recfn.formats import files

    lock = files._lock
    swept: list[list[str]] = []

    def lock_after_a_sweep(fd: int) -> None:
        swept.append(files.remove_abandoned(str(tmp_path)))  # the other thread's, just now
        lock(fd)

    monkeypatch.setattr(files, "_lock", lock_after_a_sweep)
    write_atomic(tmp_path / "part-00001.parquet", lambda path: Path(path).write_bytes(b"x"))
    assert swept == [[]]
    assert (tmp_path / "part-00001.parquet").read_bytes() == b"x"
    assert os.listdir(tmp_path) == ["part-00001.parquet"]


def test_the_empty_file_of_a_write_killed_before_it_locked_goes_once_old(tmp_path: Path) -> None:
    """A write killed between making its ``.new`` file and locking it leaves it empty and
    unlocked; the next sweep takes it once it is older than any live write's, and nothing
    else under such a name."""
    from recfn.formats import files

    then = time.time() - files.NEW_ABANDONED_AFTER - 1

    def made(token: str, content: bytes = b"", old: bool = True) -> Path:
        path = tmp_path / f".run.parquet.{token}.new"
        path.write_bytes(content)
        if old:
            os.utime(path, (then, then))
        return path

    abandoned = made("0123abcd")
    kept = [
        made("4567cdef", old=False),  # a write about to lock it
        made("89abcdef"),  # locked below: a write renaming it
        made("fedcba98", b"not ours"),  # a write never writes into it
    ]
    with open(kept[1], "rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        assert files.remove_abandoned(str(tmp_path)) == [str(abandoned)]
    assert all(path.exists() for path in kept)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
@pytest.mark.parametrize("suffix", [".parquet", ".json.gz"])
def test_new_files_get_the_mode_the_umask_gives(
    tmp_path: Path, suffix: str, mask: int, mode: int
) -> None:
    with umask(mask):
        small_trace().save(tmp_path / f"run{suffix}")
    assert stat.S_IMODE((tmp_path / f"run{suffix}").stat().st_mode) == mode


def test_a_replaced_file_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "run.parquet"
    small_trace().save(target)
    target.chmod(0o640)
    with umask(0o077):
        small_trace().save(target)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


@pytest.mark.parametrize("length", [232, 240, 255])
@pytest.mark.parametrize("suffix", [".parquet", ".json.gz"])
def test_names_up_to_the_longest_a_folder_takes_are_saved(
    tmp_path: Path, length: int, suffix: str
) -> None:
    name = "t" * (length - len(suffix)) + suffix
    small_trace().save(tmp_path / name)
    small_trace().save(tmp_path / name)  # and replaced
    assert recfn.load(tmp_path / name).events == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]
    wide = "é" * ((length - len(suffix)) // 2) + suffix  # two bytes a character
    small_trace().save(tmp_path / wide)
    assert recfn.load(tmp_path / wide).events == 4


def test_recfn_replaces_its_own_files_only_with_their_kind(tmp_path: Path) -> None:
    """A generated module never replaces a trace recfn wrote, nor a trace a generated module
    (``codegen json -o X.json`` once took a Chrome trace's place); each replaces its own kind."""
    chrome = tmp_path / "X.json"
    small_trace().save(chrome)
    cmd = [sys.executable, "-m", "recfn", "codegen", "json", "-o", str(chrome)]
    refused = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1, refused.stderr
    assert "it is a recfn trace" in refused.stderr and "Traceback" not in refused.stderr
    assert recfn.load(chrome).events == 4
    module = tmp_path / "generated.json"  # a module, whatever its name
    for _ in range(2):  # the second run replaces its own module
        done = subprocess.run([*cmd[:-1], str(module)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
    with pytest.raises(FileExistsError, match="it is a recfn module"):
        small_trace().save(module)
    assert kind_written(str(module)) == "module" and kind_written(str(chrome)) == "trace"
