"""Helpers and shared workflows for tests in more than one folder (no test module imports
another test module: what two of them share lives here, or in a folder's ``*_support.py``)."""
