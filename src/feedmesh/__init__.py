"""feedmesh: follow the web's feeds at scale, politely.

See ``docs/architecture.md`` for the data flow and the package that owns each step.
"""

__version__ = "0.1.0"
PROJECT_URL = "https://github.com/feedmesh/feedmesh"

__all__ = ["PROJECT_URL", "__version__"]
