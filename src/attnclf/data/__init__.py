"""Data sources: built-in corpora, generated sets and the user's own files, as ``TextDataset`` splits."""
