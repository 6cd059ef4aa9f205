"""Subscription metrics (issue 34): what a subscription is worth a month, and the daily figures
(actives, MRR, churn, trial conversion, refunds) computed from it. Pure: no I/O."""
