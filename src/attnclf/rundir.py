"""The run directory: everything a trained model needs, in open formats.

```
config.json        resolved settings: data, tokenizer, model, training, versions, seed
model.safetensors  best weights (never pickle)
tokenizer.json     Hugging Face tokenizers format
labels.json        label names in class-index order
history.jsonl      one line per epoch
metrics.json       final test metrics
thresholds.json    multi-label runs: each label's decision threshold, tuned on validation
temperature.json   after `attnclf calibrate`: the temperature its probabilities are scaled by, fitted on validation
checkpoint/        the full training state at the last epoch's end or --checkpoint-minutes mark, for --resume
earlier-model/     while `train --overwrite` retrains the folder: the finished model it replaces, deleted
                   when the new one finishes (an interrupted replacement keeps it)
```

``AttentionTextClassifier.save`` writes the four files a model needs, history.jsonl and metrics.json (without
test metrics: it records no texts); its config.json adds "trained_by" (``ESTIMATOR``) and the estimator's
parameters and classes.

Every file is written atomically (temporary file, then ``os.replace``), so an
interrupted run never leaves a half-written file behind.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, TypeVar

from .checks import real_number, whole_number
from .errors import NAME_LENGTH, AttnclfError, RunDirError, first_few, shown

try:
    import fcntl
except ImportError:  # (Windows: folder_lock locks nothing)
    fcntl = None

if TYPE_CHECKING:
    import torch

FORMAT_VERSION = 1
REQUIRED_FILES = ("config.json", "model.safetensors", "tokenizer.json", "labels.json")
THRESHOLDS_FILE = "thresholds.json"
TEMPERATURE_FILE = "temperature.json"
EARLIER_MODEL = "earlier-model"
EARLIER_MODEL_STAGING = f"{EARLIER_MODEL}.partial"  # a set-aside in progress, renamed to EARLIER_MODEL once whole
# config.json's "trained_by" in a folder AttentionTextClassifier.save wrote (train's runs have none)
ESTIMATOR = "attnclf.sklearn.AttentionTextClassifier"


def temporary_beside(path: Path, suffix: str = ".tmp") -> tuple[int, str]:
    """``mkstemp`` in ``path``'s folder: a temporary file to write, then ``publish`` as ``path``.

    >>> # fd, tmp = temporary_beside(Path("runs/demo/model.safetensors"))  # 'runs/demo/.model.safetensors.k3j9.tmp'
    """
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)


_CANNOT_SYNC = {errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}  # what fsync says where the filesystem has none
# and what a folder adds: one the user may write into but not open (mode -wx), a system that will not fsync a
# read-only descriptor. Its file is in place by then, as on a filesystem without fsync: no reason to call it failed.
_FOLDER_CANNOT_SYNC = _CANNOT_SYNC | {errno.EACCES, errno.EPERM, errno.EBADF}


def publish(tmp: str | Path, path: Path, replace: bool = True) -> None:
    """Atomically move a finished temporary file onto ``path``, with the permissions a new file would get
    (``mkstemp`` makes it owner-only; reports and exports are meant to be shared). Unless ``replace``, a file at
    ``path`` (another process's, written since the caller checked) is kept: FileExistsError naming ``path``, and
    ``tmp`` is left for the caller to delete.

    >>> # publish(tmp, Path("runs/demo/metrics.json"))  # tmp from temporary_beside, written and closed

    Its bytes reach the disk before its name does, and its name before the caller goes on: a checkpoint's state.json
    names its new tensor file and the older one is then deleted, so after a power cut neither may be a name without
    its bytes (ext4 flushes a file renamed over another, but not one under a new name; XFS neither), nor may the old
    state.json come back naming a file already deleted (the folder's own entries reach the disk by its fsync).
    """
    _sync(tmp, os.O_RDWR, path)  # (Windows refuses to fsync a read-only descriptor)
    _as_new(tmp, 0o666)
    if replace:
        os.replace(tmp, path)
    else:
        _publish_new(tmp, path)
    _sync_folder(path)


# What link(2) says where the filesystem makes no hard links (FAT and exFAT: EPERM; some FUSE and network mounts the
# others), as against a failure of the write itself.
_NO_HARD_LINKS = {errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EXDEV, errno.EMLINK}


def _publish_new(tmp: str | Path, path: Path) -> None:
    """Rename ``tmp`` to ``path`` only if no file is there: a hard link is made only under a free name, in one step,
    where a rename replaces whatever it finds."""
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:  # (a disk error or a full disk: the write failed, as a rename's would)
            raise
        # A filesystem without hard links (FAT, exFAT, some network and FUSE mounts): check, then rename. This
        # cannot guarantee the same: a file written at ``path`` between the check and the rename is still replaced.
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(path)) from None
        os.replace(tmp, path)
    else:
        os.unlink(tmp)


def _sync_folder(path: Path) -> None:
    """fsync the folder ``path`` was just renamed into, before the caller goes on (to delete what the old entry named).
    A sync that failed raises, naming ``path``, though the file is in place: the caller must not go on."""
    if os.name == "nt":  # (Windows opens no folder as a file; NTFS journals the rename itself)
        return
    try:
        _sync(Path(path).parent, os.O_RDONLY, path, _FOLDER_CANNOT_SYNC)
    except OSError as exc:  # (opening the folder)
        if exc.errno not in _FOLDER_CANNOT_SYNC:
            raise


def _sync(target: str | Path, flags: int, path: Path, cannot: set[int] = _CANNOT_SYNC) -> None:
    """fsync ``target`` (the file written for ``path``, or its folder), unless fsync says it ``cannot`` (errno)."""
    written = os.open(target, flags)
    try:
        os.fsync(written)
    except OSError as exc:
        # A filesystem that cannot sync at all (an SMB share, some FUSE and network mounts) says so: the rename is
        # still atomic there, and refusing every write would be worse. A sync that failed (EIO, a full disk) is the
        # file's error, named (fsync's own names none).
        if exc.errno not in cannot:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    finally:
        os.close(written)


def _as_new(tmp: str | Path, mode: int) -> None:
    """Give a temporary file or folder (owner-only, as ``mkstemp`` and ``mkdtemp`` make them) the permissions a new
    one would get."""
    try:
        os.chmod(tmp, mode & ~_umask())
    except OSError:  # a filesystem without modes: keep what it gave
        pass


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (another thread may be creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def publish_folder(tmp: str | Path, path: Path, replace: bool = False) -> None:
    """Atomically move a finished temporary folder (``mkdtemp`` beside ``path``) onto ``path``, which must be missing
    or empty unless ``replace``: then whatever ``path`` held is moved aside, and deleted once the new folder is in,
    its name on the disk (the parent folder's fsync, as ``publish`` does): a power cut then leaves one of the two.

    >>> # tmp = tempfile.mkdtemp(dir="runs", prefix=".onnx.")  # ... its files written, then:
    >>> # publish_folder(tmp, Path("runs/demo/onnx"), replace=True)
    """
    _as_new(tmp, 0o777)
    aside = None
    if replace and Path(path).exists():
        aside = Path(tempfile.mkdtemp(dir=Path(path).parent, prefix=f".{Path(path).name}.", suffix=".replaced"))
        os.replace(path, aside / "old")
    try:
        os.replace(tmp, path)
    except BaseException:
        if aside is not None:
            os.replace(aside / "old", path)
            aside.rmdir()
        raise
    _sync_folder(path)  # (its files' bytes and names reached the disk as each was published inside it)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


@contextmanager
def naming(path: str | Path, written: str | Path | None = None) -> Iterator[None]:
    """An OSError within it that names no file, or only ``written`` (the temporary file or folder being written for
    ``path``) or a file inside it, names ``path`` instead: a write past the disk's space (ENOSPC) or a file-size limit
    (EFBIG, `ulimit -f`) fails naming no file, which left the command line's message without one.

    >>> with naming("runs/demo/metrics.json"):
    ...     raise OSError(27, "File too large")
    Traceback (most recent call last):
    ...
    OSError: [Errno 27] File too large: 'runs/demo/metrics.json'
    """
    try:
        yield
    except OSError as exc:
        named = exc.filename is not None and (written is None or not Path(exc.filename).is_relative_to(written))
        if exc.errno is None or exc.filename2 is not None or named:
            raise
        raise OSError(exc.errno, exc.strerror, str(path)) from None


@contextmanager
def written_atomically(path: str | Path, suffix: str = ".tmp", replace: bool = True) -> Iterator[str]:
    """The name of a temporary file beside ``path`` (ending in ``suffix``, for a library that picks a format by it)
    for the block to write (by a library that opens files by name), published as ``path`` when the block ends;
    deleted if it raises, ``path`` then left as it was. Unless ``replace``, a file found at ``path`` by then is kept
    and the temporary file deleted: FileExistsError naming ``path`` (``publish``).

    >>> # with written_atomically("scored.parquet") as tmp:
    >>> #     pyarrow.parquet.write_table(table, tmp)
    """
    path = Path(path)
    fd, tmp = temporary_beside(path, suffix)
    os.close(fd)
    try:
        with naming(path, tmp):
            yield tmp
        publish(tmp, path, replace)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (``written_atomically``).

    >>> # atomic_write_bytes(Path("runs/demo/report.html"), page.encode("utf-8"))
    """
    with written_atomically(path) as tmp:
        Path(tmp).write_bytes(data)


def atomic_write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` to ``path`` as indented UTF-8 JSON (not escaped to ASCII: a label's own letters), atomically.

    >>> # atomic_write_json(Path("runs/demo/labels.json"), ["negative", "positive"])
    """
    atomic_write_bytes(path, (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode())


def atomic_save_tensors(path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` (copied to the CPU, contiguous) to ``path`` as safetensors, atomically; a write that fails
    (a full disk) is an OSError naming ``path``.

    >>> # atomic_save_tensors(Path("runs/demo/model.safetensors"), model.state_dict())
    """
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    with written_atomically(path) as tmp:
        try:
            save_file({k: v.detach().contiguous().cpu() for k, v in tensors.items()}, tmp, metadata=metadata)
        except SafetensorError as exc:  # safetensors reports a full disk in its own words: an OSError for the CLI
            raise OSError(f"{path}: cannot write the weights ({exc})") from None


def prepare_output_dir(path: str | Path) -> Path:
    """Create ``path`` if needed and prove it is writable, before any work is done.

    >>> # prepare_output_dir("runs/demo")  # Path('runs/demo'), made with its parents where missing
    """
    path = Path(path)
    if path.is_file():  # (mkdir would say "File exists", as if the folder were the problem)
        raise AttnclfError(f"output directory {path} is a file; give a folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=path, prefix=".write-test.", delete=True)
        probe.close()
    except OSError as exc:
        raise AttnclfError(f"output directory {path} is not writable: {exc.strerror or exc}") from None
    return path


@contextmanager
def output_folder(path: str | Path) -> Iterator[Path]:
    """``prepare_output_dir(path)`` for a command that fills the folder as it goes (an experiment's, or one of its
    cells), held meanwhile (``folder_lock``; under torchrun, by rank 0): another process that asks for it is refused in
    one line naming this one's pid. Should the command fail or be stopped before it writes anything there (bad
    settings that only its first step finds), the folder goes again, with the parents it made; one that held anything
    before, or does now, stays.

    >>> # with output_folder("experiments/compare-demo") as output:
    >>> #     records = run_variants(setup, variants, output)
    """
    from .training.distributed import from_environment

    created = first_missing_folder(path)
    folder = prepare_output_dir(path)
    try:
        with folder_lock(folder) if from_environment().is_main else nullcontext():
            yield folder
    except BaseException:
        remove_empty_folders(folder, created)  # (its lock file gone first)
        raise


LOCK_FILE = ".attnclf.lock"  # in a folder a command is writing into: see folder_lock
_CANNOT_LOCK = {errno.ENOLCK, errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}  # what flock says where
# the file system has no locks
_held: set[Path] = set()  # the folders this process holds (a call within another's hold holds nothing more)


ANOTHER_OUTPUT = "give another --output"  # folder_lock's advice to a command that chose the folder it writes


@contextmanager
def folder_lock(folder: str | Path, instead: str | None = ANOTHER_OUTPUT) -> Iterator[None]:
    """Hold ``folder`` for this process while it writes into it: another process that asks for it meanwhile (a second
    `attnclf train` given the same --output) is refused in one line instead of interleaving its files with this one's,
    which leaves a config.json of one run beside the weights of the other. The refusal advises waiting, or what to do
    ``instead`` (None: nothing; `calibrate` writes into the run it is given, not an --output). The lock is the
    operating system's (``flock``), so a process killed outright (kill -9) holds nothing; its lock file then stays,
    empty of meaning. Calls nest within one process. Where ``fcntl`` is missing (Windows), or the file system has no
    locks (some network mounts), nothing is locked.

    >>> # with folder_lock("runs/demo"):
    >>> #     ...  # write the run's files
    """
    if fcntl is None:
        yield
        return
    named, folder = folder, _real(folder)  # (named as given; held by where it is, however reached)
    if folder in _held:
        yield
        return
    lock = folder / LOCK_FILE
    handle = _locked(lock, named, instead)
    if handle is None:  # (a file system without locks: written unlocked, as before folders were locked)
        yield
        return
    _held.add(folder)
    try:  # (a failure to write the pid lets go as well: a descriptor left open would hold the folder until exit)
        with naming(lock):
            os.ftruncate(handle, 0)
            os.write(handle, f"{os.getpid()}\n".encode())  # (named by a process it refuses)
        yield
    finally:
        _held.discard(folder)
        Path(lock).unlink(missing_ok=True)  # (before letting go, so that the next holder locks a file of its own)
        os.close(handle)


def _locked(lock: Path, named: str | Path, instead: str | None) -> int | None:
    """An open descriptor of ``lock``, locked by this process (``folder_lock``, for the folder ``named``); None where
    the file system has no locks; a one-line error naming the process that holds it, and advising ``instead``."""
    while True:
        handle = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.read(handle, 32).decode(errors="replace").strip()
            os.close(handle)
            if exc.errno in _CANNOT_LOCK:
                Path(lock).unlink(missing_ok=True)
                return None
            if exc.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise
            raise AttnclfError(f"{named} is being written by another attnclf process"
                               f"{f' (pid {holder})' if holder.isdigit() else ''}; wait for it to finish"
                               f"{f', or {instead}' if instead else ''}") from None
        # The holder before us deletes the file as it lets go: the lock is ours only if we locked the file there now.
        try:
            if os.stat(lock).st_ino == os.fstat(handle).st_ino:
                return handle
        except FileNotFoundError:
            pass
        os.close(handle)


def refuse_if_held(folder: str | Path, instead: str | None = ANOTHER_OUTPUT) -> None:
    """A one-line error if another process holds ``folder`` (``folder_lock``, advising ``instead``): a run it is
    training holds no model yet, and checks that read its files would call it unfinished and offer to continue or
    replace it. Only a folder with a lock file can be held, so none is created here (in a folder that cannot be
    written, that error would be the one named). Under torchrun its callers ask on rank 0 alone (this function does
    not look at the rank): the other ranks write nothing, and rank 0 may already hold it.

    >>> refuse_if_held("no/such/run")
    """
    if (Path(folder) / LOCK_FILE).is_file():
        with folder_lock(folder, instead):
            pass


@contextmanager
def adding_to_run(run_dir: str | Path) -> Iterator[Path]:
    """Hold a trained run's folder (``folder_lock``) while a command adds files of its own to it from the run's
    weights (calibrate's temperature.json, the report's report.html and plots/, faithfulness.json): a `train --resume`
    writing new weights there meanwhile, or a second such command, would leave a file that describes other weights
    (a temperature fitted to replaced ones) or two commands' files interleaved. A holder is refused in one line naming
    its pid before the run is read (one just begun has no config.json yet); then the run is checked
    (``check_run_dir``) and its folder proved writable, so a read-only run fails before the work, naming the folder.
    Within a hold of this process (`train` writing its report) it holds nothing more.

    >>> # with adding_to_run("runs/demo") as run_dir:
    >>> #     atomic_write_json(run_dir / TEMPERATURE_FILE, record)
    """
    refuse_if_held(run_dir, instead=None)  # (the run is the command's argument: no other --output to give)
    run_dir = prepare_output_dir(check_run_dir(run_dir))
    with folder_lock(run_dir, instead=None):
        yield run_dir


def remove_cut_short_writes(*folders: Path) -> None:
    """Delete the temporary files (``temporary_beside``'s ``.NAME.XXXXXXXX.tmp``) that writes a kill -9 cut short
    left in ``folders``, each as large as the file it was to become (a model's weights), which nothing would delete
    otherwise. Only for a folder this process holds (``folder_lock``): another's writes in progress look the same.

    >>> remove_cut_short_writes(Path("no/such/run"))
    """
    for folder in folders:
        for path in Path(folder).glob(".*.tmp"):
            if path.is_file():
                path.unlink(missing_ok=True)


def prepare_output_file(path: str | Path) -> Path:
    """``path``, a file the user named (``--output``), as a ``Path`` whose folder is made if needed and proved
    writable (``prepare_output_dir``): a folder given instead, or one that cannot be written, is a one-line error
    before the work that fills the file.

    >>> prepare_output_file("/")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: / is a folder; give --output a file name
    """
    refuse_folder_output(path)
    path = Path(path)
    prepare_output_dir(path.parent)
    return path


def refuse_folder_output(path: str | Path, flag: str = "--output") -> None:
    """A one-line error when ``path``, a file the user named with ``flag``, names a folder: one that exists, or a
    name ending in a path separator (``Path`` drops it: `explain -o page.png/` wrote the terminal's text to page.png).

    >>> refuse_folder_output("explained.png/")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: explained.png/ is a folder; give --output a file name
    """
    if Path(path).is_dir() or str(path).endswith(("/", os.sep)):
        raise AttnclfError(f"{path} is a folder; give {flag} a file name")


def refuse_output_read(output: str | Path, reads: str | Path | None, flag: str = "--output",
                       reads_flag: str = "--file") -> None:
    """A one-line error when ``output`` (named with ``flag``) is the file ``reads`` (named with ``reads_flag``),
    however either is spelled: writing it would lose the input it was made from.

    >>> refuse_output_read("texts.jsonl", "./texts.jsonl")
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: --output texts.jsonl is the --file it reads; give another file
    """
    if reads is not None and Path(output).resolve() == Path(reads).resolve():
        raise AttnclfError(f"{flag} {output} is the {reads_flag} it reads; give another file")


def refuse_existing_output(output: str | Path, overwrite: bool, flag: str = "--overwrite") -> None:
    """A one-line error when the file ``output`` exists and ``overwrite`` (named with ``flag``) was not given: a
    repeated command must not replace what an earlier one wrote (vectors that runs trained from, a page).

    >>> refuse_existing_output("/", overwrite=False)
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: / exists; give --overwrite to replace it
    """
    if Path(output).exists() and not overwrite:
        raise AttnclfError(f"{output} exists; give {flag} to replace it")


def write_output_file(path: str | Path, data: bytes) -> Path:
    """Write a file the user named (``--output``), atomically, its folder prepared as ``prepare_output_file`` does.

    >>> # write_output_file("pages/demo.html", page.encode())  # Path('pages/demo.html')
    """
    path = prepare_output_file(path)
    atomic_write_bytes(path, data)
    return path


def first_missing_folder(path: str | Path) -> Path | None:
    """The outermost folder of ``path`` that does not exist yet (None when ``path`` exists): what
    ``prepare_output_dir`` will create, so that a run failing before it starts can remove it again.

    >>> first_missing_folder("/")
    """
    missing = None
    for folder in (_real(path), *_real(path).parents):
        if folder.exists():
            return missing
        missing = folder
    return missing


def _real(path: str | Path) -> Path:
    """The folder ``path`` names, as the system reaches it: ``new/../mine`` is ``mine``, which a folder counted by
    its names' parents (``new`` missing) would take for a new one, and delete as such."""
    return Path(os.path.realpath(path))


def remove_empty_folders(path: Path, outermost: Path | None) -> None:
    """Remove ``path`` and its parents up to ``outermost`` (from ``first_missing_folder``), innermost first,
    while they are empty: another run may have written into one since.

    >>> # created = first_missing_folder("runs/new/demo")  # runs/new, where runs/ exists
    >>> # remove_empty_folders(Path("runs/new/demo"), created)  # after a run that wrote nothing: both gone
    """
    if outermost is None:
        return
    for folder in (_real(path), *_real(path).parents):
        if not folder.is_relative_to(outermost):
            return
        try:
            folder.rmdir()
        except OSError:  # not empty, or gone
            return


ENSEMBLE_FILE = "ensemble.json"  # in the folder `attnclf train --seeds` writes: members and test metrics


def read_json(path: Path) -> Any:
    """The JSON value in the file at ``path``; a file missing, or that is not JSON Python reads, is one line naming it.

    >>> read_json(Path("no/such/config.json"))
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/config.json: missing
    """
    try:
        text = _regular_file_text(Path(path))
    except (FileNotFoundError, NotADirectoryError):  # (NotADirectoryError: a folder in the path is a file)
        raise RunDirError(f"{path}: missing") from None
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON ({exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise RunDirError(f"{path}: {_json_problem(exc)}") from None
    except RecursionError:
        raise RunDirError(f"{path}: {_TOO_DEEP}") from None


def _regular_file_text(path: Path) -> str:
    """The UTF-8 text of the file at ``path``, a regular file (or a link to one): a run's file that links to a device
    would be read without end (/dev/zero), or a pipe waited on for ever, and a folder is no file either."""
    if path.exists() and not path.is_file():
        raise RunDirError(f"{path}: not a regular file (a folder, a device or a pipe)")
    return path.read_text(encoding="utf-8")


# Valid JSON that Python's decoder does not read (a file made to break it): RecursionError, and a ValueError that
# is not a JSONDecodeError for an integer past sys.get_int_max_str_digits().
_TOO_DEEP = "JSON nested too deep to read (thousands of arrays or objects)"


def _json_problem(exc: ValueError) -> str:
    """What ``json.loads`` found wrong, in a message's words.

    >>> _json_problem(json.JSONDecodeError("Expecting value", "x", 0))
    'not valid JSON (Expecting value: line 1 column 1 (char 0))'
    >>> _json_problem(ValueError("Exceeds the limit (4300 digits) for integer string conversion: value has 5001 "
    ...                          "digits"))
    'a number too long to read (Exceeds the limit (4300 digits) for integer string conversion)'
    """
    if isinstance(exc, json.JSONDecodeError):
        return f"not valid JSON ({exc})"
    # (Python's own advice, set_int_max_str_digits, is not the reader's to take)
    return f"a number too long to read ({str(exc).split(':')[0]})"


def check_run_dir(path: str | Path) -> Path:
    """``path``, or one clear line unless it holds a complete run of a format this attnclf reads.

    >>> check_run_dir("no/such/run")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: run directory no/such/run does not exist
    """
    read_run_config(path)
    return Path(path)


def read_run_config(path: str | Path) -> dict:
    """The config.json of ``path`` (``read_config``), once ``check_run_dir``'s checks pass: for a caller that
    checks the run and reads its config, the file read once.

    >>> # read_run_config("runs/demo")["model"]["name"]   # -> 'self-attn'
    """
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"run directory {path} {'is a file, not a folder' if path.exists() else 'does not exist'}")
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing and not (path / "config.json").exists() and (other := what_else_the_folder_is(path)):
        raise RunDirError(other)
    if "model.safetensors" in missing and is_resumable(path):  # (weights come as the first epoch ends)
        raise RunDirError(f"run directory {path} is unfinished: stopped within its first epoch, before any weights; "
                          f"`attnclf train --resume --output {shlex.quote(str(path))}` continues it")
    if len(missing) == len(REQUIRED_FILES) and not any((path / kept).exists()
                                                       for kept in (EARLIER_MODEL, EARLIER_MODEL_STAGING)):
        # (not "incomplete": nothing says a run was ever here; one being trained again keeps its model aside)
        raise RunDirError(f"{path} is not a run directory: it holds none of a run's files ({', '.join(missing)})")
    if missing:
        raise RunDirError(f"run directory {path} is incomplete: missing {', '.join(missing)}")
    return read_config(path)


def what_else_the_folder_is(path: Path) -> str | None:
    """What a folder without a run's config.json is, when it is something attnclf made, and what to give instead:
    a `train --seeds` folder still training, a reference baseline's scores, an ONNX export, a folder of runs; else
    None.

    >>> what_else_the_folder_is(Path("no/such/folder")) is None
    True
    """
    if member_folders(path, trained=True):
        return (f"{path} is a `train --seeds` folder whose training has not finished (no {ENSEMBLE_FILE}); "
                f"`attnclf train --resume` with the same flags and --output {path} finishes it")
    if (path / "result.json").is_file():
        return f"{path} holds a reference baseline's scores (result.json) from `attnclf compare`, not a trained model"
    if (path / "export.json").is_file():
        return (f"{path} is an ONNX export, not a run directory: predict from it or serve it with --backend onnx "
                f"(`attnclf predict {path} --backend onnx`, `attnclf serve {path} --backend onnx`) or "
                f"OnnxClassifier.load; give the other commands the run it came from")
    if held := _runs_inside(path):  # (`predict runs`)
        # (no "or several": predict, explain, serve, export and report take one run; evaluate alone averages several)
        return (f"{path} is not a run directory but holds one ({held[0]!r}): give {path / held[0]} instead"
                if len(held) == 1 else f"{path} is not a run directory but holds {len(held)} runs "
                f"({first_few(held)}): give one of them instead, such as {path / held[0]}")
    return None


def _runs_inside(folder: Path) -> list[str]:
    """The names of the folders in ``folder`` that hold a run's config.json, sorted; not the model a `train
    --overwrite` sets aside until it finishes (``folder`` is a run then), nor a folder that cannot be read.

    >>> _runs_inside(Path("no/such/folder"))
    []
    """
    try:
        inside = list(folder.iterdir())
    except OSError:
        return []
    # (os.path.isfile: Path.is_file raises for a folder without search permission, which would hide the others)
    return sorted(inner.name for inner in inside if inner.name not in (EARLIER_MODEL, EARLIER_MODEL_STAGING)
                  and os.path.isfile(inner / "config.json"))


def run_dir_list(run_dirs) -> list:
    """``run_dirs`` as a list: one folder given alone is one run, not the characters of its name; none is an error.

    >>> run_dir_list("runs/a"), run_dir_list(("runs/a", "runs/b"))
    (['runs/a'], ['runs/a', 'runs/b'])
    """
    if isinstance(run_dirs, (str, os.PathLike)):
        return [run_dirs]
    if run_dirs is None or isinstance(run_dirs, (bytes, bytearray, dict, set, frozenset)) or \
            not hasattr(run_dirs, "__iter__"):
        # (a dict would give its keys, a set an order of its own)
        raise AttnclfError(f"give a list of run folders, not {type(run_dirs).__name__}")
    run_dirs = list(run_dirs)
    if not run_dirs:
        raise AttnclfError("give at least one run folder")
    return run_dirs


def read_config(run_dir: str | Path) -> dict:
    """A run's config.json, refused in one line unless it is of this format and holds what its readers rely on.

    >>> # read_config("runs/demo")["model"]["name"]   # -> 'self-attn'
    """
    path = Path(run_dir) / "config.json"
    config = read_json(path)
    if not isinstance(config, dict):
        raise RunDirError(f"{path}: expected a JSON object, got {type(config).__name__}")
    version = config.get("format_version")
    if version != FORMAT_VERSION:
        raise RunDirError(f"run directory {path.parent} has format_version {shown(version)}; this attnclf reads "
                          f"{FORMAT_VERSION}")
    for section, key, kind in _CONFIG_SHAPE:
        value = config.get(section)
        if not isinstance(value, dict) or not isinstance(value.get(key), kind) or isinstance(value.get(key), bool):
            raise RunDirError(f"{path}: {section}.{key} is missing or not a JSON {_JSON_KINDS[kind]} (was the file "
                              f"edited?)")
    return config


# What the readers of a run's config.json rely on, beyond its format version.
_CONFIG_SHAPE = (("model", "name", str), ("model", "config", dict), ("model", "parameters", int),
                 ("settings", "tokenizer", dict), ("settings", "data", dict), ("settings", "train", dict))
_JSON_KINDS = {str: "string", dict: "object", int: "whole number"}


def load_weights(path: Path, like: torch.nn.Module | None = None) -> dict[str, torch.Tensor]:
    """The tensors of the safetensors file at ``path``. With ``like``, the model they are for, the names, shapes and
    dtypes its header declares are checked against the model's first, and a file that differs is refused in one line
    naming the first tensor that does, before any is read: one of other sizes may be gigabytes, and torch's
    ``load_state_dict`` would cast integer or boolean weights without a word.

    >>> # load_weights(Path("runs/demo/model.safetensors"), like=model)["token_embedding.weight"].shape
    """
    from safetensors import safe_open
    from safetensors.torch import load_file

    try:
        if like is not None:
            with safe_open(str(path), framework="pt") as header:
                slices = {name: header.get_slice(name) for name in header.keys()}
                declared = {name: (tuple(part.get_shape()), part.get_dtype()) for name, part in slices.items()}
        differences = [] if like is None else _differences(declared, like.state_dict())
        weights = {} if differences else load_file(str(path))
    except Exception as exc:  # safetensors raises its own error types for corrupt headers
        raise RunDirError(f"{path}: not a valid safetensors file ({exc})") from None
    if differences:
        more = len(differences) - 1
        raise RunDirError(f"{path} does not match config.json: {differences[0]}"
                          + (f"; and {more} more tensor{'s' if more > 1 else ''}" if more else ""))
    return weights


def _differences(declared: dict[str, tuple[tuple[int, ...], str]], expected: dict[str, torch.Tensor]) -> list[str]:
    """How the tensors a file ``declared`` (name: shape and safetensors dtype) differ from those a model
    ``expected``, one phrase a tensor, the model's order first.

    >>> import torch
    >>> _differences({"w": ((3, 2), "F32"), "b": ((2,), "I64"), "x": ((1,), "F32")},
    ...              {"w": torch.zeros(3, 4), "b": torch.zeros(2), "v": torch.zeros(1)})
    ['w is (3, 2) in the file, (3, 4) in the model', 'b is I64 in the file, F32 in the model', \
'the file lacks v', 'the file has x, which the model lacks']
    """
    differences, names = [], _dtype_names()
    for name, tensor in expected.items():
        dtype = names.get(tensor.dtype, str(tensor.dtype))
        if name not in declared:
            differences.append(f"the file lacks {name}")
        elif declared[name][0] != tuple(tensor.shape):
            differences.append(f"{name} is {_shape(declared[name][0])} in the file, {_shape(tensor.shape)} in the "
                               f"model")
        elif declared[name][1] != dtype:
            differences.append(f"{name} is {declared[name][1]} in the file, {dtype} in the model")
    # (names the file gives, the model never had: cut as a name is, in case one is a megabyte long)
    return differences + [f"the file has {shown(name, most=NAME_LENGTH, write=str)}, which the model lacks"
                          for name in declared if name not in expected]


def _shape(sizes) -> str:
    """``(3, 2)``; ``(3)`` for one dimension, as the sizes are written, not as a Python tuple."""
    return f"({', '.join(map(str, sizes))})"


def _dtype_names() -> dict:
    """torch's dtypes by the names safetensors' header gives them."""
    import torch

    return {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
            torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8",
            torch.bool: "BOOL"}


def read_temperature(run_dir: str | Path) -> float:
    """The temperature `attnclf calibrate` fitted (the run's temperature.json), or 1: the model's own probabilities.

    >>> read_temperature("no/such/run")
    1.0
    """
    path = Path(run_dir) / TEMPERATURE_FILE
    if not path.is_file():
        return 1.0
    saved = read_json(path)
    return checked_temperature(saved.get("temperature") if isinstance(saved, dict) else None, path)


def read_thresholds(run_dir: str | Path, label_names: list[str]) -> dict[str, float] | None:
    """A multi-label run's tuned thresholds (its thresholds.json), label by label in ``label_names``' order, or None
    when none were saved; one line naming the file and label unless each is a number from 0 to 1.

    >>> read_thresholds("no/such/run", ["sports"]) is None
    True
    """
    path = Path(run_dir) / THRESHOLDS_FILE
    if not path.is_file():
        return None
    saved = read_json(path)
    return checked_thresholds(saved.get("thresholds") if isinstance(saved, dict) else None, label_names, path)


def checked_thresholds(saved: Any, label_names: list[str], path: str | Path) -> dict[str, float]:
    """``saved``, the ``thresholds`` object read from ``path`` (a run's thresholds.json, or a multi-label ONNX export's
    export.json), as a threshold per label in ``label_names``' order; one line naming ``path`` and the label unless
    each is a number from 0 to 1.

    >>> checked_thresholds({"b": 0.3, "a": 1}, ["a", "b"], "export.json")
    {'a': 1.0, 'b': 0.3}
    """
    if not isinstance(saved, dict):
        raise RunDirError(f'{path}: expected {{"thresholds": {{label: threshold, ...}}}}')
    missing = [name for name in label_names if name not in saved]
    if missing:
        raise RunDirError(f"{path}: no threshold for label {shown(missing[0], most=NAME_LENGTH)}")
    # A probability's: NaN or one past 1 would never predict the label, one below 0 always would.
    wrong = next((name for name in label_names if isinstance(saved[name], bool) or
                  not isinstance(saved[name], (int, float)) or not 0 <= saved[name] <= 1), None)
    if wrong is not None:
        raise RunDirError(f"{path}: the threshold of label {shown(wrong, most=NAME_LENGTH)} must be a number from 0 "
                          f"to 1, got {shown(saved[wrong])}")
    return {name: float(saved[name]) for name in label_names}


def checked_temperature(value: Any, path: str | Path) -> float:
    """``value``, read from ``path``, as a temperature: a positive, finite number (probabilities are
    softmax(logits / temperature): 0 or NaN would make them NaN, a negative one turn them around); one line otherwise.

    >>> checked_temperature(2, "temperature.json"), checked_temperature(0.5, "export.json")
    (2.0, 0.5)
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise RunDirError(f"{path}: temperature must be a positive number, got {shown(value)}")
    return float(value)


def write_jsonl(path: Path, records: list[dict]) -> None:
    """Write ``records`` to ``path`` as JSON lines, one a record, atomically.

    >>> # write_jsonl(Path("runs/demo/history.jsonl"), [{"epoch": 1, "train_loss": 0.69}])
    """
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in records).encode())


def _read_jsonl(path: Path) -> list[tuple[int, Any]]:
    """The JSON value of each line of the file at ``path`` that is not blank, with the line's number; none if the file
    is missing."""
    if not Path(path).exists():
        return []
    try:
        text = _regular_file_text(Path(path))
    except UnicodeDecodeError as exc:
        raise RunDirError(f"{path}: not valid JSON lines ({exc})") from None
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            records.extend([(number, json.loads(line))] if line.strip() else [])
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{path}, line {number}, column {exc.colno}: not valid JSON ({exc.msg})") from None
        except ValueError as exc:
            raise RunDirError(f"{path}, line {number}: {_json_problem(exc)}") from None
        except RecursionError:
            raise RunDirError(f"{path}, line {number}: {_TOO_DEEP}") from None
    return records


# What a field of metrics.json or history.jsonl must be wherever a file holds it: (whether a value is one, what).
_NUMBER = (lambda value: real_number(value) is not None, "a number")
_NUMBER_OR_NULL = (lambda value: value is None or real_number(value) is not None, "a number or null")
_COUNT = (lambda value: whole_number(value) is not None and whole_number(value) >= 0, "a whole number >= 0")
_OBJECT = (lambda value: isinstance(value, dict), "an object")
_TEXT = (lambda value: isinstance(value, str), "a string")
_TRUE_OR_FALSE = (lambda value: isinstance(value, bool), "true or false")
_SQUARE_COUNTS = (lambda value: isinstance(value, list) and all(
    isinstance(row, list) and len(row) == len(value) and all(_COUNT[0](count) for count in row) for row in value),
    "a square table of counts")
# What a run scored: its test split, its validation split (it had no test data), or no texts (None: a refit of data
# without a test split, or the scikit-learn estimator's save). Runs from before it was recorded scored their test split.
_SPLITS = (None, "test", "validation")
_SPLIT = (lambda value: value in _SPLITS, f"one of {', '.join(map(str, _SPLITS))}")
_NUMBERS = (lambda value: isinstance(value, list) and all(_NUMBER[0](number) for number in value), "a list of numbers")
# The kinds ``check_fields`` takes, by what its messages call them.
_KINDS = {kind: (fits, kind) for fits, kind in (_NUMBER, _NUMBER_OR_NULL, _COUNT, _OBJECT, _TEXT, _TRUE_OR_FALSE,
                                                _NUMBERS)}


def _check_fields(where: str | Path, record: dict, kinds: dict, required: Iterable[str] = (), prefix: str = "") -> None:
    """One line naming ``where`` and the field when ``record`` lacks one of ``required`` (fields of ``kinds``) or
    holds one of ``kinds`` of another kind: its readers index and format them far from the file, where a KeyError or
    a TypeError would say nothing of which file was edited."""
    for name, (fits, kind) in kinds.items():
        if name not in record:
            if name in required:
                raise RunDirError(f"{where}: {prefix}{_named(name)} is missing (was the file edited?)")
        elif not fits(record[name]):
            raise RunDirError(f"{where}: {prefix}{_named(name)} is {shown(record[name])}, not {kind} (was the file "
                              f"edited?)")


def check_fields(where: str | Path, record: Any, kinds: dict, prefix: str = "") -> dict:
    """``record``, read from the file ``where`` (bookkeeping attnclf wrote: an experiment cell's experiment.json, the
    TF-IDF reference's result.json), refused in one line naming the file and the field unless it is an object
    holding every field of ``kinds``, each of its kind: "a number", "a number or null", "a whole number >= 0",
    "a string", "true or false", "an object", "a list of numbers", or a dict of the fields an object holds in turn.
    Its readers index and format the fields far from the file, where a KeyError or a TypeError would name none.

    >>> check_fields("experiment.json", {"cpu_seconds": None, "texts_per_second": 812.5},
    ...              {"cpu_seconds": "a number or null", "texts_per_second": "a number"})
    {'cpu_seconds': None, 'texts_per_second': 812.5}
    >>> check_fields("result.json", {"record": {"accuracy": "high"}}, {"record": {"accuracy": "a number"}})
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: result.json: record.accuracy is 'high', not a number (was the file edited?)
    """
    if not isinstance(record, dict):
        raise RunDirError(f"{where}: {shown(record)} is not an object (was the file edited?)")
    flat = {name: _OBJECT if isinstance(kind, dict) else _KINDS[kind] for name, kind in kinds.items()}
    _check_fields(where, record, flat, required=kinds, prefix=prefix)
    for name, kind in kinds.items():
        if isinstance(kind, dict):
            check_fields(where, record[name], kind, prefix=f"{prefix}{_named(name)}.")
    return record


def _named(key: str) -> str:
    """A field's name in a message: ``key`` as the file holds it, on one line and cut past ``NAME_LENGTH`` (a class's
    label names its per_class field, and a label may hold a line break, or a whole text).

    >>> _named("neg\\native"), len(_named("n" * 5000))
    ('neg ative', 103)
    """
    return shown(key, most=NAME_LENGTH, write=str)


def read_metrics(run_dir: str | Path, *, tables: bool = False, costs: bool = False, scored: bool = False) -> dict:
    """A run's metrics.json, refused in one line naming the file and field unless each field of it attnclf reads is of
    its kind, and it holds the fields its reader uses: a run that scored texts, the scores `train` and `refit` print;
    one that scored none (``split`` null), the note saying why. With ``tables``, the per-class table, averages and
    confusion matrix (a multi-label run's tables) the report shows; with ``costs``, the training time and parameter
    count `compare` tabulates; with ``scored``, scores at all (a compare cell always scored texts).

    >>> read_metrics("no/such/run")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/run/metrics.json: missing
    >>> # read_metrics("runs/demo", tables=True)["per_class"]["positive"]["f1"]
    """
    path = Path(run_dir) / "metrics.json"
    metrics = check_fields(path, read_json(path), {})
    _check_fields(path, metrics, {"split": _SPLIT, "multi_label": _TRUE_OR_FALSE})
    multi, unscored = metrics.get("multi_label", False), metrics.get("split", "test") is None
    if unscored and scored:
        raise RunDirError(f"{path}: split is None: the run scored no texts (was the file edited?)")
    required = {"note"} if unscored else {"macro_f1", *(("micro_f1", "subset_accuracy", "hamming_loss") if multi else
                                                      ("accuracy",))}
    if tables and not unscored:
        required |= _metrics_tables(multi)
    if costs:
        required |= {"train_seconds", "parameters"}
    _check_fields(path, metrics, _metrics_kinds(multi), required)
    per_class = {"precision": _NUMBER, "recall": _NUMBER, "f1": _NUMBER, "support": _COUNT}
    per_class |= {"threshold": _NUMBER, "roc_auc": _NUMBER_OR_NULL} if multi else {}
    for name, scores in metrics.get("per_class", {}).items():
        if not isinstance(scores, dict):
            raise RunDirError(f"{path}: per_class.{_named(name)} is {shown(scores)}, not an object (was the file "
                              f"edited?)")
        # (average precision, and a multi-label run's calibration error and count of texts given each label, are
        # optional: runs scored before they were measured lack them)
        _check_fields(path, scores, per_class | {"average_precision": _NUMBER_OR_NULL}
                      | ({"ece": _NUMBER_OR_NULL, "predicted": _COUNT} if multi else {}), per_class,
                      prefix=f"per_class.{_named(name)}.")
    at_half = metrics.get("at_0.5", {}) if multi else {}  # (a multi-label run's scores at threshold 0.5)
    _check_fields(path, at_half, dict.fromkeys(at_half, _NUMBER), prefix="at_0.5.")
    return metrics


def _averages(multi: bool) -> tuple[str, ...]:
    """The averaged precision, recall and F1 metrics.json holds."""
    kinds = ("micro", "macro", "weighted", "samples") if multi else ("macro", "weighted")
    return tuple(f"{average}_{score}" for average in kinds for score in ("precision", "recall", "f1"))


def _metrics_kinds(multi: bool) -> dict:
    """What each field of a (``multi``-label) run's metrics.json that attnclf reads must be."""
    return {"accuracy": _NUMBER, "macro_f1": _NUMBER, "roc_auc": _NUMBER_OR_NULL, "ece": _NUMBER_OR_NULL,
            "log_loss": _NUMBER_OR_NULL,
            "average_precision": _NUMBER_OR_NULL,
            "train_seconds": _NUMBER, "parameters": _COUNT, "num_examples": _COUNT, "per_class": _OBJECT,
            **dict.fromkeys(_averages(multi), _NUMBER),
            **({"micro_roc_auc": _NUMBER_OR_NULL, "micro_average_precision": _NUMBER_OR_NULL,
                "subset_accuracy": _NUMBER, "hamming_loss": _NUMBER,
                "at_0.5": _OBJECT} if multi else {"confusion_matrix": _SQUARE_COUNTS}), "note": _TEXT}


def _metrics_tables(multi: bool) -> set[str]:
    """The fields of a (``multi``-label) run's metrics.json that the report's overview and tables show."""
    return {"accuracy", "macro_f1", "per_class", *_averages(multi),
            *(("roc_auc", "micro_roc_auc", "subset_accuracy", "hamming_loss") if multi else
              ("num_examples", "confusion_matrix"))}


# What each field of history.jsonl that attnclf reads must be; any other val_ field is a validation metric, a number
# or null (ROC AUC where validation holds one class).
_HISTORY_KINDS = {"epoch": _COUNT, "train_loss": _NUMBER, "train_accuracy": _NUMBER, "val_loss": _NUMBER,
                  "val_accuracy": _NUMBER, "lr": _NUMBER, "schedule_epochs": _COUNT, "seconds": _NUMBER}


def read_history(run_dir: str | Path, needs: Iterable[str] = ()) -> list[dict]:
    """A run's history.jsonl, one record per epoch (none without the file: no epochs were recorded), refused in one
    line naming the file, line and field unless each line is an object whose fields attnclf reads are of their kind,
    holding ``needs`` (what the caller reads of every epoch: epoch, train_loss, train_accuracy, lr, schedule_epochs or
    seconds) and, where the first line holds a validation loss or accuracy, that too (a run validates every epoch or
    none).

    >>> read_history("no/such/run")
    []
    >>> # [record["train_loss"] for record in read_history("runs/demo", needs=["train_loss"])]
    """
    path = Path(run_dir) / "history.jsonl"
    lines = _read_jsonl(path)
    history = [record for _, record in lines]
    validated = {"val_loss", "val_accuracy"} & set(history[0]) if history and isinstance(history[0], dict) else set()
    for number, record in lines:
        if not isinstance(record, dict):
            raise RunDirError(f"{path}, line {number}: {shown(record)} is not an object (was the file edited?)")
        metrics = {name: _NUMBER_OR_NULL for name in record if name.startswith("val_") and name not in _HISTORY_KINDS}
        _check_fields(f"{path}, line {number}", record, _HISTORY_KINDS | metrics, validated.union(needs))
    return history


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time: whether a file is still the one a run recorded.

    >>> len(file_sha256(__file__))
    64
    """
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


Loaded = TypeVar("Loaded")


def loaded_unchanged(files: list[Path], load: Callable[[], Loaded],
                     changed: Callable[[Path], str]) -> tuple[Loaded, list[str | None]]:
    """What ``load`` returns, and the sha256 of each of ``files`` (the weights it reads), taken before the load and
    again after: the load holds no lock (a run may be read-only), so a `train --resume` or `--overwrite` may replace
    or set aside a file meanwhile, refused in one line (``changed(file)``), where a checksum taken after alone could
    name weights other than those loaded. None for a file that is no regular file before the load: the load names
    what is wrong (reading a link to /dev/zero would never end).

    >>> loaded_unchanged([Path(__file__)], lambda: "model", lambda file: f"{file} changed")[0]
    'model'
    """
    def fingerprints() -> list[str | None]:
        return [file_sha256(file) if file.is_file() else None for file in files]

    before = fingerprints()
    loaded = load()
    replaced = next((file for file, old, new in zip(files, before, fingerprints()) if old != new), None)
    if replaced is not None:
        raise AttnclfError(changed(replaced))
    return loaded, before


def member_folders(folder: str | Path, trained: bool = False) -> list[Path]:
    """The ``seed-S`` member folders of a `train --seeds` folder, by seed (with ``trained``: those holding a
    config.json). Only ``seed-`` and a whole number: a refit beside them (``seed-0-refit``) is not a member.

    >>> member_folders("no/such/folder")
    []
    """
    members = [path for path in Path(folder).glob("seed-*") if re.fullmatch(r"seed-\d+", path.name) and path.is_dir()]
    return sorted((path for path in members if not trained or (path / "config.json").is_file()),
                  key=lambda path: int(path.name[5:]))


def is_resumable(run_dir: str | Path) -> bool:
    """Whether an unfinished run got as far as a whole checkpoint (its checkpoint/state.json is written last), which
    `train --resume` continues.

    >>> is_resumable("no/such/run")
    False
    """
    return (Path(run_dir) / "checkpoint" / "state.json").is_file()


def unfinished_warning(run_dir: str | Path) -> str | None:
    """The warning for a command about to use ``run_dir``'s weights when the run has not finished training, or None:
    an interrupted run loads (its best weights so far) and is worth using, but not unknowingly.

    >>> unfinished_warning("no/such/run") is None
    True
    """
    run_dir = Path(run_dir)
    if not (run_dir / "model.safetensors").is_file() or (run_dir / "metrics.json").is_file():
        return None
    how = (f"`attnclf train --resume --output {shlex.quote(str(run_dir))}` continues it" if is_resumable(run_dir)
           else "it stopped during its first checkpoint: train it again")
    return f"warning: {run_dir} has not finished training; these are its best weights so far ({how})"


def kept_earlier_models(output: str | Path, ensemble: bool) -> list[Path]:
    """The finished models that a `train --overwrite` into ``output`` (with ``ensemble``: a `train --seeds` folder,
    one per member) set aside and keeps, as an interrupted or failed replacement leaves them: ``earlier-model/``, or
    ``earlier-model.partial/`` where setting it aside was cut short.

    >>> kept_earlier_models("no/such/run", ensemble=False)
    []
    """
    kept = []
    for run in member_folders(output) if ensemble else [Path(output)]:
        # (.partial first: setting the model aside failed before earlier-model/, older, was replaced by it)
        kept += [earlier for earlier in (run / EARLIER_MODEL_STAGING, run / EARLIER_MODEL) if earlier.is_dir()][:1]
    return kept


def check_output_folder(output: str | Path, ensemble: bool, replace: bool) -> None:
    """Refuse an output folder that holds the other kind of run (a single run's files beside `train --seeds` members
    (``ensemble``) would load as one model in Python and as the ensemble on the command line), or a trained model
    unless ``replace``: a repeated command must not delete a finished run before its own is trained.

    >>> check_output_folder("no/such/run", ensemble=False, replace=False)  # nothing there: nothing to lose
    """
    output = Path(output)
    members = (output / ENSEMBLE_FILE).is_file() or bool(member_folders(output, trained=True))
    if ensemble and (output / "config.json").is_file():
        raise AttnclfError(f"{output} holds a single run; train --seeds into another --output")
    if not ensemble and members:
        raise AttnclfError(f"{output} holds a `train --seeds` ensemble; train a single run into another --output")
    runs = member_folders(output) if ensemble else [output]
    # A model an interrupted or failed --overwrite set aside is a trained model too (a run without --overwrite
    # would delete it when it finishes); weights from a first checkpoint cut short are not, as nothing resumes them.
    set_aside = any((run / where / "model.safetensors").is_file() for run in runs
                    for where in (EARLIER_MODEL, EARLIER_MODEL_STAGING))
    finished = any((run / "model.safetensors").is_file() and (run / "metrics.json").is_file() for run in runs)
    unfinished = any(_unfinished(run) for run in runs)
    if (set_aside or finished or unfinished) and not replace:
        what = ("trained members (--resume keeps them and adds new seeds)" if ensemble else "a trained model" if
                (output / "metrics.json").is_file() else "an unfinished run (--resume continues it)" if
                unfinished else "a trained model an interrupted --overwrite set aside")
        raise AttnclfError(f"{output} holds {what}; add --overwrite to replace {'them' if ensemble else 'it'}, or "
                           f"give another --output")


def _unfinished(run: Path) -> bool:
    """Whether ``run`` holds a run that `train --resume` continues: a checkpoint, and its weights or (a checkpoint
    within the first epoch, before any weights) its config.json, which say the checkpoint is of this folder's run."""
    return is_resumable(run) and ((run / "model.safetensors").is_file() or (run / "config.json").is_file())


def check_label_names(labels: Any, classes: int, path: Path) -> list[str]:
    """``labels`` (read from ``path``) if they are ``classes`` distinct names; a one-line error otherwise.

    >>> check_label_names(["neg", "pos"], 2, Path("labels.json"))
    ['neg', 'pos']
    """
    if (not isinstance(labels, list) or len(labels) != classes or not all(isinstance(label, str) for label in labels)
            or len(set(labels)) != len(labels)):
        raise RunDirError(f"{path}: expected {classes} distinct label names")
    return labels


def is_multi_label(config: dict) -> bool:
    """Whether the run whose config.json this is predicts a label set per text.

    >>> is_multi_label({"settings": {"data": {"multi_label": True}}}), is_multi_label({})
    (True, False)
    """
    return bool(config.get("settings", {}).get("data", {}).get("multi_label", False))


def refuse_estimator_run(config: dict, lacks: str, run_dir: str | Path | None = None) -> None:
    """One line saying the run is a fitted ``AttentionTextClassifier`` that ``save`` wrote, if it is one: it records no
    data, so it has no ``lacks``. ``run_dir`` names it; without it, "this run" (not the folder it was saved in, which
    may have moved since).

    >>> refuse_estimator_run({"trained_by": ESTIMATOR}, "test texts", "runs/fitted")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: runs/fitted was saved by the scikit-learn estimator (AttentionTextClassifier.save): \
it has no recorded test texts
    """
    if config.get("trained_by") == ESTIMATOR:
        raise RunDirError(f"{run_dir if run_dir is not None else 'this run'} was saved by the scikit-learn estimator "
                          f"(AttentionTextClassifier.save): it has no recorded {lacks}")

