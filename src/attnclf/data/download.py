"""Getting a real corpus onto disk: checksum-verified downloads into the user cache.

Sources never download by themselves. A caller that may use the network (the
CLI's ``--download``) calls ``ensure_available`` first; ``load`` then finds the
files in the user cache, which ``candidate_dirs`` always searches.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import re
import tarfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import DataError
from ..rundir import file_sha256, first_missing_folder, publish, remove_empty_folders, temporary_beside
from .registry import get_source, user_cache_dir


@dataclass(frozen=True)
class Remote:
    """A public file a source can be built from.

    ``path`` is where the file goes, relative to the user cache (or any data
    folder), laid out as the source's ``locate`` expects.
    """

    url: str
    path: str
    sha256: str


def not_found(name: str, data_dirs: list[Path], holding: str) -> DataError:
    """The error a source raises when none of ``data_dirs`` holds its files.

    Every command honours $ATTNCLF_DATA_DIR; only some take --data-dir and --download.

    >>> print(not_found("imdb", [Path("/a")], "imdb/aclImdb_v1.tar.gz"))
    imdb: not found in /a; set ATTNCLF_DATA_DIR (or --data-dir) to the folder holding imdb/aclImdb_v1.tar.gz, or use --download
    """
    where = ", ".join(str(d) for d in data_dirs) or "no folder"
    return DataError(f"{name}: not found in {where}; set ATTNCLF_DATA_DIR (or --data-dir) to the folder holding "
                     f"{holding}, or use --download")


def missing_files(name: str, folder: Path, missing: list[str], remotes: tuple[Remote, ...], holds: str) -> DataError:
    """The error a source raises when the copy it found lacks some of its files (``holds``: what that copy has).

    Each missing file is named with where it comes from: its own download, else the archive that holds it; one
    there but empty (see ``present``) is said to be.

    >>> error = missing_files("x", Path("/d/x"), ["b.txt"], (Remote("https://h/b.txt", "x/b.txt", "ab" * 32),),
    ...                       holds="only a.txt")
    >>> print(str(error).replace(str(user_cache_dir()), "CACHE"))
    x: /d/x/b.txt is missing (that folder has only a.txt); pass --download to fetch the dataset into CACHE/x, or put b.txt from https://h/b.txt (sha256 abababababababababababababababababababababababababababababababab) in /d/x
    """
    own = {Path(remote.path).name: remote for remote in remotes}
    where = [f"{file} from {own[file].url} (sha256 {own[file].sha256})" if file in own else
             f"{file} (inside {remotes[0].url})" for file in missing]
    missing_paths = ", ".join(f"{folder / file}{' (empty)' if (folder / file).is_file() else ''}" for file in missing)
    return DataError(f"{name}: {missing_paths} {'is' if len(missing) == 1 else 'are'} missing (that folder has "
                     f"{holds}); pass --download to fetch the dataset into "
                     f"{user_cache_dir() / Path(remotes[0].path).parts[0]}, or put {', '.join(where)} in {folder}")


def lacking(folder: Path, files: Iterable[str]) -> list[str]:
    """Those of ``files`` that ``folder`` lacks, an empty one counting as missing (``present``).

    >>> lacking(Path("/nowhere"), ["train.csv"])
    ['train.csv']
    """
    return [file for file in files if not present(folder / file)]


def refuse_partial(name: str, folder: Path, files: tuple[str, ...], remotes: tuple[Remote, ...]) -> None:
    """Raise ``missing_files`` naming those of ``files`` that ``folder`` lacks, if any: before any of it is read,
    a partial copy says what it lacks and how to get it.

    >>> refuse_partial("x", Path("/nowhere"), (), ())  # nothing to lack
    """
    missing = lacking(folder, files)
    if missing:
        held = [file for file in files if file not in missing]
        raise missing_files(name, folder, missing, remotes, holds=f"only {', '.join(held)}" if held else "none of them")


def damaged(name: str, path: Path, problem: str, remote: Remote) -> DataError:
    """The error a source raises when the copy it found cannot be read whole (an archive cut short, a folder missing a
    split): the problem, then how to replace it. (``--download`` fetches only where no copy is found.)

    >>> print(damaged("x", Path("/d/x.tar.gz"), "not a gzip file", Remote("https://h/x.tar.gz", "x/x.tar.gz", "00")))
    x: cannot read /d/x.tar.gz: not a gzip file; fetch it again from https://h/x.tar.gz, or move it away and use --download, or set --data-dir to a folder holding a whole x/x.tar.gz
    """
    return DataError(f"{name}: cannot read {path}: {problem}; fetch it again from {remote.url}, or move it away and use "
                     f"--download, or set --data-dir to a folder holding a whole {remote.path}")


def tar_files(archive: Path, pattern: re.Pattern[str], name: str,
              remote: Remote) -> Iterator[tuple[re.Match[str], bytes]]:
    """Each file of the tar.gz ``archive`` whose name (less a leading "./") ``pattern`` matches whole: the match and
    the file's bytes, in one streaming pass, nothing extracted. An archive that cannot be read through (cut short, not
    a gzip file) is ``damaged``, naming source ``name`` and the ``remote`` to fetch it from again.

    >>> # from attnclf.data.imdb import REMOTES
    >>> # match, data = next(tar_files(Path("imdb/aclImdb_v1.tar.gz"), re.compile("aclImdb/README"), "imdb",
    >>> #                                REMOTES["imdb"][0]))
    >>> # match.group(), len(data)  # -> ('aclImdb/README', 4038)
    """
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                match = pattern.fullmatch(member.name.removeprefix("./"))
                if match and member.isfile():
                    yield match, tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise damaged(name, archive, str(exc), remote) from None


def present(path: Path) -> bool:
    """Whether ``path`` is a file with something in it: an empty one (a copy cut short before its first byte) counts
    as missing.

    >>> present(Path("/nowhere/train.csv"))
    False
    """
    return path.is_file() and path.stat().st_size > 0


def first_complete(candidates: list[Path], usable: Callable[[Path], bool],
                   complete: Callable[[Path], bool]) -> Path | None:
    """The first of ``candidates`` that is ``complete``, else the first ``usable`` one (a copy with some files,
    whose loader then names what it lacks), else None: a whole copy in a later folder wins over a partial one.

    >>> first_complete([Path("a"), Path("b"), Path("c")], lambda p: p.name != "a", lambda p: p.name == "c")
    PosixPath('c')
    """
    usable_ones = [path for path in candidates if usable(path)]
    return next((path for path in usable_ones if complete(path)), usable_ones[0] if usable_ones else None)


def fetch(url: str, dest: str | Path, sha256: str) -> Path:
    """Download ``url`` to ``dest`` and check its sha256; a verified ``dest`` is kept as is.

    The file appears at ``dest`` only once complete and verified, so an
    interrupted or corrupt download never looks like data; nor do the folders
    made for it, removed again when the download fails.

    >>> # fetch("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
    >>> #       user_cache_dir() / "imdb" / "aclImdb_v1.tar.gz",
    >>> #       "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe")
    >>> # -> PosixPath('/home/me/.cache/attnclf/imdb/aclImdb_v1.tar.gz')
    """
    dest = Path(dest)
    if dest.is_file() and file_sha256(dest) == sha256:
        return dest
    created = first_missing_folder(dest.parent)
    try:
        _download(url, dest, sha256)
    except BaseException:  # a Ctrl-C too
        # An empty cache folder would pass for a copy of the dataset; only empty ones go, so a file another process
        # put there meanwhile stays, and so does every folder that was there before.
        remove_empty_folders(dest.parent, created)
        raise
    return dest


def _download(url: str, dest: Path, sha256: str) -> None:
    """``fetch``'s download into ``dest``, verified, through a temporary file removed whatever happens."""
    tmp = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = temporary_beside(dest, suffix=".part")
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=60) as response:
            while chunk := response.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
        if digest.hexdigest() != sha256:
            raise DataError(
                f"{url}: sha256 is {digest.hexdigest()}, expected {sha256}; the download was discarded"
            )
        publish(tmp, dest)
    except OSError as exc:  # urllib's URLError and socket timeouts are OSErrors too
        raise DataError(f"could not download {url} to {dest}: {getattr(exc, 'reason', exc)}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def ensure_available(name: str, data_dirs: list[Path], download: bool = False) -> Path:
    """Where source ``name`` reads its files from, downloading them first if allowed.

    Files found in ``data_dirs`` win. Only when they are missing (or, by the
    source's ``is_complete``, incomplete) and ``download`` is true are those of
    the module's ``REMOTES[name]`` the user cache lacks (or holds empty) fetched
    into it; the files it holds are kept.

    >>> from attnclf.data.registry import candidate_dirs
    >>> # ensure_available("imdb", candidate_dirs("/work/shared/datasets"))
    >>> # -> PosixPath('/work/shared/datasets/imdb/aclImdb_v1.tar.gz')
    """
    source = get_source(name)
    # Remote files are declared next to the loader that reads them.
    module = inspect.getmodule(source.load)
    remotes: tuple[Remote, ...] = getattr(module, "REMOTES", {}).get(name, ())
    found = source.locate(data_dirs)
    if found is not None and (not download or source.is_complete(found)):
        return found
    if not download:
        raise not_found(name, data_dirs, remotes[0].path if remotes else name)
    if not remotes:
        raise DataError(f"{name}: no public download is known; put its files in a --data-dir folder")
    cache = user_cache_dir()
    for remote in remotes:
        # A file already there is the user's copy, trusted unchecked: a copy made another way can hold the same
        # data as the original in other bytes (the shared IMDB and 20 Newsgroups are rebuilt archives, whose
        # sha256s differ), so a checksum cannot tell it from a damaged one, and fetching it again would replace it.
        if present(cache / remote.path):
            continue
        try:
            fetch(remote.url, cache / remote.path, remote.sha256)
        except DataError as exc:  # offline, or a mirror that changed: the other way to the same file
            raise DataError(f"{name}: {exc}; to use a copy fetched another way, put it there, or set "
                            f"ATTNCLF_DATA_DIR (or --data-dir) to the folder holding {remote.path}") from None
    found = source.locate([cache])
    if found is None:
        raise DataError(f"{name}: downloaded into {cache}, but the files are not where the loader looks")
    return found
