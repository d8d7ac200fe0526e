"""Real I/O for the mesh's sans-IO cores: UDP endpoints that drive overlay nodes on loopback
(:mod:`.udp`), a subscriber that verifies and recovers gaps from the HTTP feed (:mod:`.peer`).
"""

from feedmesh.mesh.transport.udp import Address, UdpNode, address_key, handle_at, pair_latency

__all__ = ["Address", "UdpNode", "address_key", "handle_at", "pair_latency"]
