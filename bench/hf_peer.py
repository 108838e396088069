"""attnclf's default recipe vs Hugging Face `BertForSequenceClassification` of the same size, side by side.

    pip install -e ".[bench]"
    python bench/hf_peer.py                                   # IMDB subset, ratios of medians
    python bench/hf_peer.py --train-examples 5000 --epochs 2 --repeats 1 --name hf_peer-accuracy

attnclf's side is the recipe's network trained from a random initialisation:
word vectors a recipe counts first (``"embeddings": "count"``) are not built
here; they change where training starts, not what a step costs.

Both models see the same token ids (attnclf's tokenizer), the same examples
and epochs, batch size, learning rate, weight decay, warm-up and linear decay;
the BERT has attnclf's layers, width, heads, feed-forward width, vocabulary
and max length, trained from scratch with `transformers.Trainer`
(length-grouped sampling, no checkpoints or evaluation during training, so its
time is its training loop alone; attnclf's time includes its per-epoch
validation on --val-examples texts and checkpoint writes). Prediction runs
both models over the same length-sorted batches, in float32 and again under
bfloat16 autocast (attnclf's `--bf16`; the same autocast for BERT), each timed
as the median of 3 calls after an untimed one. Runs alternate
(attnclf, BERT, attnclf, BERT, ...) so machine noise hits both alike; the
JSON keeps every time and the ratio of each pair, in wall seconds and in
CPU seconds of this process (with --threads 1 the CPU figures do not depend
on what else runs on the machine).
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from attnclf.evaluation.predict import predict_probabilities
from attnclf.models import MODELS, build_model
from attnclf.text.batching import BucketBatches
from attnclf.text.tokenizer import PAD_ID, Tokenizer
from attnclf.training.trainer import Trainer

from common import cli_settings, parse_with_threads, parser, peak_rss_mb, sample, splits, write_result


class _Encoded(torch.utils.data.Dataset):
    def __init__(self, ids: list[list[int]], labels: list[int]):
        self.ids, self.labels = ids, labels

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.labels[i]}


def _pad(features: list[dict]) -> dict:
    width = max(len(f["input_ids"]) for f in features)
    ids = torch.full((len(features), width), PAD_ID, dtype=torch.long)
    for row, f in enumerate(features):
        ids[row, : len(f["input_ids"])] = torch.tensor(f["input_ids"])
    return {"input_ids": ids, "attention_mask": (ids != PAD_ID).long(),
            "labels": torch.tensor([f["labels"] for f in features])}


def train_attnclf(settings, vocab_size, num_classes, label_names, train_batches, val_batches, model_config):
    torch.manual_seed(settings.train.seed)
    model = build_model(settings.model, vocab_size=vocab_size, num_classes=num_classes,
                        max_len=settings.tokenizer.max_len, **model_config)
    with tempfile.TemporaryDirectory() as run_dir:
        wall, cpu = time.perf_counter(), time.process_time()
        Trainer(model, settings.train, Path(run_dir), torch.device("cpu"), label_names, progress=False).fit(
            train_batches, val_batches)
        return model, time.perf_counter() - wall, time.process_time() - cpu


def train_bert(settings, vocab_size, num_classes, ids, labels):
    from transformers import BertConfig, BertForSequenceClassification, Trainer as HFTrainer, TrainingArguments
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    # The recipe's overrides on top of the model's defaults: the shape attnclf trains.
    mc, tc = {**MODELS[settings.model].config_class().to_dict(), **settings.model_config}, settings.train
    torch.manual_seed(tc.seed)
    config = BertConfig(vocab_size=vocab_size, hidden_size=mc["d_model"], num_hidden_layers=mc["layers"],
                        num_attention_heads=mc["heads"], intermediate_size=mc["ff_dim"],
                        max_position_embeddings=settings.tokenizer.max_len, type_vocab_size=1,
                        hidden_dropout_prob=mc.get("dropout", 0.1), attention_probs_dropout_prob=0.0,
                        num_labels=num_classes, pad_token_id=PAD_ID)
    model = BertForSequenceClassification(config)
    steps = tc.epochs * -(-len(ids) // tc.batch_size)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, num_train_epochs=tc.epochs, per_device_train_batch_size=tc.batch_size,
            learning_rate=tc.lr, weight_decay=tc.weight_decay, warmup_steps=int(tc.warmup_ratio * steps),
            lr_scheduler_type="linear", max_grad_norm=tc.grad_clip or 1e9, bf16=tc.bf16, seed=tc.seed,
            use_cpu=True, save_strategy="no", eval_strategy="no", logging_strategy="no", report_to=[],
            disable_tqdm=True, dataloader_num_workers=0, train_sampling_strategy="group_by_length",
        )
        trainer = HFTrainer(model=model, args=args, train_dataset=_Encoded(ids, labels), data_collator=_pad)
        wall, cpu = time.perf_counter(), time.process_time()
        trainer.train()
        return model, time.perf_counter() - wall, time.process_time() - cpu


@torch.inference_mode()
def predict_bert(model, batches: BucketBatches) -> np.ndarray:
    model.eval()
    probs = np.zeros((len(batches.sequences), model.config.num_labels), dtype=np.float32)
    for batch in batches:
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask.long()).logits
        probs[batch.indices] = torch.softmax(logits.float(), -1).numpy()
    return probs


def in_bf16(predict):
    """``predict`` under the bfloat16 autocast that ``attnclf predict --bf16`` uses."""
    def run(model):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return predict(model)
    return run


PREDICTION_CALLS = 3


def _timed(fn, *args):
    """(result, wall seconds, CPU seconds); with one thread CPU seconds ignore other jobs on the machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def _timed_prediction(fn, model, calls: int = PREDICTION_CALLS):
    """``_timed`` for prediction: one untimed call first (the first call of a model pays for allocations and
    kernel set-up), then the medians of ``calls`` timed ones; a single call drifted by up to 18% between runs."""
    fn(model)
    runs = [_timed(fn, model) for _ in range(calls)]
    return runs[0][0], float(np.median([r[1] for r in runs])), float(np.median([r[2] for r in runs]))


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--dataset", default="imdb")
    p.add_argument("--train-examples", type=int, default=1000)
    p.add_argument("--val-examples", type=int, default=200, help="attnclf's per-epoch validation set")
    p.add_argument("--test-examples", type=int, default=1000)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="uncounted rounds first (allocators, kernels)")
    p.add_argument("--name", default="hf_peer")
    p.add_argument("flags", nargs="*", help="extra `attnclf train` flags for both, after --")
    args = parse_with_threads(p, default=None)

    settings = cli_settings(args.dataset, "unused", "--epochs", str(args.epochs), *args.flags)
    data = splits(args.dataset, args.data_dir, settings.train.seed)
    train = sample(data.train, args.train_examples, 1)
    val = sample(data.validation, args.val_examples, 2)
    test = sample(data.test, args.test_examples, 3)
    tokenizer = Tokenizer.train(train.texts, settings.tokenizer)
    train_ids, val_ids, test_ids = (tokenizer.encode(d.texts) for d in (train, val, test))
    tokens = {"train": sum(map(len, train_ids)), "test": sum(map(len, test_ids))}
    vocab, classes, names = tokenizer.vocab_size, len(train.label_names), train.label_names
    train_batches = BucketBatches(train_ids, train.labels, settings.train.batch_size, True, settings.train.seed)
    val_batches = BucketBatches(val_ids, val.labels, 128, False)
    test_batches = BucketBatches(test_ids, test.labels, 128, False)

    systems = {
        "attnclf": lambda: train_attnclf(settings, vocab, classes, names, train_batches, val_batches,
                                         settings.model_config),
        # The same network without the hashed-bigram table and the n-gram branch: BERT's exact shape.
        "attnclf_no_ngrams": lambda: train_attnclf(settings, vocab, classes, names, train_batches, val_batches,
                                                   {**settings.model_config, "ngram_buckets": 0,
                                                    "nb_ngram_buckets": 0}),
        "bert": lambda: train_bert(settings, vocab, classes, train_ids, train.labels),
    }
    predictors = {"attnclf": lambda m: predict_probabilities(m, test_batches, torch.device("cpu")),
                  "attnclf_no_ngrams": lambda m: predict_probabilities(m, test_batches, torch.device("cpu")),
                  "bert": lambda m: predict_bert(m, test_batches)}
    kinds = ("train", "predict", "predict_bf16", "train_cpu", "predict_cpu", "predict_bf16_cpu")
    times = {name: {kind: [] for kind in kinds} for name in systems}
    accuracy, accuracy_bf16, parameters = {}, {}, {}
    for repeat in range(-args.warmup, args.repeats):  # negative repeats are warm-up, not counted
        for name, train_fn in systems.items():  # alternating, so drift hits every system alike
            model, seconds, cpu = train_fn()
            probs, predict_seconds, predict_cpu = _timed_prediction(predictors[name], model)
            probs_bf16, bf16_seconds, bf16_cpu = _timed_prediction(in_bf16(predictors[name]), model)
            if repeat < 0:
                continue
            for kind, value in (("train", seconds), ("predict", predict_seconds), ("predict_bf16", bf16_seconds),
                                ("train_cpu", cpu), ("predict_cpu", predict_cpu), ("predict_bf16_cpu", bf16_cpu)):
                times[name][kind].append(round(value, 3))
            accuracy[name] = float((probs.argmax(1) == np.asarray(test.labels)).mean())
            accuracy_bf16[name] = float((probs_bf16.argmax(1) == np.asarray(test.labels)).mean())
            parameters[name] = sum(p.numel() for p in model.parameters())
            print(f"repeat {repeat}: {name:18s} train {seconds:7.1f}s ({cpu:.1f} CPU s) predict "
                  f"{predict_seconds:6.2f}s ({predict_cpu:.2f} CPU s; bf16 {bf16_cpu:.2f}) accuracy "
                  f"{accuracy[name]:.4f} (bf16 {accuracy_bf16[name]:.4f})", flush=True)

    def ratios(kind: str, name: str) -> list[float]:  # BERT time / attnclf time, pair by pair
        return [round(b / a, 3) for a, b in zip(times[name][kind], times["bert"][kind])]

    summary = {}
    for name in systems:
        train_median = float(np.median(times[name]["train"]))
        predict_median = float(np.median(times[name]["predict"]))
        summary[name] = {
            "parameters": parameters[name], "test_accuracy": accuracy[name],
            "test_accuracy_bf16": accuracy_bf16[name], "times": times[name],
            "train_seconds_median": train_median, "predict_seconds_median": predict_median,
            "train_tokens_per_second": round(tokens["train"] * args.epochs / train_median),
            "predict_tokens_per_second": round(tokens["test"] / predict_median),
            "predict_texts_per_second": round(len(test) / predict_median, 1),
        }
        if name != "bert":
            for kind in kinds:
                summary[name][f"{kind}_speedup_vs_bert_median"] = float(np.median(ratios(kind, name)))
                summary[name][f"{kind}_speedup_vs_bert_pairs"] = ratios(kind, name)
    import transformers

    write_result(args.name, {
        "dataset": args.dataset, "train_examples": len(train), "test_examples": len(test),
        "epochs": args.epochs, "repeats": args.repeats, "prediction_calls": PREDICTION_CALLS, "tokens": tokens,
        "vocab_size": vocab,
        "settings": settings.to_dict(), "transformers": transformers.__version__,
        "systems": summary, "peak_rss_mb": round(peak_rss_mb()),
    }, args.out)


if __name__ == "__main__":
    main()
