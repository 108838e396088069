"""attnclf: attention-based text classifiers, trained from scratch, explained honestly."""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so `import attnclf` (and the CLI's --help) does not pay for importing torch.
    if name in ("Classifier", "Prediction", "LabelSetPrediction"):
        from . import classifier

        return getattr(classifier, name)
    if name == "Ensemble":
        from . import ensemble

        return ensemble.Ensemble
    raise AttributeError(f"module 'attnclf' has no attribute {name!r}")


__all__ = ["Classifier", "Ensemble", "LabelSetPrediction", "Prediction", "__version__"]
