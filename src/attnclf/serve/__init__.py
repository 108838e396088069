"""Serve a trained model over HTTP: ``attnclf serve RUN_DIR`` (see ``app`` for the API)."""

from .app import Batcher, ServeLimits, create_app, serve

__all__ = ["Batcher", "ServeLimits", "create_app", "serve"]
