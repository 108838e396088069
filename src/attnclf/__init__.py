"""attnclf: attention-based text classifiers, trained from scratch, explained honestly.

Where to start from Python (README.md, "Use a trained model from Python", says more):

- ``Classifier.load(run_dir)``: a run ``attnclf train`` (or an estimator's ``save``) wrote; its ``predict``,
  ``predict_proba``, ``logits`` and ``explain(texts, method=..., target=...)``.
- ``AttentionTextClassifier``: train from Python, the scikit-learn way (``fit(texts, labels)``: lists, a
  DataFrame's columns, a Hugging Face dataset's), ``save(folder)`` a run that ``Classifier.load`` reads.
- ``Ensemble.load([run_dir, ...])``: several runs of the same data voting by their mean probabilities.
- ``attnclf.evaluation.evaluate(clf, attnclf.training.run_data.scoring_data(clf, test_file=...))``: the metrics
  ``attnclf evaluate`` reports.
- ``attnclf.export.OnnxClassifier.load(run_dir)``: an exported run's predictions on onnxruntime, without PyTorch.

Bad input raises ``attnclf.errors.AttnclfError`` (a ``ValueError``) in one line.

>>> # from attnclf import Classifier
>>> # Classifier.load("runs/demo").predict(["the plot was not good"])[0].label  # 'negative'
>>> import attnclf
>>> "Classifier" in dir(attnclf)  # (imported when first used, so `import attnclf` does not import torch)
True
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so `import attnclf` (and the CLI's --help) does not pay for importing torch.
    if name in ("Classifier", "Prediction", "LabelSetPrediction"):
        from . import classifier

        return getattr(classifier, name)
    if name == "Ensemble":
        from . import ensemble

        return ensemble.Ensemble
    if name == "AttentionTextClassifier":
        from . import sklearn

        return sklearn.AttentionTextClassifier
    return _submodule(__name__, name)


def _submodule(package: str, name: str):
    """The module ``name`` of ``package``, imported when first asked for, for a package's ``__getattr__``: a module
    named as README names it (``attnclf.errors.AttnclfWarning``, ``attnclf.training.run_data.scoring_data``) after
    a bare ``import attnclf`` was an AttributeError unless something had imported it already. Anything else is
    the AttributeError Python raises (a name from ``_``, ``__main__`` among them, never: that one runs the CLI).

    >>> _submodule("attnclf", "errors").AttnclfWarning.__name__
    'AttnclfWarning'
    """
    import importlib
    import importlib.util

    # (a module's name, one identifier: find_spec of a dotted one imports its parent, a ModuleNotFoundError)
    if name.isidentifier() and not name.startswith("_") and importlib.util.find_spec(f"{package}.{name}") is not None:
        return importlib.import_module(f"{package}.{name}")
    raise AttributeError(f"module {package!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # What a notebook's tab completion offers: the lazy exports too, which __getattr__ alone would hide.
    return sorted(set(globals()) | set(__all__))


__all__ = ["AttentionTextClassifier", "Classifier", "Ensemble", "LabelSetPrediction", "Prediction", "__version__"]
