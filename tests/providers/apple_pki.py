"""A stand-in for Apple's signing PKI: root -> intermediate -> leaf (P-256), with the OIDs Apple's
library checks (`1.2.840.113635.100.6.2.1` on the intermediate, `1.2.840.113635.100.6.11.1` on the
leaf), and JWS signed with the leaf key (ES256, `x5c` = leaf, intermediate, root) in the App
Store's shapes: transactions, renewal infos, Server Notifications V2.

Configure the root (`root_path`, DER like Apple's `.cer` files) as `FLOKIT_APPLE_ROOT_CERTS`;
Apple's `SignedDataVerifier` then verifies what this signs exactly as it verifies Apple's data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import AuthorityInformationAccessOID, NameOID

INTERMEDIATE_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.2.1")
LEAF_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.11.1")
BUNDLE_ID = "com.acme.fit"
APP_APPLE_ID = 1234567890
DAY_MS = 86_400_000


def _name(common: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, common), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test")]
    )


def _key_usage(ca: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not ca,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool,
    oid: x509.ObjectIdentifier | None,
    ocsp_url: str | None,
) -> x509.Certificate:
    now = datetime.now(UTC)
    issuer_name, issuer_key = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=3650))
        .not_valid_after(now + timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            _key_usage(ca),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    )
    if oid is not None:
        builder = builder.add_extension(x509.UnrecognizedExtension(oid, b"\x05\x00"), critical=False)
    if ocsp_url is not None and issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityInformationAccess(
                [x509.AccessDescription(AuthorityInformationAccessOID.OCSP, x509.UniformResourceIdentifier(ocsp_url))]
            ),
            critical=False,
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _b64(cert: x509.Certificate) -> str:
    import base64

    return base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()


@dataclass
class ApplePki:
    """One root, intermediate and leaf; `ocsp_url` goes in the intermediate's and leaf's
    Authority Information Access (where the library's online checks ask)."""

    directory: Path
    ocsp_url: str | None = None
    name: str = "root"
    root_key: ec.EllipticCurvePrivateKey = field(init=False)
    leaf_key: ec.EllipticCurvePrivateKey = field(init=False)
    chain: list[str] = field(init=False)
    root_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.root_key = ec.generate_private_key(ec.SECP256R1())
        intermediate_key = ec.generate_private_key(ec.SECP256R1())
        self.leaf_key = ec.generate_private_key(ec.SECP256R1())
        root = _cert(f"Test Apple Root {self.name}", self.root_key, None, ca=True, oid=None, ocsp_url=None)
        intermediate = _cert(
            "Test WWDR", intermediate_key, (root.subject, self.root_key), ca=True, oid=INTERMEDIATE_OID,
            ocsp_url=self.ocsp_url,
        )  # fmt: skip
        leaf = _cert(
            "Test StoreKit Signing", self.leaf_key, (intermediate.subject, intermediate_key), ca=False, oid=LEAF_OID,
            ocsp_url=self.ocsp_url,
        )  # fmt: skip
        self.chain = [_b64(leaf), _b64(intermediate), _b64(root)]
        self.directory.mkdir(parents=True, exist_ok=True)
        self.root_path = self.directory / f"{self.name}.cer"
        self.root_path.write_bytes(root.public_bytes(serialization.Encoding.DER))
        self.root_pem = root.public_bytes(serialization.Encoding.PEM)

    def sign(self, claims: dict[str, Any]) -> str:
        return jwt.encode(claims, self.leaf_key, algorithm="ES256", headers={"x5c": self.chain})

    def transaction(self, **fields: Any) -> str:
        return self.sign(transaction(**fields))

    def renewal(self, **fields: Any) -> str:
        return self.sign(renewal(**fields))

    def notification(
        self,
        notification_type: str,
        subtype: str | None = None,
        *,
        txn: dict[str, Any] | None = None,
        renewal_info: dict[str, Any] | None = None,
        bundle_id: str = BUNDLE_ID,
        environment: str = "Production",
        app_apple_id: int | None = APP_APPLE_ID,
        notification_uuid: str | None = None,
        signed_ms: int | None = None,
    ) -> str:
        """A `signedPayload` (the body is `{"signedPayload": <this>}`)."""
        data: dict[str, Any] = {"bundleId": bundle_id, "environment": environment, "bundleVersion": "1"}
        if app_apple_id is not None:
            data["appAppleId"] = app_apple_id
        if txn is not None:
            data["signedTransactionInfo"] = self.sign(txn)
        if renewal_info is not None:
            data["signedRenewalInfo"] = self.sign(renewal_info)
        claims: dict[str, Any] = {
            "notificationType": notification_type,
            "notificationUUID": notification_uuid or str(uuid.uuid4()),
            "version": "2.0",
            "signedDate": signed_ms if signed_ms is not None else now_ms(),
            "data": data,
        }
        if subtype is not None:
            claims["subtype"] = subtype
        return self.sign(claims)


def now_ms() -> int:
    return int(datetime.now(UTC).timestamp() * 1000)


def transaction(**fields: Any) -> dict[str, Any]:
    """A monthly auto-renewable subscription's first period, bought a day ago, in Production."""
    now = now_ms()
    base: dict[str, Any] = {
        "transactionId": "2000000000000001",
        "originalTransactionId": "2000000000000001",
        "webOrderLineItemId": "2000000000000101",
        "bundleId": BUNDLE_ID,
        "productId": "pro_monthly",
        "subscriptionGroupIdentifier": "21000001",
        "purchaseDate": now - DAY_MS,
        "originalPurchaseDate": now - DAY_MS,
        "expiresDate": now + 29 * DAY_MS,
        "quantity": 1,
        "type": "Auto-Renewable Subscription",
        "inAppOwnershipType": "PURCHASED",
        "signedDate": now,
        "environment": "Production",
        "transactionReason": "PURCHASE",
        "storefront": "USA",
        "storefrontId": "143441",
        "price": 9990,
        "currency": "USD",
    }
    return base | fields


def renewal(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "originalTransactionId": "2000000000000001",
        "autoRenewProductId": "pro_monthly",
        "productId": "pro_monthly",
        "autoRenewStatus": 1,
        "signedDate": now_ms(),
        "environment": "Production",
        "recentSubscriptionStartDate": now_ms() - DAY_MS,
    }
    return base | fields
