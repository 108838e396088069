"""An on-disk, memory-mapped token cache: tokenise a corpus once, train from it in bounded memory.

A cache directory holds one corpus encoded by one tokenizer:

```
<root>/<key>/
  meta.json          key parts, counts, label names, token dtype
  ids.bin            every text's token ids, concatenated (uint32)
  offsets.npy        text i's ids are ids[offsets[i]:offsets[i + 1]]
  texts.bin          the UTF-8 texts, concatenated (for examples and reports)
  text_offsets.npy   byte offsets into texts.bin, as for ids
  labels.npy         label indices (int32)
```

It is built chunk by chunk from a stream of ``(text, label)`` records, so
the corpus is never in memory, into a temporary directory renamed into place
when complete: a cache directory that exists is whole. Its ``key`` hashes the
data's content (a file's size and sha256, ``file_identity``, or a dataset's
name, split and the sha256 of its texts and labels), the tokenizer's own JSON
and its cleaning and truncation settings, and the label names; any change
gives a new key, and a run with an unchanged key reuses the directory.

The root is ``$ATTNCLF_CACHE_DIR``, else ``tokens/`` in the user cache
(``$ATTNCLF_CACHE`` or ``~/.cache/attnclf``).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from array import array
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from ..data.base import TextDataset
from ..errors import DataError
from ..rundir import atomic_write_json, file_sha256, naming
from .tokenizer import Tokenizer

# A new format is a new key, so no cache built the old way is reused. 2: a text's literal "<pad>" or "<unk>" is
# stored as its words, not the special ids (format 1), as the tokenizer now encodes it; its JSON, in the key, is the
# same either way.
CACHE_FORMAT = 2
CHUNK_TEXTS = 10_000  # texts encoded per call: large enough for encode_batch, small enough to forget


def cache_root(root: str | Path | None = None) -> Path:
    """Where token caches live: ``root``, else ``$ATTNCLF_CACHE_DIR``, else ``<user cache>/tokens``."""
    if root:
        return Path(root)
    if os.environ.get("ATTNCLF_CACHE_DIR"):
        return Path(os.environ["ATTNCLF_CACHE_DIR"])
    from ..data.registry import user_cache_dir

    return user_cache_dir() / "tokens"


def file_identity(path: str | Path) -> dict:
    """A file's identity for a cache key: its size and the sha256 of its bytes.

    Its content, not its path and modification time: a file rewritten at the same size within one tick of a coarse
    clock (a second on some file systems) would otherwise reuse the cache of what it held before, and a copied, moved
    or touched one be encoded again. Hashing streams the file at about 1 s of CPU a GB, under a tenth of what the
    pass over its labels takes on every run (BENCHMARKS.md, "Token cache key").

    >>> file_identity(__file__)["sha256"] == file_sha256(__file__)
    True
    """
    return {"size": Path(path).stat().st_size, "sha256": file_sha256(path)}


def cache_key(parts: dict) -> str:
    """A short, stable hash of JSON-serialisable ``parts``.

    >>> cache_key({"a": 1, "b": [2]}) == cache_key({"b": [2], "a": 1})
    True
    """
    canonical = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


class MappedSequences(Sequence):
    """Variable-length rows of a flat memory-mapped array, optionally seen through an index.

    ``seqs[i]`` is a NumPy view (nothing is copied until it is used), and
    ``lengths`` comes from the offsets without touching the rows.

    >>> seqs = MappedSequences(np.array([5, 6, 7, 8]), np.array([0, 3, 4]))
    >>> seqs[0].tolist(), len(seqs), seqs.subset([1]).lengths.tolist()
    ([5, 6, 7], 2, [1])
    """

    def __init__(self, flat: np.ndarray, offsets: np.ndarray, index: np.ndarray | None = None):
        self.flat = flat
        self.offsets = offsets
        self.index = np.arange(len(offsets) - 1) if index is None else np.asarray(index, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        row = self.index[i]
        return self.flat[self.offsets[row] : self.offsets[row + 1]]

    @property
    def lengths(self) -> np.ndarray:
        starts = np.asarray(self.offsets[self.index])
        return np.asarray(self.offsets[self.index + 1]) - starts

    def subset(self, indices: Sequence[int]) -> "MappedSequences":
        """The rows at ``indices`` of these, as another view of the same array (of this class: texts stay texts)."""
        return type(self)(self.flat, self.offsets, self.index[np.asarray(indices, dtype=np.int64)])


class MappedTexts(MappedSequences):
    """``MappedSequences`` over UTF-8 bytes: ``texts[i]`` decodes one text on demand.

    >>> texts = MappedTexts(np.frombuffer("goodbad".encode(), dtype=np.uint8), np.array([0, 4, 7]))
    >>> texts[1], texts.subset([1, 0])[:]
    ('bad', ['bad', 'good'])
    """

    def __getitem__(self, i):
        if isinstance(i, slice):  # (the base reads each row through this method: they come decoded)
            return super().__getitem__(i)
        return bytes(super().__getitem__(i)).decode("utf-8")


def encode_packed(tokenizer: Tokenizer, texts: Sequence[str], max_len: int | None = None,
                  chunk_texts: int = CHUNK_TEXTS, done: Callable[[int], None] | None = None) -> MappedSequences:
    """``tokenizer.encode(texts, max_len)`` packed into one array of 4-byte ids, ``chunk_texts`` texts encoded at a
    time (``done(count)`` after each chunk, for a progress bar): a list of Python ints per text, and the tokenizer's
    objects for every text at once, made a 900,000-text training run's peak 6.2 GB before its first step, 1.4 GB
    this way (BENCHMARKS.md).

    >>> from attnclf.text import TokenizerConfig
    >>> tokenizer = Tokenizer.train(["a b c"], TokenizerConfig(min_frequency=1))
    >>> [ids.tolist() for ids in encode_packed(tokenizer, ["a b", "c"])]
    [[2, 3], [4]]
    """
    pieces, lengths = [], [np.zeros(1, dtype=np.int64)]
    for start in range(0, len(texts), chunk_texts):
        encoded = tokenizer.encode(texts[start:start + chunk_texts], max_len)
        lengths.append(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        pieces.append(np.fromiter(chain.from_iterable(encoded), dtype=np.uint32, count=int(lengths[-1].sum())))
        if done is not None:
            done(len(encoded))
    flat = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint32)
    return MappedSequences(flat, np.cumsum(np.concatenate(lengths)))


@dataclass
class CachedDataset(TextDataset):
    """A ``TextDataset`` whose texts and token ids stay on disk; ``sequences[i]`` are ``texts[i]``'s ids.

    ``labels`` is an in-memory int array (4 bytes a text). ``subset`` returns
    another view, so carving a validation split copies no text. ``key``: the ``cache_key`` of the data it was cached
    from (a file's ``file_identity`` and how it is read, or a dataset's split), which its parts keep.
    """

    sequences: MappedSequences | None = None
    key: str | None = None

    def subset(self, indices: Sequence[int], split: str | None = None) -> "CachedDataset":
        indices = np.asarray(indices, dtype=np.int64)
        return CachedDataset(
            texts=self.texts.subset(indices),
            labels=np.asarray(self.labels)[indices],
            label_names=list(self.label_names),
            split=split or self.split,
            name=self.name,
            groups=None if self.groups is None else [self.groups[i] for i in indices],
            sequences=self.sequences.subset(indices),
            key=self.key,
        )


class TokenCache:
    """One built cache directory, opened read-only with memory maps.

    >>> # cache = TokenCache.open_or_build(records, tokenizer, ["neg", "pos"], {"path": "train.jsonl"})
    >>> # cache.dataset("train").sequences[0]  # the first text's ids, read from disk
    """

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        try:
            self.meta = json.loads((self.directory / "meta.json").read_text(encoding="utf-8"))
            self.label_names: list[str] = self.meta["label_names"]
            self.labels = np.load(self.directory / "labels.npy")
            self.sequences = MappedSequences(_map(self.directory / "ids.bin", self.meta["dtype"]),
                                             np.load(self.directory / "offsets.npy", mmap_mode="r"))
            self.texts = MappedTexts(_map(self.directory / "texts.bin", "uint8"),
                                     np.load(self.directory / "text_offsets.npy", mmap_mode="r"))
        except (OSError, ValueError, KeyError) as exc:  # a cache damaged after it was built (it is built whole)
            raise DataError(f"{self.directory}: damaged token cache ({exc}); delete the folder to rebuild it") from None
        if not len(self.labels) == len(self.sequences) == len(self.texts) == self.meta["texts"]:
            raise DataError(f"{self.directory}: damaged token cache (counts disagree); delete the folder to rebuild it")

    def __len__(self) -> int:
        return len(self.labels)

    def dataset(self, split: str, name: str = "", groups: list[str] | None = None) -> CachedDataset:
        """The whole cache as a dataset of ``split``; carve parts of it with ``subset``."""
        data = self.meta.get("key_parts", {}).get("data")
        return CachedDataset(self.texts, self.labels, list(self.label_names), split, name, groups,
                             sequences=self.sequences, key=None if data is None else cache_key(data))

    @classmethod
    def open_or_build(cls, records: Callable[[], Iterable[tuple[str, int]]], tokenizer: Tokenizer,
                      label_names: list[str], identity: dict, root: str | Path | None = None,
                      log: Callable[[str], None] = print) -> "TokenCache":
        """The cache of ``records()`` encoded by ``tokenizer``: reused when its key exists, else built.

        ``records`` is called only to build, and must stream ``(text, label index)``
        pairs; ``identity`` names the data (``file_identity``, or a dataset's name
        and files), so changed data gets a new key.
        """
        parts = {"format": CACHE_FORMAT, "data": identity, "tokenizer": tokenizer.backend.to_str(),
                 "settings": tokenizer.config.keyed(), "label_names": list(label_names)}
        directory = cache_root(root) / cache_key(parts)
        if (directory / "meta.json").is_file():
            log(f"reusing token cache {directory}")
        else:
            log(f"building token cache {directory}")
            tokenizer_sha256 = hashlib.sha256(parts["tokenizer"].encode()).hexdigest()
            build_cache(directory, records(), tokenizer, label_names,
                        {"key_parts": parts | {"tokenizer": f"sha256:{tokenizer_sha256}"}})
        return cls(directory)


def _map(path: Path, dtype: str) -> np.ndarray:
    # np.memmap refuses an empty file; an empty array reads the same.
    return np.memmap(path, dtype=dtype, mode="r") if path.stat().st_size else np.zeros(0, dtype=dtype)


def _chunks(records: Iterable[tuple[str, int]], size: int) -> Iterator[list[tuple[str, int]]]:
    iterator = iter(records)
    while chunk := list(islice(iterator, size)):
        yield chunk


def build_cache(directory: str | Path, records: Iterable[tuple[str, int]], tokenizer: Tokenizer,
                label_names: list[str], meta: dict | None = None, chunk_texts: int = CHUNK_TEXTS) -> Path:
    """Encode ``records`` (``(text, label index)`` pairs) into ``directory``, ``chunk_texts`` at a time.

    Memory holds one chunk plus two offsets and one label per text. The
    directory appears only when complete; if another process finished the
    same key first, its directory is kept and ours discarded.

    >>> # build_cache("cache/abc", iter([("a good film", 1)]), tokenizer, ["neg", "pos"])
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.", suffix=".tmp"))
    try:
        with naming(directory, tmp):  # (a write past the disk's space names none of its files)
            _write_cache(tmp, records, tokenizer, label_names, meta, chunk_texts)
        try:
            os.rename(tmp, directory)
        except OSError:  # the same key finished elsewhere first: identical content, keep theirs
            if not (directory / "meta.json").is_file():
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def _write_cache(tmp: Path, records: Iterable[tuple[str, int]], tokenizer: Tokenizer, label_names: list[str],
                 meta: dict | None, chunk_texts: int) -> None:
    """``build_cache``'s files, written into the folder ``tmp`` that becomes the cache once they are all there."""
    token_offsets, text_offsets, labels = array("q", [0]), array("q", [0]), array("i")
    with open(tmp / "ids.bin", "wb") as ids_file, open(tmp / "texts.bin", "wb") as texts_file:
        for chunk in _chunks(records, chunk_texts):
            texts = [text for text, _ in chunk]
            encoded = tokenizer.encode(texts)
            ids_file.write(np.concatenate([np.asarray(ids, dtype=np.uint32) for ids in encoded]).tobytes())
            raw = [text.encode("utf-8") for text in texts]
            texts_file.write(b"".join(raw))
            token_offsets.extend((np.cumsum([len(ids) for ids in encoded]) + token_offsets[-1]).tolist())
            text_offsets.extend((np.cumsum([len(r) for r in raw]) + text_offsets[-1]).tolist())
            labels.extend(label for _, label in chunk)
    np.save(tmp / "offsets.npy", np.frombuffer(token_offsets, dtype=np.int64))
    np.save(tmp / "text_offsets.npy", np.frombuffer(text_offsets, dtype=np.int64))
    np.save(tmp / "labels.npy", np.frombuffer(labels, dtype=np.int32))
    atomic_write_json(tmp / "meta.json", (meta or {}) | {
        "format": CACHE_FORMAT, "texts": len(labels), "tokens": token_offsets[-1], "dtype": "uint32",
        "label_names": list(label_names)})
