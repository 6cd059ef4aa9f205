// FloKit dashboard: the Payback, Cohorts and Subscriptions charts. Loaded after Chart.js 4.6.1 (vendored), no
// inline script (the CSP): each <canvas data-chart=... data-source=ID> is drawn from the JSON in
// <script type="application/json" id=ID>. The same figures are in the table below each chart, so
// the page says everything without this file.
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;

  // Okabe-Ito, given explicitly: a colour set on one dataset switches Chart.js's own palette off
  // for all of them (design note §1), and these eight stay distinct for colour-blind readers.
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000"];
  var POINTS = ["circle", "rect", "triangle", "rectRot", "star", "crossRot", "rectRounded", "cross"];
  var DASH = [6, 4];

  var ink = getComputedStyle(document.body).color;
  Chart.defaults.color = ink;
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.animation = false; // figures, not motion (and prefers-reduced-motion for free)
  Chart.defaults.maintainAspectRatio = false; // the .chart-box sets the height

  function source(canvas) {
    return JSON.parse(document.getElementById(canvas.getAttribute("data-source")).textContent);
  }

  function percent(value) {
    return Math.round(value * 1000) / 10 + " %";
  }

  function money(currency) {
    return function (value) {
      return value.toLocaleString(undefined, { minimumFractionDigits: 2, maximumFractionDigits: 2 }) + " " + currency;
    };
  }

  var draw = {
    payback: function (canvas, data) {
      return new Chart(canvas, {
        data: {
          labels: data.labels,
          datasets: [
            {
              type: "bar",
              label: "ROAS 30d",
              data: data.roas_30d,
              yAxisID: "y",
              backgroundColor: PALETTE[0],
              borderColor: PALETTE[0],
              order: 2,
            },
            {
              type: "line",
              label: "Payback day",
              data: data.payback_days,
              yAxisID: "y1",
              borderColor: PALETTE[3],
              backgroundColor: PALETTE[3],
              pointStyle: "rectRot",
              pointRadius: 6,
              // Points only: the groups on the axis are categories, and a line between two
              // campaigns' payback days drew a trend that does not exist.
              showLine: false,
              order: 1,
            },
          ],
        },
        options: {
          interaction: { mode: "index", intersect: false },
          scales: {
            y: { position: "left", beginAtZero: true, title: { display: true, text: "ROAS 30d" }, ticks: { callback: percent } },
            y1: {
              position: "right",
              beginAtZero: true,
              suggestedMax: data.window,
              title: { display: true, text: "Payback day" },
              grid: { drawOnChartArea: false },
              ticks: { precision: 0 },
            },
          },
          plugins: {
            tooltip: {
              callbacks: {
                label: function (item) {
                  if (item.raw === null) return item.dataset.label + ": —";
                  return item.dataset.label + ": " + (item.datasetIndex === 0 ? percent(item.raw) : "day " + item.raw);
                },
              },
            },
          },
        },
      });
    },
    cac: function (canvas, data) {
      var fmt = money(data.currency);
      // One bar per group, each readable: the box grows with the groups (CSSOM, which the CSP allows).
      canvas.parentNode.style.height = Math.max(12, 4 + 2 * data.labels.length) + "rem";
      return new Chart(canvas, {
        type: "bar",
        data: {
          labels: data.labels,
          datasets: [{ label: "CAC (" + data.currency + ")", data: data.cac, backgroundColor: PALETTE[2], borderColor: PALETTE[2] }],
        },
        options: {
          indexAxis: "y",
          scales: { x: { beginAtZero: true, ticks: { callback: fmt } } },
          plugins: { legend: { display: false } },
        },
      });
    },
    retention: function (canvas, data) {
      return curves(canvas, data, "retained_pct", percent, "Retained");
    },
    revenue: function (canvas, data) {
      return curves(canvas, data, "cumulative_revenue", money(data.currency), "Per user");
    },
    "subscriptions-mrr": function (canvas, data) {
      return periods(canvas, data, [{ field: "mrr" }], money(data.currency), "MRR (" + data.currency + ")");
    },
    "subscriptions-actives": function (canvas, data) {
      return periods(
        canvas,
        data,
        [
          { field: "active_subscriptions", name: "subscriptions" },
          { field: "active_trials", name: "trials", dash: DASH },
        ],
        count,
        "Count"
      );
    },
    "subscriptions-churn": function (canvas, data) {
      return periods(canvas, data, [{ field: "churn_rate" }], percent, "Churn rate");
    },
    "subscriptions-conversion": function (canvas, data) {
      return periods(canvas, data, [{ field: "trial_conversion" }], percent, "Trial conversion");
    },
    "subscriptions-refunds": function (canvas, data) {
      return periods(canvas, data, [{ field: "refund_rate" }], percent, "Refund rate");
    },
  };

  function count(value) {
    return value.toLocaleString(undefined, { maximumFractionDigits: 0 });
  }

  // The Subscriptions page: one line per group (data.series) and measure (`measures`: a field of
  // each series, the name added to the group's label when there are several, a dash), over the
  // periods (data.labels). A null is a period without a denominator: a gap, not a zero.
  function periods(canvas, data, measures, fmt, axis) {
    var datasets = [];
    data.series.forEach(function (series, i) {
      var colour = PALETTE[i % PALETTE.length];
      measures.forEach(function (measure) {
        datasets.push({
          type: "line",
          label: measure.name ? series.label + " · " + measure.name : series.label,
          data: series[measure.field],
          borderColor: colour,
          backgroundColor: colour,
          borderDash: measure.dash,
          pointStyle: POINTS[i % POINTS.length],
          pointRadius: data.labels.length > 31 ? 0 : 3,
          spanGaps: false,
        });
      });
    });
    return new Chart(canvas, {
      type: "line",
      data: { labels: data.labels, datasets: datasets },
      options: {
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: { y: { beginAtZero: true, title: { display: true, text: axis }, ticks: { callback: fmt } } },
        plugins: {
          legend: { display: datasets.length > 1, labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              label: function (item) {
                return item.dataset.label + ": " + (item.raw === null ? "—" : fmt(item.raw));
              },
            },
          },
        },
      },
    });
  }

  // One line per group; from the first week only some cohorts have reached on, the line is dashed
  // (`segment.borderDash`: a segment ending at or after that week).
  function curves(canvas, data, field, fmt, axis) {
    var labels = [];
    for (var w = 0; w < data.weeks; w++) labels.push("Week " + w);
    var datasets = data.curves.map(function (curve, i) {
      var colour = PALETTE[i % PALETTE.length];
      var from = curve.immature_from;
      return {
        type: "line",
        label: curve.label,
        data: curve[field],
        borderColor: colour,
        backgroundColor: colour,
        pointStyle: POINTS[i % POINTS.length],
        pointRadius: 4,
        segment: {
          borderDash: function (ctx) {
            return from !== null && ctx.p1DataIndex >= from ? DASH : undefined;
          },
        },
      };
    });
    return new Chart(canvas, {
      type: "line",
      data: { labels: labels, datasets: datasets },
      options: {
        interaction: { mode: "nearest", intersect: false },
        scales: { y: { beginAtZero: true, title: { display: true, text: axis }, ticks: { callback: fmt } } },
        plugins: {
          legend: { labels: { usePointStyle: true } },
          tooltip: {
            callbacks: {
              label: function (item) {
                var from = data.curves[item.datasetIndex].immature_from;
                var partial = from !== null && item.dataIndex >= from ? " (some cohorts only)" : "";
                return item.dataset.label + ": " + fmt(item.raw) + partial;
              },
            },
          },
        },
      },
    });
  }

  document.querySelectorAll("canvas[data-chart]").forEach(function (canvas) {
    var kind = canvas.getAttribute("data-chart");
    if (draw[kind]) draw[kind](canvas, source(canvas));
  });
})();
