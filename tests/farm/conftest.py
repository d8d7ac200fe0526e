"""Farm tests use the same fixtures the farm offers to every other test folder."""

from feedmesh.farm.testing import farm, farm_config, farm_factory, farm_process  # noqa: F401
