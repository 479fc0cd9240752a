"""Registers hccl-tune's torch.distributed backends lazily (loaded by hccl_tune_torch.pth at start-up).

It imports nothing heavy: a meta-path finder waits for ``torch.distributed`` to be imported and, once that
module has finished executing, imports ``hccl_tune_torch`` (which registers ``hccltune`` and ``hccl``).
Processes that never use torch.distributed never load torch because of us.
"""

import sys

_TARGET = "torch.distributed"


class _Finder:
    """Wraps the real loader of torch.distributed so registration runs right after it executes."""

    _busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != _TARGET or _Finder._busy:
            return None
        _Finder._busy = True
        try:
            import importlib.util

            spec = importlib.util.find_spec(fullname)
        finally:
            _Finder._busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader)
        return spec


class _Loader:
    def __init__(self, inner):
        self._inner = inner

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        _remove()
        try:
            import hccl_tune_torch  # noqa: F401  (registers on import)
        except Exception as e:  # never break `import torch.distributed` for users of other backends
            import warnings

            warnings.warn(f"hccl_tune_torch: backend registration failed: {e!r}")

    def __getattr__(self, name):
        return getattr(self._inner, name)


def _remove():
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Finder)]


def install():
    if _TARGET in sys.modules:  # already imported (e.g. re-run): register now
        import hccl_tune_torch  # noqa: F401

        return
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


install()
