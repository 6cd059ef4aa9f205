// API keys and Webhooks pages: the Copy button beside a secret shown once. Without this file
// the button stays hidden and the secret is plain selectable text.
(function () {
  "use strict";

  function say(button, text) {
    var status = document.getElementById(button.getAttribute("data-copy") + "-copied");
    if (status) status.textContent = text;
  }

  function selectText(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  document.querySelectorAll("[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.addEventListener("click", function () {
      var source = document.getElementById(button.getAttribute("data-copy"));
      if (!source) return;
      var text = source.textContent.trim();
      if (navigator.clipboard && navigator.clipboard.writeText) {
        navigator.clipboard.writeText(text).then(
          function () {
            say(button, "Copied to the clipboard.");
          },
          function () {
            selectText(source);
            say(button, "Selected: press Ctrl+C (or Cmd+C) to copy.");
          }
        );
      } else {
        selectText(source);
        say(button, "Selected: press Ctrl+C (or Cmd+C) to copy.");
      }
    });
  });

  // A secret shown once, or a refused form: focus goes there, so a screen reader reads it first.
  var panel = document.querySelector(".secret-panel");
  var invalid = document.querySelector("input[aria-invalid=true], fieldset[aria-invalid=true] input");
  if (panel) panel.focus();
  else if (invalid) invalid.focus();
})();
