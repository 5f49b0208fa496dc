"""Ed25519 signatures of locks and results: *who* locked a plan and produced its results.

A hash can be recomputed by anyone who edits a file; a signature can only be made by the holder of
the private key. ``tabsim prereg keygen --out KEYFILE`` writes the private key (PEM, mode 0600,
never overwriting an existing file) and ``KEYFILE.pub`` (PEM). A signature block stored in a lock or
in ``status.json`` reads::

    {"algorithm": "ed25519", "public_key": "<base64 of the 32 raw bytes>",
     "fingerprint": "sha256:<hex SHA-256 of the raw bytes>", "value": "<base64 signature>"}

The signed message is a domain tag (``tabsim.prereg.lock``, ``tabsim.prereg.amendment``,
``tabsim.prereg.status``), a NUL byte
and the canonical JSON of the signed content, so a lock signature cannot pass for a results one.
A signature says nothing about *when*: a key holder can sign a backdated lock at any time.

A verifier that only checks a signature against the key stored beside it accepts a forger who
re-signs with their own key; pinning the expected public key (``--public-key`` or the
``TABSIM_PREREG_PUBKEY`` variable: a public key file or a fingerprint) closes that gap.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Optional

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tabsim.base import defaults
from tabsim.prereg.schema import PreregError

ALGORITHM = "ed25519"
PIN_VARIABLE = "TABSIM_PREREG_PUBKEY"
LOCK_DOMAIN = "tabsim.prereg.lock"
STATUS_DOMAIN = "tabsim.prereg.status"
AMENDMENT_DOMAIN = "tabsim.prereg.amendment"
_MAX_KEY_BYTES = 64 * 1024


class SignatureError(PreregError):
    """A signature does not verify, or was made with another key than the pinned one."""


def _canonical(body: dict) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _message(domain: str, body: dict) -> bytes:
    return domain.encode() + b"\0" + _canonical(body)


def fingerprint(raw: bytes) -> str:
    """``sha256:<hex>`` of a raw 32-byte Ed25519 public key."""
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def short(fp: Optional[str]) -> str:
    """A fingerprint shortened for display (``sha256:1a2b3c4d5e6f7a8b``)."""
    return fp[:23] if fp else "n/a"


def _raw_public(public_key) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _exclusive_write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode`` atomically and only if ``path`` does not exist.

    The bytes go to a temporary file created with ``mode`` (never readable by others in between),
    which is then hard-linked to ``path``: the link fails if ``path`` appeared meanwhile.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.link(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def keygen(out: str | Path) -> dict:
    """Write a new Ed25519 private key to ``out`` (PEM, mode 0600) and its public key to ``out.pub``.

    Never overwrites: refuses when either file exists.

    Returns:
      ``{"private_key": path, "public_key": path, "fingerprint": "sha256:..."}``.
    """
    out = Path(out)
    pub = out.with_name(out.name + ".pub")
    for p in (out, pub):
        if p.exists() or p.is_symlink():
            raise PreregError(f"--out: {p} already exists; a key is never overwritten (choose another path)")
    if not out.parent.is_dir():
        raise PreregError(f"--out: folder {out.parent} does not exist")
    key = Ed25519PrivateKey.generate()
    private_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption())
    public_pem = key.public_key().public_bytes(serialization.Encoding.PEM,
                                               serialization.PublicFormat.SubjectPublicKeyInfo)
    try:
        _exclusive_write(out, private_pem, 0o600)
    except FileExistsError:
        raise PreregError(f"--out: {out} already exists; a key is never overwritten") from None
    try:
        _exclusive_write(pub, public_pem, 0o644)
    except FileExistsError:
        out.unlink()
        raise PreregError(f"--out: {pub} already exists; a key is never overwritten") from None
    return {"private_key": str(out), "public_key": str(pub), "fingerprint": fingerprint(_raw_public(key.public_key()))}


def load_private_key(path: str | Path):
    """The Ed25519 private key in the PEM file ``path``; refuses a key file others can read."""
    path = Path(path)
    if not path.is_file():
        raise PreregError(f"--key: {path} not found (create one with `tabsim prereg keygen --out {path}`)")
    mode = path.stat().st_mode & 0o777
    if os.name == "posix" and mode & 0o077:
        raise PreregError(f"--key: {path} is readable by other users (mode {mode:04o}); a private key must be "
                          f"mode 0600: chmod 600 {path}")
    data = path.read_bytes()[:_MAX_KEY_BYTES + 1]
    if len(data) > _MAX_KEY_BYTES:
        raise PreregError(f"--key: {path} is larger than {_MAX_KEY_BYTES} bytes; not a key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as err:
        raise PreregError(f"--key: {path} is not an unencrypted PEM private key ({err})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise PreregError(f"--key: {path} holds a {type(key).__name__}; expected an Ed25519 key "
                          f"(`tabsim prereg keygen`)")
    return key


def key_fingerprint(key) -> str:
    """The fingerprint of a private key's public half."""
    return fingerprint(_raw_public(key.public_key()))


def sign(key, domain: str, body: dict) -> dict:
    """The signature block of ``body`` under ``domain`` made with the private ``key``."""
    raw = _raw_public(key.public_key())
    return {"algorithm": ALGORITHM, "public_key": base64.b64encode(raw).decode(), "fingerprint": fingerprint(raw),
            "value": base64.b64encode(key.sign(_message(domain, body))).decode()}


def verify(block, domain: str, body: dict, where: str) -> str:
    """Check a signature block over ``body``; return the signer's fingerprint.

    Raises:
      SignatureError: naming ``where`` (the file) when the block is malformed, its fingerprint does
        not belong to its public key, or the signature does not verify (the content was changed
        after signing, or signed with another key than the one stored).
    """
    if not isinstance(block, dict) or block.get("algorithm") != ALGORITHM:
        raise SignatureError(f"{where}: bad signature (malformed signature block; expected algorithm {ALGORITHM!r})")
    try:
        raw = base64.b64decode(block["public_key"], validate=True)
        value = base64.b64decode(block["value"], validate=True)
        public = Ed25519PublicKey.from_public_bytes(raw)
    except (KeyError, TypeError, ValueError, binascii.Error):
        raise SignatureError(f"{where}: bad signature (malformed public key or signature)") from None
    if block.get("fingerprint") != fingerprint(raw):
        raise SignatureError(f"{where}: bad signature (the fingerprint does not belong to the stored public key)")
    try:
        public.verify(value, _message(domain, body))
    except InvalidSignature:
        raise SignatureError(f"{where}: bad signature (the signed content was changed after signing, key "
                             f"{short(block['fingerprint'])})") from None
    return block["fingerprint"]


_FP = re.compile(r"^(sha256:)?([0-9a-f]{64})$")


def parse_pin(value: str, *, source: str = "--public-key") -> str:
    """The fingerprint named by ``value``: a public key file (PEM or ``.pub``), a fingerprint
    ``sha256:<64 hex>`` (or the bare hex), or the base64 of the 32 raw key bytes."""
    text = value.strip()
    m = _FP.match(text.lower())
    if m:
        return "sha256:" + m.group(2)
    path = Path(text)
    if path.is_file():
        data = path.read_bytes()[:_MAX_KEY_BYTES]
        try:
            key = serialization.load_pem_public_key(data)
        except (ValueError, TypeError):
            if b"PRIVATE KEY" in data:
                raise PreregError(f"{source}: {path} is a private key; pin the public key ({path}.pub) or its "
                                  f"fingerprint") from None
            raise PreregError(f"{source}: {path} is not a PEM public key") from None
        if not isinstance(key, Ed25519PublicKey):
            raise PreregError(f"{source}: {path} holds a {type(key).__name__}; expected an Ed25519 public key")
        return fingerprint(_raw_public(key))
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == 32:
        return fingerprint(raw)
    raise PreregError(f"{source}: {value!r} is neither a public key file, a fingerprint sha256:<64 hex digits>, "
                      f"nor a base64 Ed25519 public key")


def pinned(value: Optional[str] = None) -> Optional[str]:
    """The pinned fingerprint: ``value`` (the ``--public-key`` option) or ``$TABSIM_PREREG_PUBKEY``, else None."""
    if value:
        return parse_pin(value)
    env = defaults.prereg_pubkey()  # $TABSIM_PREREG_PUBKEY
    return parse_pin(env, source=PIN_VARIABLE) if env else None


def check_pin(block, pin: Optional[str], where: str, what: str) -> None:
    """With a pinned key, ``block`` must exist and carry the pinned fingerprint (verify it separately)."""
    if pin is None:
        return
    if not block:
        raise SignatureError(f"{where}: the {what} is unsigned, but public key {short(pin)} is pinned; an "
                             f"unsigned {what} cannot show who made it")
    if block.get("fingerprint") != pin:
        raise SignatureError(f"{where}: the {what} is signed by key {short(block.get('fingerprint'))}, not by "
                             f"the pinned key {short(pin)} (re-signed by someone else?)")
