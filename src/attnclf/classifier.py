"""The user-facing object: a trained model with its tokenizer and labels.

>>> # from attnclf import Classifier
>>> # clf = Classifier.load("runs/demo")
>>> # clf.predict(["not good, but the ending was wonderful"])[0].label
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .checks import true_or_false
from .errors import AttnclfError, RunDirError, shown
from .evaluation.predict import DEFAULT_THRESHOLD, output_probabilities
from .models import model_from_config, model_name
from .models.windows import window_config, windowed
from .prediction import (LabelSetPrediction, Prediction, check_texts, class_threshold, model_repr, predictions,
                         tempered_thresholds)
from .rundir import (ENSEMBLE_FILE, check_label_names, is_multi_label, load_weights, read_json, read_run_config,
                     read_temperature, read_thresholds)
from .text.batching import EVAL_MAX_TOKENS, BucketBatches
from .text.tokenizer import Tokenizer, TokenizerConfig
from .text.windows import WindowConfig, text_batches
from .training.device import check_bf16, resolve_device


class Classifier:
    """A trained attnclf model, ready to predict.

    A multi-label run (``multi_label``, from its config) predicts a label set
    per text: each label whose sigmoid probability reaches its threshold in
    ``thresholds`` (from thresholds.json; 0.5 each until tuned; a calibrated
    run's moved with its probabilities, ``tempered_thresholds``).

    ``bf16=True`` predicts under bfloat16 autocast: on a CPU with AVX-512 BF16
    or AMX the matrix products run several times faster (BENCHMARKS.md), and
    probabilities move by about 1e-3. Attributions (``explain``) are computed in
    float32; the class and probabilities they report come from ``predict_proba``.

    A run that ``attnclf calibrate`` calibrated has a ``temperature`` (from temperature.json; 1 until then): its
    probabilities are softmax(logits / temperature), which changes no prediction, only how sure each one is.
    Attributions explain those probabilities (occlusion) and their log-odds (the gradient methods).

    ``max_tokens`` (``EVAL_MAX_TOKENS``) caps a batch's padded size, texts x longest length, in predictions and
    explanations alike: long texts come fewer a batch (``batch_size`` at most), so memory stays bounded at any
    ``max_len``.
    """

    # A class attribute: a Classifier pickled (in an estimator) before it existed reads it too; one set on an
    # instance caps that classifier alone.
    max_tokens: int | None = EVAL_MAX_TOKENS

    def __init__(self, model: torch.nn.Module, tokenizer: Tokenizer, label_names: list[str],
                 device: torch.device, config: dict | None = None, batch_size: int = 64,
                 thresholds: np.ndarray | None = None, bf16: bool = False, temperature: float = 1.0):
        if bf16:
            check_bf16(device)
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.label_names = label_names
        self.device = device
        self.config = config or {}
        self.batch_size = batch_size
        self.bf16 = bf16
        self.multi_label = is_multi_label(self.config)
        self.thresholds = np.full(len(label_names), DEFAULT_THRESHOLD) if thresholds is None else thresholds
        self.temperature = temperature

    def __repr__(self) -> str:
        """Its model, labels and device, and the settings that are not the defaults, as a notebook shows it.

        >>> # Classifier.load("runs/demo", device="cpu")  # Classifier(model='self-attn', labels=[...], device='cpu')
        """
        # (the estimator's classifier_ has no run config to name its model: its class does)
        model = self.config.get("model", {}).get("name") or model_name(self.model)
        return model_repr("Classifier", model=model, labels=self.label_names, device=str(self.device),
                          multi_label=self.multi_label or None, bf16=self.bf16 or None,
                          temperature=None if self.temperature == 1 else self.temperature)

    @classmethod
    def load(cls, run_dir: str | Path, device: str = "auto", bf16: bool = False) -> "Classifier":
        """Load a run directory written by ``attnclf train``.

        >>> # Classifier.load("runs/demo", device="cpu")
        """
        bf16 = true_or_false(bf16, "bf16")  # (torch would refuse it only at the first prediction)
        resolved = resolve_device(device)  # (a GPU this machine lacks, before the weights are read)
        if (Path(run_dir) / ENSEMBLE_FILE).is_file():
            from .ensemble import first_member

            raise AttnclfError(f"{run_dir} holds a `train --seeds` ensemble: load it with attnclf.Ensemble.load, or "
                               f"one member, such as {first_member(run_dir)}, with Classifier.load")
        run_dir, config = Path(run_dir), read_run_config(run_dir)
        model_info = config["model"]
        model = windowed(model_from_config(model_info["name"], model_info["config"], run_dir),
                         _windows(run_dir, config))
        weights = load_weights(run_dir / "model.safetensors", like=model)
        model.load_state_dict(weights)
        broken = next((name for name, tensor in weights.items() if not tensor.isfinite().all()), None)
        if broken is not None:  # (it would predict NaN for every text)
            raise RunDirError(f"{run_dir / 'model.safetensors'}: {broken} holds NaN or infinite values")
        tokenizer = Tokenizer.load(run_dir / "tokenizer.json",
                                   TokenizerConfig.from_dict(config["settings"]["tokenizer"], run_dir / "config.json"),
                                   words=model.config.vocab_size)
        labels_file = run_dir / "labels.json"
        labels = check_label_names(read_json(labels_file), model.config.num_classes, labels_file)
        thresholds = read_thresholds(run_dir, labels) if is_multi_label(config) else None
        temperature = read_temperature(run_dir)
        return cls(model, tokenizer, labels, resolved, config, bf16=bf16, temperature=temperature,
                   thresholds=None if thresholds is None else tempered_thresholds(list(thresholds.values()),
                                                                                  temperature))

    def scores(self, texts: Sequence[str], logits: bool = False
               ) -> tuple[np.ndarray, list[list[int]], list[np.ndarray | None]]:
        """One pass over ``texts``, what ``predict_proba``, ``logits`` and ``predict`` read (and an ``Ensemble``
        averages): the probabilities (or, with ``logits``, the model's logits), one row per text; each text's token
        ids; and each text's pooling weights over those tokens (None for a model that pools without them).

        >>> # probabilities, ids, attention = clf.scores(["great film"])  # ids[0], e.g. [412, 96]
        """
        return self._scored(text_batches(self.tokenizer, check_texts(texts), windows=window_config(self.model),
                                         batch_size=self.batch_size, max_tokens=self.max_tokens), logits)

    def scores_of_ids(self, ids: Sequence[Sequence[int]], logits: bool = False, uniform_pooling: bool = False
                      ) -> tuple[np.ndarray, list[list[int]], list[np.ndarray | None]]:
        """``scores`` of texts already tokenised, ``ids`` a list of token ids per text as ``tokenizer.encode`` gives
        them, so that a caller holding them (``explain``) does not tokenise the texts again; the same batches, the
        same scores. A run that reads windows is refused in one line: it cuts each text into windows itself
        (``scores``). ``uniform_pooling=True`` pools each text with uniform weights over its tokens in place of the
        learned ones (the faithfulness check's; a model that pools without weights ignores them).

        >>> # clf.scores_of_ids(clf.tokenizer.encode(["great film"]))[0]  # clf.scores(["great film"])[0]
        >>> # clf.scores_of_ids(clf.tokenizer.encode(["great film"]), uniform_pooling=True)[2]  # [array([0.5, 0.5])]
        """
        if window_config(self.model) is not None:  # (the model would refuse (batch, tokens) ids, naming no remedy)
            raise AttnclfError("this run reads long texts as windows (--windows), several token sequences a text: "
                               "scores_of_ids reads one; give the texts to scores")
        return self._scored(BucketBatches(_checked_ids(ids, self.model.config.vocab_size), batch_size=self.batch_size,
                                          shuffle=False, max_tokens=self.max_tokens), logits, uniform_pooling)

    @torch.inference_mode()
    def _scored(self, batches: BucketBatches, logits: bool, uniform_pooling: bool = False
                ) -> tuple[np.ndarray, list[list[int]], list[np.ndarray | None]]:
        """``scores``' work on ``batches``, texts or ids batched as the model reads them."""
        ids = batches.sequences
        probabilities = np.zeros((len(ids), len(self.label_names)), dtype=np.float32)
        attention: list[np.ndarray | None] = [None] * len(ids)
        for batch in batches:
            batch = batch.to(self.device)
            mask = batch.attention_mask
            uniform = mask.float() / mask.sum(dim=1, keepdim=True).clamp(min=1) if uniform_pooling else None
            # (the override given only when asked for: a windowed model refuses every option, even a None one)
            options = {} if uniform is None else {"pooling_override": uniform}
            with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
                out = self.model(batch.input_ids, mask, **options)
            scores = out.logits.float() if logits else output_probabilities(out.logits, self.multi_label,
                                                                            self.temperature)
            probabilities[batch.indices] = scores.cpu().numpy()
            if out.pooling_weights is not None:
                weights = out.pooling_weights.float().cpu().numpy()
                for row, i in enumerate(batch.indices):
                    attention[i] = weights[row, : len(ids[i])]
        return probabilities, ids, attention

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """Class probabilities, one row per text, columns in ``label_names`` order.

        Multi-label runs: each label's own (sigmoid) probability; rows need not sum to 1.

        >>> # clf.predict_proba(["great film", "dull film"])  # array([[0.08, 0.92], [0.87, 0.13]], dtype=float32)
        >>> # dict(zip(clf.label_names, clf.predict_proba(["great film"])[0]))  # {'negative': 0.08, 'positive': 0.92}
        """
        return self.scores(texts)[0]

    def logits(self, texts: Sequence[str]) -> np.ndarray:
        """The model's logits, one row per text: before the temperature and the softmax (or sigmoids).

        >>> # clf.logits(["great film"])  # array([[-2.1,  2.3]], dtype=float32)
        """
        return self.scores(texts, logits=True)[0]

    def predict(self, texts: Sequence[str], tokens: bool = True,
                threshold: tuple[str, float] | str | None = None) -> list[Prediction] | list[LabelSetPrediction]:
        """Label, confidence, probabilities, tokens, pooling attention and how many of its tokens the model does not
        know (``unknown_tokens`` of ``tokens_read``) per text; ``tokens=False`` leaves out the tokens and attention,
        for a caller that shows neither (``attnclf serve``'s /predict).

        ``threshold=("pos", 0.7)`` (or ``"pos=0.7"``) applies an operating point (``evaluate --operating-points``
        finds one): pos wherever its probability is at least 0.7, else the most probable other class; the confidence
        stays the predicted class's probability. A multi-label run's ``threshold=("sports", 0.9)`` puts sports in a
        text's set from 0.9 on, in place of its tuned threshold; the other labels keep theirs (thresholds.json).

        A multi-label run returns a ``LabelSetPrediction`` per text instead:
        its ``labels`` (a list, possibly empty) in place of label and confidence.

        >>> # [p.label for p in clf.predict(["great film", "dull film"])]
        >>> # [p.labels for p in topics_clf.predict(["the coach praised the album"])]  # [['sports', 'music']]
        >>> # clf.predict(["the movie was awesome"], tokens=False)[0].unknown_tokens  # 1 of tokens_read 4
        >>> # clf.predict(["a fine film"], threshold=("positive", 0.9))[0].label  # 'negative' under 0.9
        """
        threshold = class_threshold(threshold, self.label_names, self.multi_label)  # (before the texts are run)
        texts = check_texts(texts)  # (a list, read twice: by the model and by the counts of its tokens)
        return predictions(texts, *self.scores(texts), self.label_names, self.tokenizer, tokens,
                           self.thresholds if self.multi_label else None, threshold)

    def explain(self, texts: Sequence[str], method: str | None = None, **options) -> list:
        """Per-token scores of each prediction by ``method``: one ``attnclf.explain.Explanation`` per text.

        Methods: attention (where the pooling layer looked), rollout, grad-input,
        integrated-gradients (option ``steps``), occlusion; by default occlusion. Where the
        model pools by attention, its weights come beside any other method's scores
        (``Explanation.pooling_attention``; ``attention_beside=False``: not). ``target=`` picks the
        class to explain (default: the predicted one), by name as ``attnclf explain --target`` takes it, or by
        index into ``label_names`` (an int is always an index); an unknown name or an index out of range is
        refused in one line; ``threshold=`` (as ``predict`` takes it) makes the predicted class the one it predicts.
        ``self_attentions=True`` adds every head's map. In a notebook the answer (a list) and each explanation in it
        show as the text's coloured tokens, as ``attnclf explain -o page.html`` colours them.

        >>> # clf.explain(["not bad at all"], method="occlusion")[0].top_tokens(2)
        >>> # clf.explain(["not bad at all"], target="neg")[0].target  # 'neg'; target=0 too, if label_names[0] is it
        """
        from .explain import explain

        return explain(self, texts, method, **options)  # (which refuses a windowed run's, and checks the texts)


def _windows(run_dir: Path, config: dict) -> WindowConfig | None:
    """The run's ``--windows`` settings, or None; a one-line error for a config.json edited out of shape."""
    saved = config["settings"].get("windows")
    if not saved:
        return None
    try:
        return WindowConfig(**saved)
    except (TypeError, AttnclfError) as exc:
        raise RunDirError(f"{run_dir / 'config.json'}: settings.windows is not a window setting ({exc})") from None


def _checked_ids(ids: Sequence[Sequence[int]], vocab_size: int) -> list[list[int]]:
    """``ids`` (token ids per text) as lists, or one line naming the first text whose ids this run's embedding cannot
    read: an id past it was torch's IndexError, an empty row a reshape's RuntimeError, each a traceback."""
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise AttnclfError(f"pass a list of token id sequences (tokenizer.encode's), not {type(ids).__name__}")
    checked = []
    for i, sequence in enumerate(ids):
        if isinstance(sequence, (str, bytes)) or not hasattr(sequence, "__iter__"):
            raise AttnclfError(f"ids[{i}] is {shown(sequence)}, not a sequence of token ids")
        row = list(sequence)
        if not row:
            raise AttnclfError(f"ids[{i}] is empty: a text's ids hold one at least (<unk> for an empty text)")
        for token in row:
            if isinstance(token, bool) or not isinstance(token, (int, np.integer)) or not 0 <= token < vocab_size:
                raise AttnclfError(f"ids[{i}] holds {shown(token)}, not a token id of this run (0 to "
                                   f"{vocab_size - 1})")
        checked.append(row)
    return checked
