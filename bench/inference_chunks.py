"""Prediction time by chunk size: attnclf's chunked inference against BERT's own feed-forward chunking.

    python bench/inference_chunks.py --threads 1

Untrained models of ``hf_peer``'s shapes (the IMDB recipe; BERT of the same size), the same 1,000 IMDB test
reviews in the same length-sorted batches of 128, median CPU seconds of ``--calls`` prediction calls after a
warm-up, the variants alternated call by call. attnclf runs with ``INFERENCE_CHUNK_TOKENS`` at each size (0: whole
batches); BERT with ``chunk_size_feed_forward`` 0 and 16 (128 reviews x 16 positions = 2,048 tokens a chunk), its
batches padded to a multiple of 16 as that option requires. About two minutes of one thread.
"""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F

from attnclf.evaluation.predict import predict_probabilities
from attnclf.models import MODELS, build_model
from attnclf.models import attention
from attnclf.text.batching import BucketBatches
from attnclf.text.tokenizer import PAD_ID, Tokenizer

from common import cli_settings, parse_with_threads, parser, sample, splits, write_result


def bert_predictor(settings, vocab_size: int, chunk: int, batches: BucketBatches):
    from transformers import BertConfig, BertForSequenceClassification
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    mc = {**MODELS[settings.model].config_class().to_dict(), **settings.model_config}
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(
        vocab_size=vocab_size, hidden_size=mc["d_model"], num_hidden_layers=mc["layers"],
        num_attention_heads=mc["heads"], intermediate_size=mc["ff_dim"],
        max_position_embeddings=settings.tokenizer.max_len + 16, type_vocab_size=1, num_labels=2,
        pad_token_id=PAD_ID, chunk_size_feed_forward=chunk)).eval()

    @torch.inference_mode()
    def predict():
        for batch in batches:
            pad = -batch.input_ids.shape[1] % 16
            ids = F.pad(batch.input_ids, (0, pad), value=PAD_ID)
            torch.softmax(model(input_ids=ids, attention_mask=(ids != PAD_ID).long()).logits, -1)
    return predict


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[0, 2048, 4096, 8192])
    p.add_argument("--calls", type=int, default=5)
    args = parse_with_threads(p, default=None)

    settings = cli_settings("imdb", "unused", "--epochs", "1")
    data = splits("imdb", args.data_dir, settings.train.seed)
    train, test = sample(data.train, 1000, 1), sample(data.test, 1000, 3)  # hf_peer's samples
    tokenizer = Tokenizer.train(train.texts, settings.tokenizer)
    batches = BucketBatches(tokenizer.encode(test.texts), test.labels, 128, False)
    torch.manual_seed(0)
    model = build_model(settings.model, vocab_size=tokenizer.vocab_size, num_classes=2,
                        max_len=settings.tokenizer.max_len, **settings.model_config)

    def attnclf_at(size: int):
        def predict():
            attention.INFERENCE_CHUNK_TOKENS = size or 10**12
            return predict_probabilities(model, batches, torch.device("cpu"))
        return predict

    variants = {f"attnclf chunks {size or 'off'}": attnclf_at(size) for size in args.sizes}
    variants |= {f"bert chunk_size_feed_forward {chunk}": bert_predictor(settings, tokenizer.vocab_size, chunk, batches)
                 for chunk in (0, 16)}
    whole = attnclf_at(0)()
    differences = {name: float(np.abs(attnclf_at(size)() - whole).max()) for name, size in
                   zip(variants, args.sizes)}
    seconds = {name: [] for name in variants}
    for call in range(args.calls + 1):  # call 0 warms up, uncounted
        for name, predict in variants.items():
            started = time.process_time()
            predict()
            if call:
                seconds[name].append(time.process_time() - started)
    medians = {name: round(float(np.median(values)), 3) for name, values in seconds.items()}
    for name, median in medians.items():
        print(f"{name:36s} {median:.3f} CPU s")
    write_result("inference_chunks", {
        "texts": len(test), "calls": args.calls, "cpu_seconds_median": medians,
        "max_abs_probability_difference_vs_whole_batches": differences,
    }, args.out)


if __name__ == "__main__":
    main()
