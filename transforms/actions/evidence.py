# The formulas are written as the design note writes them (α, σ, κ, −, ×); ruff would read them as typos.
# ruff: noqa: RUF001, RUF003
"""What every rule family of the actions engine shares: the inputs (`Context`, the registry's
`RegistryCampaign`), the `Evaluation` it returns, the guardrails common to all types
(`data_fresh`, `cooldown_elapsed`, `no_conflicting_action`, `learning_phase_clear`), the strings of
the data signals, and what an evaluation row keeps. The families are `budget_shift`,
`creative_pause` and `offer_test`; `proposals` runs them (design note §5.2-5.4)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import numpy as np
import polars as pl

from transforms.actions import ActionContent, ActionType
from transforms.actions.policy import Policy
from transforms.actions.rules import RollbackRule
from transforms.currencies import exponent
from transforms.reports.schemas import ORGANIC

# Recorded in every evaluation; bump when a rule or a threshold changes what is proposed.
ENGINE_VERSION = "engine-2026.11-1"

# --- thresholds (design note §5.2, scaled where the data demands it; see the module docstring). The
# decision rules' own thresholds (floors, margins, lift, risk) are in `decisions`, where the engine and
# the honesty harness read them; these are the generators' windows, sizing and ranking.
# Cohort days compared: the 28 days ending at the newest cohort with the horizon complete.
COMPARE_WINDOW_DAYS = 28
TRIAL_MATURITY_DAYS = 9
OFFER_DOWN = 0.75
# Data older than this (the lake's newest day vs as_of) fails `data_fresh`.
FRESH_DAYS = 2
SIGNAL_LOOKBACK_DAYS = 30 + COMPARE_WINDOW_DAYS + 2  # what the engine reads


def fingerprint(workspace_id: str, action_type: str, subject: Sequence[str], direction: str) -> str:
    """sha256 of (workspace, type, subject, direction) (§5.4): the same proposal on every refresh."""
    text = json.dumps([workspace_id, action_type, list(subject), direction], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RegistryCampaign:
    """A report campaign as the registry knows it: the budget (minor units) and its ads by creative label."""

    name: str
    ad_account_id: str
    platform: str
    daily_budget_minor: int | None
    currency: str | None
    status: str
    edited_at: datetime | None
    creatives: Mapping[str, str] = field(default_factory=dict)  # creative label -> status

    @property
    def budget(self) -> float | None:
        if self.daily_budget_minor is None or self.currency is None:
            return None
        # The registry's ISO minor units, read with the one exponent table the executor writes with.
        return self.daily_budget_minor / 10 ** exponent(self.currency)


@dataclass(frozen=True)
class OpenAction:
    id: str
    type: str
    status: str
    fingerprint: str | None
    entities: frozenset[str]


@dataclass(frozen=True)
class Rejection:
    """A human's rejection: the fingerprint, when, and the sample the rejected proposal stood on."""

    fingerprint: str
    rejected_at: datetime
    sample: int


@dataclass(frozen=True)
class Context:
    """What one refresh of one workspace knows besides the signals."""

    workspace_id: str
    as_of: datetime
    data_through: date  # the lake's newest day with events
    policy: Policy
    registry: Mapping[str, RegistryCampaign]
    open_actions: Sequence[OpenAction] = ()
    rejections: Sequence[Rejection] = ()
    # entity key ("campaign:x") -> when a FloKit action on it ended (completed / rolled back)
    cooldowns: Mapping[str, datetime] = field(default_factory=dict)


def entity(kind: str, name: str) -> str:
    return f"{kind}:{name}"


@dataclass(frozen=True)
class Evaluation:
    """One subject evaluated: the content, the parameters and whether the signal is there."""

    action_type: ActionType
    parameters: dict[str, Any]
    fingerprint: str
    entities: frozenset[str]
    content: ActionContent
    rollback_rules: tuple[RollbackRule, ...]
    evidence: dict[str, Any]
    signal: bool  # the decision rule holds (a proposal is made only then)
    confidence: float  # the posterior probability behind the signal (hysteresis reads it)
    sample: int  # the smaller side's sample (suppression reads it)
    score: float  # expected impact magnitude (ranking)

    @property
    def guardrails_pass(self) -> bool:
        return self.content.guardrails_pass


Proposal = Evaluation


# --- formatting (the data signals' strings) -------------------------------------------------


def pct(x: float, digits: int = 1) -> str:
    return f"{x * 100:.{digits}f} %"


def money_text(x: float, currency: str) -> str:
    return f"{x:,.2f} {currency}"


def signed_pct(x: float) -> str:
    return f"{'+' if x >= 0 else '−'}{abs(x) * 100:.0f} %"


def guardrail(check: str, passed: bool, detail: str) -> dict[str, Any]:
    return {"check": check, "passed": bool(passed), "detail": detail}


# --- shared guardrails --------------------------------------------------------------------------


def common_checks(ctx: Context, entities: frozenset[str], own_fingerprint: str, own_id: str | None) -> list[dict]:
    """`data_fresh`, `cooldown_elapsed`, `no_conflicting_action` (§5.3's extra ids)."""
    out = []
    age = (ctx.as_of.date() - ctx.data_through).days
    out.append(
        guardrail(
            "data_fresh",
            age <= FRESH_DAYS,
            f"newest data is of {ctx.data_through.isoformat()}, {age} day(s) before {ctx.as_of.date().isoformat()} "
            f"(limit {FRESH_DAYS})",
        )
    )
    cooling = sorted(
        (name, ended)
        for name, ended in ctx.cooldowns.items()
        if name in entities and ctx.as_of - ended < timedelta(days=ctx.policy.cooldown_days)
    )
    if cooling:
        name, ended = cooling[0]
        detail = (
            f"a FloKit action on {name.split(':', 1)[1]} ended {ended.date().isoformat()}; "
            f"cooldown {ctx.policy.cooldown_days} days"
        )
    else:
        detail = f"no FloKit action on these entities ended in the last {ctx.policy.cooldown_days} days"
    out.append(guardrail("cooldown_elapsed", not cooling, detail))
    conflicts = sorted(
        a.id for a in ctx.open_actions if a.entities & entities and a.fingerprint != own_fingerprint and a.id != own_id
    )
    out.append(
        guardrail(
            "no_conflicting_action",
            not conflicts,
            f"open action {conflicts[0]} touches the same campaign or creative"
            if conflicts
            else "no other open action touches these campaigns or creatives",
        )
    )
    return out


def learning_check(ctx: Context, campaigns: Iterable[RegistryCampaign]) -> dict[str, Any]:
    """`learning_phase_clear`: no edit of the campaigns in the last `cooldown_days` (Meta's learning week)."""
    recent = [
        c
        for c in campaigns
        if c.edited_at is not None and ctx.as_of - c.edited_at < timedelta(days=ctx.policy.cooldown_days)
    ]
    if recent:
        c = sorted(recent, key=lambda x: x.name)[0]
        assert c.edited_at is not None
        return guardrail(
            "learning_phase_clear",
            False,
            f"{c.name} was edited {c.edited_at.date().isoformat()}, within {ctx.policy.cooldown_days} days",
        )
    known = [c for c in campaigns if c.edited_at is not None]
    detail = (
        f"no edit in the last {ctx.policy.cooldown_days} days"
        if known
        else "the platform reports no edit time for these campaigns (none recorded)"
    )
    return guardrail("learning_phase_clear", True, detail)


def json_safe(value: Any) -> Any:
    """JSON-safe evidence: NaN and infinities become None (JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.floating):
        return json_safe(float(value))
    if isinstance(value, np.integer):
        return int(value)
    return value


def matured(signals: pl.DataFrame, *, paid_only: bool = True) -> pl.DataFrame:
    """Cohort rows old enough for their trials to have converted (of paid campaigns: creatives)."""
    rows = signals.filter(pl.col("complete_days") >= TRIAL_MATURITY_DAYS)
    return rows.filter(pl.col("campaign") != ORGANIC) if paid_only else rows


# --- what an evaluation row keeps ---------------------------------------------------------------


def data_as_of(day: date) -> datetime:
    """The evaluations' `data_as_of`: the start (UTC) of the newest day with events."""
    return datetime.combine(day, time.min, tzinfo=UTC)


def evaluation_detail(e: Evaluation, summary: str) -> dict[str, Any]:
    """What an evaluation row keeps: the summary line, the guardrail results and data signals as
    shown, the confidence and sample (hysteresis and suppression read them), and the evidence."""
    return {
        "summary": summary,
        "confidence": e.confidence,
        "sample": e.sample,
        "signal": e.signal,
        "score": e.score,
        "parameters": e.parameters,
        "guardrail_checks": e.content.guardrail_checks,
        "data_signals": e.content.data_signals,
        "evidence": e.evidence,
    }


def confidence_line(e: Evaluation) -> str:
    failed = [c["check"] for c in e.content.guardrail_checks if not c["passed"]]
    checks = f"guardrails failing: {', '.join(failed)}" if failed else "all guardrails pass"
    return f"confidence {e.confidence * 100:.1f} %, {checks}"
