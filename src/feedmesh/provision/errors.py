"""Errors of the provision package: one tree, so the command can say each in one line.

::

    ProvisionError               anything this package raises on purpose
    ├── ModelError               a model file that cannot be used (names the field and why)
    │   └── ModelVersionError    a model file of a version this code does not know
    ├── TargetsError             targets or node limits out of range (names the flag)
    └── UnresolvableError        a violation no decomposition can resolve (carries the violation)
"""

from __future__ import annotations

from feedmesh.errors import FeedmeshError

__all__ = ["ModelError", "ModelVersionError", "ProvisionError", "TargetsError",
           "UnresolvableError"]


class ProvisionError(FeedmeshError):
    """Base of every error the provision package raises on purpose."""


class ModelError(ProvisionError, ValueError):
    """A resource model that cannot be used; the message names the field."""


class ModelVersionError(ModelError):
    """A model file written for another version of the model format."""


class TargetsError(ProvisionError, ValueError):
    """A target or a node limit out of range."""


class UnresolvableError(ProvisionError):
    """The greedy planner met a violation that no decomposition resolves."""

    def __init__(self, service: str, resource: str, reason: str) -> None:
        super().__init__(f"{service} violates its {resource.replace('_', '-')} limit and no "
                         f"decomposition resolves it: {reason}")
        self.service = service
        self.resource = resource
        self.reason = reason
