// artmem catalog page: the only script, served by the page's own server (CSP: script-src 'self').
// It copies commands to the clipboard; everything else works without it.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const button of document.querySelectorAll("button.copy")) {
    button.addEventListener("click", async () => {
      const text = button.getAttribute("data-copy") || "";
      try {
        await navigator.clipboard.writeText(text);
        button.textContent = "copied";
      } catch (_) {
        button.textContent = "select and copy";
      }
    });
  }
});
