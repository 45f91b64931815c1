// calibrate: small progressive enhancements; every page works without this file.
//
// The notice bar (#notice, fixed in view) says what a script could not do: one handler for every
// refused htmx request (a 4xx or 5xx answer, with the server's message) and for a request that
// never reached the server. The words come from the page (the JSON block #calibrate-strings), in the
// reader's language; the workbench (annotate.js) speaks through the same bar (window.calibrate).
(() => {
  "use strict";

  let strings = {};
  try {
    const block = document.getElementById("calibrate-strings");
    strings = JSON.parse((block && block.textContent) || "{}");
  } catch (_err) {
    strings = {};
  }

  // The message `key` in the reader's language, with {name} filled from `values`.
  function t(key, values = {}) {
    const text = strings[key] || key;
    return text.replace(/\{(\w+)\}/g, (whole, name) => (name in values ? String(values[name]) : whole));
  }

  // Show `text` in the notice bar; kind "error" makes it an alert (read out at once), "" clears it.
  function say(text, kind = "info") {
    const notice = document.getElementById("notice");
    if (!notice) return;
    notice.setAttribute("role", kind === "error" ? "alert" : "status");
    notice.textContent = text;
    notice.dataset.kind = text ? kind : "";
  }

  window.calibrate = { t, say };

  // Every refusal of an htmx request: the server's own message (plain text, or the page's heading and first paragraph).
  document.addEventListener("htmx:responseError", (event) => {
    const xhr = event.detail.xhr;
    let message = (xhr.responseText || "").trim();
    if (/^\s*</.test(message)) {
      const doc = new DOMParser().parseFromString(message, "text/html");
      const main = doc.querySelector("main") || doc.body;
      message = [main.querySelector("h1"), main.querySelector("p")].filter(Boolean).map((el) => el.textContent.trim()).join(": ");
    }
    say(t("refused", { status: xhr.status, message: message.slice(0, 500) || t("error_status", { status: xhr.status }) }), "error");
  });
  document.addEventListener("htmx:sendError", () => say(t("network_error"), "error"));
  // A fragment that came back well clears an earlier refusal.
  document.addEventListener("htmx:afterRequest", (event) => {
    const notice = document.getElementById("notice");
    if (event.detail.successful && notice && notice.dataset.kind === "error") say("", "");
  });

  document.addEventListener("keydown", (event) => {
    if (event.key === "/" && !event.target.closest("input, textarea, select")) {
      const search = document.querySelector("[data-search]");
      if (search) { event.preventDefault(); search.focus(); }
    }
  });
})();
