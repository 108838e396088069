"""Cleaning, tokenisation and batching."""

from .cleaning import CleaningConfig, clean
from .tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig, truncate


def __getattr__(name: str):
    # Batching builds torch tensors; importing it lazily keeps tokenisation usable
    # without torch (the ONNX runtime needs only tokenizers, numpy and onnxruntime).
    if name in ("Batch", "BucketBatches", "collate"):
        from . import batching

        return getattr(batching, name)
    from attnclf import _submodule  # its modules (.windows, .batching, ...), as attnclf's own

    return _submodule(__name__, name)


__all__ = ["Batch", "BucketBatches", "collate", "CleaningConfig", "clean", "PAD_ID", "UNK_ID",
           "Tokenizer", "TokenizerConfig", "truncate"]
