// FloKit dashboard: the Experiments page's charts. Loaded after Chart.js 4.6.1 (vendored), no inline
// script (the CSP): each <canvas data-experiment-chart=ID> is drawn from the JSON in
// <script type="application/json" id=ID>, which transforms/experiments/charts.py computed. The
// page's tables and the canvas's label say the same figures without this file.
(function () {
  "use strict";
  if (typeof Chart === "undefined") return;

  // Okabe-Ito, as reports.js: distinct for colour-blind readers; each variant also has its own dash.
  var PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442", "#000000"];
  var DASHES = [[], [6, 4], [2, 3], [10, 3, 2, 3], [1, 2], [12, 6], [4, 4, 1, 4], [8, 2]];

  Chart.defaults.color = getComputedStyle(document.body).color;
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.animation = false;
  Chart.defaults.maintainAspectRatio = false;

  function percent(value, signed) {
    var text = Math.round(value * 1000) / 10 + " %";
    return signed && value > 0 ? "+" + text : text;
  }

  // Rates: one density curve per variant over x (the rate), each on its own points.
  function posterior(canvas, data) {
    var datasets = data.series.map(function (s, i) {
      return {
        label: s.label,
        data: s.x.map(function (x, j) {
          return { x: x, y: s.y[j] };
        }),
        borderColor: PALETTE[i % PALETTE.length],
        backgroundColor: PALETTE[i % PALETTE.length],
        borderDash: DASHES[i % DASHES.length],
        pointRadius: 0,
        borderWidth: 2,
      };
    });
    return new Chart(canvas, {
      type: "line",
      data: { datasets: datasets },
      options: {
        parsing: false,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: { type: "linear", title: { display: true, text: data.axis }, ticks: { callback: function (v) { return percent(v); } } },
          y: { beginAtZero: true, title: { display: true, text: "Density" } },
        },
        plugins: {
          tooltip: {
            callbacks: {
              label: function (item) {
                return item.dataset.label + " at " + percent(item.raw.x);
              },
            },
          },
        },
      },
    });
  }

  // Revenue per user: a floating bar per treatment from the interval's low to high, the mean a point.
  function interval(canvas, data) {
    var labels = data.series.map(function (s) {
      return s.label;
    });
    // One bar per treatment, each readable: the box grows with them (CSSOM, which the CSP allows).
    canvas.parentNode.style.height = Math.max(10, 5 + 3 * labels.length) + "rem";
    return new Chart(canvas, {
      data: {
        labels: labels,
        datasets: [
          {
            type: "bar",
            label: "95 % credible interval",
            data: data.series.map(function (s) {
              return [s.low, s.high];
            }),
            backgroundColor: PALETTE[4],
            borderColor: PALETTE[0],
            borderWidth: 1,
            barPercentage: 0.4,
          },
          {
            type: "scatter",
            label: "Posterior mean",
            // {x, y} on the category axis: a bare number would be read as an index, not a lift.
            data: data.series.map(function (s) {
              return { x: s.mean, y: s.label };
            }),
            backgroundColor: PALETTE[7],
            borderColor: PALETTE[7],
            pointStyle: "rectRot",
            pointRadius: 6,
          },
        ],
      },
      options: {
        indexAxis: "y",
        scales: {
          x: { title: { display: true, text: data.axis }, ticks: { callback: function (v) { return percent(v, true); } } },
        },
        plugins: {
          tooltip: {
            callbacks: {
              label: function (item) {
                if (Array.isArray(item.raw)) return "95 %: " + percent(item.raw[0], true) + " to " + percent(item.raw[1], true);
                return "mean " + percent(item.raw.x, true);
              },
            },
          },
        },
      },
    });
  }

  document.querySelectorAll("canvas[data-experiment-chart]").forEach(function (canvas) {
    var data = JSON.parse(document.getElementById(canvas.getAttribute("data-experiment-chart")).textContent);
    (data.kind === "posterior" ? posterior : interval)(canvas, data);
  });
})();
