// The Customers page: a grant or an end is sent once. A grant is not idempotent (v1 has no
// Idempotency-Key), so a double click on "Grant access" would grant twice; the second submit of
// a form marked data-once is dropped while the first one's answer loads. Without this file the
// page works the same, minus that guard.
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches || !form.matches("form[data-once]")) return;
    if (form.getAttribute("data-sent")) {
      event.preventDefault();
      return;
    }
    form.setAttribute("data-sent", "1");
  });
})();
