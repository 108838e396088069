"""Cleaning, tokenisation and batching."""

from .batching import Batch, BucketBatches, collate
from .cleaning import CleaningConfig, clean
from .tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig, truncate

__all__ = ["Batch", "BucketBatches", "collate", "CleaningConfig", "clean", "PAD_ID", "UNK_ID",
           "Tokenizer", "TokenizerConfig", "truncate"]
