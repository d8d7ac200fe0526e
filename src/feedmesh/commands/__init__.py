"""The programs: each ``feedmesh`` subcommand that wires stages together (the composition root,
:mod:`feedmesh.compose`, builds what they run). Commands of a single stage (``parse``, ``query``,
``sim``, ``farm``) live in that stage's package; these sit above every package they use."""
