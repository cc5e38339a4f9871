"""Where a Trainable's checkpoint directories are made: staged, scratch or local.

A checkpoint saved into the trial directory is written to a staging directory
and moved into place only when complete; checkpoints passed as bytes go through
scratch directories; a :class:`~fasttune.Checkpoint` is read through a local copy.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from fasttune.checkpoint import Checkpoint
from fasttune.trainable.checkpoint_io import checkpoint_dir_name


@contextlib.contextmanager
def staged_dir(final: str, parent: str) -> Iterator[str]:
    """A new directory in ``parent`` to fill, moved to ``final`` when the block succeeds.

    An existing ``final`` is replaced; if the block raises, the staging directory
    is removed instead, so no half-written checkpoint appears under ``final``. The
    folder keeps the permissions ``mkdir`` gave it, whatever the block copied onto it
    (``shutil.copytree`` gives it the source's: a ``TemporaryDirectory``'s 0700).
    """
    # Imported here: the fork server imports it once it serves, so its first workers
    # start sooner (and those that checkpoint import it at their first checkpoint).
    import shutil

    staging = _new_dir(parent, ".checkpoint_tmp_")
    mode = os.stat(staging).st_mode
    try:
        yield staging
        os.chmod(staging, mode)
        if os.path.exists(final):
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _new_dir(parent: str, prefix: str) -> str:
    """A new directory with a unique name in ``parent``, made as ``mkdir`` makes one:
    with the permissions the umask leaves (``tempfile.mkdtemp`` gives 0700, and the
    checkpoint folder keeps the staging folder's, which others sharing the results,
    as Ray's 0755 folders allow, could not read)."""
    while True:
        path = os.path.join(parent, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path)
        except FileExistsError:
            continue
        return path


def save_dir(
    write: Callable[[str], None], checkpoint_dir: str | None, logdir: str, iteration: int
) -> str:
    """Run ``write(directory)`` for a checkpoint and return the checkpoint's directory.

    Args:
        write: Fills a directory with the checkpoint.
        checkpoint_dir: Where to write (created if missing); None writes atomically
            to ``<logdir>/checkpoint_<iteration>`` through :func:`staged_dir`.
        logdir: The trainable's directory.
        iteration: Number of the default checkpoint directory.
    """
    if checkpoint_dir is not None:
        os.makedirs(checkpoint_dir, exist_ok=True)
        write(checkpoint_dir)
        return os.path.abspath(checkpoint_dir)
    final = os.path.join(logdir, checkpoint_dir_name(iteration))
    with staged_dir(final, logdir) as staging:
        write(staging)
    return final


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A new temporary directory, removed (ignoring errors) when the block ends."""
    import shutil
    import tempfile

    tmp = tempfile.mkdtemp(prefix=prefix)
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def local_directory(checkpoint_path: str | os.PathLike[str] | Checkpoint) -> Iterator[str]:
    """A local directory holding ``checkpoint_path`` for the duration of the block.

    Raises:
        TypeError: If ``checkpoint_path`` is neither a path nor a Checkpoint.
    """
    if isinstance(checkpoint_path, Checkpoint):
        with checkpoint_path.as_directory() as local:
            yield local
        return
    if not isinstance(checkpoint_path, (str, os.PathLike)):
        raise TypeError(
            "restore(checkpoint_path=...) takes the path returned by save() or a "
            f"fasttune.Checkpoint, got {type(checkpoint_path).__name__}"
        )
    yield os.fspath(checkpoint_path)
