"""Data sources: built-in corpora, generated sets and the user's own files, as ``TextDataset`` splits."""


def __getattr__(name: str):
    from attnclf import _submodule  # its modules (.files, .base, ...), as attnclf's own

    return _submodule(__name__, name)
