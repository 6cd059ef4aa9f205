"""Whose purchase it is: the buyer's identity the stores carry, against the user the app names.

Apple's `appAccountToken` is a UUID the app passes to StoreKit at purchase; Google's
`obfuscatedExternalAccountId` a string of up to 64 characters passed to Play Billing. FloKit's
convention (README, "Receipts belong to their buyer"): the app sets the token from its user id,
so that the store itself vouches for the buyer:
- Apple: the user id when it is a UUID (any case), else `uuid5(FLOKIT_ACCOUNT_NAMESPACE, user_id)`;
- Google: the user id itself when it fits (64 characters at most), else the SHA-256 hex of it
  (64 characters), which also suits apps that prefer not to hand Google their user ids.
An app that sets no token gets no check (the store carries nothing to check against).
"""

from __future__ import annotations

import hashlib
import uuid

# A fixed namespace (uuid5 of the DNS name) so every FloKit SDK and server derives the same token.
FLOKIT_ACCOUNT_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_DNS, "account-token.flokit.dev")


def apple_account_token(user_id: str) -> str:
    """The `appAccountToken` an app sets for `user_id` (lowercase UUID text)."""
    try:
        return str(uuid.UUID(user_id))
    except ValueError:
        return str(uuid.uuid5(FLOKIT_ACCOUNT_NAMESPACE, user_id))


def google_account_ids(user_id: str) -> tuple[str, ...]:
    """The `obfuscatedExternalAccountId` values that name `user_id`."""
    digest = hashlib.sha256(user_id.encode("utf-8")).hexdigest()
    return (user_id, digest) if len(user_id) <= 64 else (digest,)


def token_names_user(source: str, token: str | None, user_id: str) -> bool:
    """Whether the store's buyer token (if the app set one) is `user_id`'s. No token: True."""
    if not token:
        return True
    if source == "ios_store":
        try:
            return str(uuid.UUID(token)) == apple_account_token(user_id)
        except ValueError:
            return False  # Apple only carries UUIDs; anything else names nobody
    if source == "android_store":
        return token in google_account_ids(user_id)
    return token == user_id
