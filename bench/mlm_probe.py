"""IMDB validation: does masked-token pretraining on the 50,000 unlabelled reviews help `self-attn`?

    python bench/mlm_probe.py --minutes 12 --lr 1e-3 --name mlm_probe-12min-lr1e-3
    python bench/mlm_probe.py --minutes 0 --lr 1e-3 --name mlm_probe-none-lr1e-3     # the control

A probe, not a feature: the tokenizer is trained on the training reviews plus
the unlabelled ones; for ``--minutes`` of wall time the recipe's network
(without its n-gram branch or bigram table) learns to restore 15% of tokens
(80% replaced by <unk>, 10% by a random word, 10% kept), scored by a softmax
over the true words plus 2,048 sampled ones through the tied token
embeddings. Then a fresh pooling layer and head are put on top and the whole
model is fine-tuned like the recipe (3 epochs, batch 64, AdamW at ``--lr``,
linear decay) on seed 0's split. Validation only: test is not read.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from attnclf.data.imdb import load_unsup
from attnclf.models import build_model
from attnclf.recipes import recipe_for
from attnclf.text import Tokenizer, TokenizerConfig
from attnclf.text.batching import BucketBatches
from attnclf.text.tokenizer import UNK_ID
from attnclf.training.trainer import TrainConfig, Trainer

from common import data_dir, parse_with_threads, parser, splits, write_result

SAMPLED_WORDS = 2048


def pretrain(model, sequences: list[list[int]], minutes: float) -> dict:
    """Masked-token training of ``model``'s embeddings, positions and encoder for ``minutes`` of wall time."""
    vocab = model.config.vocab_size
    width = model.config.d_model
    head = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
    word_bias = nn.Parameter(torch.zeros(vocab))
    parameters = [*model.parameters(), *head.parameters(), word_bias]
    optimizer = torch.optim.AdamW(parameters, lr=1e-3, weight_decay=0.01)
    batches = BucketBatches(sequences, [0] * len(sequences), batch_size=64, shuffle=True, seed=0)
    started, steps, epoch, losses = time.perf_counter(), 0, 0, []
    model.train()
    while time.perf_counter() - started < minutes * 60:
        batches.set_epoch(epoch)
        epoch += 1
        for batch in batches:
            ids, mask = batch.input_ids, batch.attention_mask
            chosen = (torch.rand(ids.shape) < 0.15) & mask
            draw = torch.rand(ids.shape)
            corrupted = torch.where(chosen & (draw < 0.8), torch.full_like(ids, UNK_ID), ids)
            corrupted = torch.where(chosen & (draw >= 0.8) & (draw < 0.9), torch.randint(2, vocab, ids.shape),
                                    corrupted)
            x, mask = model.embed(corrupted, mask, None)
            states, _ = model.encoder(model.dropout(model.positions(x)), mask)
            targets = ids[chosen]
            candidates = torch.unique(torch.cat([targets, torch.randint(2, vocab, (SAMPLED_WORDS,))]))
            logits = head(states[chosen]) @ model.token_embedding.weight[candidates].T + word_bias[candidates]
            loss = nn.functional.cross_entropy(logits, torch.searchsorted(candidates, targets))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            steps += 1
            losses.append(loss.item())
            if time.perf_counter() - started >= minutes * 60:
                break
    return {"steps": steps, "epochs_started": epoch, "seconds": round(time.perf_counter() - started, 1),
            "final_loss_mean_of_last_100": round(sum(losses[-100:]) / max(1, len(losses[-100:])), 4)}


def main() -> None:
    p = parser(__doc__)
    p.add_argument("--minutes", type=float, default=12.0, help="pretraining budget (0: none, the control)")
    p.add_argument("--lr", type=float, default=1e-3, help="fine-tuning learning rate")
    p.add_argument("--name", default="mlm_probe")
    args = parse_with_threads(p)
    torch.manual_seed(0)
    data = splits("imdb", args.data_dir, 0)
    unlabelled = load_unsup([Path(data_dir(args.data_dir))])
    recipe = recipe_for("imdb")
    tokenizer = Tokenizer.train(list(data.train.texts) + unlabelled, TokenizerConfig(**recipe["tokenizer"]))
    config = {**recipe["model_config"], "ngram_buckets": 0, "nb_ngram_buckets": 0}
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2,
                        max_len=tokenizer.config.max_len, **config)
    pretraining = pretrain(model, tokenizer.encode(list(data.train.texts) + unlabelled), args.minutes) \
        if args.minutes > 0 else None
    # The pooling query and head start fresh, as they would on a new task.
    fresh = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2,
                        max_len=tokenizer.config.max_len, **config)
    model.pool.load_state_dict(fresh.pool.state_dict())
    model.head.load_state_dict(fresh.head.state_dict())

    train = BucketBatches(tokenizer.encode(data.train.texts), data.train.labels, batch_size=64, shuffle=True, seed=0)
    validation = BucketBatches(tokenizer.encode(data.validation.texts), data.validation.labels, batch_size=128)
    settings = TrainConfig(epochs=3, batch_size=64, lr=args.lr, patience=0, monitor="accuracy",
                           checkpoint_seconds=1e9)
    with tempfile.TemporaryDirectory() as run_dir:
        history = Trainer(model, settings, Path(run_dir), torch.device("cpu"), data.train.label_names,
                          progress=False).fit(train, validation)
    write_result(args.name, {
        "pretraining_minutes": args.minutes, "pretraining": pretraining, "fine_tune_lr": args.lr,
        "validation_accuracy_by_epoch": [round(h["val_accuracy"], 4) for h in history],
        "best_validation_accuracy": max(h["val_accuracy"] for h in history),
    }, args.out)


if __name__ == "__main__":
    main()
