"""The classifiers: ``build_model("self-attn", vocab_size=20000)``; see ``MODELS`` for the list."""

from attnclf.models.base import Classifier, ModelConfig, ModelOutput
from attnclf.models.classifiers import (MODELS, ModelSpec, build_model, config_for, model_from_config, model_name,
                                        parameter_table, parameter_table_heading)

__all__ = ["MODELS", "Classifier", "ModelConfig", "ModelOutput", "ModelSpec", "build_model", "config_for",
           "model_from_config", "model_name", "parameter_table", "parameter_table_heading"]
