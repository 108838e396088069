"""Masked-token pretraining of the ``self-attn`` encoder on unlabelled text, and starting a run from it.

``pretrain_encoder`` teaches the recipe's encoder to restore hidden words of
unlabelled text (BERT's masked-language-model task: 15% of the tokens are
chosen; 80% of those become ``<unk>``, 10% a random word, 10% stay), scored
by a softmax over the true words plus words drawn by frequency. Texts are cut
into consecutive pieces of ``max_len`` tokens. Word vectors (``attnclf
vectors``) may seed the token embedding, which then stays frozen: the encoder
learns to read the vectors the classifier will start from.

The folder it writes holds ``encoder.safetensors`` (positions, encoder, token
embedding), ``tokenizer.json`` and ``pretrain.json`` (the model's shape, the
corpus, the losses). ``attnclf train --init-from FOLDER`` starts a ``self-attn``
model of the same shape from it (``load_pretrained``): the encoder whole, the
token embedding row by row for the words both vocabularies share. Pooling,
head and n-gram branch are the classifier's own and start fresh.

>>> # settings = PretrainSettings(model_config={"d_model": 64, "layers": 2, "ff_dim": 256}, max_len=64, epochs=1)
>>> # pretrain_encoder(texts, settings, "runs/pretrained")
>>> # then: attnclf train --dataset sst2-sentences --init-from runs/pretrained
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from ..errors import AttnclfError, RunDirError
from ..models import build_model
from ..models.classifiers import SelfAttentionClassifier
from ..rundir import atomic_write_bytes, atomic_write_json, prepare_output_dir, read_json
from ..text.batching import BucketBatches
from ..text.tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig
from ..text.vectors import WordVectors

ENCODER_FILE = "encoder.safetensors"
PRETRAIN_FILE = "pretrain.json"
# The parts of SelfAttentionClassifier that pretraining trains; the rest is the classifier's own.
PRETRAINED_PREFIXES = ("token_embedding.", "positions.", "embedding_norm.", "encoder.")
# The fields that decide those parts' shapes and meaning: a model that differs in any cannot start from them.
SHAPE_FIELDS = ("d_model", "heads", "layers", "ff_dim", "positional", "embedding_norm")


@dataclass
class PretrainSettings:
    """What ``pretrain_encoder`` trains. ``model_config`` holds ``self-attn`` fields (a recipe's ``model_config``)."""

    model_config: dict = field(default_factory=dict)
    max_len: int = 64  # tokens per piece of text, and the classifier's max_len for learned positions
    vocab_size: int = 50000
    min_frequency: int = 5  # as `attnclf vectors`, so vectors counted on the same texts cover the vocabulary
    embeddings: str | None = None  # word vectors that seed (and fix) the token embedding
    embeddings_std: float = 4.0
    epochs: int = 1
    batch_size: int = 64
    lr: float = 1e-3
    warmup_ratio: float = 0.05
    mask_rate: float = 0.15
    sampled_words: int = 2048  # words drawn per batch (by count ** 0.75) besides the true ones
    seed: int = 0


def mask_tokens(ids: torch.Tensor, mask: torch.Tensor, rate: float, vocab_size: int,
                generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's corruption: (corrupted ids, bool of the chosen positions); every text with a token has one chosen.

    >>> g = torch.Generator().manual_seed(0)
    >>> ids = torch.tensor([[5, 6, 7, 0]])
    >>> corrupted, chosen = mask_tokens(ids, ids != 0, 0.15, 10, g)
    >>> int(chosen.sum()) >= 1, bool(chosen[0, 3])
    (True, False)
    """
    chosen = (torch.rand(ids.shape, generator=generator) < rate) & mask
    missing = mask.any(dim=1) & ~chosen.any(dim=1)
    if missing.any():  # a short text would often teach nothing: hide one of its tokens at random
        scores = torch.rand(ids.shape, generator=generator).masked_fill(~mask, -1.0)
        rows = missing.nonzero().squeeze(1)
        chosen[rows, scores[rows].argmax(dim=1)] = True
    draw = torch.rand(ids.shape, generator=generator)
    random_words = torch.randint(UNK_ID + 1, vocab_size, ids.shape, generator=generator)
    corrupted = torch.where(chosen & (draw < 0.8), torch.full_like(ids, UNK_ID), ids)
    corrupted = torch.where(chosen & (draw >= 0.8) & (draw < 0.9), random_words, corrupted)
    return corrupted, chosen


def cut_pieces(sequences: Sequence[Sequence[int]], max_len: int, min_tokens: int = 2) -> list[list[int]]:
    """Each sequence cut into consecutive pieces of ``max_len`` ids; pieces shorter than ``min_tokens`` are dropped.

    >>> cut_pieces([[1, 2, 3, 4, 5], [6]], 2)
    [[1, 2], [3, 4]]
    """
    return [list(seq[start:start + max_len]) for seq in sequences for start in range(0, len(seq), max_len)
            if len(seq[start:start + max_len]) >= min_tokens]


class MaskedWordHead(nn.Module):
    """Encoder states -> scores of candidate words (transform, then dot products with output word vectors)."""

    def __init__(self, width: int, vocab_size: int) -> None:
        super().__init__()
        self.transform = nn.Sequential(nn.Linear(width, width), nn.GELU(), nn.LayerNorm(width))
        self.words = nn.Embedding(vocab_size, width)
        self.bias = nn.Parameter(torch.zeros(vocab_size))
        nn.init.normal_(self.words.weight, std=0.02)

    def forward(self, states: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self.transform(states) @ self.words(candidates).T + self.bias[candidates]


def pretrain_encoder(texts: Sequence[str], settings: PretrainSettings, output: str | Path,
                     log: Callable[[str], None] = print, progress: bool = False) -> dict:
    """Pretrain a ``self-attn`` encoder on ``texts`` into the folder ``output``; return what ``pretrain.json`` records.

    Deterministic on the CPU for the same texts, settings and thread count. Each finished epoch is
    written (atomically), so the folder always holds a usable encoder; a rerun with the same settings
    skips finished epochs. ``progress`` shows a bar per epoch on a terminal.
    """
    if settings.epochs < 1 or settings.batch_size < 1 or settings.max_len < 2:
        raise AttnclfError(f"epochs and batch_size must be at least 1 and max_len at least 2, got "
                           f"{settings.epochs}, {settings.batch_size} and {settings.max_len}")
    if not 0 < settings.mask_rate < 1:
        raise AttnclfError(f"mask_rate must be between 0 and 1, got {settings.mask_rate}")
    output = prepare_output_dir(output)
    started = time.perf_counter()
    tokenizer = Tokenizer.train(texts, TokenizerConfig(kind="word", vocab_size=settings.vocab_size,
                                                       min_frequency=settings.min_frequency, max_len=10 ** 9))
    pieces = cut_pieces(tokenizer.encode(texts), settings.max_len)
    if not pieces:
        raise AttnclfError(f"no text of the {len(texts):,} holds two known words: nothing to pretrain on")
    tokens = sum(len(piece) for piece in pieces)
    log(f"pretrain: {len(texts):,} texts, {len(pieces):,} pieces of at most {settings.max_len} tokens, "
        f"{tokens:,} tokens, {tokenizer.vocab_size:,} words ({time.perf_counter() - started:.0f} s)")

    torch.manual_seed(settings.seed)
    model_config = {**settings.model_config, "ngram_buckets": 0, "nb_ngram_buckets": 0}
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=settings.max_len,
                        **model_config)
    width = model.config.d_model
    head = MaskedWordHead(width, tokenizer.vocab_size)
    if settings.embeddings:
        found = WordVectors.load(settings.embeddings).initialise(model.token_embedding, tokenizer,
                                                                 settings.embeddings_std)
        model.token_embedding.weight.requires_grad_(False)
        log(f"pretrain: {found:,} of {tokenizer.vocab_size - 2:,} words start from {settings.embeddings} (fixed)")
    trained = [p for name, p in model.named_parameters()
               if name.startswith(PRETRAINED_PREFIXES) and p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.AdamW(trained, lr=settings.lr, weight_decay=0.01)
    batches = BucketBatches(pieces, None, batch_size=settings.batch_size, shuffle=True, seed=settings.seed)
    total_steps = settings.epochs * len(batches)
    warmup = max(1, int(settings.warmup_ratio * total_steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup))))
    counts = np.bincount(np.concatenate([np.asarray(p) for p in pieces]), minlength=tokenizer.vocab_size)
    counts[[PAD_ID, UNK_ID]] = 0
    sampling = torch.from_numpy(counts.astype(np.float64) ** 0.75)
    generator = torch.Generator().manual_seed(settings.seed)

    record = {"settings": asdict(settings), "model_config": asdict(model.config), "texts": len(texts),
              "pieces": len(pieces), "tokens": tokens, "words": tokenizer.vocab_size, "epochs": []}
    first_epoch = _resume(output, record, model, head, optimizer, schedule, generator, log)
    model.train()
    for epoch in range(first_epoch, settings.epochs):
        batches.set_epoch(epoch)
        epoch_started, losses = time.perf_counter(), []
        for batch in tqdm(batches, desc=f"pretrain epoch {epoch + 1}", disable=None if progress else True,
                          leave=False):
            ids, mask = batch.input_ids, batch.attention_mask
            corrupted, chosen = mask_tokens(ids, mask, settings.mask_rate, tokenizer.vocab_size, generator)
            x, mask = model.embed(corrupted, mask, None)
            states, _ = model.encoder(model.dropout(model.embedding_norm(model.positions(x))), mask)
            targets = ids[chosen]
            drawn = torch.multinomial(sampling, settings.sampled_words, replacement=True, generator=generator)
            candidates, where = torch.unique(torch.cat([targets, drawn]), return_inverse=True)
            scores = head(states[chosen], candidates)
            loss = nn.functional.cross_entropy(scores, where[: len(targets)])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
        seconds = time.perf_counter() - epoch_started
        record["epochs"].append({"epoch": epoch + 1, "loss": round(float(np.mean(losses)), 4),
                                 "seconds": round(seconds, 1), "tokens_per_second": round(tokens / seconds)})
        _save(output, record, model, head, optimizer, schedule, generator, tokenizer)
        log(f"pretrain: epoch {epoch + 1}/{settings.epochs} loss {np.mean(losses):.4f} ({seconds:.0f} s, "
            f"{tokens / seconds:,.0f} tokens/s; saved)")
    return record


def _state_path(output: Path) -> Path:
    return output / "checkpoint.pt"


def _save(output: Path, record: dict, model, head, optimizer, schedule, generator, tokenizer: Tokenizer) -> None:
    encoder = {name: tensor.detach().contiguous() for name, tensor in model.state_dict().items()
               if name.startswith(PRETRAINED_PREFIXES)}
    tmp = output / f".{ENCODER_FILE}.tmp"
    save_file(encoder, str(tmp))
    atomic_write_bytes(output / ENCODER_FILE, tmp.read_bytes())
    tmp.unlink()
    tokenizer_tmp = output / ".tokenizer.json.tmp"
    tokenizer.save(tokenizer_tmp)
    atomic_write_bytes(output / "tokenizer.json", tokenizer_tmp.read_bytes())
    tokenizer_tmp.unlink()
    # The optimiser's state resumes an interrupted pretraining; it is plain tensors, read with weights_only.
    state = {"head": head.state_dict(), "optimizer": optimizer.state_dict(), "schedule": schedule.state_dict(),
             "generator": generator.get_state(), "dropout_rng": torch.get_rng_state(),
             "epochs_done": len(record["epochs"])}
    tmp = output / ".checkpoint.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(_state_path(output))
    atomic_write_json(output / PRETRAIN_FILE, record)


def _resume(output: Path, record: dict, model, head, optimizer, schedule, generator, log) -> int:
    """The first epoch still to train: 0, or after the epochs a same-settings earlier call finished."""
    if not (output / PRETRAIN_FILE).exists():
        return 0
    earlier = read_json(output / PRETRAIN_FILE)
    same = {key: earlier.get(key) for key in ("model_config", "texts", "pieces", "tokens", "words")}
    settings_then = {k: v for k, v in earlier.get("settings", {}).items() if k != "epochs"}
    settings_now = {k: v for k, v in record["settings"].items() if k != "epochs"}
    if same != {key: record[key] for key in same} or settings_then != settings_now:
        raise RunDirError(f"{output} holds a pretraining of other texts or settings; choose another --output")
    state = torch.load(_state_path(output), weights_only=True)
    encoder = load_file(str(output / ENCODER_FILE))
    model.load_state_dict(encoder, strict=False)
    head.load_state_dict(state["head"])
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    generator.set_state(state["generator"])
    torch.set_rng_state(state["dropout_rng"])  # so a resumed pretraining ends where an uninterrupted one would
    record["epochs"] = earlier["epochs"][: state["epochs_done"]]
    log(f"pretrain: resuming after epoch {state['epochs_done']}")
    return state["epochs_done"]


def check_compatible(model_name: str, config, folder: str | Path) -> None:
    """A one-line error unless ``folder`` is a pretraining a ``model_name`` model with ``config`` can start from."""
    folder = Path(folder)
    if not (folder / PRETRAIN_FILE).is_file() or not (folder / ENCODER_FILE).is_file():
        raise RunDirError(f"{folder}: not a pretrained encoder (no {PRETRAIN_FILE} or {ENCODER_FILE}; "
                          f"write one with `attnclf pretrain`)")
    if model_name != "self-attn":
        raise AttnclfError(f"--init-from starts self-attn models only (it pretrained one), not {model_name}")
    pretrained = read_json(folder / PRETRAIN_FILE)["model_config"]
    differ = [name for name in SHAPE_FIELDS if pretrained.get(name) != getattr(config, name)]
    if differ:
        name = differ[0]
        raise AttnclfError(f"{folder} pretrained an encoder with {name}={pretrained.get(name)!r}, but this model has "
                           f"{name}={getattr(config, name)!r}; train with --set {name}={pretrained.get(name)}")
    if config.positional == "learned" and pretrained["max_len"] < config.max_len:
        raise AttnclfError(f"{folder} learned positions for {pretrained['max_len']} tokens, but this model reads "
                           f"{config.max_len}; train with --max-len {pretrained['max_len']} (or fewer)")


def load_pretrained(model, tokenizer: Tokenizer, folder: str | Path) -> int:
    """Start ``model`` (a ``self-attn`` classifier) from a pretrained encoder; return how many words it knew.

    The model's shape (width, heads, layers, feed-forward, positions) must be the pretraining's.
    """
    folder = Path(folder)
    check_compatible("self-attn" if isinstance(model, SelfAttentionClassifier) else type(model).__name__,
                     model.config, folder)
    weights = load_file(str(folder / ENCODER_FILE))
    pretrained_vocab = Tokenizer.load(folder / "tokenizer.json", TokenizerConfig(kind="word")).backend.get_vocab()
    table = weights.pop("token_embedding.weight")
    own = model.state_dict()
    with torch.no_grad():
        for name, tensor in weights.items():
            if name.startswith("positions.") and own[name].shape != tensor.shape:  # learned, longer: its first rows
                tensor = tensor[: own[name].shape[0]]
            own[name].copy_(tensor)
        rows = [(token_id, pretrained_vocab[word]) for word, token_id in tokenizer.backend.get_vocab().items()
                if token_id not in (PAD_ID, UNK_ID) and word in pretrained_vocab]
        if rows:
            targets, sources = zip(*rows)
            model.token_embedding.weight[list(targets)] = table[list(sources)].to(model.token_embedding.weight.dtype)
    return len(rows)


def describe(folder: str | Path) -> str:
    """One line on a pretrained encoder, for logs."""
    record = json.loads((Path(folder) / PRETRAIN_FILE).read_text())
    losses = [e["loss"] for e in record["epochs"]]
    return (f"{record['tokens']:,} tokens x {len(losses)} epochs, final loss "
            f"{losses[-1] if losses else math.nan}")
