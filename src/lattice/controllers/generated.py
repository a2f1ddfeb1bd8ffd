"""Secret material the pure plugins cannot make: filled in just before a Secret is created.

Contract: a plugin marks a Secret manifest with the annotation ``lattice.breezeml.ai/generate``;
``fill_generated`` returns a copy with the material in ``data`` (base64, as the API wants) and the
annotation kept, so the object says how it was made. It is called only for Secrets that do not
exist yet, so material is generated once per job and never rotated under a running job.

- ``ssh-keypair``: what mpi-operator puts in ``<job>-ssh``: an ECDSA P-521 key pair,
  ``ssh-privatekey`` as a PEM "EC PRIVATE KEY" and ``ssh-publickey`` in OpenSSH
  ``authorized_keys`` form, in a Secret of type ``kubernetes.io/ssh-auth``.
- ``flux-curve-cert``: what a TrainJob's Flux brokers share in ``<tj>-flux-curve``: a fresh
  X25519 (ZeroMQ CURVE) key pair as a certificate (``flux.curve_certificate``, Z85 keys) under
  ``curve.cert``, named after the Secret.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, x25519

from lattice.frameworks.policies import flux
from lattice.frameworks.policies.mpi import ANNOTATION_GENERATE, GENERATE_SSH_KEYPAIR
from lattice.frameworks.trainjob_flux import GENERATE_CURVE_CERT

__all__ = ["GENERATE_ANNOTATION", "curve_certificate", "fill_generated", "ssh_keypair"]

GENERATE_ANNOTATION = ANNOTATION_GENERATE


def ssh_keypair() -> tuple[bytes, bytes]:
    """A fresh ECDSA P-521 key pair: (PEM private key, OpenSSH public key)."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    return private, public


def curve_certificate(name: str) -> str:
    """A fresh ZeroMQ CURVE certificate (X25519 key pair, Z85-encoded) named ``name``."""
    key = x25519.X25519PrivateKey.generate()
    public = key.public_key().public_bytes_raw()
    return flux.curve_certificate(
        name, public=flux.z85(public), secret=flux.z85(key.private_bytes_raw())
    )


def fill_generated(manifest: dict[str, Any]) -> dict[str, Any]:
    """``manifest`` with generated ``data`` when it asks for it; otherwise unchanged."""
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    what = annotations.get(GENERATE_ANNOTATION)
    if what is None:
        return manifest
    out = copy.deepcopy(manifest)
    out.pop("stringData", None)
    if what == GENERATE_CURVE_CERT:
        cert = curve_certificate(str(out["metadata"].get("name", "")))
        out["data"] = {flux.CURVE_KEY: base64.b64encode(cert.encode()).decode()}
        return out
    if what != GENERATE_SSH_KEYPAIR:
        raise ValueError(f"unknown {GENERATE_ANNOTATION} value {what!r}")
    private, public = ssh_keypair()
    out["data"] = {
        "ssh-privatekey": base64.b64encode(private).decode(),
        "ssh-publickey": base64.b64encode(public).decode(),
    }
    return out
