"""`attnclf demo`: train the self-attention classifier on generated reviews, then show it working."""

from __future__ import annotations

from .classifier import Classifier
from .recipes import recipe_for
from .text.tokenizer import TokenizerConfig
from .training.run import DataSettings, RunSettings, train_run
from .training.trainer import TrainConfig

EXAMPLES = [
    "the acting was wonderful",
    "the acting was not wonderful",
    "the plot was boring but the ending was brilliant",
    "the plot was brilliant but the ending was boring",
    "honestly the soundtrack was not bad",
]


def run_demo(output: str = "runs/demo", device: str = "auto", progress: bool = True) -> None:
    """Train ``self-attn`` on ``demo`` (well under two minutes on 2 CPU cores) and print what it learned."""
    recipe = recipe_for("demo")
    settings = RunSettings(
        data=DataSettings(dataset="demo"),
        tokenizer=TokenizerConfig(**recipe["tokenizer"]),
        model="self-attn",
        model_config=dict(recipe["model_config"]),
        train=TrainConfig(**recipe["train"]),
        output=output,
        device=device,
    )
    print("Training a self-attention classifier on generated reviews where negation and contrast decide.")
    result = train_run(settings, progress=progress)
    m = result.metrics
    print(f"\ntest accuracy {m['accuracy']:.4f}  macro-F1 {m['macro_f1']:.4f}  ROC AUC {m['roc_auc']:.4f}"
          f"  ({m['parameters']:,} parameters, trained in {m['train_seconds']:.0f}s)")

    clf = Classifier.load(result.run_dir, device=device)
    print("\nPredictions; in brackets the three words the pooling layer weighted most")
    print("(where the pooling layer looked, not proof of why the model decided):")
    for text, prediction in zip(EXAMPLES, clf.predict(EXAMPLES)):
        top = ", ".join(f"{tok} {w:.2f}" for tok, w in prediction.top_tokens(3))
        print(f"  {prediction.label:<8} {prediction.confidence:.2f}  {text!r}  [{top}]")
    print(f"\nrun directory: {result.run_dir}  (try: attnclf predict {result.run_dir} \"not bad at all\")")
