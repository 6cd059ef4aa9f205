// Paywall pages: the live weight sum beside the document, and the review opened in a <dialog>.
// Loaded after htmx and before app.js; no inline script, no eval. Without this file the form
// posts to the review page and everything still works.
(function () {
  "use strict";

  // The same arithmetic as transforms/paywall.py `shares`: weights are relative; while an
  // experiment is active each variant gets weight / sum; otherwise the first variant gets all.
  function describe(text) {
    var doc;
    try {
      doc = JSON.parse(text);
    } catch (e) {
      return "Not valid JSON yet.";
    }
    if (!doc || !Array.isArray(doc.variants) || doc.variants.length === 0) return "No variants yet.";
    var weights = doc.variants.map(function (v) {
      return v && typeof v.traffic_weight === "number" && v.traffic_weight > 0 ? v.traffic_weight : 0;
    });
    var sum = weights.reduce(function (a, b) { return a + b; }, 0);
    var name = function (v, i) { return (v && v.variant_id) || "variant " + (i + 1); };
    if (doc.experiment_active !== true) {
      return "Weights sum to " + sum + ". No experiment active: everyone sees " + name(doc.variants[0], 0) + ".";
    }
    if (sum <= 0) return "Weights sum to 0: an active experiment needs a variant with a weight above 0.";
    var parts = doc.variants.map(function (v, i) {
      return name(v, i) + " " + ((weights[i] / sum) * 100).toFixed(1) + " %";
    });
    return "Weights sum to " + sum + ": " + parts.join(", ") + ".";
  }

  function update() {
    var area = document.getElementById("paywall-document");
    var out = document.getElementById("weight-sum");
    if (area && out) out.textContent = describe(area.value);
  }

  document.addEventListener("input", function (event) {
    if (event.target && event.target.id === "paywall-document") update();
  });
  document.addEventListener("DOMContentLoaded", update);
  update();

  document.addEventListener("htmx:afterSettle", function (event) {
    var target = event.detail.target;
    if (!target) return;
    if (target.id === "publish-review") {
      var dialog = document.getElementById("dialog-publish");
      if (dialog && typeof dialog.showModal === "function" && !dialog.open) dialog.showModal();
      var first = dialog && dialog.querySelector("[data-initial-focus]");
      if (first) first.focus();
    } else if (target.id === "paywall-page") {
      update();
      // An outerHTML swap leaves `target` detached: look in the document for the new part.
      var fresh = document.getElementById("paywall-page");
      var problem = fresh && (fresh.querySelector("[aria-invalid=true]") || fresh.querySelector(".notice"));
      if (problem) problem.focus();
    }
  });

  // Closing the review returns focus to the button that asked for it.
  document.addEventListener(
    "close",
    function (event) {
      if (event.target.id !== "dialog-publish") return;
      var button = document.querySelector("#publish-form button[type=submit]");
      if (button) button.focus();
    },
    true
  );
})();
