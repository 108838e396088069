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
corpus, the losses, the device it last pretrained on), and
``checkpoint.safetensors``, the whole state as the last epoch ended or, within
an epoch, every ``checkpoint_minutes`` of it (where the epoch was: its step and
losses so far), which resumes an interrupted call from the next step to the
same bytes; the encoder is published as epochs end only. On SST-2 sentences 52 minutes of it did
not beat the fixed vectors alone (BENCHMARKS.md). ``attnclf train
--init-from FOLDER`` starts a ``self-attn`` model of the same shape from it
(``load_pretrained``): the encoder whole, the token embedding row by row for
the words both vocabularies share. Pooling, head and n-gram branch are the
classifier's own and start fresh.

>>> # settings = PretrainSettings(model_config={"d_model": 64, "layers": 2, "ff_dim": 256}, max_len=64, epochs=1)
>>> # pretrain_encoder(texts, settings, "runs/pretrained")
>>> # then: attnclf train --dataset sst2-sentences --init-from runs/pretrained
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import InitVar, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Callable, Collection, Iterable, Sequence

import numpy as np
import torch
from torch import nn

from ..checks import by_field, check_seed, real_number, whole_number
from ..errors import AttnclfError, RunDirError, shown
from ..models import MODELS, build_model, config_for
from ..models.classifiers import SelfAttentionClassifier
from ..models.memory import SMALLEST_VOCABULARY, refuse_untrainable
from ..prediction import check_texts
from ..rundir import (atomic_save_tensors, atomic_write_json, file_sha256, first_missing_folder, folder_lock,
                      load_weights, prepare_output_dir, read_json, remove_cut_short_writes, remove_empty_folders)
from ..text.batching import BucketBatches
from ..text.cleaning import CLEANING_ADDED, CleaningConfig, added_since
from ..text.tokenizer import PAD_ID, UNK_ID, Tokenizer, TokenizerConfig
from ..text.vectors import WordVectors
from .device import (describe_device, device_generator_state, forked_generators, resolve_device, seed_generators,
                     set_device_generator_state)
from . import pace
from .pace import CHECKPOINT_MINUTES, EpochSteps, checked_minutes
from .settings import DERIVED_MODEL_FIELDS, refuse_derived_fields
from .trainer import device_rng_key, optimizer_tensors, restore_optimizer

ENCODER_FILE = "encoder.safetensors"
PRETRAIN_FILE = "pretrain.json"
TOKENIZER_FILE = "tokenizer.json"
CHECKPOINT_FILE = "checkpoint.safetensors"  # the whole state, for resuming; not needed by --init-from
# Where a checkpoint keeps a GPU's generator (``device_rng_key``), which a pretraining resumed on another device
# leaves unread: one resumed on a GPU from a checkpoint of the CPU draws its dropout from the seed on, as a run does.
DEVICE_GENERATORS = {device_rng_key(torch.device(kind)) for kind in ("cuda", "mps")}
# Pretraining splits words as the word tokenizer does with its default cleaning; a run must read text the same way.
TOKENIZER = TokenizerConfig(kind="word", vocab_size=50000, min_frequency=5, max_len=10 ** 9)
# The parts of SelfAttentionClassifier that pretraining trains; the rest is the classifier's own.
PRETRAINED_PREFIXES = ("token_embedding.", "positions.", "embedding_norm.", "encoder.")
# The fields that decide those parts' shapes and meaning: a model that differs in any cannot start from them.
ENCODER_FIELDS = ("d_model", "heads", "layers", "ff_dim", "positional", "embedding_norm", "attention_window")


@dataclass
class PretrainSettings:
    """What ``pretrain_encoder`` trains. ``model_config`` holds ``self-attn`` fields (a recipe's ``model_config``).
    A value that cannot work is refused as the settings are built, in one line naming its field, or the field as
    ``named`` spells it (the command line: by its flag), as ``TrainConfig`` refuses one.

    >>> PretrainSettings(lr=True)
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: lr must be a number, got True
    """

    model_config: dict = field(default_factory=dict)
    max_len: int = 64  # tokens per piece of text, and the classifier's max_len for learned positions
    vocab_size: int = TOKENIZER.vocab_size
    min_frequency: int = TOKENIZER.min_frequency  # as `attnclf vectors`: vectors from the same texts cover the words
    embeddings: str | None = None  # word vectors that seed (and fix) the token embedding
    embeddings_std: float = 4.0
    epochs: int = 1
    batch_size: int = 64
    lr: float = 1e-3
    warmup_ratio: float = 0.05
    mask_rate: float = 0.15
    sampled_words: int = 2048  # words drawn per batch (by count ** 0.75) besides the true ones
    seed: int = 0
    # Not a setting (pretrain.json leaves it out): how the checks name a field, as TrainConfig's `named`.
    named: InitVar[Callable[[str], str] | None] = None

    def __post_init__(self, named: Callable[[str], str] | None) -> None:
        # Each value as the type pretrain.json records (numpy's numbers would not go into it, nor into torch's seed)
        named = named or by_field
        for name, low in (("epochs", 1), ("batch_size", 1), ("max_len", 2), ("sampled_words", 1), ("vocab_size", 3),
                          ("min_frequency", 1)):
            count = whole_number(getattr(self, name))
            if count is None or count < low:
                raise AttnclfError(f"{named(name)} must be a whole number, at least {low}, got "
                                   f"{shown(getattr(self, name))}")
            setattr(self, name, count)
        self.seed = check_seed(self.seed, named("seed"))
        for name, high, bounds in (("lr", math.inf, "positive and finite"),
                                   ("embeddings_std", math.inf, "positive and finite"),
                                   ("mask_rate", 1, "between 0 and 1"), ("warmup_ratio", 1, "between 0 and 1")):
            number = real_number(getattr(self, name))
            if number is None:  # (a string failed on the comparison; True trained at a learning rate of 1)
                raise AttnclfError(f"{named(name)} must be a number, got {shown(getattr(self, name))}")
            if not 0 < number < high:  # (NaN fails the comparison too)
                raise AttnclfError(f"{named(name)} must be {bounds}, got {shown(number)}")
            setattr(self, name, number)
        # (build_model and refuse_untrainable got them twice, a TypeError; a pad_id of 1 hid every <unk> as padding)
        refuse_derived_fields(self.model_config, {
            "vocab_size": f"the trained tokenizer ({named('vocab_size')} caps it)", "max_len": named("max_len"),
            "pad_id": "the tokenizer", "num_classes": "the labels, which pretraining has none of"})
        # (config_for's "valid fields" of a field no self-attn has listed the four refused above, as train's does not)
        settable = [f.name for f in fields(MODELS["self-attn"].config_class) if f.name not in DERIVED_MODEL_FIELDS]
        unknown = [key for key in self.model_config if key not in settable]
        if unknown:
            raise AttnclfError(f"model 'self-attn' has no settable field {shown(unknown[0])}; valid: "
                               f"{', '.join(sorted(settable))}")


def pretrain_recipe(recipe: str | None, datasets: Sequence[str] = (),
                    named: Callable[[str], str] = by_field) -> str | None:
    """The dataset recipe whose model a pretraining builds (``pretrain_settings``' ``recipe``): ``recipe`` where
    given, refused unless a dataset has a recipe by that name (``named``: how the caller's argument is named), else
    that of the first of ``datasets`` it pretrains on; None (the file recipe's) on files alone.

    >>> pretrain_recipe(None, ["imdb", "sst2"]), pretrain_recipe("sst2-sentences", ["imdb"])
    ('imdb', 'sst2-sentences')
    """
    from ..recipes import RECIPES, recipe_for

    if recipe is not None and not recipe_for(recipe):
        raise AttnclfError(f"{named('recipe')} {recipe!r}: no dataset has a recipe by that name; choose one of "
                           f"{', '.join(sorted(RECIPES))}")
    return recipe or (datasets[0] if datasets else None)


def pretrain_settings(output: str | Path, recipe: str | None = None, overrides: dict | None = None,
                      named: Callable[[str], str] | None = None, **fields) -> PretrainSettings:
    """The settings `attnclf pretrain` pretrains into ``output`` with: the model of ``recipe`` (a dataset's recipe;
    None: the file recipe's) with ``overrides`` (``--set``) on it, and the recipe's tokens per piece (``max_len``);
    ``fields``, other ``PretrainSettings`` fields, where not None (None: no flag, the default); ``embeddings_std``
    given without ``embeddings`` is refused. Without a recipe, a pretraining in ``output`` begun under an earlier
    edition of the file recipe goes on with the model it began with. ``named``: as for ``PretrainSettings``.

    >>> pretrain_settings("runs/pretrained", "imdb", {"layers": 1}, epochs=2).model_config["layers"]
    1
    """
    from ..recipes import earlier_file_recipes, file_recipe, model_defaults, recipe_for

    fields = {name: value for name, value in fields.items() if value is not None}
    if "embeddings_std" in fields and not fields.get("embeddings"):  # (it would scale nothing, silently)
        named = named or by_field
        raise AttnclfError(f"{named('embeddings_std')} needs {named('embeddings')} FILE")
    overrides = overrides or {}
    model_config = model_defaults(recipe) | overrides
    if recipe is None:  # (files alone: one begun under an earlier file recipe goes on as it began)
        model_config = as_begun(output, model_config, [file_recipe(edition=edition).get("model_config", {}) |
                                                       overrides for edition in earlier_file_recipes()])
    # A dataset recipe's tokens, else PretrainSettings' own: on files not the file recipe's 512, which its sinusoidal
    # positions read after any pretraining, while longer pieces cost more attention for no measured gain.
    fields.setdefault("max_len", recipe_for(recipe).get("tokenizer", {}).get("max_len", PretrainSettings.max_len))
    return PretrainSettings(model_config=model_config, **fields, named=named)


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


def cut_pieces(sequences: Iterable[Sequence[int]], max_len: int, min_tokens: int = 2) -> list[Sequence[int]]:
    """Each sequence cut into consecutive pieces of ``max_len`` ids (slices: lists of lists, arrays of arrays);
    pieces shorter than ``min_tokens`` are dropped.

    >>> cut_pieces([[1, 2, 3, 4, 5], [6]], 2)
    [[1, 2], [3, 4]]
    """
    return [piece for seq in sequences for start in range(0, len(seq), max_len)
            if len(piece := seq[start:start + max_len]) >= min_tokens]


def encode_pieces(tokenizer: Tokenizer, texts: Sequence[str], max_len: int, chunk: int = 2048) -> list[np.ndarray]:
    """``cut_pieces`` of the texts' ids, as int32 arrays, tokenising ``chunk`` texts at a time (``encode_arrays``).

    >>> tokenizer = Tokenizer.train(["a b c d e"], replace(TOKENIZER, min_frequency=1))
    >>> [piece.tolist() for piece in encode_pieces(tokenizer, ["a b c d e"], 2)]
    [[2, 3], [4, 5]]
    """
    return cut_pieces(tokenizer.encode_arrays(texts, chunk=chunk), max_len)


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
                     log: Callable[[str], None] = print, progress: bool = False,
                     device: str | torch.device = "auto", checkpoint_minutes: float = CHECKPOINT_MINUTES) -> dict:
    """Pretrain a ``self-attn`` encoder on ``texts`` into the folder ``output``; return what ``pretrain.json`` records.

    Deterministic on the CPU for the same texts, settings and thread count. After each epoch the whole
    state goes into one file, ``checkpoint.safetensors`` (written atomically), and the encoder is published
    from it; within an epoch the state goes there every ``checkpoint_minutes`` of training too (0: never), as
    `train`'s does. The same call again after an interruption continues from there (``pretrain_kept`` says where)
    and ends where one uninterrupted call would have, to the byte on the CPU; the interval may differ. ``progress``
    shows a bar per epoch on a terminal, else a line every ``pace.PROGRESS_LINE_SECONDS``. ``device`` is where it
    runs, as for ``train_run`` (``auto``: CUDA, else MPS, else the CPU; ``cuda:N``; or a ``torch.device``); one the
    machine lacks is one line before anything is read. Masking and the sampled words draw on the CPU whatever the
    device, so only the model's sums and its dropout differ on a GPU.

    >>> # pretrain_encoder(texts, PretrainSettings(epochs=1), "pretrained/mine", device="cuda:1")
    """
    device = resolve_device(device)
    checkpoint_minutes = checked_minutes(checkpoint_minutes)
    texts = check_texts(texts)
    if not texts:
        raise AttnclfError("no text to pretrain on")
    _check_settings(settings)
    vectors = WordVectors.load(settings.embeddings) if settings.embeddings else None
    if vectors is not None:  # before the minutes of tokenising, not after
        vectors.check_width(config_for("self-attn", **settings.model_config).d_model)
    output = Path(output)
    created = first_missing_folder(output)
    output = prepare_output_dir(output)
    tokenizer_config = _tokenizer_as_begun(output, replace(TOKENIZER, vocab_size=settings.vocab_size,
                                                           min_frequency=settings.min_frequency))
    # (keyed: one begun before a cleaning setting is recorded without it still, as its checkpoint is)
    record = {"settings": asdict(settings), "texts": len(texts), "texts_sha256": _fingerprint(texts),
              "tokenizer": tokenizer_config.keyed(), "epochs": []}
    try:
        # (generators seeded inside on a fork: the caller's own stream goes on untouched)
        with forked_generators(device), folder_lock(output):
            remove_cut_short_writes(output)
            return _pretrain(texts, settings, output, record, vectors, log, progress, device, checkpoint_minutes)
    except AttnclfError:  # (refused before anything was written: a folder made for it goes again)
        remove_empty_folders(output, created)
        raise


def pretrain_summary(record: dict, output: str | Path) -> str:
    """The line closing `attnclf pretrain`: what ``pretrain_encoder`` (its ``record``) pretrained on, its last loss,
    and how a run starts from ``output``.

    >>> pretrain_summary({"tokens": 12000, "epochs": [{"loss": 4.25}]}, "pretrained")
    'pretrained on 12,000 tokens, final loss 4.25: pretrained (`attnclf train --init-from pretrained`)'
    """
    return (f"pretrained on {record['tokens']:,} tokens, final loss {record['epochs'][-1]['loss']}: {output} "
            f"(`attnclf train --init-from {output}`)")


def _pretrain(texts: Sequence[str], settings: PretrainSettings, output: Path, record: dict,
              vectors: WordVectors | None, log: Callable[[str], None], progress: bool, device: torch.device,
              checkpoint_minutes: float) -> dict:
    """``pretrain_encoder``'s work, in the folder it holds: the texts tokenised into pieces and the model built, then
    trained epoch by epoch from where an earlier call left off; returns the record."""
    saved = _earlier_state(output, record)
    if saved is not None and _published_whole(output, saved["record"], settings.epochs):
        log(_resume_line(output, saved["record"], settings.epochs, position=None))
        return saved["record"]
    tokenizer, pieces = _tokenised_pieces(texts, settings, record, log)
    tokens = record["tokens"]
    model, head = _built_model(settings, tokenizer, vectors, record, log, device)
    trained = [p for name, p in model.named_parameters()
               if name.startswith(PRETRAINED_PREFIXES) and p.requires_grad] + list(head.parameters())
    optimizer = torch.optim.AdamW(trained, lr=settings.lr, weight_decay=0.01)
    batches = BucketBatches(pieces, None, batch_size=settings.batch_size, shuffle=True, seed=settings.seed)
    schedule = _warmup_and_decay(optimizer, settings.epochs * len(batches), settings.warmup_ratio)
    sampling = _word_sampling(pieces, tokenizer.vocab_size)
    generator = torch.Generator().manual_seed(settings.seed)
    position = saved and saved.get("within_epoch")  # (where a checkpoint within an epoch left it)
    if saved is not None:
        record = _restore(output, saved, model, head, optimizer, schedule, generator, device)
        # (within an epoch, not published: what --init-from reads stays the last finished epoch's, published before)
        if not position:  # (an interruption may have come between the checkpoint and the publishing)
            _publish(output, record, model, tokenizer)
        log(_resume_line(output, record, settings.epochs, position))

    if len(record["epochs"]) < settings.epochs:  # (as a run's config.json: where the weights last trained)
        record["device"] = describe_device(device)
    model.train()
    last_saved = pace.clock()
    for epoch in range(len(record["epochs"]), settings.epochs):
        batches.set_epoch(epoch)  # (the epoch's order, drawn again the same on a resume)
        first, carried, losses = ((position["step"], position["epoch_seconds"], position["epoch_losses"])
                                  if position else (0, 0.0, []))
        position = None
        steps = EpochSteps(batches.batch_indices(), f"pretrain epoch {epoch + 1}", progress=progress,
                           checkpoint_minutes=checkpoint_minutes, first=first, carried=carried, unit="pieces")
        for step, idx in steps:
            loss = _masked_word_loss(model, head, batches.batch(idx), settings, tokenizer.vocab_size, sampling,
                                     generator, device)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(trained, 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if steps.after_step(step + 1, len(idx), lambda: float(np.mean(losses)), last_saved):
                _save_checkpoint(output, record, model, head, optimizer, schedule, generator, device,
                                 position={"step": step + 1, "epoch_steps": steps.steps,
                                           "epoch_seconds": steps.seconds(), "epoch_losses": losses})
                last_saved = pace.clock()
        seconds = steps.seconds()
        record["epochs"].append({"epoch": epoch + 1, "loss": round(float(np.mean(losses)), 4),
                                 "seconds": round(seconds, 1), "tokens_per_second": round(tokens / seconds)})
        _save_checkpoint(output, record, model, head, optimizer, schedule, generator, device)
        last_saved = pace.clock()
        _publish(output, record, model, tokenizer)
        log(f"pretrain: epoch {epoch + 1}/{settings.epochs} loss {np.mean(losses):.4f} ({seconds:.0f} s, "
            f"{tokens / seconds:,.0f} tokens/s; saved)")
    return record


def _tokenised_pieces(texts: Sequence[str], settings: PretrainSettings, record: dict,
                      log: Callable[[str], None]) -> tuple[Tokenizer, list[np.ndarray]]:
    """The tokenizer learned from ``texts`` (as ``record`` configures it) and the texts' pieces of at most
    ``settings.max_len`` tokens, counted into ``record``; a one-line error where the model is too large for the
    vocabulary learned, or no text holds two words."""
    started = time.perf_counter()
    tokenizer = Tokenizer.train(texts, TokenizerConfig.from_dict(record["tokenizer"]))
    # (the encoder alone, counted as trained: with its output words, as wide as its vocabulary, pretraining holds more)
    refuse_untrainable("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=settings.max_len,
                       **_encoder_config(settings))
    pieces = encode_pieces(tokenizer, texts, settings.max_len)
    if not pieces:
        raise AttnclfError(f"no text of the {len(texts):,} holds two words: nothing to pretrain on")
    tokens = sum(len(piece) for piece in pieces)
    record |= {"pieces": len(pieces), "tokens": tokens, "words": tokenizer.vocab_size}
    log(f"pretrain: {len(texts):,} texts, {len(pieces):,} pieces of at most {settings.max_len} tokens, "
        f"{tokens:,} tokens, {tokenizer.vocab_size:,} words ({time.perf_counter() - started:.0f} s)")
    return tokenizer, pieces


def _built_model(settings: PretrainSettings, tokenizer: Tokenizer, vectors: WordVectors | None, record: dict,
                 log: Callable[[str], None], device: torch.device) -> tuple[SelfAttentionClassifier, MaskedWordHead]:
    """The encoder's model (its config recorded into ``record``) and the head that guesses hidden words, seeded by
    ``settings.seed``, on ``device``; the token embedding starts from ``vectors`` (None: drawn), and stays fixed."""
    seed_generators(settings.seed, device)  # (initial weights draw on the CPU, dropout on the device)
    model = build_model("self-attn", vocab_size=tokenizer.vocab_size, num_classes=2, max_len=settings.max_len,
                        **_encoder_config(settings))
    record["model_config"] = asdict(model.config)
    head = MaskedWordHead(model.config.d_model, tokenizer.vocab_size)
    if vectors is not None:
        found = vectors.initialise(model.token_embedding, tokenizer, settings.embeddings_std)
        model.token_embedding.weight.requires_grad_(False)
        log(f"pretrain: {found:,} of {tokenizer.vocab_size - 2:,} words start from {settings.embeddings} (fixed)")
    model.to(device)
    head.to(device)
    return model, head


def _warmup_and_decay(optimizer: torch.optim.Optimizer, total_steps: int,
                      warmup_ratio: float) -> torch.optim.lr_scheduler.LambdaLR:
    """The learning rate rising linearly over the first ``warmup_ratio`` of ``total_steps``, then falling linearly
    to 0 at the last."""
    warmup = max(1, int(warmup_ratio * total_steps))
    # Linear warmup and decay as trainer._make_schedule, written as the recorded encoder was trained: that one
    # computes the decay as 1 - progress, which rounds differently and would change the benchmark's bytes.
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup))))


def _word_sampling(pieces: list[np.ndarray], vocab_size: int) -> torch.Tensor:
    """Each word's weight among the sampled words a hidden one is told from: its count in ``pieces`` ** 0.75 (as
    word2vec's negative sampling), none for padding and <unk>."""
    counts = np.bincount(np.concatenate(pieces), minlength=vocab_size)
    counts[[PAD_ID, UNK_ID]] = 0
    return torch.from_numpy(counts.astype(np.float64) ** 0.75)


def _resume_line(output: Path, record: dict, epochs: int, position: dict | None) -> str:
    """The line saying where a pretraining restored from ``output`` (``record``) goes on: within an epoch
    (``position``), after its last finished one, or nowhere, all ``epochs`` done."""
    if position:
        return (f"pretrain: resuming from step {position['step'] + 1:,} of {position['epoch_steps']:,} in epoch "
                f"{len(record['epochs']) + 1} of {epochs}")
    if len(record["epochs"]) == epochs:
        return f"pretrain: {output} has pretrained all {epochs} epochs already; nothing to do"
    return f"pretrain: resuming after epoch {len(record['epochs'])} of {epochs}"


def _masked_word_loss(model: SelfAttentionClassifier, head: MaskedWordHead, batch, settings: PretrainSettings,
                      vocab_size: int, sampling: torch.Tensor, generator: torch.Generator,
                      device: torch.device) -> torch.Tensor:
    """One step's loss: ``batch``'s pieces corrupted (``mask_tokens``, random words among the ``vocab_size``),
    encoded, and each hidden word scored by ``head`` among the true words and ``settings.sampled_words`` drawn by
    ``sampling`` (count ** 0.75), both drawn from ``generator`` on the CPU."""
    ids, mask = batch.input_ids, batch.attention_mask
    # <unk> is a word like the others here: a hidden rare word is to be recognised as rare.
    corrupted, chosen = mask_tokens(ids, mask, settings.mask_rate, vocab_size, generator)
    ids, mask, corrupted, chosen = (tensor.to(device) for tensor in (ids, mask, corrupted, chosen))
    x, mask = model.embed(corrupted, mask, None)
    states, _ = model.encoder(model.dropout(model.embedding_norm(model.positions(x))), mask)
    targets = ids[chosen]
    drawn = torch.multinomial(sampling, settings.sampled_words, replacement=True, generator=generator).to(device)
    candidates, where = torch.unique(torch.cat([targets, drawn]), return_inverse=True)
    return nn.functional.cross_entropy(head(states[chosen], candidates), where[: len(targets)])


def _check_settings(settings: PretrainSettings) -> None:
    """A one-line error for a model that cannot work, before anything is read or written (each value alone was
    checked as the settings were built)."""
    # An impossible model (heads that do not divide d_model) fails here in its own words, and one too large to train
    # whatever the texts (--max-len 100000000) before they are read, as `train` refuses it; its vocabulary is sized
    # once the tokenizer has learned it.
    refuse_untrainable("self-attn", vocab_size=SMALLEST_VOCABULARY, num_classes=2, max_len=settings.max_len,
                       **_encoder_config(settings))


def _encoder_config(settings: PretrainSettings) -> dict:
    # (a classifier's, not an encoder's)
    return {**settings.model_config, "ngram_buckets": 0, "nb_ngram_buckets": 0, "nb_ngram_bucket_budget": 0}


def _fingerprint(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little") + data)  # (so that ["a\nb"] is not ["a", "b"])
    return digest.hexdigest()


def _earlier_state(output: Path, record: dict) -> dict | None:
    """The checkpoint's state if ``output`` holds an earlier call's pretraining of the same texts and settings,
    None if it is empty; refused otherwise."""
    checkpoint = output / CHECKPOINT_FILE
    if not checkpoint.is_file():
        if any(not path.name.startswith(".") for path in output.iterdir()):
            raise RunDirError(f"{output} holds other files and no pretraining; choose an empty or new --output")
        return None
    try:
        saved = _saved_state(output)
        then = saved["record"]
        then["epochs"], saved["schedule"], saved["optimizer_param_groups"]  # (what resuming reads)
        if position := saved.get("within_epoch"):
            position["step"] + position["epoch_steps"] + position["epoch_seconds"] + sum(position["epoch_losses"])
    except (KeyError, TypeError, ValueError):
        raise RunDirError(f"{checkpoint}: not a checkpoint of `attnclf pretrain`; choose another --output") from None
    for key, what in (("texts_sha256", "other texts"), ("settings", "other settings"),
                      ("tokenizer", "another tokenizer")):
        if then.get(key) != record[key]:
            differ = next((name for name in record[key] if then[key].get(name) != record[key][name]), None) \
                if isinstance(record[key], dict) else None
            which = f" ({differ}: {then[key].get(differ)!r} there, {record[key][differ]!r} here)" if differ else ""
            raise RunDirError(f"{output} holds a pretraining of {what}{which}; rerun its own command to continue it, "
                              f"or choose another --output")
    return saved


def pretrain_kept(output: str | Path) -> tuple[str, str] | None:
    """What the interrupted pretraining in ``output`` kept ("kept step 812 of 1,561 in epoch 1 of 2") and what its
    own command run again does from there ("continues from step 813"); None where it kept nothing readable.

    >>> pretrain_kept("no/such/folder") is None
    True
    """
    try:
        if (saved := _saved_state(Path(output))) is None:
            return None
        finished, epochs = len(saved["record"]["epochs"]), saved["record"]["settings"]["epochs"]
        position = saved.get("within_epoch")
        step, steps = (position["step"], position["epoch_steps"]) if position else (None, None)
    except (KeyError, TypeError, ValueError, AttnclfError):  # (not a pretraining's: the command again says so)
        return None
    if position:
        return (f"kept step {step:,} of {steps:,} in epoch {finished + 1} of {epochs}",
                f"continues from step {step + 1:,}")
    if finished >= epochs:
        return f"kept epoch {finished} of {epochs}", "has nothing left to do"
    return f"kept epoch {finished} of {epochs}", f"continues from epoch {finished + 1}"


def as_begun(output: str | Path, model_config: dict, earlier: Sequence[dict]) -> dict:
    """``model_config`` for pretraining into ``output``: the one of ``earlier`` (what the command built under earlier
    editions of its defaults) that the pretraining there began with exactly, so its own command continues it; else
    ``model_config`` as it is (checked against the pretraining there as usual).

    >>> # as_begun("pretrained/mine", model_defaults(None) | overrides, [overrides])  # begun at the general defaults
    """
    recorded = _recorded(Path(output), "settings", "model_config")
    return next((begun for begun in earlier if begun == recorded), model_config)


def _tokenizer_as_begun(output: Path, config: TokenizerConfig) -> TokenizerConfig:
    """``config`` as the pretraining in ``output`` began with it: one whose checkpoint records no value for a cleaning
    setting added since (``CLEANING_ADDED``) read texts without it, and its own command continues it so.

    >>> # _tokenizer_as_begun(Path("pretrained/imdb"), TOKENIZER).cleaning.split_cjk   # -> False if begun before it
    """
    recorded = _recorded(output, "tokenizer", "cleaning")
    if not isinstance(recorded, dict):  # (no checkpoint, or not a pretraining's: _earlier_state says so)
        return config
    return replace(config, cleaning=config.cleaning.as_before(added_since(recorded)))


def _saved_state(output: Path) -> dict | None:
    """What the checkpoint in ``output`` holds besides its tensors (``_save_checkpoint``'s state: the record, the
    optimiser's groups, the schedule, where within an epoch it was), None without one. One that is not a
    pretraining's raises: RunDirError where the file is no safetensors, KeyError or ValueError where it holds no such
    state."""
    checkpoint = output / CHECKPOINT_FILE
    if not checkpoint.is_file():
        return None
    return json.loads(_checkpoint_metadata(checkpoint)["state"])


def _recorded(output: Path, part: str, name: str):
    """The field ``name`` of ``part`` of the record the checkpoint in ``output`` holds (its settings' model_config,
    its tokenizer's cleaning); None without a checkpoint, or where it is not a pretraining's (``_earlier_state`` says
    why, as the pretraining starts).

    >>> _recorded(Path("no/such/folder"), "settings", "model_config") is None
    True
    """
    try:
        return _saved_state(output)["record"][part][name]
    except (KeyError, TypeError, ValueError, AttnclfError):  # (TypeError: no checkpoint, or a record of other shape)
        return None


def _checkpoint_metadata(path: Path) -> dict:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as handle:
            return handle.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types for a damaged file
        raise RunDirError(f"{path}: not a valid safetensors file ({exc}); choose another --output") from None


def _save_checkpoint(output: Path, record: dict, model, head, optimizer, schedule, generator,
                     device: torch.device, position: dict | None = None) -> None:
    """Everything a resumed call needs, in one file written atomically: it is the only thing resuming trusts. On a
    GPU, its generator too (dropout draws from it there), as a run's checkpoint keeps it. ``position``: where
    within the epoch after ``record``'s a checkpoint within it was taken (step, the epoch's steps, its seconds and
    losses so far)."""
    tensors = {f"model.{name}": tensor for name, tensor in model.state_dict().items()
               if name.startswith(PRETRAINED_PREFIXES)}
    tensors |= {f"head.{name}": tensor for name, tensor in head.state_dict().items()}
    optimizer_state, param_groups = optimizer_tensors(optimizer)
    tensors |= optimizer_state
    tensors["rng.torch"] = torch.get_rng_state()  # dropout: a resumed call draws the masks it would have drawn
    tensors["rng.generator"] = generator.get_state()  # masking and sampled words
    if (own := device_generator_state(device)) is not None:
        tensors[device_rng_key(device)] = own
    metadata = {"state": json.dumps({"record": record, "optimizer_param_groups": param_groups,
                                     "schedule": schedule.state_dict(),
                                     **({"within_epoch": position} if position else {})})}
    atomic_save_tensors(output / CHECKPOINT_FILE, tensors, metadata)


def _restore(output: Path, saved: dict, model, head, optimizer, schedule, generator, device: torch.device) -> dict:
    """Put the checkpoint's state back into the pretraining's parts (``device``'s generator where it holds one);
    return its record."""
    tensors = load_weights(output / CHECKPOINT_FILE)
    expected = {f"model.{name}" for name in model.state_dict() if name.startswith(PRETRAINED_PREFIXES)}
    expected |= {f"head.{name}" for name in head.state_dict()} | {"rng.torch", "rng.generator"}
    trained = sum(len(group["params"]) for group in optimizer.param_groups)
    expected |= {f"optimizer.{index}.{name}" for index in range(trained) for name in ("step", "exp_avg", "exp_avg_sq")}
    found = set(tensors) - DEVICE_GENERATORS
    if found != expected:
        missing = sorted(expected - found) or sorted(found - expected)
        raise RunDirError(f"{output / CHECKPOINT_FILE} does not hold this pretraining's state ({missing[0]} "
                          f"{'missing' if expected - found else 'unexpected'}); choose another --output")
    model.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")}, strict=False)
    head.load_state_dict({k[5:]: v for k, v in tensors.items() if k.startswith("head.")})
    restore_optimizer(optimizer, tensors, saved["optimizer_param_groups"])
    schedule.load_state_dict(saved["schedule"])
    torch.set_rng_state(tensors["rng.torch"])
    generator.set_state(tensors["rng.generator"])
    if device_rng_key(device) in tensors:
        set_device_generator_state(device, tensors[device_rng_key(device)])
    return saved["record"]


def _published_whole(output: Path, record: dict, epochs: int) -> bool:
    """Whether the checkpoint's ``record`` is of all ``epochs`` and was published whole (pretrain.json, written
    last, holds it): then a rerun has nothing to tokenise, train or write."""
    if len(record["epochs"]) != epochs or not all((output / name).is_file() for name in (ENCODER_FILE, TOKENIZER_FILE)):
        return False
    try:
        return read_json(output / PRETRAIN_FILE) == record
    except RunDirError:  # missing or damaged: published again from the checkpoint
        return False


def _publish(output: Path, record: dict, model, tokenizer: Tokenizer) -> None:
    """What ``--init-from`` reads, from the checkpoint's state; pretrain.json last, as it marks the folder."""
    tokenizer.save(output / TOKENIZER_FILE)
    atomic_save_tensors(output / ENCODER_FILE, {name: tensor for name, tensor in model.state_dict().items()
                                                if name.startswith(PRETRAINED_PREFIXES)})
    atomic_write_json(output / PRETRAIN_FILE, record)


def check_pretrained(model_name: str, config, folder: str | Path,
                     tokenizer: TokenizerConfig | None = None) -> None:
    """A one-line error unless ``folder`` is a pretraining that a ``model_name`` model with ``config``, reading
    text as ``tokenizer`` says, can start from.

    >>> check_pretrained("self-attn", None, "no/such/folder")
    Traceback (most recent call last):
    ...
    attnclf.errors.RunDirError: no/such/folder: not a pretrained encoder (no pretrain.json, encoder.safetensors or \
tokenizer.json; write one with `attnclf pretrain`)
    """
    folder = Path(folder)
    unfinished = (f"{folder} has not finished an epoch of pretraining yet; its `attnclf pretrain` command, given "
                  f"again, continues it")
    if not all((folder / name).is_file() for name in (PRETRAIN_FILE, ENCODER_FILE, TOKENIZER_FILE)):
        if (folder / CHECKPOINT_FILE).is_file():  # (a pretraining stopped in its first epoch has written that alone)
            raise RunDirError(unfinished)
        raise RunDirError(f"{folder}: not a pretrained encoder (no {PRETRAIN_FILE}, {ENCODER_FILE} or "
                          f"{TOKENIZER_FILE}; write one with `attnclf pretrain`)")
    if model_name != "self-attn":
        raise AttnclfError(f"--init-from starts self-attn models only (it pretrained one), not {model_name}")
    pretrained = read_json(folder / PRETRAIN_FILE)
    if not pretrained.get("epochs"):
        raise RunDirError(unfinished)
    encoder = pretrained["model_config"]
    # Every setting to change in one line: a recipe's pretraining differs from train's defaults in several.
    differ = [name for name in ENCODER_FIELDS if encoder.get(name) != getattr(config, name)]
    said, fixes = [], [f"--set {name}={encoder.get(name)}" for name in differ]
    if differ:
        said.append(f"pretrained an encoder with {', '.join(f'{name}={encoder.get(name)!r}' for name in differ)}, "
                    f"but this model has {', '.join(f'{name}={getattr(config, name)!r}' for name in differ)}")
    # (the encoder's positions: those the model will have once it takes the encoder's settings)
    if encoder.get("positional") == "learned" and encoder["max_len"] < config.max_len:
        said.append(f"learned positions for {encoder['max_len']} tokens, but this model reads {config.max_len}")
        fixes.append(f"--max-len {encoder['max_len']} (or fewer)")
    if said:
        raise AttnclfError(f"{folder} {'; it '.join(said)}; train with {' '.join(fixes)}")
    if tokenizer is not None:
        theirs = TokenizerConfig.from_dict(pretrained.get("tokenizer", TOKENIZER.to_dict()))
        if tokenizer.kind != theirs.kind or tokenizer.cleaning != theirs.cleaning:
            give, leave_out = _cleaning_flags(tokenizer.cleaning, theirs.cleaning)
            give = [f"--tokenizer {theirs.kind}"] * (tokenizer.kind != theirs.kind) + give
            advice = " and ".join([f"with {' '.join(give)}"] * bool(give) + [f"without {' '.join(leave_out)}"] *
                                  bool(leave_out))
            raise AttnclfError(f"{folder} was pretrained on {theirs.kind} tokens with {_cleaning(theirs.cleaning)}, "
                               f"but this run reads {tokenizer.kind} tokens with {_cleaning(tokenizer.cleaning)}: its "
                               f"embedding would meet other tokens; train {advice}")


def cleaning_as_pretrained(folder: str | Path, cleaning: CleaningConfig,
                           given: Collection[str] = ()) -> tuple[CleaningConfig, list[str]]:
    """``cleaning`` for a run that starts from the pretraining in ``folder``, and the settings it took from there:
    one written before a cleaning setting was added (its pretrain.json records no value for it, ``CLEANING_ADDED``)
    read texts at the value every run had then, and so does the run, unless ``given`` names the setting (the caller
    set it: the command line, its flag typed). A folder that is no pretraining leaves ``cleaning`` as it is
    (``check_pretrained`` says why it cannot start a run).

    >>> cleaning_as_pretrained("no/such/folder", CleaningConfig())
    (CleaningConfig(lowercase=True, strip_punctuation=False, remove_stopwords=False, lemmatize=False, \
unicode_nfc=True, split_cjk=True, social_media=False, turkish_i=True), [])
    """
    try:
        recorded = read_json(Path(folder) / PRETRAIN_FILE)["tokenizer"]["cleaning"]
        lacking = [name for name in added_since(recorded)
                   if name not in given and getattr(cleaning, name) != CLEANING_ADDED[name]]
    except (RunDirError, KeyError, TypeError):
        return cleaning, []
    return cleaning.as_before(lacking), lacking


# The command line's flag for each cleaning setting: what sets it away from its default
_CLEANING_FLAGS = {"lowercase": "--no-lowercase", "strip_punctuation": "--strip-punctuation",
                   "remove_stopwords": "--remove-stopwords", "lemmatize": "--lemmatize",
                   "unicode_nfc": "--no-unicode-nfc", "split_cjk": "--no-split-cjk",
                   "social_media": "--social-media", "turkish_i": "--no-turkish-i"}


def _cleaning_flags(ours: CleaningConfig, theirs: CleaningConfig) -> tuple[list[str], list[str]]:
    """The flags that make ``ours`` cleaning ``theirs``: those to give, and those to leave out.

    >>> _cleaning_flags(CleaningConfig(lowercase=False), CleaningConfig(lemmatize=True))
    (['--lemmatize'], ['--no-lowercase'])
    """
    default, give, leave_out = CleaningConfig(), [], []
    for name, flag in _CLEANING_FLAGS.items():
        if getattr(ours, name) != getattr(theirs, name):
            (give if getattr(theirs, name) != getattr(default, name) else leave_out).append(flag)
    return give, leave_out


def _cleaning(cleaning: CleaningConfig) -> str:
    """The cleaning, as the settings that differ from the default's.

    >>> _cleaning(CleaningConfig()), _cleaning(CleaningConfig(lowercase=False))
    ('the default cleaning', 'cleaning lowercase=False')
    """
    changed = [name for name, value in asdict(cleaning).items() if value != getattr(CleaningConfig(), name)]
    return f"cleaning {', '.join(f'{name}={getattr(cleaning, name)}' for name in changed)}" if changed else \
        "the default cleaning"


def load_pretrained(model, tokenizer: Tokenizer, folder: str | Path) -> int:
    """Start ``model`` (a ``self-attn`` classifier) from a pretrained encoder; return how many words it knew.

    The model's shape (width, heads, layers, feed-forward, positions, attention window) and its tokenizer's
    kind and cleaning must be the pretraining's.

    >>> # load_pretrained(model, tokenizer, "runs/pretrained")  # 18,412: the words both vocabularies share
    """
    folder = Path(folder)
    check_pretrained("self-attn" if isinstance(model, SelfAttentionClassifier) else type(model).__name__,
                     model.config, folder, tokenizer.config)
    weights = load_weights(folder / ENCODER_FILE)
    pretrained_vocab = Tokenizer.load(folder / TOKENIZER_FILE, TOKENIZER).backend.get_vocab()
    own = model.state_dict()
    if problem := _encoder_mismatch(weights, own, len(pretrained_vocab)):
        raise RunDirError(f"{folder / ENCODER_FILE}: {problem}")
    table = weights.pop("token_embedding.weight")
    with torch.no_grad():
        for name, tensor in weights.items():
            if name.startswith("positions.") and own[name].shape != tensor.shape:  # learned, longer: its first rows
                tensor = tensor[: own[name].shape[0]]
            own[name].copy_(tensor)
        rows = [(token_id, pretrained_vocab[word]) for word, token_id in tokenizer.backend.get_vocab().items()
                if token_id not in (PAD_ID, UNK_ID) and word in pretrained_vocab]
        if rows:
            targets, sources = zip(*rows)
            # (to the table's dtype and device: a model already on a GPU holds it there)
            model.token_embedding.weight[list(targets)] = table[list(sources)].to(model.token_embedding.weight)
    return len(rows)


def _encoder_mismatch(weights: dict[str, torch.Tensor], own: dict[str, torch.Tensor], words: int) -> str | None:
    """How an encoder file's ``weights`` fail to fit a model's state ``own`` (its tokenizer knowing ``words``), or
    None. The folder may come from elsewhere: torch would cast another dtype without a word, and a missing name or
    another shape would surface as torch's KeyError or RuntimeError. Learned positions may be longer than the model
    reads (their first rows are taken); the embedding has a row per word of the encoder's own tokenizer.

    >>> own = {"token_embedding.weight": torch.zeros(5, 4), "encoder.w": torch.zeros(4, 4)}
    >>> _encoder_mismatch({"token_embedding.weight": torch.zeros(5, 4), "encoder.w": torch.zeros(4, 2)}, own, 5)
    'encoder.w is (4, 2) in the file, (4, 4) in the model'
    """
    # Every part the encoder covers: one left out would stay at its random start without a word.
    lacking = [name for name in own if name.startswith(PRETRAINED_PREFIXES) and name not in weights]
    if lacking:
        return f"it lacks {lacking[0]}" + (f" and {len(lacking) - 1} more the model has" if len(lacking) > 1 else "")
    for name, tensor in weights.items():
        if name not in own:
            return f"holds {name}, which the model lacks"
        if tensor.dtype != own[name].dtype:
            return f"{name} is {tensor.dtype} in the file, {own[name].dtype} in the model"
        shape, expected = tuple(tensor.shape), tuple(own[name].shape)
        if name == "token_embedding.weight" and shape != (words, expected[1]):
            return (f"{name} is {shape} in the file: rows for the {words:,} words of its tokenizer.json, "
                    f"{expected[1]} wide")
        fits = (shape[1:] == expected[1:] and shape[0] >= expected[0]) if name.startswith("positions.") else (
            shape == expected or name == "token_embedding.weight")
        if not fits:
            return f"{name} is {shape} in the file, {expected} in the model"
    return None


def describe_pretrained(folder: str | Path) -> str:
    """One line on a pretrained encoder, for logs.

    >>> # describe_pretrained("runs/pretrained")  # '1,250,000 tokens x 2 epochs, final loss 4.25'
    """
    record = read_json(Path(folder) / PRETRAIN_FILE)
    losses = [epoch["loss"] for epoch in record["epochs"]]
    planned = record["settings"]["epochs"]
    return (f"{record['tokens']:,} tokens x {len(losses)}{f' of {planned} planned' if len(losses) < planned else ''} "
            f"epochs, final loss {losses[-1] if losses else math.nan}")


def encoder_fingerprint(folder: str | Path) -> str:
    """sha256 of the pretrained weights: whether a folder still holds the encoder a run started from.

    >>> # encoder_fingerprint("runs/pretrained")[:12]  # what config.json's pretrained_sha256 records
    """
    return file_sha256(Path(folder) / ENCODER_FILE)


def check_pretrained_unchanged(run_config: dict, what: str) -> None:
    """A one-line error if the pretrained encoder a run (its config.json) started from has changed since.

    >>> check_pretrained_unchanged({"settings": {"init_from": None}}, "runs/demo")  # (it started from none)
    """
    settings = run_config.get("settings", {})
    recorded = run_config.get("pretrained_sha256")
    if not settings.get("init_from"):
        return
    folder = Path(settings["init_from"])
    if not (folder / ENCODER_FILE).is_file():
        raise AttnclfError(f"{what} started from the pretrained encoder {folder}, which is gone; it must start from "
                           f"the same one")
    if recorded is not None and encoder_fingerprint(folder) != recorded:
        raise AttnclfError(f"{what} started from the pretrained encoder in {folder}, which has changed since "
                           f"(pretrained further, or replaced); it must start from the same one")
