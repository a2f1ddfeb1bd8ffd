"""Generated Secret material: fresh, well-formed, only when asked for."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from lattice.controllers.generated import GENERATE_ANNOTATION, fill_generated


def secret(generate: str | None) -> dict[str, object]:
    annotations = {GENERATE_ANNOTATION: generate} if generate else {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "metadata": {"name": "pi-ssh", "annotations": annotations},
        "data": {"ssh-privatekey": "", "ssh-publickey": ""},
    }


def test_ssh_keypair_is_a_matching_p521_pair_and_fresh_each_time() -> None:
    first = fill_generated(secret("ssh-keypair"))
    second = fill_generated(secret("ssh-keypair"))
    data = first["data"]
    assert isinstance(data, dict)
    private = serialization.load_pem_private_key(
        base64.b64decode(data["ssh-privatekey"]), password=None
    )
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.curve.name == "secp521r1"
    public = base64.b64decode(data["ssh-publickey"])
    assert public.startswith(b"ecdsa-sha2-nistp521 ")
    derived = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert derived == public
    assert first["data"] != second["data"]
    assert first["metadata"] == secret("ssh-keypair")["metadata"], "the annotation is kept"


def test_a_secret_without_the_annotation_is_returned_as_is() -> None:
    plain = secret(None)
    assert fill_generated(plain) is plain


def test_an_unknown_generator_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'gpg-key'"):
        fill_generated(secret("gpg-key"))
