"""provision: Cobra's provisioner (section 3.5-3.6): plan a topology of crawlers, filters and
reflectors from targets, node limits and a measured resource model; check a running one.

The front door::

    from feedmesh.provision import plan, Targets, NodeLimits, decode_model

    result = plan(Targets(feeds=800_000, subscriptions=8_000_000),
                  NodeLimits.from_units(bandwidth_mbps=100, memory_mb=1024, cpu=1.0), model)
    result.topology.crawlers, result.loads["filter-0"], result.steps

The package is pure except ``cli`` (files, subprocesses, HTTP): a plan is a function of its
inputs. Layers, bottom-up (the ``provision-layers`` contract of ``.importlinter``)::

    1 errors
    2 model (the resource model file), topology (targets, limits, shares, links)
    3 loads (predicted load per service)
    4 decomposition (Figure 3, derived)
    5 planner (the greedy algorithm)
    6 launch (topology JSON, launch plan), calibrate (benchmarks -> model), check (live loads)
    7 render (table, Graphviz)
    8 cli (``feedmesh provision``)

See docs/provisioning.md.
"""

from .decomposition import DECOMPOSITION, decompose
from .errors import ModelError, ModelVersionError, ProvisionError, TargetsError, UnresolvableError
from .loads import Load, predict, selectivity
from .model import MODEL_VERSION, ResourceModel, decode_model, encode_model
from .planner import Plan, PlannerSettings, Violation, find_violations, plan
from .topology import NodeLimits, Targets, Topology

__all__ = [
    "DECOMPOSITION",
    "MODEL_VERSION",
    "Load",
    "ModelError",
    "ModelVersionError",
    "NodeLimits",
    "Plan",
    "PlannerSettings",
    "ProvisionError",
    "ResourceModel",
    "Targets",
    "TargetsError",
    "Topology",
    "UnresolvableError",
    "Violation",
    "decode_model",
    "decompose",
    "encode_model",
    "find_violations",
    "plan",
    "predict",
    "selectivity",
]
