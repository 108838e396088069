"""`attnclf demo`: train the self-attention classifier on generated reviews, then show it working."""

from __future__ import annotations

from pathlib import Path

from .classifier import Classifier
from .errors import AttnclfError
from .rundir import member_folders
from .training.run import train_run
from .training.settings import DataSettings, resume_settings, settings_for

EXAMPLES = [  # (text, the label the generator's rules give it: negation flips a word, the clause after "but" decides)
    ("the acting was wonderful", "positive"),
    ("the acting was not wonderful", "negative"),
    ("the plot was boring but the ending was brilliant", "positive"),
    ("the plot was brilliant but the ending was boring", "negative"),
    ("honestly the soundtrack was not bad", "positive"),
]


def run_demo(output: str = "runs/demo", device: str = "auto", threads: int | None = 1, progress: bool = True) -> None:
    """Train ``self-attn`` on ``demo`` (well under two minutes on 2 CPU cores) and print what it learned: test
    scores, then five example reviews with their predictions and the tokens attention and occlusion pick.

    >>> # run_demo("runs/demo")  # what `attnclf demo` runs: "test accuracy ...", then the five examples
    """
    settings = settings_for(DataSettings(dataset="demo"), "self-attn", output=output, device=device)
    settings.threads = threads
    _refuse_another_run(Path(output), settings)
    print("Training a self-attention classifier on generated reviews where negation and contrast decide.")
    result = train_run(settings, progress=progress)
    m = result.metrics
    print(f"\ntest accuracy {m['accuracy']:.4f}  macro-F1 {m['macro_f1']:.4f}  ROC AUC {m['roc_auc']:.4f}"
          f"  ({m['parameters']:,} parameters, trained in {m['train_seconds']:.0f}s)")

    clf = Classifier.load(result.run_dir, device=device)
    texts = [text for text, _ in EXAMPLES]
    occlusion = clf.explain(texts, method="occlusion")
    print("\nPredictions, with the three tokens that")
    print("  attention: the pooling layer weighted most (where it looked, not proof of why it decided)")
    print("  occlusion: lower the predicted class's probability most when left out (a measured effect)")
    wrong = 0
    for (text, expected), prediction, occluded in zip(EXAMPLES, clf.predict(texts), occlusion):
        mistake = prediction.label != expected
        wrong += mistake
        print(f"  {prediction.label:<8} {prediction.confidence:.2f}  {text!r}"
              f"{f'  WRONG: the rules say {expected}' if mistake else ''}")
        weights = ", ".join(f"{token} {weight:.3f}" for token, weight in prediction.top_tokens(3))
        print(f"      attention: {weights}  (uniform would be {1 / len(prediction.tokens):.3f})")
        print(f"      occlusion: {_top(occluded.top_tokens(3))}")
    if wrong:  # shown, not hidden: high test accuracy and high confidence do not make every answer right
        print(f"\n{wrong} of {len(EXAMPLES)} wrong, at {m['accuracy']:.1%} test accuracy: the tokens above show "
              f"what the model went by")
    print(f"\nrun directory: {result.run_dir}")
    print(f"next: attnclf explain {result.run_dir} \"the acting was not bad\" --method integrated-gradients")


def _top(pairs: list[tuple[str, float]]) -> str:
    """Signed effects: occlusion's drop in the predicted class's probability."""
    return ", ".join(f"{token} {score:+.2f}" for token, score in pairs)


def _refuse_another_run(output: Path, settings) -> None:
    """The demo replaces an earlier demo in ``output`` (run again, it trains the same), never another run, not even
    one of self-attn on demo trained otherwise: the folder may hold a user's own."""
    if not (output / "config.json").is_file():
        if member_folders(output, trained=True):
            raise AttnclfError(f"{output} holds the runs of `train --seeds`; give the demo another --output")
        return
    try:
        differing = resume_settings(output).first_difference(settings)
    except (AttnclfError, KeyError, TypeError, ValueError):  # a run folder this attnclf cannot read
        differing = ("settings",)
    if differing is not None:
        raise AttnclfError(f"{output} holds another run (its {differing[0]} differs from the demo's); give the demo "
                           f"another --output, or delete the folder")
