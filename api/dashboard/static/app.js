// FloKit dashboard behaviour: dialogs, focus after swaps, toasts. Loaded after htmx, no inline
// script anywhere (the CSP forbids it), no eval. Every page works without this file.
(function () {
  "use strict";

  var lastTrigger = null; // the button that opened the dialog: focus goes back to it
  var focusAfterSwap = null; // the id of what an htmx swap updates: focus lands there

  function openDialog(trigger) {
    var dialog = document.getElementById(trigger.getAttribute("data-dialog"));
    if (!dialog || typeof dialog.showModal !== "function") return false;
    lastTrigger = trigger;
    dialog.showModal();
    var first = dialog.querySelector("[data-initial-focus]");
    if (first) first.focus();
    return true;
  }

  document.addEventListener("click", function (event) {
    var trigger = event.target.closest("[data-dialog]");
    if (trigger && openDialog(trigger)) {
      event.preventDefault(); // without this file the button submits to the confirmation page
      return;
    }
    var closer = event.target.closest("[data-close]");
    if (closer) {
      var dialog = closer.closest("dialog");
      if (dialog) dialog.close();
    }
  });

  // Esc closes a modal dialog natively; either way, focus returns to the trigger if it still exists.
  document.addEventListener(
    "close",
    function (event) {
      if (event.target.tagName === "DIALOG" && lastTrigger && document.body.contains(lastTrigger)) {
        lastTrigger.focus();
      }
    },
    true
  );

  function toast(text, isError) {
    var region = document.getElementById(isError ? "toast-errors" : "toasts");
    if (!region) return;
    var item = document.createElement("p");
    item.className = "toast" + (isError ? " toast-error" : "");
    item.textContent = text;
    if (isError) {
      var dismiss = document.createElement("button");
      dismiss.type = "button";
      dismiss.className = "secondary outline";
      dismiss.textContent = "Dismiss";
      dismiss.addEventListener("click", function () {
        item.remove();
      });
      item.appendChild(dismiss);
    } else {
      setTimeout(function () {
        item.remove();
      }, 6000);
    }
    region.appendChild(item);
  }

  // A phone (the stylesheet's 40rem breakpoint) reads a wide table best as one card per row, each
  // cell under its column's name: the cells get that name as `data-label` and the table the class
  // `stackable`, which the stylesheet lays out as cards below the breakpoint. Explicit roles keep
  // it a table for screen readers once CSS changes its display (Safari drops the semantics).
  // Report matrices and tables holding form fields are read across, so they keep scrolling.
  // An editor: a field a person types in or picks from (a verb's hidden CSRF input and the fields of
  // its <dialog> do not count; the dialog opens over the page).
  function hasFields(table) {
    return Array.prototype.some.call(table.querySelectorAll("input:not([type=hidden]), select, textarea"), function (field) {
      return !field.closest("dialog");
    });
  }

  function stackTables(root) {
    root.querySelectorAll("table").forEach(function (table) {
      if (table.classList.contains("report-table") || hasFields(table)) return;
      var heads = [];
      table.querySelectorAll("thead tr:first-child th").forEach(function (th) {
        for (var i = 0; i < (th.colSpan || 1); i++) heads.push(th.textContent.trim());
      });
      if (heads.length < 3) return;
      table.classList.add("stackable");
      table.setAttribute("role", "table");
      table.querySelectorAll("thead, tbody").forEach(function (group) {
        group.setAttribute("role", "rowgroup");
      });
      table.querySelectorAll("tr").forEach(function (tr) {
        tr.setAttribute("role", "row");
        var column = 0;
        Array.prototype.forEach.call(tr.children, function (cell) {
          if (cell.tagName === "TH") {
            cell.setAttribute("role", cell.getAttribute("scope") === "row" ? "rowheader" : "columnheader");
          } else {
            cell.setAttribute("role", "cell");
            if (heads[column]) cell.setAttribute("data-label", heads[column]);
            // Nothing in it (no approver yet, no verb left): a card leaves the line out.
            var blank = !cell.textContent.trim() && !cell.querySelector("a, button, img, svg, input:not([type=hidden])");
            cell.classList.toggle("blank", blank);
          }
          column += cell.colSpan || 1;
        });
      });
    });
  }

  // htmx.onLoad runs for the page and for every piece an htmx swap brings in (a queue row, a status
  // block): the table around new content is marked again, so a swapped row gets its labels too.
  function stackAround(elt) {
    var table = elt.closest ? elt.closest("table") : null;
    stackTables(table ? table.parentNode : elt);
  }
  if (window.htmx) window.htmx.onLoad(stackAround);
  else stackTables(document);

  document.addEventListener("htmx:beforeRequest", function (event) {
    var elt = event.detail.elt;
    focusAfterSwap = elt && elt.getAttribute ? elt.getAttribute("data-focus") : null;
  });

  document.addEventListener("htmx:beforeSwap", function (event) {
    var xhr = event.detail.xhr;
    // 409: someone acted first; the answer is the current state, shown in place.
    // 400 with HX-Retarget: the form again, with the error beside its field.
    if (xhr.status === 409 || (xhr.status === 400 && xhr.getResponseHeader("HX-Retarget"))) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
    if (xhr.status === 400 && xhr.getResponseHeader("HX-Retarget")) {
      focusAfterSwap = null;
      return; // the dialog stays open with the error
    }
    var dialog = event.detail.requestConfig && event.detail.requestConfig.elt.closest("dialog");
    if (dialog && dialog.open) {
      lastTrigger = null; // the trigger is being replaced; focus goes to the updated part instead
      dialog.close();
    }
  });

  document.addEventListener("htmx:afterSettle", function () {
    if (!focusAfterSwap) return;
    var target = document.getElementById(focusAfterSwap);
    focusAfterSwap = null;
    if (target) target.focus();
    var alert = target && target.querySelector(".notice");
    if (alert || !target) return;
    // What the server says was done (`data-toast`: "Sync queued"), else the new status of a row
    // ("Done: approved"); a status block's first badge is a state, not what the click did.
    var said = target.getAttribute("data-toast");
    toast(said || "Done: " + (target.querySelector(".badge") || target).textContent.trim(), false);
  });

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    toast(status === 401 ? "Your session has ended: sign in again with a new link." : "Request failed (HTTP " + status + ") — retry.", true);
  });

  document.addEventListener("htmx:sendError", function () {
    toast("Request failed: the server could not be reached — retry.", true);
  });
})();
