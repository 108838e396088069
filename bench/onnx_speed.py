"""ONNX export of a run: parity with PyTorch, CPU speed of onnxruntime vs PyTorch, int8 accuracy change.

    python bench/onnx_speed.py RUN_DIR [--texts 1000] [--threads 1] [--batch-sizes 1,64] [--repeats 3]

Exports RUN_DIR (with int8 quantisation) into a temporary directory, checking
parity on up to ``--texts`` texts of the run's test split, then times
``predict_proba`` over those texts (tokenisation included) for PyTorch,
onnxruntime fp32 and onnxruntime int8, each with ``--threads`` intra-op
threads, at every batch size; the best of ``--repeats`` runs counts. Writes
bench/results/onnx_speed.json.
"""

from __future__ import annotations

import tempfile
import time

import torch

from attnclf.classifier import Classifier
from attnclf.export import OnnxClassifier
from attnclf.export.onnx import check_data, export_onnx
from common import parser, write_result


def _best_seconds(predict_proba, texts: list[str], repeats: int) -> float:
    predict_proba(texts[:64])  # warm-up: first calls allocate and pick kernels
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        predict_proba(texts)
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("run_dir")
    p.add_argument("--texts", type=int, default=1000, help="test texts checked and timed (default: 1000)")
    p.add_argument("--threads", type=int, default=1, help="intra-op threads of both runtimes (default: 1)")
    p.add_argument("--batch-sizes", default="1,64", help="comma-separated (default: 1,64)")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per cell; the best counts (default: 3)")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    check = check_data(args.run_dir, limit=args.texts)
    with tempfile.TemporaryDirectory(prefix="attnclf-onnx-bench-") as tmp:
        manifest = export_onnx(args.run_dir, tmp, check=check, quantize=True).manifest
        runtimes = {
            "torch": Classifier.load(args.run_dir, device="cpu"),
            "onnx_fp32": OnnxClassifier.load(tmp, threads=args.threads),
            "onnx_int8": OnnxClassifier.load(tmp, int8=True, threads=args.threads),
        }
        speed = {}
        for batch_size in (int(b) for b in args.batch_sizes.split(",")):
            row = {}
            for name, clf in runtimes.items():
                clf.batch_size = batch_size
                row[f"{name}_texts_per_second"] = round(len(check) / _best_seconds(clf.predict_proba, check.texts,
                                                                                    args.repeats), 1)
            for name in ("onnx_fp32", "onnx_int8"):
                row[f"{name}_vs_torch"] = round(row[f"{name}_texts_per_second"] / row["torch_texts_per_second"], 2)
            speed[f"batch_{batch_size}"] = row
    write_result("onnx_speed", {
        "run_dir": args.run_dir,
        "model": manifest["model"],
        "texts": len(check),
        "threads": args.threads,
        "parity": manifest["parity"],
        "int8": manifest["int8"],
        "speed": speed,
    }, args.out)


if __name__ == "__main__":
    main()
