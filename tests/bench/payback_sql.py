# ruff: noqa: E501  (SQL text reads better unwrapped)
"""The benchmark's baseline: the payback cube in hand-written DuckDB SQL, from the same lake files.

It follows the definitions of transforms/reports (first install per user, install-day
dimensions, spend shared by installs, days since install), so that the two tables must agree.
"""

from __future__ import annotations

PAYBACK_SQL = """
WITH ev AS (
    SELECT * FROM read_parquet($events)
),
installs AS (
    SELECT workspace_id, user_id, occurred_at, event_id,
           CAST(occurred_at AS DATE) AS cohort_date,
           coalesce(json_extract_string(properties, '$.campaign'), 'organic') AS campaign,
           coalesce(json_extract_string(properties, '$.creative'), '(none)') AS creative,
           coalesce(country, '(none)') AS country
    FROM ev WHERE event_type = 'install' AND user_id IS NOT NULL
),
first_install AS (
    SELECT * FROM installs
    QUALIFY row_number() OVER (PARTITION BY workspace_id, user_id ORDER BY occurred_at, event_id) = 1
),
subs AS (
    SELECT workspace_id, user_id, event_id, event_type, occurred_at, CAST(occurred_at AS DATE) AS event_date,
           coalesce(json_extract_string(properties, '$.product_id'), json_extract_string(properties, '$.offer'))
               AS product_id,
           json_extract_string(properties, '$.paywall_id') AS paywall_id,
           coalesce(abs(TRY_CAST(json_extract_string(properties, '$.revenue') AS DOUBLE)), 0) AS amount
    FROM ev WHERE event_type <> 'install' AND user_id IS NOT NULL
),
touches AS (
    SELECT s.workspace_id, s.user_id,
           first(s.paywall_id ORDER BY s.occurred_at, s.event_id) FILTER (WHERE s.event_type = 'paywall_impression')
               AS paywall,
           first(s.product_id ORDER BY s.occurred_at, s.event_id) FILTER (WHERE s.event_type = 'paywall_offer_tap')
               AS offer
    FROM subs AS s JOIN first_install AS f USING (workspace_id, user_id)
    WHERE s.event_type IN ('paywall_impression', 'paywall_offer_tap') AND s.event_date = f.cohort_date
    GROUP BY s.workspace_id, s.user_id
),
cohorts AS (
    SELECT f.workspace_id, f.user_id, f.cohort_date, f.campaign, f.creative, f.country,
           coalesce(t.offer, '(none)') AS offer, coalesce(t.paywall, '(none)') AS paywall
    FROM first_install AS f LEFT JOIN touches AS t USING (workspace_id, user_id)
),
activity AS (
    SELECT c.workspace_id, c.cohort_date, c.campaign, c.creative, c.country, c.offer, c.paywall,
           CAST(s.event_date - c.cohort_date AS INTEGER) AS day,
           0 AS installs, 0.0 AS spend,
           count(*) FILTER (WHERE s.event_type = 'trial_start') AS trials,
           count(*) FILTER (WHERE s.event_type = 'trial_converted') AS trial_conversions,
           count(*) FILTER (WHERE s.event_type IN ('subscription_start', 'trial_converted')) AS subscriptions,
           coalesce(sum(s.amount) FILTER (WHERE s.event_type IN ('subscription_start', 'trial_converted', 'renewal')), 0)
               AS revenue,
           coalesce(sum(s.amount) FILTER (WHERE s.event_type = 'refund'), 0) AS refunds
    FROM subs AS s JOIN cohorts AS c USING (workspace_id, user_id)
    WHERE s.event_date - c.cohort_date BETWEEN 0 AND 364
      -- only events that move a measure (the Polars side filters the same way before its join)
      AND (s.event_type IN ('trial_start', 'trial_converted', 'subscription_start') OR s.amount <> 0)
    GROUP BY ALL
),
activity_moving AS (  -- days with only paywall views move no measure (a WHERE, not HAVING: see ARCHITECTURE)
    SELECT * FROM activity
    WHERE trials + trial_conversions + subscriptions > 0 OR revenue <> 0 OR refunds <> 0
),
fine_installs AS (
    SELECT workspace_id, cohort_date, campaign, creative, country, offer, paywall, 0 AS day,
           count(*) AS installs, 0.0 AS spend, 0 AS trials, 0 AS trial_conversions, 0 AS subscriptions,
           0.0 AS revenue, 0.0 AS refunds
    FROM cohorts GROUP BY ALL
),
mix AS (
    SELECT workspace_id, cohort_date, campaign, creative, country, offer, paywall,
           installs / sum(installs) OVER (PARTITION BY workspace_id, cohort_date, campaign, creative, country) AS share
    FROM fine_installs
),
spend_clean AS (
    SELECT workspace_id, spend_date, coalesce(campaign, 'organic') AS campaign, coalesce(creative, '(none)') AS creative,
           coalesce(country, '(none)') AS country, greatest(coalesce(spend, 0), 0) AS spend
    FROM read_parquet($spend)
),
fine_spend AS (
    SELECT s.workspace_id, s.spend_date AS cohort_date, s.campaign, s.creative, s.country,
           coalesce(m.offer, '(none)') AS offer, coalesce(m.paywall, '(none)') AS paywall, 0 AS day,
           0 AS installs, s.spend * coalesce(m.share, 1.0) AS spend, 0 AS trials, 0 AS trial_conversions,
           0 AS subscriptions, 0.0 AS revenue, 0.0 AS refunds
    FROM spend_clean AS s LEFT JOIN mix AS m
      ON m.workspace_id = s.workspace_id AND m.cohort_date = s.spend_date AND m.campaign = s.campaign
     AND m.creative = s.creative AND m.country = s.country
),
fine AS (
    SELECT workspace_id, cohort_date, campaign, creative, country, offer, paywall, day,
           sum(installs) AS installs, sum(spend) AS spend, sum(trials) AS trials,
           sum(trial_conversions) AS trial_conversions, sum(subscriptions) AS subscriptions,
           sum(revenue) AS revenue, sum(refunds) AS refunds
    FROM (SELECT * FROM activity_moving UNION ALL BY NAME SELECT * FROM fine_installs UNION ALL BY NAME SELECT * FROM fine_spend)
    GROUP BY workspace_id, cohort_date, campaign, creative, country, offer, paywall, day
),
rolled AS (
    SELECT workspace_id, cohort_date, 'campaign' AS dimension, campaign AS value, day, * EXCLUDE (workspace_id, cohort_date, campaign, creative, country, offer, paywall, day) FROM fine
    UNION ALL SELECT workspace_id, cohort_date, 'creative', creative, day, * EXCLUDE (workspace_id, cohort_date, campaign, creative, country, offer, paywall, day) FROM fine
    UNION ALL SELECT workspace_id, cohort_date, 'country', country, day, * EXCLUDE (workspace_id, cohort_date, campaign, creative, country, offer, paywall, day) FROM fine
    UNION ALL SELECT workspace_id, cohort_date, 'offer', offer, day, * EXCLUDE (workspace_id, cohort_date, campaign, creative, country, offer, paywall, day) FROM fine
    UNION ALL SELECT workspace_id, cohort_date, 'paywall', paywall, day, * EXCLUDE (workspace_id, cohort_date, campaign, creative, country, offer, paywall, day) FROM fine
),
cube AS (
    SELECT workspace_id, cohort_date, dimension, value, day,
           sum(installs) AS installs, sum(spend) AS spend, sum(trials) AS trials,
           sum(trial_conversions) AS trial_conversions, sum(subscriptions) AS subscriptions,
           sum(revenue) AS revenue, sum(refunds) AS refunds
    FROM rolled
    GROUP BY workspace_id, cohort_date, dimension, value, day
)
SELECT *,
       sum(revenue) OVER w AS cumulative_revenue,
       sum(revenue - refunds) OVER w AS cumulative_net_revenue
FROM cube
WINDOW w AS (PARTITION BY workspace_id, cohort_date, dimension, value ORDER BY day)
"""
