"""A publisher's (or republisher's) signing keys on disk, and ``feedmesh keys`` (issue 14).

:class:`KeyStore` is the data folder: the secret key (mode 0600, folder 0700), the public keyring
with every rotation and revocation signed by the key it retires, the heads of the logs the key
signs, and an outbox of ``rotate``/``revoke`` records to multicast in those logs.
"""

from feedmesh.mesh.keys.store import KeyFileError, KeyStore, fingerprint

__all__ = ["KeyFileError", "KeyStore", "fingerprint"]
