"""The names of the fetch policies, kept apart from the policies themselves so that settings can
be validated without importing them (settings sit below the policies in the package's layers).
:mod:`.policies` maps each name to its class and checks that the two lists agree."""

from __future__ import annotations

__all__ = ["ABLATION_POLICY_NAMES", "KNOWN_POLICY_NAMES", "POLICY_NAMES"]

POLICY_NAMES: tuple[str, ...] = (
    "uniform", "adaptive", "adaptive-literal", "cgm-age", "cgm-freshness", "optimal", "feedmesh",
)
"""The policies a deployment chooses from (``--policies all``)."""

ABLATION_POLICY_NAMES: tuple[str, ...] = ("optimal-timing", "optimal-allocation")
"""The paper's strategies 2 and 3 (Table 1: placement only, allocation only), for the simulator's
calibration table; a deployment has no reason to pick them."""

KNOWN_POLICY_NAMES: tuple[str, ...] = POLICY_NAMES + ABLATION_POLICY_NAMES
