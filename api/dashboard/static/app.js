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
    if (!alert && target) toast("Done: " + (target.querySelector(".badge") || target).textContent.trim(), false);
  });

  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    toast(status === 401 ? "Your session has ended: sign in again with a new link." : "Request failed (HTTP " + status + ") — retry.", true);
  });

  document.addEventListener("htmx:sendError", function () {
    toast("Request failed: the server could not be reached — retry.", true);
  });
})();
