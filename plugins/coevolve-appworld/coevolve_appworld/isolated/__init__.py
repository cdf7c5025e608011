"""Scripts that run inside AppWorld's own virtualenv (pydantic 1), never in the SDK's process.

They are shipped as package data and executed by path with the isolated interpreter:
``<appworld-venv>/bin/python <this folder>/worker.py ...``. They import only the standard
library and ``appworld``; importing anything from ``coevolve_sdk`` here would defeat the
isolation, so this ``__init__`` exists only so that setuptools ships the folder.
"""
