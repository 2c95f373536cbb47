// The sandboxd console: plain JavaScript over the /v1 API (docs/api-v1.md),
// served by the daemon itself from files embedded at build time. The token
// lives in this tab's sessionStorage; WebSockets, which cannot carry an
// Authorization header, open with a one-time ticket instead.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { token: sessionStorage.getItem("sbx-token"), current: null,
                term: null, fit: null, ws: null, contexts: {}, path: "" };

function authHeaders(extra) {
  const h = Object.assign({}, extra || {});
  if (state.token) h["Authorization"] = "Bearer " + state.token;
  return h;
}

async function api(method, path, opts) {
  opts = opts || {};
  const r = await fetch(path, { method, headers: authHeaders(opts.headers), body: opts.body });
  if (r.status === 401) { logout("Your token was refused: log in again."); throw new Error("unauthorized"); }
  return r;
}

async function apiJSON(method, path, body) {
  const r = await api(method, path, body === undefined ? {} :
    { body: JSON.stringify(body), headers: { "Content-Type": "application/json", "Accept": "application/json" } });
  const text = await r.text();
  let j = null;
  try { j = text ? JSON.parse(text) : null; } catch (e) { j = null; }
  if (!r.ok) throw new Error((j && j.error) || (r.status + " " + text.slice(0, 200)));
  return j;
}

function status(el, msg, isError) {
  const p = $(el);
  p.textContent = msg || "";
  p.classList.toggle("error", !!isError);
}

function fmtBytes(n) {
  if (n === undefined || n === null) return "";
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

function button(label, onClick, aria) {
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = label;
  if (aria) b.setAttribute("aria-label", aria);
  b.addEventListener("click", onClick);
  return b;
}

function cell(tr, content) {
  const td = document.createElement("td");
  if (content instanceof Node) td.appendChild(content); else td.textContent = content;
  tr.appendChild(td);
  return td;
}

// ---- login ---------------------------------------------------------------

function show(view) {
  $("#login").hidden = view !== "login";
  $("#app").hidden = view !== "app";
  $("#logout").hidden = view !== "app";
}

function logout(msg) {
  sessionStorage.removeItem("sbx-token");
  state.token = null;
  closeTerminal();
  show("login");
  status("#login-error", msg || "", !!msg);
  $("#token").focus();
}

async function login(token) {
  const r = await fetch("/v1/sandbox", { headers: token ? { Authorization: "Bearer " + token } : {} });
  if (r.status === 401) {
    status("#login-error", token ? "That token is not valid." : "This daemon needs a token.", true);
    return false;
  }
  if (!r.ok) { status("#login-error", "The daemon answered " + r.status, true); return false; }
  state.token = token || "";
  sessionStorage.setItem("sbx-token", state.token);
  status("#login-error", "");
  show("app");
  renderSandboxes((await r.json()).sandboxes);
  return true;
}

$("#login-form").addEventListener("submit", (e) => { e.preventDefault(); login($("#token").value.trim()); });
$("#logout").addEventListener("click", () => logout());

// ---- sandboxes -----------------------------------------------------------

async function refresh() {
  try {
    const j = await apiJSON("GET", "/v1/sandbox");
    renderSandboxes(j.sandboxes);
  } catch (e) { status("#sb-status", e.message, true); }
}

async function renderSandboxes(list) {
  const tbody = $("#sb-table tbody");
  tbody.textContent = "";
  list.sort((a, b) => a.id.localeCompare(b.id));
  for (const sb of list) {
    const tr = document.createElement("tr");
    tr.dataset.id = sb.id;
    if (state.current === sb.id) tr.classList.add("selected");
    cell(tr, sb.id);
    cell(tr, sb.state);
    const mem = cell(tr, ""), cpu = cell(tr, "");
    cell(tr, new Date(sb.lastActiveAt).toLocaleString());
    const act = cell(tr, "");
    act.className = "actions";
    act.append(button("Open", () => select(sb.id), "Open " + sb.id),
               button("Stop", () => stop(sb.id), "Stop " + sb.id),
               button("Delete", () => remove(sb.id), "Delete " + sb.id));
    tbody.appendChild(tr);
    if (sb.state === "running") {
      apiJSON("GET", "/v1/sandbox/" + sb.id).then((info) => {
        mem.textContent = fmtBytes(info.usage && info.usage.memoryBytes);
        cpu.textContent = info.usage && info.usage.cpuMs !== undefined ? (info.usage.cpuMs / 1000).toFixed(1) + " s" : "";
      }).catch(() => {});
    }
  }
  status("#sb-status", list.length ? list.length + " sandbox(es)" : "No sandbox yet: create one.");
}

$("#create-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const id = $("#new-id").value.trim();
  try {
    const sb = await apiJSON("POST", "/v1/sandbox", id ? { id } : {});
    $("#new-id").value = "";
    status("#sb-status", "Created " + sb.id);
    await refresh();
    select(sb.id);
  } catch (err) { status("#sb-status", err.message, true); }
});
$("#refresh").addEventListener("click", refresh);

async function stop(id) {
  try {
    await apiJSON("POST", "/v1/sandbox/" + id + "/stop", {});
    status("#sb-status", "Stopped " + id + " (its files are kept)");
    if (state.current === id) closeTerminal();
    refresh();
  } catch (e) { status("#sb-status", e.message, true); }
}

async function remove(id) {
  if (!confirm("Delete sandbox " + id + " and all its files?")) return;
  const r = await api("DELETE", "/v1/sandbox/" + id);
  if (!r.ok && r.status !== 204) { status("#sb-status", "Delete failed: " + r.status, true); return; }
  status("#sb-status", "Deleted " + id);
  if (state.current === id) { closeTerminal(); state.current = null; $("#detail").hidden = true; }
  refresh();
}

function select(id) {
  if (state.current !== id) {
    closeTerminal();
    state.current = id;
    state.path = "";
    state.contexts = {};
    $("#run-out").textContent = "";
  }
  $("#detail-id").textContent = id;
  $("#detail").hidden = false;
  for (const tr of document.querySelectorAll("#sb-table tbody tr"))
    tr.classList.toggle("selected", tr.dataset.id === id);
  tab("terminal");
  openTerminal();
  listFiles();
  setTimeout(refresh, 1000); // it starts with its terminal
}

// ---- tabs ----------------------------------------------------------------

function tab(name) {
  for (const t of ["terminal", "files", "run"]) {
    $("#tab-" + t).hidden = t !== name;
    $("#tab-btn-" + t).setAttribute("aria-selected", String(t === name));
  }
  if (name === "terminal" && state.fit) { state.fit.fit(); state.term.focus(); }
  if (name === "files") listFiles();
}
for (const t of ["terminal", "files", "run"])
  $("#tab-btn-" + t).addEventListener("click", () => tab(t));

// ---- terminal --------------------------------------------------------------

function closeTerminal() {
  if (state.ws) { state.ws.onclose = null; state.ws.close(); state.ws = null; }
  if (state.term) { state.term.dispose(); state.term = null; state.fit = null; }
}

async function openTerminal() {
  const id = state.current;
  closeTerminal();
  const term = new Terminal({ convertEol: false, cursorBlink: true, scrollback: 5000,
                              screenReaderMode: false, fontSize: 14 });
  const fit = new FitAddon.FitAddon();
  term.loadAddon(fit);
  term.open($("#terminal"));
  fit.fit();
  state.term = term;
  state.fit = fit;
  let q = "cols=" + term.cols + "&rows=" + term.rows;
  try {
    if (state.token) {
      const t = await apiJSON("POST", "/v1/sandbox/" + id + "/pty/ticket", {});
      q += "&ticket=" + encodeURIComponent(t.ticket);
    }
  } catch (e) { status("#term-status", e.message, true); return; }
  if (state.current !== id || state.term !== term) return;
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const ws = new WebSocket(proto + "//" + location.host + "/v1/sandbox/" + id + "/pty?" + q);
  ws.binaryType = "arraybuffer";
  state.ws = ws;
  const enc = new TextEncoder();
  status("#term-status", "Connecting…");
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") { term.write(new Uint8Array(ev.data)); return; }
    let m;
    try { m = JSON.parse(ev.data); } catch (e) { return; }
    if (m.type === "ready") status("#term-status", "Connected to " + id + " (shared: everyone here sees the same screen)");
    else if (m.type === "exit") status("#term-status", "The shell exited with " + m.code + ". Open the sandbox again for a new one.");
    else if (m.type === "error") status("#term-status", m.message, true);
  };
  ws.onclose = (ev) => {
    if (ev.code === 4008) status("#term-status", "Disconnected: this page did not keep up with the output (" + ev.reason + ").", true);
    else if (ev.code !== 1000) status("#term-status", "Disconnected (" + ev.code + (ev.reason ? ": " + ev.reason : "") + ").", true);
  };
  term.onData((d) => { if (ws.readyState === 1) ws.send(enc.encode(d)); });
  term.onBinary((d) => {
    if (ws.readyState !== 1) return;
    const b = new Uint8Array(d.length);
    for (let i = 0; i < d.length; i++) b[i] = d.charCodeAt(i) & 255;
    ws.send(b);
  });
  term.onResize(({ cols, rows }) => {
    if (ws.readyState === 1) ws.send(JSON.stringify({ type: "resize", cols, rows }));
  });
  term.focus();
}

window.addEventListener("resize", () => { if (state.fit && !$("#tab-terminal").hidden) state.fit.fit(); });

// ---- files -----------------------------------------------------------------

function filePath(name) {
  const parts = (state.path ? state.path.split("/") : []).concat(name ? [name] : []);
  return parts.filter((p) => p).map(encodeURIComponent).join("/");
}

async function listFiles() {
  if (!state.current) return;
  $("#path").value = state.path;
  const tbody = $("#files-table tbody");
  try {
    const r = await api("GET", "/v1/sandbox/" + state.current + "/file/" + filePath(""));
    const j = await r.json();
    if (!r.ok) throw new Error(j.error || r.status);
    if (!j.entries) throw new Error("/workspace/" + state.path + " is not a folder");
    tbody.textContent = "";
    j.entries.sort((a, b) => (a.type === "directory") === (b.type === "directory") ?
      a.name.localeCompare(b.name) : (a.type === "directory" ? -1 : 1));
    for (const e of j.entries) {
      const tr = document.createElement("tr");
      const isDir = e.type === "directory";
      if (isDir) {
        const a = document.createElement("a");
        a.href = "#";
        a.className = "dir";
        a.textContent = e.name + "/";
        a.addEventListener("click", (ev) => { ev.preventDefault(); state.path = filePath(e.name).split("/").map(decodeURIComponent).join("/"); listFiles(); });
        cell(tr, a);
      } else {
        cell(tr, e.name);
      }
      cell(tr, e.type);
      cell(tr, isDir ? "" : fmtBytes(e.size));
      cell(tr, e.mtime ? new Date(typeof e.mtime === "number" ? e.mtime * (e.mtime < 1e12 ? 1000 : 1) : e.mtime).toLocaleString() : "");
      const act = cell(tr, "");
      act.className = "actions";
      if (!isDir) act.append(button("Download", () => download(e.name), "Download " + e.name));
      act.append(button("Delete", () => delFile(e.name, isDir), "Delete " + e.name));
      tbody.appendChild(tr);
    }
    status("#files-status", j.entries.length + " entries in /workspace/" + state.path);
  } catch (e) { tbody.textContent = ""; status("#files-status", e.message, true); }
}

async function download(name) {
  const r = await api("GET", "/v1/sandbox/" + state.current + "/file/" + filePath(name));
  if (!r.ok) { status("#files-status", "Download failed: " + r.status, true); return; }
  const url = URL.createObjectURL(await r.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

async function delFile(name, isDir) {
  if (!confirm("Delete " + name + (isDir ? " and everything in it" : "") + "?")) return;
  const r = await api("DELETE", "/v1/sandbox/" + state.current + "/file/" + filePath(name) + (isDir ? "?recursive=1" : ""));
  if (!r.ok) { const j = await r.json().catch(() => ({})); status("#files-status", j.error || ("Delete failed: " + r.status), true); return; }
  listFiles();
}

$("#path-form").addEventListener("submit", (e) => {
  e.preventDefault();
  state.path = $("#path").value.replace(/^\/+|\/+$/g, "");
  listFiles();
});
$("#up").addEventListener("click", () => {
  state.path = state.path.split("/").slice(0, -1).join("/");
  listFiles();
});
$("#upload-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const files = $("#upload").files;
  if (!files.length) { status("#files-status", "Choose a file first.", true); return; }
  for (const f of files) {
    const r = await api("PUT", "/v1/sandbox/" + state.current + "/file/" + filePath(f.name),
                        { body: f, headers: { "Content-Type": "application/octet-stream" } });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      status("#files-status", "Upload of " + f.name + " failed: " + (j.error || r.status), true);
      return;
    }
  }
  const n = files.length; // the list empties with the input
  $("#upload").value = "";
  await listFiles();
  status("#files-status", "Uploaded " + n + " file(s) to /workspace/" + state.path);
});

// ---- run code ----------------------------------------------------------------

$("#run-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const lang = $("#lang").value, out = $("#run-out");
  out.textContent = "Running…";
  try {
    let cid = state.contexts[lang];
    if (!cid) {
      cid = (await apiJSON("POST", "/v1/sandbox/" + state.current + "/contexts", { language: lang })).id;
      state.contexts[lang] = cid;
    }
    const j = await apiJSON("POST", "/v1/sandbox/" + state.current + "/contexts/" + cid + "/run",
                            { code: $("#code").value });
    out.textContent = "";
    const pre = (text, cls) => { const p = document.createElement("pre"); p.textContent = text; if (cls) p.className = cls; out.appendChild(p); };
    if (j.notice) pre(j.notice);
    if (j.logs.stdout.length) pre(j.logs.stdout.join(""));
    if (j.logs.stderr.length) pre(j.logs.stderr.join(""), "error");
    for (const res of j.results) {
      if (res["image/png"]) {
        const img = document.createElement("img");
        img.src = "data:image/png;base64," + res["image/png"];
        img.alt = res["text/plain"] || "an image the code made";
        out.appendChild(img);
      } else if (res["text/plain"] !== undefined) {
        pre(res["text/plain"]);
      }
    }
    if (j.error) pre(j.error.name + ": " + j.error.value + "\n" + (j.error.traceback || []).join("\n"), "error");
    if (!out.childNodes.length) pre("(no output)");
  } catch (err) {
    delete state.contexts[lang];
    out.textContent = err.message;
  }
});

// ---- start -------------------------------------------------------------------

// the list keeps up with what others do (every 5 s while this tab shows)
setInterval(() => { if (!$("#app").hidden && !document.hidden) refresh(); }, 5000);

if (state.token !== null) login(state.token).then((ok) => { if (!ok) logout(); });
else show("login");
