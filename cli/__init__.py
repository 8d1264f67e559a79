"""The ``kadence`` command line (click). Sits above every other package."""

from .main import main

__all__ = ["main"]
