"""How many words of a lower-cased vocabulary a cased word-vectors file starts, matched as written and as the run
cleans text.

    python bench/cased_vectors.py [--texts 2000]

The file is counted by `attnclf vectors`' method (``count_vectors``, 16 dimensions) from the first ``--texts`` IMDB
training reviews without lower-casing them, as an outside file (word2vec's, fastText's) keeps "Paris" and "The"; the
vocabulary is the default tokenizer's of the same reviews, lower-cased. Matched as written (the rule before
2026-11-29), a capitalised word finds no vocabulary word; ``WordVectors.initialise`` now reads a word the vocabulary
lacks as written as the run cleans text ("Paris" starts "paris"). Recorded: the file's words, how many hold a capital,
and the vocabulary words each rule starts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from attnclf.data.registry import load_splits
from attnclf.text.cleaning import CleaningConfig, unicode_normalized
from attnclf.text.tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig
from attnclf.text.vectors import WordVectors, count_vectors
from common import data_dir, parser, write_result


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--texts", type=int, default=2000, help="IMDB training reviews counted (default: 2000)")
    args = p.parse_args()
    texts = load_splits("imdb", data_dir(args.data_dir)).train.texts[:args.texts]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "cased.vec"
        count_vectors(texts, dim=16, cleaning=CleaningConfig(lowercase=False)).save(path)
        vectors = WordVectors.load(path)
    tokenizer = Tokenizer.train(texts, TokenizerConfig())
    as_written = {unicode_normalized(word, tokenizer.config.cleaning) for word, row in vectors.index.items()
                  if vectors.vectors[row].any()}
    vocabulary = {word for word, token_id in tokenizer.vocabulary().items() if token_id not in (PAD_ID, UNK_ID)}
    embedding = torch.nn.Embedding(tokenizer.vocab_size, 16, padding_idx=PAD_ID)
    result = {"texts": len(texts), "vectors_words": len(vectors.words),
              "capitalised_words": sum(word != word.lower() for word in vectors.words),
              "vocabulary_words": len(vocabulary), "started_as_written": len(vocabulary & as_written),
              "started_as_cleaned": vectors.initialise(embedding, tokenizer, std=4.0)}
    print(result, flush=True)
    write_result("cased_vectors", result, args.out)


if __name__ == "__main__":
    main()
