"""Serve a trained model over HTTP: ``attnclf serve RUN_DIR`` (see ``app`` for the API)."""

from .app import create_app
from .batcher import Batcher
from .limits import ServeLimits
from .server import serve

__all__ = ["Batcher", "ServeLimits", "create_app", "serve"]
