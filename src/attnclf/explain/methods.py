"""Per-token scores for one class of a prediction, five ways, and the self-attention maps.

| method | score of token t |
|---|---|
| ``attention`` | the pooling layer's weight: where the pooling layer looked, not why the model decided |
| ``rollout`` | attention rolled out through the layers with the residual path, read out by the pooling's weights |
| ``grad-input`` | gradient x input on the token embedding: ``e_t . df/de_t`` |
| ``integrated-gradients`` | ``(e_t - b_t) . mean of df/de_t`` along the straight path from a ``<pad>`` baseline |
| ``occlusion`` | ``p(class | text) - p(class | text without t)`` |

The gradient methods explain the class's log-odds ``f = z_c - logsumexp(z_other) =
log p / (1 - p)``: it is what the softmax reads (for two classes, the logit
margin), where a raw logit can rise with every class's logit and mean nothing.
A calibrated run's ``z`` are its logits over its temperature, so ``p`` is the probability it reports.
A multi-label run (``multi_label=True``) has a sigmoid per label, and explains one label at a time: the same
``log p / (1 - p)`` of that label's own probability is then exactly its logit ``z_c``, which no other label's
logit moves, and occlusion's score is the drop in that label's own probability, the one its threshold cuts.
Integrated gradients' scores add up to ``f(text) - f(baseline)`` in the limit of
many steps; ``Attribution.completeness_error`` says how far from that they are,
and ``steps="auto"`` (the default) integrates the whole path with 16 Gauss-Legendre nodes,
then halves, per text, the pieces of the path whose integral misses the log-odds' change along
them (known exactly: a forward pass each end) until that error is at most 1%, and the pieces whose
tokens' scores moved most when they were halved until those moves, summed, are at most 3% of the
largest score (or 1,008 gradients, what doubling 16 to 512 nodes took, are spent); ``steps``
reports the gradients taken. Completeness alone bounds only the sum: on 16 IMDB test reviews it
left single scores off by a median 6% of the largest one (55% at worst), and one of 48 demo texts
by 47%; with both checks, IMDB's by a median 0.8% (at worst 9%, on a review whose log-odds barely
change) and the demo's by at most 0.9%, for 2-3x the CPU (2026-11-28, BENCHMARKS.md).

Removing a token means shortening the text. That differs from masking the
token out in models with positions: masking keeps the later tokens at their old
positions, removal moves them up one, as if the word had never been written.
A text with every token removed is scored as the empty text, as the tokenizer encodes it (one ``<unk>``).

Gradient methods attribute to token embeddings as ``embed_tokens`` builds them. In ``self-attn``'s optional
bigram table (``ngram_buckets``) the bigram (t, t+1) is added to token t's row, so it is credited to t alone,
while removing t+1 removes it too; the n-gram branch (``nb_ngram_buckets``) splits a bigram's evidence
between its two tokens. The IMDB and SST-2 recipes use the branch, 20 Newsgroups' the table.

>>> from attnclf.models import build_model
>>> model = build_model("self-attn", vocab_size=20, d_model=16, layers=1)
>>> result = attribute(model, [[5, 6, 7]], np.array([1]), "occlusion")
>>> result.scores[0].shape
(3,)
"""

from __future__ import annotations

import functools
import numbers
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from ..checks import by_field
from ..errors import AttnclfError, first_few, shown, unknown_name
from ..evaluation.predict import predict_probabilities
from ..models.base import model_device
from ..text.batching import EVAL_MAX_TOKENS, BucketBatches
from ..text.tokenizer import PAD_ID, UNK_ID


@dataclass(frozen=True)
class Method:
    name: str
    description: str  # what a score means; shown beside every result
    signed: bool  # negative scores are evidence against the class
    per_class: bool = True  # the scores depend on the class explained (attention's weights come before the head)
    options: dict = field(default_factory=dict)  # option name -> default


METHODS: dict[str, Method] = {
    m.name: m
    for m in [
        Method("attention", "where the pooling layer looked (its weight per token), not necessarily why "
               "the model decided", signed=False, per_class=False),
        Method("rollout", "attention rolled out through the encoder layers with the residual path "
               "(Abnar & Zuidema 2020), read out by the pooling's weight per position (every position alike where "
               "it pools by mean, or by max, which has no weights)", signed=False, per_class=False),
        Method("grad-input", "gradient x input on the token embeddings: each token's first-order "
               "contribution to the class log-odds", signed=True),
        Method("integrated-gradients", "integrated gradients from a <pad>-embedding baseline: contributions "
               "to the class log-odds that add up to its change from the baseline", signed=True,
               options={"steps": "auto"}),
        Method("occlusion", "drop in the class probability when the token is removed", signed=True),
    ]
}


IG_TOLERANCE = 0.01  # steps="auto" refines a text's path until its completeness error is at most this ...
IG_TOKEN_TOLERANCE = 0.03  # ... and each token's estimated error is within this share of the largest score ...
IG_AUTO_BUDGET = 1008  # ... or it has taken this many gradients (what doubling 16 to 512 nodes took at worst)
IG_AUTO_FIRST_NODES = 16  # Gauss-Legendre nodes on the whole path first (as steps=16), ...
IG_AUTO_PIECE_NODES = 8  # ... then on each half of a piece of it still off
IG_MAX_STEPS = 1024  # a fixed step count's bound: its Gauss-Legendre nodes take seconds to find (10^5: 75 GB)
IG_TOKENS_PER_PASS = 16384  # path points are stacked into forward passes of about this many tokens
OCCLUSION_VARIANTS_PER_CHUNK = 4096


@dataclass
class Attribution:
    """One score per token of every text, for the class asked about.

    ``completeness_error``, ``log_odds_change`` and ``steps`` are set by
    integrated gradients only: ``|sum(scores) - change| / |change|`` per text,
    where ``change = f(text) - f(baseline)``, and the gradients it took (a whole-number ``steps``: that many).
    """

    scores: list[np.ndarray]
    completeness_error: np.ndarray | None = None
    log_odds_change: np.ndarray | None = None
    steps: np.ndarray | None = None


def known_method(name: object, all_too: bool = False) -> str:
    """``name`` if it names an explanation method (a key of ``METHODS``), else one line naming it and the methods
    to choose from: the one wording for every place a method is named (``attribute``, ``chosen_methods``,
    ``measure_faithfulness``). ``all_too``: where ``all`` is a choice too (a list of methods to explain).

    >>> known_method("occlusion")
    'occlusion'
    >>> known_method("saliency", all_too=True)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: unknown explanation method 'saliency'; choose one of attention, rollout, \
grad-input, integrated-gradients, occlusion, or all
    """
    if not isinstance(name, str) or name not in METHODS:
        raise AttnclfError(unknown_name("explanation method", name, METHODS, tail=", or all" if all_too else ""))
    return name


def attribute(model: torch.nn.Module, sequences: Sequence[Sequence[int]], targets: np.ndarray, method: str, *,
              device: torch.device | str | None = None, batch_size: int = 32, max_tokens: int | None = EVAL_MAX_TOKENS,
              temperature: float = 1.0, multi_label: bool = False, **options) -> Attribution:
    """Score every token of every id sequence for class ``targets[i]`` by ``method`` (a key of ``METHODS``).

    ``targets`` are class indices, one per sequence (the model knows no label names: ``explain`` and
    ``Classifier.explain`` take a name too); one outside the model's classes is refused, never wrapped around.

    ``temperature``: a calibrated run's (``Classifier.temperature``), so that occlusion's probabilities, and the
    log-odds the gradient methods attribute (those of softmax(logits / T)), are the ones its predictions report.

    ``multi_label``: the model is a multi-label run's, a sigmoid per label; ``targets[i]`` is the label explained,
    scored by its own probability (occlusion) and log-odds, its logit (the gradient methods).

    ``device``: where the batches go; by default where the model's weights are (a GPU's model, a GPU).
    ``max_tokens``: a batch's padded size, texts x longest length, at most (None: ``batch_size`` texts whatever
    their length), as ``Classifier.max_tokens`` caps predictions'; occlusion's batches of a text's variants too.

    >>> from attnclf.models import build_model
    >>> model = build_model("self-attn", vocab_size=20, d_model=16, layers=1)
    >>> result = attribute(model, [[5, 6, 7], [8]], np.array([0, 1]), "integrated-gradients", steps=16)
    >>> [len(s) for s in result.scores], bool(result.completeness_error.max() < 0.05)
    ([3, 1], True)
    """
    options = method_options(model, method, options)
    device = model_device(model) if device is None else torch.device(device)
    model.eval()
    targets = _class_indices(targets, len(sequences), model.config.num_classes)
    if method == "occlusion":
        return Attribution(_occlusion(model, sequences, targets, device, batch_size, temperature, multi_label,
                                      max_tokens=max_tokens))

    per_batch: Callable = {"attention": _attention, "rollout": _rollout, "grad-input": _grad_input,
                           "integrated-gradients": _integrated_gradients}[method]
    scores: list[np.ndarray] = [np.zeros(0)] * len(sequences)
    extras: dict[str, np.ndarray] = {}
    tempered = ({"temperature": temperature, "multi_label": multi_label}
                if method in ("grad-input", "integrated-gradients") else {})
    for batch in BucketBatches(sequences, batch_size=batch_size, shuffle=False, max_tokens=max_tokens):
        batch = batch.to(device)
        target = torch.as_tensor(targets[batch.indices], device=device)
        batch_scores, batch_extras = per_batch(model, batch.input_ids, batch.attention_mask, target, **options,
                                               **tempered)
        batch_scores = batch_scores.detach().float().cpu().numpy()
        for row, i in enumerate(batch.indices):
            scores[i] = batch_scores[row, : len(sequences[i])]  # batches are right-padded
        for key, values in batch_extras.items():
            extras.setdefault(key, np.zeros(len(sequences)))[batch.indices] = values.detach().float().cpu().numpy()
    return Attribution(scores, **extras)


def _class_indices(targets, texts: int, classes: int) -> np.ndarray:
    """``targets`` as int64 class indices, one per text, or a one-line error: a name, a miscount, or an index out of
    range (numpy would wrap -1 round to the last class, and torch would fail deep in a gather)."""
    given = np.asarray(targets)
    if given.ndim != 1:
        raise AttnclfError(f"targets must be one class index per text (a sequence of {texts}), got "
                           f"{repr(given.item()) if given.ndim == 0 else f'a {given.ndim}-dimensional array'}")
    if given.size and given.dtype.kind not in "iu":
        raise AttnclfError(f"targets must be class indices (whole numbers), got {first_few(given.ravel().tolist())}; "
                           f"Classifier.explain takes class names")
    if len(given) != texts:
        raise AttnclfError(f"{len(given)} target{'s' if len(given) != 1 else ''} for {texts} text"
                           f"{'s' if texts != 1 else ''}; give one class index per text")
    outside = given[(given < 0) | (given >= classes)]
    if outside.size:
        raise AttnclfError(f"target {outside[0]} is not a class index of this {classes}-class model "
                           f"(0 to {classes - 1})")
    return given.astype(np.int64)


def available_methods(model: torch.nn.Module) -> list[str]:
    """The methods ``model`` supports: ``attention`` needs attention pooling, ``rollout`` self-attention.

    A windowed model (``--windows``) supports none yet.

    >>> from attnclf.models import build_model
    >>> available_methods(build_model("boe", vocab_size=20))
    ['grad-input', 'integrated-gradients', 'occlusion']
    """
    from ..models.windows import window_config

    if window_config(model) is not None:  # the methods attribute one token sequence; it reads several
        return []
    ids = torch.tensor([[PAD_ID + 2]], device=model_device(model))
    model.eval()
    with torch.inference_mode():
        out = model(ids, ids != PAD_ID, output_attentions=True)
    # (A self-attn model with layers=0 returns an empty list: no self-attention to roll out.)
    lacking = {"attention": out.pooling_weights is None, "rollout": not out.self_attentions}
    return [name for name in METHODS if not lacking.get(name, False)]


# Why a model lacks one of the methods not every model has: what ``available_methods`` looks for.
LACKING = {"attention": "this model does not pool by attention", "rollout": "it has no self-attention layers"}


def left_out(available: Sequence[str]) -> list[str]:
    """The methods a model's ``available_methods`` lack, each with why: what asking for ``all`` leaves out.

    >>> left_out(["rollout", "grad-input", "integrated-gradients", "occlusion"])
    ['attention (this model does not pool by attention)']
    """
    return [f"{name} ({LACKING[name]})" for name in METHODS if name not in available]


def run_methods(run_dir: str | Path, model: torch.nn.Module) -> list[str]:
    """``available_methods`` of ``model``, loaded from ``run_dir``; none is one line naming the run (a windowed model
    has none yet).

    >>> # run_methods("runs/demo", Classifier.load("runs/demo").model)[:2]  # ['attention', 'rollout']
    """
    available = available_methods(model)
    if not available:
        raise AttnclfError(f"{run_dir} reads long texts as windows (--windows); its explanations, and so "
                           f"their faithfulness, are not supported yet")
    return available


def chosen_methods(asked: str | Sequence[str], available: Sequence[str], argument: str = "method",
                   named: Callable[[str], str] = by_field) -> list[str]:
    """The methods ``asked`` names, each one a model supports (``available``: its ``available_methods``): ``all``
    (alone, or alone in a list), every one of those, or names, comma-separated or in a list, each once; one line
    otherwise, naming ``asked`` as the ``argument`` it came in, as ``named`` spells it (the command line: by its
    flag). What ``all`` leaves out, ``left_out`` says.

    >>> chosen_methods("occlusion, grad-input", ["grad-input", "occlusion"]), chosen_methods("all", ["occlusion"])
    (['occlusion', 'grad-input'], ['occlusion'])
    """
    if isinstance(asked, str):
        names = [name.strip() for name in asked.split(",") if name.strip()]
    elif isinstance(asked, (list, tuple)):
        names = list(asked)
    else:
        raise AttnclfError(f"{named(argument)} must be all or method names, got {shown(asked)}")
    if names == ["all"]:  # (["all"] too: a client building the list from its own choices sends it)
        return list(available)
    if "all" in names:  # (not "unknown explanation method 'all'", which the choices offer)
        raise AttnclfError(f"{named(argument)} names all among other methods: all alone names every one")
    for name in names:
        known_method(name, all_too=True)
        if name not in available:
            raise AttnclfError(f"method {shown(name)} does not apply to this model; it supports {', '.join(available)}")
    if len(set(names)) < len(names):  # (each would be explained twice, the same scores shown twice)
        twice = next(name for i, name in enumerate(names) if name in names[:i])
        raise AttnclfError(f"{named(argument)} names {shown(twice)} twice")
    if not names:
        raise AttnclfError(f"{named(argument)} is empty")
    return names


def refuse_methods_as_texts(method: str | None, texts: Sequence[str], named: Callable[[str], str] = by_field) -> None:
    """Refuse ``texts`` of which one is a method's name (or all), where ``method`` is asked for: argparse reads
    `--method attention occlusion` as one method and a text "occlusion"; the line says how to ask for both, and how
    to explain that word as a text (``named``: how the caller's arguments are named; the command line: by flag).

    >>> refuse_methods_as_texts("attention", ["occlusion"])
    Traceback (most recent call last):
    ...
    attnclf.errors.AttnclfError: 'occlusion' would be explained as a text; several methods go comma-separated: \
method attention,occlusion (that word as a text: give it with file)
    """
    if not method or (typed := next((text for text in texts if text.strip() in {*METHODS, "all"}), None)) is None:
        return
    remedy = (f"{named('method')} all, alone, names every method" if typed.strip() == "all" else
              f"several methods go comma-separated: {named('method')} {method},{typed.strip()}")
    raise AttnclfError(f"{shown(typed)} would be explained as a text; {remedy} (that word as a text: give it with "
                       f"{named('file')})")


# What an explanation scores tokens by when no method is asked for, for every model: the measured effect of
# removing each token. BENCHMARKS.md ("Explanations: faithfulness") found it the most faithful method on 3 of 4 runs,
# and attention no better than random on IMDB; ``explain`` shows a model's pooling attention beside it instead.
DEFAULT_METHOD = "occlusion"


def self_attention_maps(model: torch.nn.Module, sequences: Sequence[Sequence[int]], *,
                        device: torch.device | str | None = None, batch_size: int = 32,
                        max_tokens: int | None = EVAL_MAX_TOKENS) -> list[np.ndarray]:
    """Every layer's and head's self-attention per text: (layers, heads, n, n), rows = queries; computed on
    ``device``, by default where the model's weights are, in batches as ``attribute`` makes them.

    >>> from attnclf.models import build_model
    >>> model = build_model("self-attn", vocab_size=20, d_model=16, heads=2, layers=3)
    >>> self_attention_maps(model, [[5, 6, 7]])[0].shape
    (3, 2, 3, 3)
    """
    device = model_device(model) if device is None else torch.device(device)
    model.eval()
    maps: list[np.ndarray] = [np.zeros(0)] * len(sequences)
    with torch.inference_mode():
        for batch in BucketBatches(sequences, batch_size=batch_size, shuffle=False, max_tokens=max_tokens):
            batch = batch.to(device)
            layers = _self_attentions(model, batch.input_ids, batch.attention_mask)
            stacked = torch.stack(layers, dim=1).float().cpu().numpy()  # (B, L, H, T, T)
            for row, i in enumerate(batch.indices):
                n = len(sequences[i])
                maps[i] = stacked[row, :, :, :n, :n]
    return maps


# ---------------------------------------------------------------- per-batch methods
# Each takes a right-padded batch and the class per row, and returns (batch, seq)
# scores, zero at padding, plus any per-row extras.


def log_odds(logits: torch.Tensor, target: torch.Tensor, temperature: float = 1.0,
             multi_label: bool = False) -> torch.Tensor:
    """``log p / (1 - p)`` of class ``target[i]`` in row i: ``z_c - logsumexp(z_other)``, z the logits over
    ``temperature`` (in float32); ``multi_label`` (p a sigmoid of the label's own logit): ``z_c`` itself.

    >>> log_odds(torch.tensor([[0.0, 2.0]]), torch.tensor([1])), log_odds(torch.tensor([[5.0, 2.0]]),
    ...                                                                   torch.tensor([1]), multi_label=True)
    (tensor([2.]), tensor([2.]))
    """
    logits = logits.float() / temperature
    chosen = logits.gather(1, target[:, None]).squeeze(1)
    # The log-odds, not log p: integrated gradients stays complete on either, but log-sigmoid flattens near p = 1,
    # where a confident label's evidence would all read as nothing, and the log-odds is what single-label runs explain.
    if multi_label:
        return chosen
    others = logits.scatter(1, target[:, None], float("-inf"))
    return chosen - torch.logsumexp(others, dim=1)


def _attention(model, ids, mask, target) -> tuple[torch.Tensor, dict]:
    with torch.inference_mode():
        weights = model(ids, mask).pooling_weights  # (attribute checked the model has them)
    return weights, {}


def _self_attentions(model, ids, mask) -> list[torch.Tensor]:
    maps = model(ids, mask, output_attentions=True).self_attentions
    if maps is None:
        raise AttnclfError("this model has no self-attention layers (self-attn, transformer-mean and mha do)")
    return maps


def rollout(maps: Sequence[torch.Tensor], readout: torch.Tensor) -> torch.Tensor:
    """Attention rollout (Abnar & Zuidema 2020) read out by pooling weights.

    Each layer's head-averaged map ``A`` becomes ``0.5 A + 0.5 I`` (the
    residual path carries half of every position's state through), rows
    renormalised; the product over layers says how much of each final
    position's state came from each input token, and ``readout`` (batch, seq),
    the weights with which the model pools final positions, turns that into
    one score per input token.

    >>> to_first = torch.tensor([[[[1.0, 0.0], [1.0, 0.0]]]])  # both positions read token 0
    >>> rollout([to_first], torch.tensor([[0.0, 1.0]]))
    tensor([[0.5000, 0.5000]])
    """
    seq = readout.size(-1)
    eye = torch.eye(seq, device=readout.device)
    joint = eye.expand(readout.size(0), seq, seq)
    for layer in maps:
        step = 0.5 * layer.float().mean(dim=1) + 0.5 * eye
        joint = (step / step.sum(dim=-1, keepdim=True)) @ joint
    return (readout.unsqueeze(1) @ joint).squeeze(1)


def _rollout(model, ids, mask, target) -> tuple[torch.Tensor, dict]:
    with torch.inference_mode():
        out = model(ids, mask, output_attentions=True)  # (attribute checked the model has self-attention)
    readout = out.pooling_weights
    if readout is None:  # models that pool without attention
        real = mask.float()
        if getattr(model.config, "pooling", "mean") == "first":
            real = torch.nn.functional.one_hot(real.argmax(dim=1), real.size(1)).float()
        # Mean pooling reads every real position equally; max pooling, which no weights describe, is read the same
        # way (the method's description says so).
        readout = real / real.sum(dim=1, keepdim=True).clamp(min=1)
    return rollout(out.self_attentions, readout.float()) * mask, {}


def _gradient(model, ids, mask, target, embeddings, temperature: float, multi_label: bool) -> torch.Tensor:
    """d(class log-odds of softmax(logits / temperature), or of the label's sigmoid: ``multi_label``)/d(token
    embeddings), (batch, seq, dim)."""
    embeddings = embeddings.detach().requires_grad_(True)
    # cuDNN's RNN backward refuses eval mode; the native kernels accept it (CPU is unaffected).
    with torch.enable_grad(), torch.backends.cudnn.flags(enabled=False):
        f = log_odds(model(ids, mask, token_embeddings=embeddings).logits, target, temperature, multi_label)
        (gradient,) = torch.autograd.grad(f.sum(), embeddings)  # rows are independent in eval mode
    return gradient


def _grad_input(model, ids, mask, target, temperature: float, multi_label: bool) -> tuple[torch.Tensor, dict]:
    embeddings = model.embed_tokens(ids).detach()
    return (_gradient(model, ids, mask, target, embeddings, temperature, multi_label) * embeddings).sum(-1) * mask, {}


def method_options(model: torch.nn.Module, method: str, options: dict) -> dict:
    """``options`` with ``method``'s defaults for those not given, once the method is known, ``model`` has what it
    shows, and every option is one it takes: one line otherwise, before any forward pass (``attribute`` and
    ``explain`` check here first).

    >>> from attnclf.models import build_model
    >>> method_options(build_model("boe", vocab_size=20), "integrated-gradients", {})
    {'steps': 'auto'}
    >>> method_options(build_model("boe", vocab_size=20), "occlusion", {"steps": 8})
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: method 'occlusion' takes no option 'steps'
    """
    known_method(method)
    if method in ("attention", "rollout") and method not in (available := available_methods(model)):
        what = "attention pooling" if method == "attention" else "self-attention layers"
        raise AttnclfError(f"this model has no {what} for {method} to show; it supports {', '.join(available)}")
    unknown = set(options) - set(METHODS[method].options)
    if unknown:
        raise AttnclfError(f"method {method!r} takes no option {sorted(unknown)[0]!r}"
                           + (f" (it takes: {', '.join(METHODS[method].options)})" if METHODS[method].options else ""))
    options = {**METHODS[method].options, **options}
    if "steps" in options:
        check_steps(options["steps"])
    return options


def check_steps(steps: int | str) -> int | str:
    """``steps`` if integrated gradients can take it ("auto", or a whole number up to ``IG_MAX_STEPS``).

    >>> check_steps(0)
    Traceback (most recent call last):
    attnclf.errors.AttnclfError: integrated gradients needs steps from 1 to 1024 or 'auto', got 0
    """
    if (isinstance(steps, str) and steps == "auto") or (
            isinstance(steps, numbers.Integral) and not isinstance(steps, bool) and 1 <= steps <= IG_MAX_STEPS):
        return steps
    raise AttnclfError(f"integrated gradients needs steps from 1 to {IG_MAX_STEPS} or 'auto', got {shown(steps)}")


def _integrated_gradients(model, ids, mask, target, steps: int | str, temperature: float,
                          multi_label: bool) -> tuple[torch.Tensor, dict]:
    steps = check_steps(steps)
    embeddings = model.embed_tokens(ids).detach()
    # <pad> at every real position (its embedding row is zero); the mask stays, so the
    # baseline is a text of the same length saying nothing.
    baseline = model.embed_tokens(torch.full_like(ids, PAD_ID)).detach()
    with torch.inference_mode():
        at_text = log_odds(model(ids, mask, token_embeddings=embeddings).logits, target, temperature, multi_label)
        at_baseline = log_odds(model(ids, mask, token_embeddings=baseline).logits, target, temperature, multi_label)
    change = at_text - at_baseline
    if steps == "auto":
        path = _Path(model, ids, mask, target, embeddings, baseline, temperature, multi_label)
        scores, used = _adaptive_path_integral(path, at_baseline, at_text)
    else:
        scores = _path_integral(model, ids, mask, target, embeddings, baseline, steps, temperature, multi_label)
        used = torch.full_like(change, steps)
    error = (scores.sum(1) - change).abs() / change.abs().clamp(min=1e-6)
    return scores, {"completeness_error": error, "log_odds_change": change, "steps": used}


@functools.lru_cache(maxsize=None)
def _gauss_legendre(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy's nodes and weights, found once per process: 512 of them take about a second."""
    return np.polynomial.legendre.leggauss(steps)


def _path_integral(model, ids, mask, target, embeddings, baseline, steps: int, temperature: float,
                   multi_label: bool) -> torch.Tensor:
    """``(x - b) . integral of df/dx`` along the straight path from ``b`` to ``x``, summed per token."""
    # Gauss-Legendre nodes on [0, 1]: exact for polynomial paths of degree < 2*steps, so far
    # fewer steps reach a small completeness error on smooth paths than a Riemann sum would.
    nodes, weights = _gauss_legendre(steps)
    alphas = torch.tensor((nodes + 1) / 2, dtype=embeddings.dtype, device=embeddings.device)
    weights = torch.tensor(weights / 2, dtype=embeddings.dtype, device=embeddings.device)
    rows, seq, dim = embeddings.shape
    # Several path points per forward pass: small models are dominated by per-call overhead.
    per_pass = max(1, IG_TOKENS_PER_PASS // (rows * seq))
    path_gradient = torch.zeros_like(embeddings)
    for start in range(0, steps, per_pass):
        alpha, weight = alphas[start:start + per_pass, None, None, None], weights[start:start + per_pass]
        points = (baseline + alpha * (embeddings - baseline)).reshape(-1, seq, dim)  # (points x rows) rows
        k = len(weight)
        gradient = _gradient(model, ids.repeat(k, 1), mask.repeat(k, 1), target.repeat(k), points, temperature,
                             multi_label)
        path_gradient += torch.einsum("k,krsd->rsd", weight, gradient.view(k, rows, seq, dim))
    return ((embeddings - baseline) * path_gradient).sum(-1) * mask


@dataclass(frozen=True)
class _Path:
    """The straight paths from ``baseline`` to ``embeddings`` of a batch's texts: the log-odds and the
    ``(x - b) . gradient`` at points on them, any number of points on any of the texts stacked into forward passes
    of about ``IG_TOKENS_PER_PASS`` tokens (short texts' points share a pass, as in ``_path_integral``)."""

    model: torch.nn.Module
    ids: torch.Tensor
    mask: torch.Tensor
    target: torch.Tensor
    embeddings: torch.Tensor
    baseline: torch.Tensor
    temperature: float
    multi_label: bool

    def _passes(self, rows: torch.Tensor, alphas: torch.Tensor):
        """(first point, rows, points) per forward pass: point i is ``b + alphas[i] (x - b)`` of text ``rows[i]``."""
        per_pass = max(1, IG_TOKENS_PER_PASS // self.ids.size(1))
        alphas = alphas.to(self.embeddings.dtype)
        for first in range(0, len(rows), per_pass):
            r, alpha = rows[first:first + per_pass], alphas[first:first + per_pass, None, None]
            yield first, r, self.baseline[r] + alpha * (self.embeddings[r] - self.baseline[r])

    def log_odds(self, rows: torch.Tensor, alphas: torch.Tensor) -> torch.Tensor:
        """The class log-odds at each point: a forward pass, no gradient."""
        with torch.inference_mode():
            return torch.cat([log_odds(self.model(self.ids[r], self.mask[r], token_embeddings=points).logits,
                                       self.target[r], self.temperature, self.multi_label)
                              for _, r, points in self._passes(rows, alphas)])

    def piece_scores(self, rows: torch.Tensor, starts: np.ndarray, ends: np.ndarray, nodes: int) -> torch.Tensor:
        """(pieces, seq): each token's share of the integral over alpha in ``[starts[i], ends[i]]`` of text
        ``rows[i]``, by the Gauss-Legendre rule with ``nodes`` nodes."""
        unit_nodes, unit_weights = _gauss_legendre(nodes)
        widths = (ends - starts)[:, None]
        alphas = torch.tensor((starts[:, None] + widths * (unit_nodes + 1) / 2).ravel(), device=self.ids.device)
        weights = torch.tensor((widths * unit_weights / 2).ravel(), dtype=self.embeddings.dtype,
                               device=self.ids.device)
        piece_of_point = torch.arange(len(rows), device=self.ids.device).repeat_interleave(nodes)
        scores = torch.zeros(len(rows), self.ids.size(1), dtype=self.embeddings.dtype, device=self.ids.device)
        for first, r, points in self._passes(rows.repeat_interleave(nodes), alphas):
            gradient = _gradient(self.model, self.ids[r], self.mask[r], self.target[r], points, self.temperature,
                                 self.multi_label)
            along = ((self.embeddings[r] - self.baseline[r]) * gradient).sum(-1)
            scores.index_add_(0, piece_of_point[first:first + len(r)], along * weights[first:first + len(r), None])
        return scores * self.mask[rows]


@dataclass(eq=False)
class _Piece:
    """A piece ``[start, end]`` of text ``row``'s path, with the log-odds at its ends and its tokens' scores.

    ``token_error`` estimates each token's error: half of ``|parent's scores - (its halves' scores)|`` on both
    halves, from when its parent was halved (none for the whole path, which no piece came from yet)."""

    row: int
    start: float
    end: float
    at_start: float
    at_end: float
    scores: torch.Tensor
    token_error: torch.Tensor | None = None
    error: float = field(init=False)  # signed, and exact: the integral over a piece is the log-odds' change along it

    def __post_init__(self):
        self.error = float(self.scores.sum()) - (self.at_end - self.at_start)


def _adaptive_path_integral(path: _Path, at_baseline: torch.Tensor,
                            at_text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """steps="auto": scores (batch, seq) and the gradients each text took.

    Completeness holds on every piece of the path (the integral over alpha in [a, c] is f(c) - f(a)), and f at a
    point is one forward pass, so each piece's error is known exactly. A trained model's path can turn sharply
    in a sliver of it (IMDB's: a log-odds swing of 1.3 between alpha 0.005 and 0.006), which no count of nodes
    spread over the whole path reaches; halving just the pieces that are off does. The whole path is integrated
    first with ``IG_AUTO_FIRST_NODES`` nodes, as ``steps=16`` does, and halved once (each half
    ``IG_AUTO_PIECE_NODES`` nodes); then, per text and round, pieces are halved until both hold: the sum of the
    pieces' errors is within ``IG_TOLERANCE`` of the text's change (the completeness error reported), and each
    token's estimated error, summed over the pieces, is within ``IG_TOKEN_TOLERANCE`` of the largest score; or
    until ``IG_AUTO_BUDGET`` is spent. The first is on the signed sum, the completeness error each explanation
    reports; the second is needed because errors cancel in that sum, of opposite sign between pieces and
    between tokens within a piece (on IMDB, scores off by a median 4.3% of the largest one at a completeness
    error of 0.03-0.29%).
    """
    whole = _path_integral(path.model, path.ids, path.mask, path.target, path.embeddings, path.baseline,
                           IG_AUTO_FIRST_NODES, path.temperature, path.multi_label)
    pieces = [[_Piece(row, 0.0, 1.0, at_baseline[row].item(), at_text[row].item(), whole[row])]
              for row in range(len(whole))]
    used = [IG_AUTO_FIRST_NODES] * len(pieces)
    allowed = (IG_TOLERANCE * (at_text - at_baseline).abs().clamp(min=1e-6)).tolist()
    halving = 2 * IG_AUTO_PIECE_NODES
    while True:
        to_halve = []
        for row, row_pieces in enumerate(pieces):
            chosen = _pieces_to_halve(row_pieces, allowed[row], (IG_AUTO_BUDGET - used[row]) // halving)
            to_halve += chosen
            used[row] += halving * len(chosen)
        if not to_halve:
            break
        rows = torch.tensor([piece.row for piece in to_halve], device=path.ids.device)
        middles = np.array([(piece.start + piece.end) / 2 for piece in to_halve])
        at_middle = path.log_odds(rows, torch.tensor(middles, device=path.ids.device)).tolist()
        starts = np.stack([[piece.start for piece in to_halve], middles], axis=1).ravel()
        ends = np.stack([middles, [piece.end for piece in to_halve]], axis=1).ravel()
        halves = path.piece_scores(rows.repeat_interleave(2), starts, ends, IG_AUTO_PIECE_NODES)
        for i, (piece, middle, at) in enumerate(zip(to_halve, middles.tolist(), at_middle)):
            left, right = halves[2 * i], halves[2 * i + 1]
            # The coarser rule's error, mostly: where in the piece it lies is unknown, so each half gets half of it.
            token_error = (piece.scores - (left + right)).abs() / 2
            row_pieces = pieces[piece.row]
            where = row_pieces.index(piece)
            row_pieces[where:where + 1] = [
                _Piece(piece.row, piece.start, middle, piece.at_start, at, left, token_error),
                _Piece(piece.row, middle, piece.end, at, piece.at_end, right, token_error)]
    scores = torch.stack([torch.stack([piece.scores for piece in row_pieces]).sum(0) for row_pieces in pieces])
    return scores, torch.tensor(used, dtype=at_text.dtype, device=at_text.device)


def _pieces_to_halve(pieces: list[_Piece], allowed: float, affordable: int) -> list[_Piece]:
    """The fewest of one text's pieces (at most ``affordable``) whose halving leaves the others' signed errors
    within ``allowed`` and each token's estimated error within ``IG_TOKEN_TOLERANCE`` of the largest score: those
    with the largest errors first, assuming a halved piece's error gone (the next round checks)."""
    if pieces[0].token_error is None:  # the whole path, whose tokens' errors nothing has estimated yet
        return pieces[:affordable]
    chosen: list[_Piece] = []
    left = sum(piece.error for piece in pieces)
    for piece in sorted(pieces, key=lambda piece: -abs(piece.error)):
        if abs(left) <= allowed or len(chosen) == affordable:
            break
        chosen.append(piece)
        left -= piece.error
    scores = torch.stack([piece.scores for piece in pieces]).sum(0)
    token_allowed = IG_TOKEN_TOLERANCE * max(float(scores.abs().max()), 1e-6)
    token_left = torch.stack([piece.token_error for piece in pieces if piece not in chosen] +
                             [torch.zeros_like(scores)]).sum(0)
    for piece in sorted((piece for piece in pieces if piece not in chosen), key=lambda piece: -piece.token_error.max()):
        if float(token_left.max()) <= token_allowed or len(chosen) == affordable:
            break
        chosen.append(piece)
        token_left -= piece.token_error
    return chosen


# ---------------------------------------------------------------- occlusion


def remove_positions(sequence: Sequence[int], positions) -> list[int]:
    """``sequence`` without the tokens at ``positions``; nothing left is the empty text as ``Tokenizer.encode``
    gives it (one ``<unk>``), so the model scores what it would answer for "".

    >>> remove_positions([5, 6, 7], [0, 2]), remove_positions([5], [0])
    ([6], [1])
    """
    drop = set(int(p) for p in positions)
    kept = [token for position, token in enumerate(sequence) if position not in drop]
    return kept or [UNK_ID]


def class_probability(model: torch.nn.Module, sequences: Sequence[Sequence[int]], targets: np.ndarray,
                      device: torch.device, batch_size: int = 128, temperature: float = 1.0,
                      multi_label: bool = False, *, max_tokens: int | None = EVAL_MAX_TOKENS) -> np.ndarray:
    """p(``targets[i]`` | ``sequences[i]``) for every i, batched by length within ``max_tokens`` padded tokens a
    batch (at ``temperature``; ``multi_label``: the label's own sigmoid probability).

    >>> from attnclf.models import build_model
    >>> model = build_model("boe", vocab_size=20)
    >>> class_probability(model, [[5, 6], [7]], np.array([0, 1]), torch.device("cpu")).shape
    (2,)
    """
    probabilities = predict_probabilities(model, BucketBatches(sequences, batch_size=batch_size, shuffle=False,
                                                               max_tokens=max_tokens),
                                          device, multi_label=multi_label, temperature=temperature)
    return probabilities[np.arange(len(sequences)), targets]


def _occlusion(model, sequences, targets, device, batch_size, temperature, multi_label, *,
               max_tokens) -> list[np.ndarray]:
    full = class_probability(model, sequences, targets, device, batch_size, temperature, multi_label,
                             max_tokens=max_tokens)
    scores = []
    # A text of n tokens has n variants; chunks of texts bound the variants held at once.
    for chunk in _chunks([len(s) for s in sequences], OCCLUSION_VARIANTS_PER_CHUNK):
        variants = [remove_positions(sequences[i], [t]) for i in chunk for t in range(len(sequences[i]))]
        owners = [i for i in chunk for _ in sequences[i]]
        occluded = class_probability(model, variants, targets[owners], device, batch_size, temperature, multi_label,
                                     max_tokens=max_tokens)
        start = 0
        for i in chunk:
            scores.append(full[i] - occluded[start:start + len(sequences[i])])
            start += len(sequences[i])
    return scores


def _chunks(sizes: Sequence[int], limit: int):
    """Consecutive index lists whose sizes add up to at most ``limit`` (or one item, if larger).

    >>> list(_chunks([3, 3, 5, 1], 6))
    [[0, 1], [2, 3]]
    """
    chunk, total = [], 0
    for i, size in enumerate(sizes):
        if chunk and total + size > limit:
            yield chunk
            chunk, total = [], 0
        chunk.append(i)
        total += size
    if chunk:
        yield chunk
