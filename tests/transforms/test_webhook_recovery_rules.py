"""The v1 names of delivery states, why an endpoint is disabled, and what a failed resend falls back to."""

from transforms.webhooks.backoff import DISABLE_AFTER_FAILURES
from transforms.webhooks.recovery import API_STATUS, disabled_reason, queue_statuses, resend_fallback
from warehouse.webhooks.tables import DELIVERY_STATUSES


def test_every_queue_state_has_one_v1_name_and_the_filters_cover_them() -> None:
    assert set(API_STATUS) == set(DELIVERY_STATUSES)
    assert queue_statuses("pending") == ("pending", "delivering")
    assert queue_statuses("delivered") == ("succeeded",)
    assert queue_statuses("failed") == ("failed",)


def test_disabled_reason() -> None:
    assert disabled_reason("enabled", DISABLE_AFTER_FAILURES) is None
    assert disabled_reason("disabled", DISABLE_AFTER_FAILURES) == "consecutive_failures"
    assert disabled_reason("disabled", DISABLE_AFTER_FAILURES - 1) == "manual"


def test_a_failed_resend_goes_back_to_the_status_it_had() -> None:
    assert [resend_fallback(s) for s in ("pending", "delivering", "succeeded", "failed")] == [
        "pending", "pending", "succeeded", "failed",
    ]  # fmt: skip
