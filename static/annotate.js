// calibrate workbench: keyboard-first labelling with write-ahead autosave (docs/annotation.md).
//
// Every action on an item (a label, a rationale, evidence, a claim edit, undo, submit, skip, flag) is put in
// a queue that is mirrored in localStorage *before* it is sent, and leaves the queue only when
// the server has answered. Actions go one at a time, in order, so "1 then 2" on a claim can
// never land as "2 then 1". If the session has ended (401), the page goes to the login and,
// back on the item, sends what was waiting; if the network or the server fails, it retries.
// The server answers with HTML fragments (the cell, and the item status), swapped in here.
(() => {
  "use strict";

  // The queue page: Enter on the focused "Start labelling" button opens the next item (a POST:
  // it may take an open slot, which a GET never does).
  const start = document.querySelector("[data-autofocus]");
  if (start) start.focus();

  const root = document.getElementById("annotate");
  if (!root) return;

  const STORE = `calibrate.pending.${root.dataset.user}.${root.dataset.assignment}`;
  const MAX_AGE_MS = 7 * 24 * 3600 * 1000;
  // What the workbench says, in the reader's language (calibrate.js reads the page's calibrate-strings block).
  const t = (key, values) => (window.calibrate ? window.calibrate.t(key, values) : key);
  let pending = loadPending();
  let sending = false;
  let leaving = false;
  let retryMs = 0;
  let evidenceMode = false;
  // E, then a context's number, then a sentence's number: null, {} (waiting for the context), {rank}.
  let sentencePick = null;
  // The cell whose error type the next digit picks (w, or a label of the negative label just chosen): its id, or null.
  let errorPick = null;
  let focusedId = null;

  // ------------------------------------------------------------------ storage

  function loadPending() {
    try {
      const items = JSON.parse(localStorage.getItem(STORE) || "[]");
      return Array.isArray(items) ? items.filter((a) => Date.now() - a.t < MAX_AGE_MS) : [];
    } catch (_err) {
      return [];
    }
  }

  function persist() {
    try {
      if (pending.length) localStorage.setItem(STORE, JSON.stringify(pending));
      else localStorage.removeItem(STORE);
    } catch (_err) {
      // Storage full or disabled: the queue still lives in memory for this page.
    }
  }

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (_err) {
      return "";
    }
  }

  // ------------------------------------------------------------------ the action queue

  function enqueue(url, fields, kind, cellId) {
    if ((kind === "submit" || kind === "park") && pending.some((a) => a.kind === kind)) return;
    pending.push({ id: `${Date.now()}-${Math.random().toString(36).slice(2)}`, url, fields, kind, cell: cellId, t: Date.now(), tries: 0 });
    persist();
    pump();
  }

  function finish(action) {
    pending = pending.filter((a) => a.id !== action.id);
    persist();
  }

  async function pump() {
    if (sending || leaving || !pending.length) return;
    sending = true;
    const action = pending[0];
    let response = null;
    try {
      response = await fetch(action.url, {
        method: "POST",
        credentials: "same-origin",
        headers: { "HX-Request": "true", "HX-Current-URL": location.href, "X-CSRFToken": csrfToken() },
        body: new URLSearchParams(action.fields),
      });
    } catch (_err) {
      response = null;
    }
    sending = false;
    if (response === null) return retryLater(action, t("no_connection"));
    await handle(action, response);
    if (!leaving && pending.length && retryMs === 0) pump();
  }

  function retryLater(action, why) {
    retryMs = Math.min(retryMs ? retryMs * 2 : 1000, 30000);
    markCell(action.cell, "error", t("retrying_cell"));
    say(t(pending.length === 1 ? "waiting_one" : "waiting_many", { why, n: pending.length, seconds: Math.round(retryMs / 1000) }), "error");
    setTimeout(() => { retryMs = 0; pump(); }, retryMs);
  }

  async function handle(action, response) {
    const status = response.status;
    const redirect = response.headers.get("HX-Redirect");
    if (status === 401) {
      // The session ended: keep the action, log in, come back here and send it then.
      leaving = true;
      say(t("session_ended"), "error");
      location.assign(redirect || `${root.dataset.login}?next=${encodeURIComponent(location.pathname)}`);
      return;
    }
    if (status === 400 && response.headers.get("X-Invalid-Field")) {
      // A field the server refused (a sentence the context does not have): say so, do not resend.
      finish(action);
      markCell(action.cell, "error", t("not_saved"));
      say(await response.text(), "error");
      return;
    }
    if (status === 400) {
      // The page's security token is stale (a login in another tab): reload and send again.
      action.tries += 1;
      persist();
      if (action.tries <= 2) { leaving = true; location.reload(); return; }
      finish(action);
      say(t("token_refused"), "error");
      return;
    }
    if (status === 409) {
      // The claim or context changed under the label (an expert split it meanwhile): the label is
      // not saved; the item is drawn again with the current claims and the server's notice.
      finish(action);
      leaving = true;
      location.assign(redirect || location.href);
      return;
    }
    if (status >= 500 || status === 0) return retryLater(action, t("server_error", { status }));
    const text = await response.text();
    if (status === 200 || status === 204) {
      finish(action);
      if (action.kind === "submit" || action.kind === "park") {
        pending = pending.filter((a) => a.kind !== "submit" && a.kind !== "park");
        persist();
      }
      if (redirect) { leaving = true; location.assign(redirect); return; }
      if (response.headers.get("X-Nothing")) { say(text, "info"); return; }
      const cell = swap(text, response.headers.get("HX-Retarget"));
      // An undo says what it undid (and keeps saying it); any other answer clears the notice once nothing waits.
      if (action.kind === "undo" && cell) { focusCell(cell); say(t("undone", { what: cell.dataset.where }), "info"); }
      else if (!pending.length) say("", "");
      return;
    }
    finish(action);
    if (status === 422 && response.headers.get("HX-Retarget")) {
      swap(text, response.headers.get("HX-Retarget"));
      const first = cells().find((c) => c.dataset.required === "1" && c.dataset.state !== "saved");
      if (first) focusCell(first);
      // What is missing, by name, in the notice bar (fixed in view, an alert), wherever the focus went.
      const missing = document.querySelector("#item-status [data-summary]");
      say(t("not_submitted", { what: missing ? missing.dataset.summary : "" }), "error");
      return;
    }
    markCell(action.cell, "error", t("not_saved"));
    say(status === 404 || status === 403 ? t("not_yours") : text, "error");
  }

  // ------------------------------------------------------------------ swapping fragments

  // Replace the target with the server's fragment, and elements marked hx-swap-oob by id.
  // A text field the annotator is typing in is kept (with its text and caret), never replaced.
  function swap(html, selector) {
    const template = document.createElement("template");
    template.innerHTML = html;
    const fragment = template.content;
    for (const oob of Array.from(fragment.querySelectorAll("[hx-swap-oob]"))) {
      oob.remove();
      oob.removeAttribute("hx-swap-oob");
      const old = document.getElementById(oob.id);
      if (old) morph(old, oob);
    }
    const fresh = fragment.firstElementChild;
    const target = selector ? document.querySelector(selector) : null;
    if (!fresh || !target) return null;
    const result = morph(target, fresh);
    syncMarks();
    if (result.id === focusedId && !isTyping()) focusCell(result, { scroll: false });
    return result;
  }

  function isTyping() {
    const active = document.activeElement;
    return !!(active && active.matches("textarea, input:not([type=hidden])"));
  }

  function morph(target, fresh) {
    const active = document.activeElement;
    if (!(active && target.contains(active) && active.matches("textarea, input"))) {
      const wasFocused = active === target;
      // A focused element inside (the Submit button in the status box) keeps the focus in its fresh copy.
      const inside = !wasFocused && active && active.id && target.contains(active) ? active.id : null;
      target.replaceWith(fresh);
      if (wasFocused) fresh.focus({ preventScroll: true });
      else if (inside && document.getElementById(inside)) document.getElementById(inside).focus({ preventScroll: true });
      return fresh;
    }
    // Keep the part holding the field being edited; take every other part from the server.
    for (const name of Array.from(target.attributes)) if (!fresh.hasAttribute(name.name)) target.removeAttribute(name.name);
    for (const name of Array.from(fresh.attributes)) target.setAttribute(name.name, name.value);
    const keep = Array.from(target.children).find((child) => child.contains(active));
    const freshKeep = keep ? Array.from(fresh.children).find((child) => child.className === keep.className) : null;
    for (const child of Array.from(target.children)) if (child !== keep) child.remove();
    for (const child of Array.from(fresh.children)) {
      if (child === freshKeep) continue;
      if (keep && freshKeep && freshKeep.compareDocumentPosition(child) & Node.DOCUMENT_POSITION_PRECEDING) target.insertBefore(child, keep);
      else target.appendChild(child);
    }
    return target;
  }

  // ------------------------------------------------------------------ cells and focus

  function cells() {
    return [
      ...root.querySelectorAll("#claims .cell"),
      ...root.querySelectorAll(".pairwise .cell"),
      ...root.querySelectorAll(".whole .cell"),
      ...root.querySelectorAll("#contexts .cell"),
      ...root.querySelectorAll("#steps .cell"),
    ];
  }

  function currentCell() {
    return (focusedId && document.getElementById(focusedId)) || null;
  }

  function focusCell(cell, { scroll = true } = {}) {
    if (!cell) return;
    for (const el of root.querySelectorAll(".cell.focused, mark.focused, .context.evidence-shown, .sentence.evidence-shown")) {
      el.classList.remove("focused", "evidence-shown");
    }
    focusedId = cell.id;
    cell.classList.add("focused");
    cell.focus({ preventScroll: true });
    if (scroll) cell.scrollIntoView({ block: "nearest" });
    const row = cell.closest(".claim-row");
    if (row) {
      const mark = root.querySelector(`mark.claim[data-claim="${row.dataset.claim}"]`);
      if (mark) mark.classList.add("focused");
      for (const chip of cell.querySelectorAll(".evidence .chip[name=evidence][aria-pressed=true]")) {
        const context = root.querySelector(`.context[data-rank="${chip.value}"]`);
        if (context) context.classList.add("evidence-shown");
      }
      for (const chip of cell.querySelectorAll(".evidence .sentence-chip[aria-pressed=true]")) {
        const sentence = root.querySelector(`.context[data-rank="${chip.dataset.rank}"] .sentence[data-sentence="${chip.dataset.sentence}"]`);
        if (sentence) sentence.classList.add("evidence-shown");
      }
    }
    const guide = root.querySelector(`.guideline[data-task="${cell.dataset.task}"]`);
    if (guide) guide.open = true;
  }

  function move(step) {
    const all = cells();
    if (!all.length) return;
    const index = all.indexOf(currentCell());
    const next = index < 0 ? (step > 0 ? 0 : all.length - 1) : Math.min(Math.max(index + step, 0), all.length - 1);
    focusCell(all[next]);
  }

  function needsWork(cell) {
    return cell.dataset.state === "empty" || cell.dataset.state === "outdated" || cell.dataset.state === "error";
  }

  // After a label: the next required cell still to do (from here, wrapping), else the submit button.
  function advance(from) {
    const all = cells();
    const index = all.indexOf(from);
    const order = [...all.slice(index + 1), ...all.slice(0, index + 1)];
    if (from.dataset.required === "1") {
      const next = order.find((c) => c.dataset.required === "1" && needsWork(c));
      if (next) return focusCell(next);
      const button = document.getElementById("submit-button");
      if (button) { focusedId = null; clearFocus(); button.focus(); button.scrollIntoView({ block: "nearest" }); }
      return;
    }
    const next = all.slice(index + 1).find((c) => c.dataset.task === from.dataset.task && needsWork(c));
    if (next) focusCell(next);
  }

  function clearFocus() {
    for (const el of root.querySelectorAll(".cell.focused, mark.focused")) el.classList.remove("focused");
  }

  function markCell(cellId, state, text) {
    const cell = cellId && document.getElementById(cellId);
    if (!cell) return;
    cell.dataset.state = state;
    const line = cell.querySelector(".save-state");
    if (line) { line.dataset.state = state; line.textContent = text; }
  }

  function syncMarks() {
    for (const row of root.querySelectorAll(".claim-row")) {
      const cell = row.querySelector(".cell");
      const mark = root.querySelector(`mark.claim[data-claim="${row.dataset.claim}"]`);
      if (mark && cell) mark.dataset.value = cell.dataset.value || "";
    }
  }

  // The notice bar of the page (base.html, fixed in view): calibrate.js owns it.
  function say(text, kind) {
    if (window.calibrate) window.calibrate.say(text, kind);
  }

  // ------------------------------------------------------------------ actions

  // Every form of the item goes through the queue (a plain post is the no-script fallback).
  root.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches("form[data-queue]")) return;
    event.preventDefault();
    const data = new FormData(form, event.submitter || undefined);
    data.delete("csrf_token"); // sent fresh in a header: a replay after login has a new one
    const fields = Array.from(data.entries()).map(([k, v]) => [k, String(v)]);
    const cell = form.closest(".cell");
    if (form.closest(".item-status")) return enqueue(form.action, fields, "submit", null);
    const dialog = form.closest("dialog");
    if (dialog) { dialog.close(); return enqueue(form.action, fields, "park", null); }
    enqueue(form.action, fields, "label", cell ? cell.id : null);
    if (!cell) return;
    const chosen = event.submitter && event.submitter.name === "value" ? event.submitter : null;
    const number = form.querySelector("[data-number]");
    if (form.classList.contains("choices") && (chosen || number)) {
      for (const button of form.querySelectorAll("button[name=value]")) button.setAttribute("aria-pressed", String(button === chosen));
      cell.dataset.value = chosen ? chosen.value : number.value;
      for (const part of cell.querySelectorAll(".rationale, .evidence, .history-link")) part.hidden = false;
      markCell(cell.id, "saving", t("saving"));
      syncMarks();
      // The negative label (incorrect) of a task with error types: the focus stays to pick one, unless one is chosen.
      const types = showErrorTypes(cell);
      if (types && !types.querySelector("[aria-checked=true][value]:not([value=''])")) startErrorPick(cell);
      else advance(cell);
    } else if (event.submitter && event.submitter.name === "error_type") {
      for (const chip of form.querySelectorAll("button[name=error_type]")) chip.setAttribute("aria-checked", String(chip === event.submitter));
      markCell(cell.id, "saving", t("saving"));
      advance(cell);
    } else if (event.submitter && (event.submitter.name === "evidence" || event.submitter.name === "evidence_sentence")) {
      const on = event.submitter.getAttribute("aria-pressed") !== "true";
      event.submitter.setAttribute("aria-pressed", String(on));
      markCell(cell.id, "saving", t("saving"));
    } else {
      markCell(cell.id, "saving", t("saving"));
    }
  });

  // A rationale is saved when the field is left, if it changed.
  root.addEventListener("focusout", (event) => {
    const field = event.target;
    if (field.name === "rationale" && field.value !== field.defaultValue) {
      field.defaultValue = field.value;
      field.form.requestSubmit();
    }
  });

  root.addEventListener("click", (event) => {
    const opener = event.target.closest("[data-open]");
    if (opener) { openDialog(opener.dataset.open); return; }
    if (event.target.closest("[data-close]")) { event.target.closest("dialog").close(); return; }
    const history = event.target.closest("[data-history]");
    if (history) { showHistory(history.dataset.history); return; }
    const review = event.target.closest("[data-review]");
    if (review) { showReview(review.dataset.review); return; }
    const mark = event.target.closest("mark.claim");
    if (mark) {
      const row = root.querySelector(`.claim-row[data-claim="${mark.dataset.claim}"] .cell`);
      if (row) focusCell(row);
      return;
    }
    const sentence = event.target.closest("#contexts .sentence");
    if (sentence) {
      // Selecting text (to copy it) is not a click on the sentence.
      if (!window.getSelection().toString()) toggleSentence(currentCell(), sentence.closest(".context"), Number(sentence.dataset.sentence));
      return;
    }
    const cell = event.target.closest(".cell");
    if (cell && !event.target.closest("button, textarea, input")) focusCell(cell, { scroll: false });
  });

  function openDialog(id) {
    const dialog = document.getElementById(id);
    if (!dialog || dialog.open) return;
    dialog.showModal();
    // Open at the top with the heading in view (showModal focuses the first control, which may be at the bottom).
    const heading = dialog.querySelector("h2");
    if (heading && !dialog.querySelector("input, textarea")) { heading.tabIndex = -1; heading.focus({ preventScroll: true }); }
    dialog.scrollTop = 0;
  }

  async function fetchFragment(url) {
    const response = await fetch(url, { credentials: "same-origin", headers: { "HX-Request": "true", "HX-Current-URL": location.href } });
    if (response.status === 401) { location.assign(response.headers.get("HX-Redirect") || root.dataset.login); return null; }
    if (!response.ok) { say(await response.text() || t("error_status", { status: response.status }), "error"); return null; }
    return response.text();
  }

  async function showHistory(url) {
    const html = await fetchFragment(url);
    if (html === null) return;
    const holder = document.getElementById("history");
    if (holder) swapPlain(holder, html);
    openDialog("history-dialog");
  }

  async function showReview(url) {
    const html = await fetchFragment(url);
    if (html === null) return;
    const holder = document.getElementById("review");
    if (holder) swapPlain(holder, html).scrollIntoView({ block: "start" });
  }

  function swapPlain(target, html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    const fresh = template.content.firstElementChild;
    target.replaceWith(fresh);
    return fresh;
  }

  function labelWithKey(cell, key) {
    const button = Array.from(cell.querySelectorAll("form.choices button[name=value]"))
      .find((b) => (b.dataset.keys || "").split(" ").includes(key));
    if (button) { button.form.requestSubmit(button); return true; }
    const number = cell.querySelector("[data-number]");
    if (number && /^[0-9.,-]$/.test(key)) { number.focus(); return "typing"; }
    return false;
  }

  function toggleEvidence(cell, rank) {
    const chip = cell.querySelector(`.evidence:not([hidden]) button[name=evidence][value="${rank}"]`);
    if (chip) chip.form.requestSubmit(chip);
    else say(cell.dataset.value ? t("no_context", { n: rank + 1 }) : t("label_first_evidence"), "info");
  }

  // Mark (or unmark) one sentence of a context as evidence of the focused claim.
  function toggleSentence(cell, context, index) {
    const form = cell && cell.closest(".claim-row") ? cell.querySelector("form.evidence") : null;
    if (!form) { say(t("focus_claim_sentence"), "info"); return; }
    if (form.hidden) { say(t("label_first_evidence"), "info"); return; }
    const sentence = context && context.querySelector(`.sentence[data-sentence="${index}"]`);
    if (!sentence) { say(context ? t("no_sentence", { n: Number(context.dataset.rank) + 1, m: index + 1 }) : t("no_such_context"), "info"); return; }
    const data = new FormData(form);
    data.delete("csrf_token");
    data.set("evidence_sentence", `${context.dataset.contextId}:${index}`);
    enqueue(form.action, Array.from(data.entries()).map(([k, v]) => [k, String(v)]), "label", cell.id);
    sentence.classList.toggle("evidence-shown");
    markCell(cell.id, "saving", t("saving"));
  }

  // Show the cell's error types when its label is the negative one (hide and clear them otherwise); return the form shown.
  function showErrorTypes(cell) {
    const form = cell.querySelector("form.error-type");
    if (!form) return null;
    form.hidden = cell.dataset.value !== form.dataset.negative;
    if (form.hidden) for (const chip of form.querySelectorAll("button[name=error_type]")) chip.setAttribute("aria-checked", "false");
    return form.hidden ? null : form;
  }

  function startErrorPick(cell) {
    errorPick = cell.id;
    root.classList.add("picking-error-type");
    say(t("error_type_prompt"), "info");
  }

  function stopErrorPick() {
    errorPick = null;
    root.classList.remove("picking-error-type");
  }

  // w on a cell: pick its error type with the next digit (1–9, 0: none given), when its label is the negative one.
  function errorTypeKey(cell) {
    const form = cell.querySelector("form.error-type");
    if (!form) { say(t("no_error_types"), "info"); return; }
    if (form.hidden) { say(t("label_negative_first", { label: form.dataset.negativeName }), "info"); return; }
    startErrorPick(cell);
  }

  function pickErrorType(cell, key) {
    const chip = cell.querySelector(`form.error-type:not([hidden]) button[name=error_type][data-key="${key}"]`);
    if (chip) { say("", ""); chip.form.requestSubmit(chip); } else say(t("no_error_type", { n: key }), "info");
  }

  function undo() {
    enqueue(root.dataset.undo, [], "undo", null);
  }

  // ------------------------------------------------------------------ correcting claims

  // The claim row of the focused cell, or null (with a hint) when the focus is not on a claim.
  function claimRow(cell) {
    const row = cell ? cell.closest(".claim-row") : null;
    if (!row) say(t("focus_claim_edit"), "info");
    return row;
  }

  // Shift+D (split: Enter splits at the caret) or Shift+T (edit: Enter saves the text) opens the claim's editor.
  function openClaimEditor(cell, mode) {
    const row = claimRow(cell);
    if (!row) return;
    const form = row.querySelector("form.claim-edit");
    const area = form.elements.text;
    form.hidden = false;
    form.dataset.mode = mode;
    form.elements.change.value = mode;
    area.value = area.dataset.original;
    form.querySelector(".claim-edit-mode").textContent = mode === "split"
      ? t("split_mode") : t("edit_mode");
    form.querySelector(".claim-edit-verb").textContent = mode === "split" ? "split here" : "save";
    area.focus();
    // Split: the caret starts at the word boundary nearest the middle; edit: at the end.
    let at = area.value.length;
    if (mode === "split") {
      const middle = Math.floor(area.value.length / 2);
      const spaces = [...area.value.matchAll(/\s+/g)].map((m) => m.index + m[0].length).filter((i) => i < area.value.length);
      if (spaces.length) at = spaces.reduce((best, i) => (Math.abs(i - middle) < Math.abs(best - middle) ? i : best));
    }
    area.setSelectionRange(at, at);
    say(mode === "split" ? t("split_help") : t("edit_help"), "info");
  }

  function closeClaimEditor(form) {
    form.hidden = true;
    const cell = form.closest(".claim-row").querySelector(".cell");
    if (cell) focusCell(cell, { scroll: false });
    say("", "");
  }

  function sendClaimEdit(form) {
    const area = form.elements.text;
    if (form.dataset.mode === "split") {
      if (area.value !== area.dataset.original) {
        say(t("split_only_caret"), "info");
        return;
      }
      form.elements.at.value = String(area.selectionStart);
    } else if (area.value.trim() === area.dataset.original) {
      closeClaimEditor(form);
      return;
    }
    form.requestSubmit();
    form.hidden = true;
    say(t("saving_claim"), "info");
  }

  function mergeClaim(cell) {
    const row = claimRow(cell);
    if (!row) return;
    if (!row.nextElementSibling) { say(t("last_claim"), "info"); return; }
    const form = row.querySelector("form.claim-edit");
    form.elements.change.value = "merge";
    form.requestSubmit();
    say(t("merging"), "info");
  }

  function submitItem() {
    const form = root.querySelector(".item-status form[data-queue]");
    if (form) form.requestSubmit();
  }

  function backToCell(field) {
    const cell = field.closest(".cell");
    field.blur();
    if (cell) focusCell(cell, { scroll: false });
  }

  // ------------------------------------------------------------------ keys

  document.addEventListener("keydown", (event) => {
    if (event.defaultPrevented || event.isComposing) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (root.querySelector("dialog[open]")) return; // dialogs: their own fields, Esc closes
    const field = event.target.closest && event.target.closest("input, textarea, select");
    if (field) {
      if (field.matches("[data-claim-editor]")) {
        if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); sendClaimEdit(field.form); }
        else if (event.key === "Escape") { event.preventDefault(); closeClaimEditor(field.form); }
        return;
      }
      if (field.name === "rationale" || field.matches("[data-number]")) {
        if (event.key === "Enter" && !event.shiftKey) { event.preventDefault(); field.defaultValue = field.value; field.form.requestSubmit(); backToCell(field); }
        else if (event.key === "Escape") { event.preventDefault(); backToCell(field); }
      }
      return;
    }
    const onControl = event.target.closest && event.target.closest("a, summary, button:not(.choice):not(.chip)");
    const key = event.key;
    const cell = (event.target.closest && event.target.closest(".cell")) || currentCell();
    if (evidenceMode) {
      evidenceMode = false;
      say("", "");
      if (/^[1-9]$/.test(key) && cell) { event.preventDefault(); toggleEvidence(cell, Number(key) - 1); return; }
    }
    if (errorPick) {
      const picking = document.getElementById(errorPick);
      stopErrorPick();
      if (/^[0-9]$/.test(key) && picking) { event.preventDefault(); pickErrorType(picking, key); return; }
      say("", "");
      if (key === "Escape") { event.preventDefault(); return; }
    }
    if (sentencePick) {
      const pick = sentencePick;
      sentencePick = null;
      if (/^[1-9]$/.test(key) && cell) {
        event.preventDefault();
        if (pick.rank === undefined) {
          const context = root.querySelector(`.context[data-rank="${Number(key) - 1}"]`);
          if (!context) { root.classList.remove("picking-sentence"); say(t("no_context", { n: key }), "info"); return; }
          sentencePick = { rank: Number(key) - 1 };
          say(t("evidence_context", { n: key }), "info");
          return;
        }
        say("", "");
        root.classList.remove("picking-sentence");
        toggleSentence(cell, root.querySelector(`.context[data-rank="${pick.rank}"]`), Number(key) - 1);
        return;
      }
      root.classList.remove("picking-sentence");
      say("", "");
    }
    let handled = true;
    if (key === "j" || key === "ArrowDown") move(1);
    else if (key === "k" || key === "ArrowUp") move(-1);
    else if (key === "u") undo();
    else if (key === "Enter") { if (onControl) return; submitItem(); }
    else if (key === "?") openDialog("help");
    else if (key === "g") { const gt = document.getElementById("ground-truth"); if (gt) gt.open = !gt.open; }
    else if (key === "o") {
      // On a step's cell: unfold (or fold) that step; elsewhere every long context.
      const step = currentCell() && currentCell().closest(".step");
      const long = step ? step.querySelectorAll("details") : root.querySelectorAll("details.long");
      const open = !Array.from(long).some((d) => d.open); long.forEach((d) => { d.open = open; });
    }
    else if (key === "S" && event.shiftKey) openDialog("skip-dialog");
    else if (key === "F" && event.shiftKey) openDialog("flag-dialog");
    else if (key === "D" && event.shiftKey) openClaimEditor(cell, "split");
    else if (key === "T" && event.shiftKey) openClaimEditor(cell, "edit");
    else if (key === "M" && event.shiftKey) mergeClaim(cell);
    else if (key === "v") { const button = root.querySelector("[data-review]"); if (button) showReview(button.dataset.review); else handled = false; }
    else if (key === "r" && cell) {
      const area = cell.querySelector(".rationale:not([hidden]) textarea");
      if (area) area.focus(); else say(t("label_first_rationale"), "info");
    } else if (key === "e" && cell) {
      if (cell.querySelector(".evidence:not([hidden])")) { evidenceMode = true; say(t("evidence_prompt"), "info"); }
      else say(cell.querySelector(".evidence") ? t("label_first_e") : t("evidence_on_claims"), "info");
    } else if (key === "E" && event.shiftKey && cell) {
      if (cell.querySelector(".evidence:not([hidden])")) {
        sentencePick = {};
        root.classList.add("picking-sentence");
        say(t("sentence_prompt"), "info");
      } else say(cell.querySelector(".evidence") ? t("label_first_E") : t("evidence_on_claims"), "info");
    } else if (key === "w" && cell) {
      errorTypeKey(cell);
    } else if (key === "h" && cell) {
      const link = cell.querySelector("[data-history]:not([hidden])");
      if (link) showHistory(link.dataset.history); else handled = false;
    } else if (cell && key.length === 1) {
      const result = labelWithKey(cell, key);
      if (result === "typing") return; // the digit goes into the number field
      handled = !!result;
    } else handled = false;
    if (handled) event.preventDefault();
  });

  // ------------------------------------------------------------------ start

  syncMarks();
  const all = cells();
  const first = all.find((c) => c.dataset.required === "1" && needsWork(c)) || all[0];
  // Back from a claim edit (or its undo): the focus goes to the changed claim.
  const changed = new URLSearchParams(location.search).get("claim");
  const changedCell = changed ? root.querySelector(`.claim-row[data-claim-id="${CSS.escape(changed)}"] .cell`) : null;
  if (changedCell) focusCell(changedCell);
  else if (first && !location.hash) focusCell(first, { scroll: false });
  else if (location.hash) {
    const target = document.getElementById(location.hash.slice(1));
    if (target && target.classList.contains("cell")) focusCell(target);
  }
  if (pending.length) {
    say(pending.length === 1 ? t("sending_one") : t("sending_many", { n: pending.length }), "info");
    pump();
  }
})();
