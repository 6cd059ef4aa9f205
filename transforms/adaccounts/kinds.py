"""The ad platforms, what each one's config file holds, and how a config is validated.

An operator connects an ad account with a JSON file (`flokit admin ad-accounts connect
--platform P --config FILE.json`). The pattern is the integrations' (`transforms.integrations.kinds`,
whose `Field`, `ValidConfig` and checks are reused): each platform declares its fields once, the
CLI validates against the declaration (an error names the field), the store seals the `secret`
fields under the instance key and keeps the rest readable, and the client reads both back by
name. Every platform accepts `base_url` (the API's address; default the vendor's production
address), so that a proxy or a test can point it elsewhere; the sandbox ignores it (it calls
nothing).

Checks beyond the field types, because a wrong value would otherwise surface only at the first
sync: Meta's ad account id is `act_<digits>` (the Graph API node), its `api_version` `vN.M`
(the SDK refuses anything else); Apple's private key must be an EC P-256 key (the client secret
is an ES256 JWT); the sandbox's `campaigns` are checked item by item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final, Literal

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from transforms.adaccounts.money import InexactAmount, is_currency, to_minor
from transforms.integrations.kinds import ConfigProblem, Field, ValidConfig, read_fields, secret_hint

Platform = Literal["meta", "apple_search_ads", "sandbox"]
PLATFORMS: Final[tuple[Platform, ...]] = ("meta", "apple_search_ads", "sandbox")
ACCOUNT_STATUSES: Final = ("connected", "syncing", "error", "disconnected")
ENTITY_TYPES: Final = ("campaign", "ad_set", "ad_group", "ad")
# Meta's Graph API version the SDK release we pin speaks (facebook_business.apiconfig).
META_API_VERSION: Final = "v26.0"
MAX_SANDBOX_CAMPAIGNS: Final = 500
MAX_NAME: Final = 200

__all__ = [
    "ACCOUNT_STATUSES",
    "ENTITY_TYPES",
    "PLATFORMS",
    "ConfigProblem",
    "Platform",
    "PlatformKind",
    "ValidConfig",
    "kind_of",
    "secret_hint",
    "validate_config",
]


@dataclass(frozen=True)
class PlatformKind:
    platform: Platform
    vendor: str
    default_base_url: str
    fields: tuple[Field, ...] = ()

    def all_fields(self) -> tuple[Field, ...]:
        base = Field("base_url", kind="url", default=self.default_base_url or None, doc="the platform API's address")
        return (base, *self.fields)


KINDS: dict[str, PlatformKind] = {
    k.platform: k
    for k in (
        PlatformKind(
            "meta",
            vendor="Meta Marketing API (facebook-business SDK)",
            default_base_url="https://graph.facebook.com",
            fields=(
                Field(
                    "access_token",
                    required=True,
                    secret=True,
                    doc="a system user's access token with ads_management on the ad account",
                ),
                Field("ad_account_id", required=True, doc="the ad account's Graph id, act_<digits>"),
                Field("api_version", default=META_API_VERSION, doc="the Graph API version, vN.M"),
            ),
        ),
        PlatformKind(
            "apple_search_ads",
            vendor="Apple Search Ads Campaign Management API v5",
            default_base_url="https://api.searchads.apple.com",
            fields=(
                Field("client_id", required=True, doc="the API user's client id (SEARCHADS.…)"),
                Field("team_id", required=True, doc="the team id shown with the uploaded public key"),
                Field("key_id", required=True, doc="the key id shown with the uploaded public key"),
                Field(
                    "private_key",
                    kind="pem",
                    required=True,
                    secret=True,
                    doc="the EC P-256 private key whose public key was uploaded (PEM text)",
                ),
                Field("org_id", required=True, doc="the organization (campaign group) id sent as X-AP-Context"),
                Field(
                    "token_url",
                    kind="url",
                    default="https://appleid.apple.com/auth/oauth2/token",
                    doc="Apple's OAuth token endpoint",
                ),
            ),
        ),
        PlatformKind("sandbox", vendor="FloKit's own records (no platform is called)", default_base_url=""),
    )
}

_META_ACCOUNT = re.compile(r"^act_[0-9]{1,30}$")
_META_VERSION = re.compile(r"^v[0-9]+\.[0-9]+$")
_CAMPAIGN_KEYS = frozenset({"name", "daily_budget", "currency", "creatives"})


def kind_of(platform: str) -> PlatformKind:
    try:
        return KINDS[platform]
    except KeyError:
        raise ConfigProblem("platform", f"unknown ad platform {platform!r}; one of {', '.join(KINDS)}") from None


def validate_config(platform: str, raw: object) -> ValidConfig:
    """Check a config file's content against the platform's fields; defaults filled in."""
    kind = kind_of(platform)
    if not isinstance(raw, Mapping):
        raise ConfigProblem("", "the config must be a JSON object")
    extra: dict[str, Any] = {}
    if kind.platform == "sandbox":
        raw = dict(raw)
        if "campaigns" in raw:
            extra["campaigns"] = _sandbox_campaigns(raw.pop("campaigns"))
        raw.pop("base_url", None)  # accepted everywhere; the sandbox calls nothing
    if (
        kind.platform == "apple_search_ads"
        and isinstance(raw.get("org_id"), int)
        and not isinstance(raw["org_id"], bool)
    ):
        raw = {**raw, "org_id": str(raw["org_id"])}  # Apple shows it as a number; JSON may carry it so
    also_known = ("campaigns",) if kind.platform == "sandbox" else ()
    options, secrets = read_fields(kind.all_fields(), raw, platform, also_known=also_known)
    if kind.platform == "meta":
        if not _META_ACCOUNT.match(options["ad_account_id"]):
            raise ConfigProblem("ad_account_id", "must be the Graph id of the ad account, act_<digits> (e.g. act_1234)")
        if not _META_VERSION.match(options["api_version"]):
            raise ConfigProblem("api_version", "must be a Graph API version such as v26.0")
    if kind.platform == "apple_search_ads":
        _check_es256_key(secrets["private_key"])
        if not str(options["org_id"]).isdigit():
            raise ConfigProblem("org_id", "must be the numeric organization id")
    return ValidConfig(options={**options, **extra}, secrets=secrets)


def _check_es256_key(pem: str) -> None:
    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        raise ConfigProblem("private_key", f"is not a readable unencrypted PEM private key ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ConfigProblem("private_key", "must be an EC P-256 (prime256v1) key: the client secret is an ES256 JWT")


def _sandbox_campaigns(value: object) -> list[dict[str, Any]]:
    """The sandbox's declared campaigns: name, daily budget (major units, as a number or a decimal
    string), ISO 4217 currency, and the creatives' names (the labels the reports show)."""
    if not isinstance(value, list) or len(value) > MAX_SANDBOX_CAMPAIGNS:
        raise ConfigProblem("campaigns", f"must be a list of at most {MAX_SANDBOX_CAMPAIGNS} campaign objects")
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(value):
        where = f"campaigns[{i}]"
        if not isinstance(item, Mapping):
            raise ConfigProblem(where, "must be an object with name, daily_budget, currency, creatives")
        unknown = sorted(set(item) - _CAMPAIGN_KEYS)
        if unknown:
            raise ConfigProblem(
                f"{where}.{unknown[0]}", "unknown field; fields: name, daily_budget, currency, creatives"
            )
        name = item.get("name")
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or name != name.strip():
            raise ConfigProblem(f"{where}.name", f"must be a non-empty name of at most {MAX_NAME} characters")
        if name in seen:
            raise ConfigProblem(f"{where}.name", f"{name!r} is listed twice")
        seen.add(name)
        budget = item.get("daily_budget")
        try:
            amount = Decimal(str(budget)) if not isinstance(budget, bool) and budget is not None else None
        except InvalidOperation:
            amount = None
        if amount is None or not amount.is_finite() or amount < 0:
            raise ConfigProblem(f"{where}.daily_budget", "must be a non-negative amount in major units (e.g. 120.50)")
        currency = item.get("currency")
        if not isinstance(currency, str) or not is_currency(currency):
            raise ConfigProblem(f"{where}.currency", "must be an ISO 4217 code such as USD")
        try:
            to_minor(amount, currency)
        except InexactAmount:
            raise ConfigProblem(f"{where}.daily_budget", f"is finer than {currency.upper()}'s minor unit") from None
        creatives = item.get("creatives", [])
        if not isinstance(creatives, list) or not all(
            isinstance(c, str) and c.strip() and len(c) <= MAX_NAME for c in creatives
        ):
            raise ConfigProblem(f"{where}.creatives", "must be a list of creative names (the reports' creative labels)")
        if len(set(creatives)) != len(creatives):
            raise ConfigProblem(f"{where}.creatives", "lists a creative twice")
        out.append({"name": name, "daily_budget": str(amount), "currency": currency.upper(), "creatives": creatives})
    return out
