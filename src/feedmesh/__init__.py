"""feedmesh: follow the web's feeds at scale, politely.

See ``docs/architecture.md`` for the data flow and the package that owns each step.
"""

import os
import tempfile

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/feedmesh/feedmesh"

__all__ = ["PROJECT_URL", "__version__"]


def _numba_cache_dir() -> None:
    """numba keeps compiled kernels beside their source, and fails at import where it cannot
    write there (a system-wide install, another user's checkout) and the user has no writable
    home either (a service account). Cache in the user's cache folder then, or in a private
    temporary one, rather than fail."""
    if "NUMBA_CACHE_DIR" in os.environ or os.access(os.path.dirname(__file__), os.W_OK):
        return
    home_cache = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    for base in (home_cache, tempfile.gettempdir()):
        folder = os.path.join(base, f"feedmesh-numba-{os.getuid()}")
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK) and os.stat(folder).st_uid == os.getuid():
            os.environ["NUMBA_CACHE_DIR"] = folder
            return


_numba_cache_dir()
