"""Certificates and keys of one cluster, made as kubeadm makes them (one CA per cluster; EC P-256, as
`kubeadm init --encryption-algorithm ECDSA-P256` makes them, because they are made in milliseconds): the API
server's serving certificate, client certificates whose subject is the identity (CN the user, O the groups, as
the x509 authenticator reads them), and the service-account signing key pair."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def public_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class Pair:
    cert: bytes
    key: bytes

    def write(self, directory: Path, stem: str) -> tuple[Path, Path]:
        cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
        cert.write_bytes(self.cert)
        key.write_bytes(self.key)
        key.chmod(0o600)
        return cert, key


class CA:
    def __init__(self, name: str) -> None:
        self.key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self.cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False, content_commitment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, *, groups: tuple[str, ...] = (), hosts: tuple[str, ...] = (),
              server: bool = False) -> Pair:
        """A client certificate (subject CN=user, O=groups) or, with `server`, a serving one for `hosts`."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        names = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        names += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(names)).issuer_name(self.cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + VALID)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return Pair(cert.public_bytes(serialization.Encoding.PEM), key_pem(key))


def service_account_key() -> Pair:
    """The token signing key pair: `cert` holds the public key (--service-account-key-file), `key` the private one
    (--service-account-signing-key-file, and the controller manager's --service-account-private-key-file)."""
    key = _key()
    return Pair(public_pem(key), key_pem(key))
