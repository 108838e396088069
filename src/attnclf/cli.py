"""The `attnclf` command: parses arguments, calls the library, prints.

Errors the user can fix arrive as one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path
from typing import Callable

from . import __version__
from .errors import AttnclfError

COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {}


def command(name: str):
    def register(handler: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = handler
        return handler

    return register


def _parse_value(text: str):
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def _parse_overrides(pairs: list[str]) -> dict:
    overrides = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AttnclfError(f"--set expects key=value, got {pair!r}")
        overrides[key.replace("-", "_")] = _parse_value(value)
    return overrides


# ---------------------------------------------------------------- settings


def _add_data_args(p: argparse.ArgumentParser, *, test_only: bool = False) -> None:
    p.add_argument("--dataset", help="a dataset name (see `attnclf datasets`)")
    p.add_argument("--data-dir", help="folder holding dataset files (default: $ATTNCLF_DATA_DIR, then ~/.cache/attnclf)")
    p.add_argument("--download", action="store_true", help="download a missing public dataset (checksum-verified)")
    if not test_only:
        p.add_argument("--train-file", help="your own CSV / TSV / JSONL / Parquet training file")
    p.add_argument("--test-file", help="a held-out file in the same format")
    p.add_argument("--text-column", default="text", help="column holding the text (default: text)")
    p.add_argument("--label-column", default="label", help="column holding the label (default: label)")


def build_settings(args: argparse.Namespace):
    """RunSettings from general defaults, then the dataset's recipe, then explicit flags."""
    from .models import MODELS
    from .recipes import recipe_for
    from .text.cleaning import CleaningConfig
    from .text.tokenizer import TokenizerConfig
    from .training.run import DataSettings, RunSettings
    from .training.trainer import TrainConfig

    if args.model not in MODELS:
        raise AttnclfError(f"unknown model {args.model!r}; known: {', '.join(MODELS)}")
    recipe = recipe_for(args.dataset)
    model_fields = {f.name for f in fields(MODELS[args.model].config_class)}
    # A recipe tunes several models at once; each takes the fields it has.
    model_config = {k: v for k, v in recipe.get("model_config", {}).items() if k in model_fields}
    model_config |= _parse_overrides(args.set)

    train = TrainConfig(**recipe.get("train", {}))
    for flag, name in (("epochs", "epochs"), ("seed", "seed"), ("batch_size", "batch_size"), ("lr", "lr"),
                       ("optimizer", "optimizer"), ("schedule", "schedule"), ("warmup_ratio", "warmup_ratio"),
                       ("label_smoothing", "label_smoothing"), ("class_weight", "class_weights"),
                       ("patience", "patience"), ("monitor", "monitor"), ("weight_decay", "weight_decay")):
        if getattr(args, flag) is not None:
            setattr(train, name, getattr(args, flag))
    if args.bf16:
        train.bf16 = True

    tok = dict(recipe.get("tokenizer", {}))
    for flag, name in (("tokenizer", "kind"), ("vocab_size", "vocab_size"), ("min_frequency", "min_frequency"),
                       ("max_len", "max_len"), ("truncation", "truncation")):
        if getattr(args, flag) is not None:
            tok[name] = getattr(args, flag)
    cleaning = CleaningConfig(lowercase=not args.no_lowercase, strip_punctuation=args.strip_punctuation,
                              remove_stopwords=args.remove_stopwords, lemmatize=args.lemmatize)
    data = DataSettings(dataset=args.dataset, data_dir=args.data_dir, download=args.download, train_file=args.train_file,
                        test_file=args.test_file, text_column=args.text_column, label_column=args.label_column,
                        val_fraction=args.val_fraction, max_train_examples=args.max_train_examples)
    output = args.output or f"runs/{args.model}-{data.describe()}"
    return RunSettings(data=data, tokenizer=TokenizerConfig(**tok, cleaning=cleaning), model=args.model,
                       model_config=model_config, train=train, output=output, device=args.device)


def _add_train_args(p: argparse.ArgumentParser) -> None:
    _add_data_args(p)
    p.add_argument("--model", default="self-attn", help="model name (see `attnclf models`; default: self-attn)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="model config field, e.g. --set heads=8")
    p.add_argument("--output", "-o", help="run directory (default: runs/<model>-<dataset>)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--lr", type=float, help="peak learning rate")
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--optimizer", choices=["adamw", "adam"])
    p.add_argument("--schedule", choices=["linear", "cosine", "constant"], help="decay after warm-up")
    p.add_argument("--warmup-ratio", type=float, help="fraction of steps spent warming up")
    p.add_argument("--label-smoothing", type=float)
    p.add_argument("--class-weight", choices=["none", "balanced"])
    p.add_argument("--patience", type=int, help="early-stopping patience in epochs (0: never)")
    p.add_argument("--monitor", choices=["accuracy", "macro_f1", "loss"], help="validation metric to select on")
    p.add_argument("--bf16", action="store_true", help="bfloat16 autocast")
    p.add_argument("--tokenizer", choices=["word", "bpe"])
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--min-frequency", type=int)
    p.add_argument("--max-len", type=int, help="tokens kept per text")
    p.add_argument("--truncation", choices=["head", "tail", "head_tail"])
    p.add_argument("--no-lowercase", action="store_true")
    p.add_argument("--strip-punctuation", action="store_true")
    p.add_argument("--remove-stopwords", action="store_true")
    p.add_argument("--lemmatize", action="store_true")
    p.add_argument("--val-fraction", type=float, default=0.1, help="validation share carved from train")
    p.add_argument("--max-train-examples", type=int, help="train on a stratified sample of this size")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    p.add_argument("--resume", action="store_true", help="continue the interrupted run in --output")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def _print_metrics(metrics: dict) -> None:
    auc = metrics.get("roc_auc")
    print(f"{metrics.get('split', 'test')}: accuracy {metrics['accuracy']:.4f}  macro-F1 {metrics['macro_f1']:.4f}  "
          f"ROC AUC {auc:.4f}" if auc is not None else
          f"{metrics.get('split', 'test')}: accuracy {metrics['accuracy']:.4f}  macro-F1 {metrics['macro_f1']:.4f}")


# ---------------------------------------------------------------- commands


@command("train")
def cmd_train(args: argparse.Namespace) -> int:
    from .training.run import resume_settings, train_run

    if args.resume:
        if not args.output:
            raise AttnclfError("--resume needs --output RUN_DIR, the run to continue")
        settings = resume_settings(args.output, epochs=args.epochs, device=args.device)
    else:
        settings = build_settings(args)
    result = train_run(settings, resume=args.resume, progress=not args.quiet)
    _print_metrics(result.metrics)
    print(f"run directory: {result.run_dir}")
    return 0


@command("evaluate")
def cmd_evaluate(args: argparse.Namespace) -> int:
    from .classifier import Classifier
    from .data.files import load_file
    from .data.registry import load_splits
    from .evaluation.metrics import compute_metrics

    clf = Classifier.load(args.run_dir, device=args.device)
    if args.test_file:
        data = load_file(args.test_file, args.text_column, args.label_column, label_names=clf.label_names,
                         split="test")
    elif args.dataset:
        if args.download:
            from .data.download import ensure_available
            from .data.registry import candidate_dirs

            ensure_available(args.dataset, candidate_dirs(args.data_dir), download=True)
        splits = load_splits(args.dataset, args.data_dir)
        data = splits.test or splits.validation
        if data is None:
            raise AttnclfError(f"{args.dataset} has no test split")
    else:
        raise AttnclfError("give --dataset NAME or --test-file PATH to evaluate on")
    from .training.run import _aligned

    data = _aligned(data, clf.label_names)
    metrics = compute_metrics(data.labels, clf.predict_proba(data.texts), clf.label_names)
    if args.json:
        print(json.dumps({k: v for k, v in metrics.items() if k != "classification_report"}, indent=2))
    else:
        print(metrics["classification_report"])
        _print_metrics(metrics)
    return 0


@command("predict")
def cmd_predict(args: argparse.Namespace) -> int:
    from .classifier import Classifier

    texts = list(args.texts)
    if args.file:
        texts += _read_lines(Path(args.file))
    if not texts and not sys.stdin.isatty():
        texts = [line.rstrip("\n") for line in sys.stdin if line.strip()]
    if not texts:
        raise AttnclfError("no texts: give them as arguments, with --file PATH, or on stdin")
    clf = Classifier.load(args.run_dir, device=args.device)
    for prediction in clf.predict(texts):
        record = prediction.to_dict()
        if not args.attention:
            record.pop("tokens"), record.pop("attention")
        print(json.dumps(record, ensure_ascii=False))
    return 0


def _read_lines(path: Path) -> list[str]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise AttnclfError(f"{path}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise AttnclfError(f"{path}: line {line}: not UTF-8 (byte 0x{raw[exc.start]:02x})") from None
    return [line for line in text.splitlines() if line.strip()]


@command("datasets")
def cmd_datasets(args: argparse.Namespace) -> int:
    from .data.registry import candidate_dirs, sources

    dirs = candidate_dirs(args.data_dir)
    print(f"{'name':<16} {'status':<32} description")
    for name, source in sources().items():
        if source.generated:
            status = "generated"
        else:
            where = source.locate(dirs)
            status = f"local: {where}" if where else "not found locally"
        print(f"{name:<16} {status:<32} {source.description}")
    return 0


@command("models")
def cmd_models(args: argparse.Namespace) -> int:
    from .models import MODELS, build_model

    overrides = _parse_overrides(args.set)
    print(f"{'name':<18} {'parameters':>11}  description")
    for name, spec in MODELS.items():
        model_fields = {f.name for f in fields(spec.config_class)}
        model = build_model(name, vocab_size=args.vocab_size, num_classes=args.num_classes,
                            **{k: v for k, v in overrides.items() if k in model_fields})
        print(f"{name:<18} {model.num_parameters():>11,}  {spec.description}")
    return 0


@command("demo")
def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    run_demo(output=args.output, device=args.device, progress=not args.quiet)
    return 0


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attnclf", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"attnclf {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("train", help="train a model and test it", description="Train, validate and test one model.")
    _add_train_args(p)

    p = sub.add_parser("evaluate", help="score a trained model on a labelled test set")
    p.add_argument("run_dir")
    _add_data_args(p, test_only=True)
    p.add_argument("--json", action="store_true", help="print all metrics as JSON")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])

    p = sub.add_parser("predict", help="label texts (arguments, --file, or stdin); JSON lines out")
    p.add_argument("run_dir")
    p.add_argument("texts", nargs="*")
    p.add_argument("--file", help="a UTF-8 file with one text per line")
    p.add_argument("--attention", action="store_true", help="include tokens and pooling attention")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])

    p = sub.add_parser("datasets", help="list datasets and whether they are available locally")
    p.add_argument("--data-dir")

    p = sub.add_parser("models", help="list models with parameter counts")
    p.add_argument("--vocab-size", type=int, default=20000)
    p.add_argument("--num-classes", type=int, default=2)
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="config field, e.g. --set d_model=256")

    p = sub.add_parser("demo", help="train self-attn on generated reviews and show what it attends to")
    p.add_argument("--output", default="runs/demo")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda", "mps"])
    p.add_argument("--quiet", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except AttnclfError as exc:
        print(f"attnclf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("attnclf: interrupted; `attnclf train --resume --output RUN_DIR` continues a training run",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
