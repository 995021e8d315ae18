"""paramd: train models through paramd parameter servers.

paramd.torch is the PyTorch worker (docs/pytorch.md). The native part,
paramd._native, is built by Bazel over paramd's C++ client:
`bazel build //python:package`, then PYTHONPATH=bazel-bin/python/package.
"""

from . import _native  # noqa: F401  (fails clearly when not built)

__all__ = ["torch"]
