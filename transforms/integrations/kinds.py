"""The integration types, what each one's config file holds, and how a config is validated.

An operator connects an integration with a JSON file (`flokit admin integrations connect
--config FILE.json`). Each type declares its fields here, once: the CLI validates against the
declaration (an error names the field), the store seals the `secret` fields under the instance
key and keeps the rest readable, and the connector reads both back by name. Every type accepts
`base_url`, the provider API's address (default: the vendor's production address), so that a
proxy or a test can point it elsewhere; for the object-storage kinds it is the S3 endpoint
(boto's `endpoint_url`, accepted under that name too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any, Literal
from urllib.parse import urlsplit

FieldKind = Literal["string", "integer", "url", "string_list", "pem"]
# What a sync of the type brings in, which is what its `sync_stats` count (docs/spec-decisions.md).
Produces = Literal["events", "spend", "exports"]
# Scheduled syncs run this often unless the type says otherwise (stored per integration at
# connect time, so changing a default never silently reschedules existing integrations).
DEFAULT_CADENCE_HOURS = 24
MAX_STRING = 2000


class ConfigProblem(ValueError):
    """A config file that cannot be used; `field` is the offending key ("" for the file itself)."""

    def __init__(self, field_name: str, message: str) -> None:
        super().__init__(f"{field_name}: {message}" if field_name else message)
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class Field:
    name: str
    kind: FieldKind = "string"
    required: bool = False
    secret: bool = False
    default: Any = None
    minimum: int | None = None
    maximum: int | None = None
    aliases: tuple[str, ...] = ()
    doc: str = ""
    check: Callable[[str], str | None] | None = None  # a string's further rule: why it is refused, or None


@dataclass(frozen=True)
class IntegrationKind:
    type: str
    vendor: str  # the real system behind the spec's anonymised name, for operators
    produces: Produces
    default_base_url: str
    fields: tuple[Field, ...] = ()
    cadence_hours: int = DEFAULT_CADENCE_HOURS
    # Fields that must be given together, as one option of the config (all or none).
    groups: tuple[tuple[str, ...], ...] = ()
    base_url_aliases: tuple[str, ...] = ()

    def all_fields(self) -> tuple[Field, ...]:
        base = Field(
            "base_url",
            kind="url",
            default=self.default_base_url,
            aliases=self.base_url_aliases,
            doc="the provider API's address",
        )
        return (base, *self.fields)


@dataclass(frozen=True)
class ValidConfig:
    """A validated config: `options` are stored readable, `secrets` only sealed."""

    options: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.secrets[name] if name in self.secrets else self.options.get(name)


_S3_FIELDS = (
    Field("bucket", required=True, doc="the bucket name"),
    Field("prefix", default="", doc="the key prefix inside the bucket, without a leading slash"),
    Field("region", default="us-east-1"),
    Field("access_key_id", required=True, secret=True),
    Field("secret_access_key", required=True, secret=True),
)
_AWS_S3 = "https://s3.amazonaws.com"
# A subscription provider's webhook (RevenueCat, Adapty): the `Authorization` header value the
# operator types into the provider's dashboard, and the FloKit app whose ledger the webhook
# updates. Optional (the sync needs neither), but together: a webhook without an app has no
# ledger to apply to.
# It is the webhook's only credential (the providers sign nothing), checked online by anyone who
# can reach the gateway: at least 32 characters besides a scheme word, e.g. `openssl rand -hex 24`.
MIN_WEBHOOK_CREDENTIAL = 32
# Different characters, and different steps between neighbouring characters, a credential needs:
# `aaaa…`, `abab…`, `abcd…`, `0123…0123…` fall short; 32 random digits, hex or alphanumerics never did
# in 10^5 draws of each.
MIN_VARIETY = 6


def webhook_credential_problem(value: str) -> str | None:
    """Why `value` is too weak to be a webhook's only credential, or None. A leading scheme word
    (`Bearer `, `Basic `) carries no secret and is not counted."""
    scheme, _, rest = value.partition(" ")
    secret = rest.strip() if rest.strip() and scheme.isalpha() else value
    if len(secret) < MIN_WEBHOOK_CREDENTIAL:
        return (
            f"must hold at least {MIN_WEBHOOK_CREDENTIAL} characters of random text besides a scheme word "
            f"(this one has {len(secret)}): set a new value in the provider's dashboard, e.g. "
            "`Bearer ` and the output of `openssl rand -hex 24`"
        )
    steps = {ord(b) - ord(a) for a, b in pairwise(secret)}
    if len(set(secret)) < MIN_VARIETY or len(steps) < MIN_VARIETY:
        return (
            "is trivially repetitive (a repeated character, pattern or sequence): set a random value in the "
            "provider's dashboard, e.g. `Bearer ` and the output of `openssl rand -hex 24`"
        )
    return None


_WEBHOOK_FIELDS = (
    Field(
        "webhook_authorization",
        secret=True,
        doc="the exact Authorization header value configured for the webhook in the provider's dashboard",
        check=webhook_credential_problem,
    ),
    Field("app_id", doc="the FloKit app (app_...) whose entitlements the webhook updates"),
)
_WEBHOOK_GROUP = ("webhook_authorization", "app_id")

KINDS: dict[str, IntegrationKind] = {
    k.type: k
    for k in (
        IntegrationKind(
            "attribution_provider_a",
            vendor="Adjust",
            produces="spend",
            default_base_url="https://automate.adjust.com",
            fields=(
                Field("api_token", required=True, secret=True, doc="Report Service API token (Bearer)"),
                Field("app_token", doc="limit the report to this app (Adjust app token); default every app"),
                Field(
                    "lookback_days",
                    kind="integer",
                    default=14,
                    minimum=1,
                    maximum=90,
                    doc="days re-pulled every sync, ending today (UTC); network spend restates for 14",
                ),
                Field(
                    "currency",
                    default="USD",
                    doc="ISO 4217 code Adjust converts cost to (the report's `currency` parameter)",
                ),
            ),
        ),
        IntegrationKind(
            "attribution_provider_b",
            vendor="AppsFlyer",
            produces="spend",
            default_base_url="https://hq1.appsflyer.com",
            fields=(
                Field("api_token", required=True, secret=True, doc="API V2 token (Bearer)"),
                Field("app_id", required=True, doc="the app id, e.g. id123456789 or com.example.app"),
                Field("lookback_days", kind="integer", default=7, minimum=1, maximum=90, doc="days re-pulled"),
                Field(
                    "currency",
                    default="USD",
                    doc="the cost currency: USD (the Master API's default) or the app's own currency as set in "
                    "AppsFlyer (ISO 4217; then asked for with currency=preferred)",
                ),
            ),
        ),
        IntegrationKind(
            "subscription_provider_a",
            vendor="RevenueCat",
            produces="events",
            default_base_url="https://api.revenuecat.com",
            fields=(
                Field("api_key", required=True, secret=True, doc="secret API v2 key (sk_...)"),
                Field("project_id", required=True, doc="the RevenueCat project id (proj...)"),
                Field(
                    "requests_per_minute",
                    kind="integer",
                    default=480,
                    minimum=1,
                    maximum=10_000,
                    doc=(
                        "pace of the Customer Information calls: RevenueCat's default limit is 480 a "
                        "minute per project; set it higher only where RevenueCat raised the project's limit"
                    ),
                ),
                # Scheduled Data Exports (optional): the bucket RevenueCat delivers the Transactions
                # feed to, read before the API walk for the history and the exact figures.
                Field("export_bucket", doc="the S3 bucket RevenueCat's Scheduled Data Exports deliver to"),
                Field("export_prefix", doc="the folder inside the bucket the exports are delivered under"),
                Field("export_region", doc="the bucket's AWS region (default us-east-1)"),
                Field(
                    "export_endpoint_url",
                    kind="url",
                    doc="the S3 endpoint when the bucket is not on AWS (an S3-compatible store)",
                ),
                Field(
                    "export_access_key_id",
                    secret=True,
                    doc="a key allowed s3:ListBucket and s3:GetObject on the export bucket",
                ),
                Field("export_secret_access_key", secret=True),
                *_WEBHOOK_FIELDS,
            ),
            groups=(("export_bucket", "export_access_key_id", "export_secret_access_key"), _WEBHOOK_GROUP),
        ),
        IntegrationKind(
            "subscription_provider_b",
            vendor="Adapty",
            produces="events",
            default_base_url=_AWS_S3,
            # The bucket and folder Adapty's S3 integration exports events to (its "S3 bucket
            # name" and "Folder inside the bucket"), and a key that may list and read them.
            fields=(
                Field("bucket", required=True, doc="the bucket Adapty exports to (a bucket/folder path is split)"),
                Field("prefix", default="", doc="the folder Adapty writes to inside the bucket; empty: all of it"),
                Field("region", default="us-east-1", doc="the bucket's AWS region"),
                Field("access_key_id", required=True, secret=True, doc="a key allowed s3:ListBucket and s3:GetObject"),
                Field("secret_access_key", required=True, secret=True),
                *_WEBHOOK_FIELDS,
            ),
            groups=(_WEBHOOK_GROUP,),
            base_url_aliases=("endpoint_url",),
        ),
        IntegrationKind(
            "warehouse",
            vendor="S3-compatible object storage, and Snowflake",
            produces="exports",
            default_base_url=_AWS_S3,
            base_url_aliases=("endpoint_url",),
            fields=(
                *_S3_FIELDS,
                Field("snowflake_account"),
                Field("snowflake_user"),
                Field("snowflake_password", secret=True),
                Field("snowflake_database"),
                Field("snowflake_schema"),
                Field("snowflake_warehouse"),
                Field("snowflake_role"),
                Field(
                    "snowflake_url",
                    kind="url",
                    doc="the account's address when it is not https://<account>.snowflakecomputing.com "
                    "(PrivateLink, a proxy)",
                ),
            ),
            groups=(
                (
                    "snowflake_account",
                    "snowflake_user",
                    "snowflake_password",
                    "snowflake_database",
                    "snowflake_schema",
                ),
            ),
        ),
        IntegrationKind(
            "payment_processor",
            vendor="Stripe",
            produces="events",
            default_base_url="https://api.stripe.com",
            fields=(
                Field(
                    "secret_key",
                    required=True,
                    secret=True,
                    doc="a Stripe secret (sk_...) or restricted (rk_...) key, for the sync and --check",
                ),
                Field(
                    "webhook_secret",
                    required=True,
                    secret=True,
                    doc="the webhook endpoint's signing secret (whsec_...), shown in Stripe's dashboard",
                ),
                Field(
                    "app_id",
                    required=True,
                    doc="the FloKit app (app_...) whose users Stripe purchases entitle",
                ),
            ),
        ),
        IntegrationKind(
            "ios_store_connect",
            vendor="App Store",
            produces="events",
            default_base_url="https://api.storekit.apple.com",
            fields=(
                Field(
                    "issuer_id",
                    required=True,
                    doc="the In-App Purchase key's issuer id (App Store Connect, Users and Access, Integrations)",
                ),
                Field("key_id", required=True, doc="the In-App Purchase key's id"),
                Field(
                    "private_key",
                    kind="pem",
                    required=True,
                    secret=True,
                    doc="the In-App Purchase key (.p8 file's text)",
                ),
                Field(
                    "app_id",
                    required=True,
                    doc="the FloKit app (app_...) whose store identities (bundle id, environment) the history is for",
                ),
            ),
        ),
        IntegrationKind(
            "android_store",
            vendor="Google Play",
            produces="events",
            default_base_url="https://androidpublisher.googleapis.com",
            fields=(
                Field(
                    "app_id",
                    required=True,
                    doc="the FloKit app (app_...) whose package and service account (`flokit admin apps stores`) "
                    "the sync uses",
                ),
                Field(
                    "requests_per_minute",
                    kind="integer",
                    default=2900,
                    minimum=1,
                    maximum=100_000,
                    doc=(
                        "pace of the Play Developer API calls: Google's default quota is 3000 queries a minute "
                        "per bucket, shared with every other user of the service account's Cloud project; "
                        "lower it when the app's own backend calls the API too"
                    ),
                ),
            ),
        ),
    )
}
INTEGRATION_TYPES = tuple(KINDS)


def kind_of(integration_type: str) -> IntegrationKind:
    try:
        return KINDS[integration_type]
    except KeyError:
        raise ConfigProblem(
            "type", f"unknown integration type {integration_type!r}; one of {', '.join(KINDS)}"
        ) from None


def validate_config(integration_type: str, raw: object) -> ValidConfig:
    """Check a config file's content against the type's fields; defaults filled in."""
    kind = kind_of(integration_type)
    if not isinstance(raw, Mapping):
        raise ConfigProblem("", "the config must be a JSON object")
    options, secrets = read_fields(kind.all_fields(), raw, integration_type)
    for group in kind.groups:
        given = [name for name in group if name in options or name in secrets]
        if given and len(given) != len(group):
            missing = [name for name in group if name not in given]
            raise ConfigProblem(missing[0], f"is required with {given[0]} (give all of {', '.join(group)} or none)")
    return ValidConfig(options=options, secrets=secrets)


def read_fields(
    fields: tuple[Field, ...], raw: Mapping[Any, Any], owner: str, *, also_known: tuple[str, ...] = ()
) -> tuple[dict[str, Any], dict[str, str]]:
    """A config object read against declared fields: (options, secrets), defaults filled in.

    The one reading of a config file, for integrations and ad accounts alike: an unknown key, a key
    given twice (under its name and an alias), a missing required field and a value of the wrong
    kind are each a `ConfigProblem` naming the field. `owner` (the type or platform) and
    `also_known` (keys the caller reads itself) only word the unknown-field message."""
    names = {alias: f for f in fields for alias in (f.name, *f.aliases)}
    seen: dict[str, str] = {}
    for key in raw:
        if key not in names:
            known = ", ".join([f.name for f in fields] + list(also_known))
            raise ConfigProblem(str(key), f"unknown field for {owner}; fields: {known}")
        canonical = names[key].name
        if canonical in seen:
            raise ConfigProblem(str(key), f"given twice (also as {seen[canonical]!r})")
        seen[canonical] = str(key)
    options: dict[str, Any] = {}
    secrets: dict[str, str] = {}
    for f in fields:
        value = raw[seen[f.name]] if f.name in seen else None
        if value is None or value == "":
            if f.required:
                raise ConfigProblem(f.name, "is required" + (f" ({f.doc})" if f.doc else ""))
            if f.default is not None:
                options[f.name] = f.default
            continue
        checked = check_field(f, value)
        problem = f.check(checked) if f.check is not None else None
        if problem is not None:
            raise ConfigProblem(f.name, problem)
        if f.secret:
            secrets[f.name] = checked
        else:
            options[f.name] = checked
    return options, secrets


def check_field(f: Field, value: Any) -> Any:
    """One value against its field's kind (integer, string list, PEM, URL, string); the value as kept."""
    if f.kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigProblem(f.name, "must be an integer")
        if (f.minimum is not None and value < f.minimum) or (f.maximum is not None and value > f.maximum):
            raise ConfigProblem(f.name, f"must be between {f.minimum} and {f.maximum}")
        return value
    if f.kind == "string_list":
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigProblem(f.name, "must be a list of non-empty strings")
        return value
    if not isinstance(value, str):
        raise ConfigProblem(f.name, "must be a string")
    if f.kind == "pem":  # a key file's text, pasted whole: its final newline is part of the file
        value = value.strip()
        if not (value.startswith("-----BEGIN ") and "\n-----END " in value) or len(value) > MAX_STRING:
            raise ConfigProblem(f.name, "must be a PEM key file's text (-----BEGIN ... -----END ...)")
        return value
    if len(value) > MAX_STRING or value != value.strip():
        raise ConfigProblem(f.name, f"must be at most {MAX_STRING} characters, without surrounding spaces")
    if f.kind == "url":
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
            raise ConfigProblem(f.name, "must be an http(s) address without query or fragment, e.g. https://host")
        return value.rstrip("/")
    return value


def secret_hint(value: str) -> str:
    """What is ever shown of a secret again: its last four characters, and only when the secret is
    long enough that four characters leave most of it unknown."""
    return "…" + value[-4:] if len(value) >= 16 else "…"
