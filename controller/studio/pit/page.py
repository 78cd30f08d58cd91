"""The pit console's pages: the login form, the floor page, its script and style (no templates).

The floor page is a shell; its script (``pit.js``) opens the WebSocket, receives the floor
(``snapshot``, then ``table`` and ``floor`` updates) and draws it with ``textContent`` only
(nothing received is ever parsed as HTML). A lost WebSocket is shown at once ("connection
lost") and reopened with a growing delay; the server then sends the whole floor again.
"""

from __future__ import annotations

import html

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;background:#101418;color:#e8eaed}
header{display:flex;gap:1.5em;align-items:center;padding:.6em 1em;background:#1c232b}
header h1{font-size:1.2em;margin:0}
.badge{padding:.1em .5em;border-radius:.3em;font-weight:600}
.ok{background:#1e6b34}.bad{background:#9b1c1c}.warn{background:#8a5a00}.unknown{background:#444}
#lost{display:none;background:#9b1c1c;color:#fff;padding:.6em 1em;font-weight:700}
#lost.shown{display:block}
main{display:grid;grid-template-columns:1fr 24em;gap:1em;padding:1em}
#tables{display:grid;grid-template-columns:repeat(auto-fill,minmax(26em,1fr));gap:1em}
.card{background:#1c232b;border-radius:.5em;padding:.8em;border:2px solid transparent}
.card.halted{border-color:#e0a800}.card.offline{opacity:.75;border-color:#9b1c1c}
.card h2{margin:0 0 .4em;font-size:1.1em;display:flex;gap:.5em;align-items:center}
.row{margin:.2em 0}.label{color:#9aa4ae;margin-right:.3em}
.lines{font-family:monospace;font-size:.8em;max-height:9em;overflow:auto;white-space:pre-wrap;
 background:#0c1014;padding:.3em}
.actions{margin-top:.5em;display:flex;flex-wrap:wrap;gap:.4em;align-items:center}
.answer{margin-top:.3em;font-weight:600;white-space:pre-wrap}
.answer.accepted{color:#6fdc8c}.answer.refused,.answer.invalid{color:#ff8383}
.answer.no_answer{color:#ffcf5c}
#alerts li{margin:.3em 0}#alerts .age{color:#9aa4ae;font-size:.85em}
pre{white-space:pre-wrap;background:#0c1014;padding:.5em;font-size:.8em}
input,button{font-size:.95em}.who{margin-left:auto}.replay-from{width:6em}
form.login{max-width:22em;margin:4em auto;background:#1c232b;padding:1.5em;border-radius:.5em}
form.login label{display:block;margin:.6em 0 .2em}
form.login input{width:100%}
.error{color:#ff8383;font-weight:700}
"""


def _page(title: str, body: str, *, base: str, script: bool = False) -> str:
    tag = f'<script src="{html.escape(base)}pit.js"></script>' if script else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)}</title>"
        f'<base href="{html.escape(base)}">'
        f'<link rel=stylesheet href="{html.escape(base)}pit.css">'
        f"</head><body>{body}{tag}</body></html>"
    )


def login_page(*, base: str, csrf: str, error: str | None = None, username: str = "") -> str:
    """The sign-in form (``error``: shown plainly above it)."""
    shown = f"<p class=error id=login-error role=alert>{html.escape(error)}</p>" if error else ""
    body = (
        f'<form class=login method=post action="{html.escape(base)}login">'
        "<h1>Pit console: sign in</h1>"
        f"{shown}"
        f'<input type=hidden name=csrf value="{html.escape(csrf)}">'
        "<label for=username>User name</label>"
        f'<input id=username name=username autocomplete=username required value="'
        f'{html.escape(username)}">'
        "<label for=password>Password</label>"
        "<input id=password name=password type=password autocomplete=current-password required>"
        "<p><button id=sign-in type=submit>Sign in</button></p></form>"
    )
    return _page("Pit console: sign in", body, base=base)


def floor_page(*, base: str, user: str, role: str, csrf: str, archive: bool) -> str:
    """The floor page's shell; the script fills it."""
    recall_note = (
        "from the studio archive"
        if archive
        else "from the rounds this console saw since it started (no archive configured)"
    )
    body = (
        f'<div id=config hidden data-user="{html.escape(user)}" data-role="{html.escape(role)}"'
        f' data-csrf="{html.escape(csrf)}"></div>'
        "<header><h1>Pit console</h1>"
        "<span>broker <span id=broker class='badge unknown'>?</span></span>"
        "<span>betting system <span id=betting class='badge unknown'>?</span></span>"
        "<span id=problems></span>"
        f"<span class=who>{html.escape(user)} ({html.escape(role)})</span>"
        f'<form method=post action="{html.escape(base)}logout">'
        f'<input type=hidden name=csrf value="{html.escape(csrf)}">'
        "<button id=sign-out>Sign out</button></form></header>"
        "<div id=lost role=alert>Connection to the console lost: reconnecting...</div>"
        "<main><section><div id=tables></div></section>"
        "<aside><h2>Alerts (oldest first)</h2><ol id=alerts></ol>"
        "<h2>Recall a round</h2>"
        f"<p class=label>{html.escape(recall_note)}</p>"
        "<input id=recall-round placeholder='round id, e.g. tp-01-000042' size=24>"
        "<button id=recall-go>Recall</button>"
        "<div id=recall-result></div></aside></main>"
    )
    return _page("Pit console", body, base=base, script=True)


SCRIPT = r"""
"use strict";
const config = document.getElementById("config").dataset;
const canAct = config.role === "pitboss";
const cards = new Map();
const tables = new Map();
const nonces = new Map();
let socket = null;
let retry = 500;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, value);
  if (text !== undefined) node.textContent = text;
  return node;
}
function nonce() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
function nonceFor(table, name) {
  const key = table + "/" + name;
  if (!nonces.has(key)) nonces.set(key, nonce());
  return nonces.get(key);
}
function age(at) {
  if (!at) return "";
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(at)) / 1000));
  if (seconds < 120) return seconds + " s ago";
  if (seconds < 7200) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}
function send(message) {
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify(message));
    return true;
  }
  return false;
}

function field(card, name, label) {
  const row = el("div", {class: "row"});
  row.append(el("span", {class: "label"}, label));
  const value = el("span", {class: name});
  row.append(value);
  card.append(row);
  return value;
}

function actionForm(card, table) {
  const box = el("div", {class: "actions"});
  const answer = el("div", {class: "answer", role: "status"});
  const run = (name, extra, button) => {
    const id = nonceFor(table, name);
    const view = tables.get(table) || {};
    button.disabled = true;
    answer.className = "answer";
    answer.textContent = "sending " + name + "...";
    const sent = send(Object.assign(
      {type: "action", csrf: config.csrf, nonce: id, table: table, name: name,
       round: view.round || null}, extra));
    if (!sent) {
      button.disabled = false;
      answer.className = "answer no_answer";
      answer.textContent = "NOT SENT: the connection to the console is down";
    }
  };
  const resume = el("button", {class: "resume"}, "Resume");
  resume.addEventListener("click", () => run("resume", {}, resume));
  const reason = el("input", {class: "void-reason", placeholder: "void reason", size: 18});
  const voidButton = el("button", {class: "void"}, "Void");
  voidButton.addEventListener("click", () => run("void", {reason: reason.value}, voidButton));
  const from = el("input", {class: "replay-from", type: "number", min: 1, placeholder: "from seq"});
  const replay = el("button", {class: "replay"}, "Replay");
  replay.addEventListener("click",
    () => run("replay", {from_seq: from.value ? Number(from.value) : null}, replay));
  box.append(resume, reason, voidButton, from, replay);
  card.append(box, answer);
  return {answer: answer, buttons: {resume: resume, void: voidButton, replay: replay}};
}

function makeCard(table) {
  const card = el("div", {class: "card", id: "card-" + table, "data-table": table});
  const title = el("h2");
  title.append(el("span", {}, table));
  const online = el("span", {class: "badge unknown online"}, "?");
  title.append(online);
  const halted = el("span", {class: "badge warn halted-badge", hidden: ""}, "HALTED");
  title.append(halted);
  card.append(title);
  const parts = {card: card, online: online, halted: halted};
  parts.game = field(card, "game", "game");
  parts.round = field(card, "round", "round");
  parts.state = field(card, "state", "state");
  parts.rescan = field(card, "rescan", "awaiting rescan");
  parts.decision = field(card, "decision", "decision");
  parts.result = field(card, "result", "last result");
  parts.gate = field(card, "gate", "gate");
  parts.devices = field(card, "devices", "devices");
  parts.delayed = field(card, "delayed", "delayed results");
  parts.lines = el("div", {class: "lines"});
  card.append(parts.lines);
  if (canAct) parts.form = actionForm(card, table);
  document.getElementById("tables").append(card);
  cards.set(table, parts);
  return parts;
}

function drawTable(view) {
  tables.set(view.table, view);
  const parts = cards.get(view.table) || makeCard(view.table);
  const online = view.online;
  parts.online.textContent = online === true ? "ONLINE" : online === false
    ? "OFFLINE" + (view.status_reason ? ": " + view.status_reason : "") : "status unknown";
  parts.online.className = "online badge " + (online === true ? "ok" : online === false
    ? "bad" : "unknown");
  parts.card.classList.toggle("offline", online === false);
  parts.card.classList.toggle("halted", !!view.halted);
  parts.halted.hidden = !view.halted;
  parts.game.textContent = view.game || "-";
  parts.round.textContent = view.round ? view.round : "-";
  parts.state.textContent = (view.state || "-") + (view.halted ? " (HALTED)" : "");
  parts.rescan.textContent = view.awaiting_rescan || "-";
  parts.decision.textContent = view.decision || "-";
  parts.result.textContent = view.result || "-";
  parts.gate.textContent = view.gate ? view.gate.state + (view.gate.detail ? ": "
    + view.gate.detail : "") : "-";
  const devices = Object.entries(view.devices || {}).map(
    ([name, d]) => name + " " + d.state + (d.detail ? " (" + d.detail + ")" : ""));
  parts.devices.textContent = devices.length ? devices.join("; ") : "-";
  parts.delayed.textContent = (view.delayed || []).length ? view.delayed.map(
    (d) => "#" + d.seq + " " + d.round + " " + d.text + (d.replayed ? " (replayed)" : "")
  ).join("; ") : "-";
  parts.lines.textContent = (view.lines || []).join("\n");
  parts.lines.scrollTop = parts.lines.scrollHeight;
}

function drawAlerts() {
  const all = [];
  for (const view of tables.values()) for (const alert of view.alerts || []) all.push(alert);
  all.sort((a, b) => (a.at || "~").localeCompare(b.at || "~"));
  const list = document.getElementById("alerts");
  list.replaceChildren(...all.map((alert) => {
    const item = el("li", {class: "alert", "data-kind": alert.kind});
    item.append(el("b", {}, alert.table + " "), document.createTextNode(alert.text + " "));
    item.append(el("span", {class: "age", "data-at": alert.at || ""}, age(alert.at)));
    if (alert.delayed) item.append(el("span", {class: "badge warn"}, "delayed"));
    return item;
  }));
}

function drawFloor(floor) {
  const broker = document.getElementById("broker");
  broker.textContent = floor.broker ? "connected" : "DISCONNECTED: " + floor.broker_detail;
  broker.className = "badge " + (floor.broker ? "ok" : "bad");
  const betting = document.getElementById("betting");
  betting.textContent = floor.betting || "unknown";
  betting.className = "badge " + (floor.betting === "online" ? "ok" : floor.betting === "offline"
    ? "bad" : "unknown");
  document.getElementById("problems").textContent = floor.problems
    ? floor.problems + " unreadable message(s), last: " + floor.last_problem : "";
}

function drawAnswer(message) {
  const parts = cards.get(message.table);
  if (!parts || !parts.form) return;
  const button = parts.form.buttons[message.name];
  if (button) button.disabled = false;
  parts.form.answer.className = "answer " + message.status;
  const again = message.repeated ? " (repeated click: the first answer)" : "";
  parts.form.answer.textContent = message.text + again;
  if (message.status !== "no_answer") nonces.delete(message.table + "/" + message.name);
}

function drawRecall(message) {
  const box = document.getElementById("recall-result");
  box.replaceChildren();
  if (message.type === "recall_error") {
    box.append(el("p", {class: "error", id: "recall-error"}, message.text));
    return;
  }
  box.append(el("p", {class: "label"}, message.note));
  for (const line of message.signatures) {
    const text = "#" + line.seq + " " + line.kind + ": " + line.text;
    box.append(el("div", {class: "signature"}, text));
  }
  box.append(el("pre", {id: "recall-text"}, message.text));
}

function received(message) {
  if (message.type === "snapshot") {
    drawFloor(message.floor);
    for (const view of message.floor.tables) drawTable(view);
    drawAlerts();
  } else if (message.type === "table") {
    drawTable(message.table);
    drawAlerts();
  } else if (message.type === "floor") {
    drawFloor(message.floor);
  } else if (message.type === "answer") {
    drawAnswer(message);
  } else if (message.type === "recall" || message.type === "recall_error") {
    drawRecall(message);
  } else if (message.type === "denied") {
    document.getElementById("lost").textContent = message.text;
  }
}

function connect() {
  const url = new URL("ws", document.baseURI);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  socket = new WebSocket(url);
  socket.addEventListener("open", () => {
    retry = 500;
    document.getElementById("lost").classList.remove("shown");
    document.body.dataset.connected = "yes";
  });
  socket.addEventListener("message", (event) => received(JSON.parse(event.data)));
  socket.addEventListener("close", (event) => {
    document.body.dataset.connected = "no";
    const lost = document.getElementById("lost");
    lost.classList.add("shown");
    if (event.code === 4401) {
      lost.textContent = "Signed out: reload the page to sign in again";
      return;
    }
    lost.textContent = "Connection to the console lost: reconnecting...";
    for (const parts of cards.values()) {
      if (!parts.form) continue;
      for (const button of Object.values(parts.form.buttons)) button.disabled = false;
    }
    setTimeout(connect, retry);
    retry = Math.min(retry * 2, 10000);
  });
}

document.getElementById("recall-go").addEventListener("click", () => {
  const round = document.getElementById("recall-round").value.trim();
  if (round && !send({type: "recall", round: round})) {
    drawRecall({type: "recall_error", text: "the connection to the console is down"});
  }
});
setInterval(() => {
  for (const span of document.querySelectorAll("#alerts .age")) {
    span.textContent = age(span.dataset.at);
  }
}, 1000);
connect();
"""
