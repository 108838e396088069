"""Run a trained model outside PyTorch: ONNX export (``export_onnx``) and inference (``OnnxClassifier``).

``OnnxClassifier`` needs only onnxruntime, tokenizers and numpy; importing it
does not import torch. ``export_onnx`` needs torch (it reads the run).

>>> # from attnclf.export import OnnxClassifier, check_data, export_onnx
>>> # export_onnx("runs/demo", check=check_data("runs/demo"), quantize=True).manifest["parity"]
>>> # OnnxClassifier.load("runs/demo").predict(["not bad at all"])
"""


def __getattr__(name: str):
    # Lazy, so `from attnclf.export import OnnxClassifier` never pays for (or needs) torch.
    if name == "OnnxClassifier":
        from .runtime import OnnxClassifier

        return OnnxClassifier
    if name in ("export_onnx", "check_data", "onnx_graph"):
        from . import onnx

        return getattr(onnx, name)
    from attnclf import _submodule  # its modules (.onnx, .runtime), as attnclf's own

    return _submodule(__name__, name)


__all__ = ["OnnxClassifier", "check_data", "export_onnx", "onnx_graph"]
