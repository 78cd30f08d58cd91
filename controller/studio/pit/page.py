"""The pit console's pages: the login form, the floor page, its script and style (no templates).

The floor page is a shell; its script (``pit.js``) opens the WebSocket, receives the floor
(``snapshot``, then ``table`` and ``floor`` updates) and draws it with ``textContent`` only
(nothing received is ever parsed as HTML). A lost WebSocket is shown at once ("connection
lost") and reopened with a growing delay; the server then sends the whole floor again.
"""

from __future__ import annotations

import html

STYLE = """
:root{color-scheme:dark;--bg:#0d1117;--panel:#161c24;--line:#2a3441;--text:#d7dde4;
 --dim:#8b96a3;--ok:#3f9d63;--bad:#c2413b;--warn:#b8862b;--accent:#6ea8fe}
*{box-sizing:border-box}
body.pit{font-family:"DejaVu Sans","Liberation Sans",system-ui,sans-serif;margin:0;
 background:var(--bg);color:var(--text);font-size:clamp(17px,1.15vw,24px);line-height:1.4}
body.pit header{display:flex;gap:1.2em;align-items:center;flex-wrap:wrap;padding:.5em 1em;
 background:var(--panel);border-bottom:1px solid var(--line)}
body.pit header h1{font-size:1.25em;margin:0;font-weight:600}
.badge{padding:.1em .55em;border-radius:.3em;font-weight:600;color:#fff}
.ok{background:var(--ok)}.bad{background:var(--bad)}.warn{background:var(--warn)}
.unknown{background:#3a434f}
#lost{display:none;background:var(--bad);color:#fff;padding:.6em 1em;font-weight:700}
#lost.shown{display:block}
body.pit main{display:grid;grid-template-columns:minmax(0,1fr) minmax(20em,30%);gap:1em;
 padding:1em}
#tables{display:grid;grid-template-columns:repeat(auto-fill,minmax(26em,1fr));gap:1em}
.table-card{background:var(--panel);border-radius:.5em;padding:.9em 1em;
 border:2px solid var(--line)}
.table-card.halted{border-color:var(--warn)}.table-card.offline{border-color:var(--bad)}
.table-card h2{margin:0 0 .5em;font-size:1.3em;display:flex;gap:.6em;align-items:center}
.headline{font-size:1.25em;font-weight:600;margin:.2em 0 .5em}
.table-card.halted .headline{color:#f0c674}.table-card.offline .headline{color:#ff9b94}
.row{margin:.25em 0}.label{color:var(--dim);margin-right:.4em}
details>summary{cursor:pointer}
.devices details{margin:.15em 0}.devices .fault{color:#ff9b94}
.detail{color:var(--dim);font-size:.85em;white-space:pre-wrap;word-break:break-word;
 margin:.2em 0 .2em 1.2em}
.lines{font-family:"DejaVu Sans Mono",monospace;font-size:.8em;max-height:10em;overflow:auto;
 white-space:pre-wrap;background:#0a0e13;padding:.4em;margin:.3em 0}
.actions{margin-top:.7em;display:flex;flex-wrap:wrap;gap:.5em;align-items:center}
button,input,textarea{font:inherit;color:inherit}
button{background:#25303c;border:1px solid #3c4a5a;border-radius:.35em;padding:.35em .9em;
 cursor:pointer}
button:disabled{opacity:.5;cursor:default}
button.danger{background:#5a1f1c;border-color:#8a2f2a}
button.primary{background:#1f4a7a;border-color:#2f6aa8}
input,textarea{background:#0a0e13;border:1px solid #3c4a5a;border-radius:.3em;padding:.3em .5em}
.replay-round{width:11em}
.answer{margin-top:.5em;font-weight:600;white-space:pre-wrap}
.answer.accepted{color:#7fd89a}.answer.refused,.answer.invalid{color:#ff9b94}
.answer.no_answer{color:#f0c674}
aside h2{font-size:1.1em;margin:.3em 0 .5em}
#alerts{list-style:none;padding:0;margin:0}
.alert{background:var(--panel);border-left:.3em solid var(--warn);border-radius:.3em;
 padding:.5em .7em;margin:0 0 .6em}
.alert.acked{border-left-color:var(--accent)}
.alert .what{font-weight:600}.age,.when{color:var(--dim);font-size:.9em}
.alert .ack-by{color:#9ec5fe;font-size:.9em}
#resolved ol{list-style:none;padding:0;margin:.4em 0}
#resolved li{color:var(--dim);margin:.3em 0;font-size:.9em}
#no-alerts{color:var(--dim)}
#recall{margin-top:1.5em}#recall h2{font-size:1.15em;margin:.3em 0}
.recalled{background:var(--panel);border-radius:.5em;padding:.7em;margin-top:.6em}
.hands{display:flex;flex-wrap:wrap;gap:.8em;margin:.5em 0}
.hand{background:#0f151c;border:1px solid var(--line);border-radius:.4em;padding:.4em .6em}
.hand.winner{border-color:#d4b04c;box-shadow:0 0 0 1px #d4b04c}
.hand .name{font-weight:600;margin-bottom:.2em}
body.pit .card{width:3.2em;height:4.5em;margin:.15em;font-size:1em;border-width:.12em;
 border-radius:.35em;vertical-align:top}
body.pit .card.tile{width:3.3em}
body.pit .card svg{width:100%;height:100%;display:block}
body.pit .card .rank,body.pit .card .suit{font-size:1.5em}
body.pit .card .slot{display:none}
body.pit .recalled .card{width:4.6em;height:6.4em}body.pit .recalled .card.tile{width:4.7em}
table.bets{border-collapse:collapse;width:100%;font-size:.9em;margin:.4em 0}
table.bets td,table.bets th{border-bottom:1px solid var(--line);padding:.2em .4em;text-align:left}
.win{color:#7fd89a}.lose{color:#ff9b94}
.pit-actions li{margin:.2em 0}
pre{white-space:pre-wrap;background:#0a0e13;padding:.5em;font-size:.8em}
dialog{background:var(--panel);color:var(--text);border:2px solid var(--warn);
 border-radius:.6em;padding:1.2em 1.4em;max-width:34em;width:90vw;font-size:1.1em}
dialog::backdrop{background:rgba(0,0,0,.65)}
dialog h3{margin:0 0 .6em;font-size:1.25em}
dialog textarea{width:100%;min-height:4em;margin:.4em 0}
dialog .confirm-card{margin:.2em 0 .8em}
dialog .buttons{display:flex;gap:.8em;justify-content:flex-end;margin-top:.8em}
.who{margin-left:auto}
form.login{max-width:22em;margin:4em auto;background:var(--panel);padding:1.5em;
 border-radius:.5em}
form.login h1{font-size:1.4em;margin:0 0 .6em}
form.login label{display:block;margin:.6em 0 .2em}
form.login input{width:100%}
.error{color:#ff9b94;font-weight:700}
body.pit header a{color:var(--accent)}
body.pit main.today{display:block;padding:1em;max-width:72em}
main.today .headline{font-size:1.5em;font-weight:700;padding:.5em .8em;border-radius:.4em;
 color:#fff;margin:.2em 0 .8em}
.today-table{background:var(--panel);border-radius:.5em;padding:.8em 1em;margin:0 0 1em;
 border:2px solid var(--line)}
.today-table[data-verdict=drift]{border-color:var(--bad)}
.today-table[data-verdict=watch]{border-color:var(--warn)}
.today-table h2{margin:0 0 .3em;font-size:1.4em;display:flex;gap:.6em;align-items:center}
table.drift{border-collapse:collapse;width:100%;margin:.4em 0}
table.drift th{color:var(--dim);font-weight:400;text-align:left;padding:.25em .5em;
 border-bottom:1px solid var(--line)}
table.drift td{padding:.35em .5em;border-bottom:1px solid var(--line)}
table.drift td.num{text-align:right;font-variant-numeric:tabular-nums}
table.drift tr.bet td{font-size:1.1em}
table.drift tr.bet.v-bad td{color:#ff9b94;font-weight:700}
table.drift tr.bet.v-warn td{color:#f0c674;font-weight:600}
table.drift .verdict{font-size:1em;display:inline-block;min-width:6.5em;text-align:center}
table.drift tr.outcomes td{border-bottom:none;padding:0 .5em .3em 1.5em}
table.outcomes{border-collapse:collapse;font-size:.9em;margin:.2em 0 .4em}
table.outcomes td,table.outcomes th{padding:.1em .6em;text-align:left}
.note{color:var(--dim);margin:.2em 0}
"""


def _page(title: str, body: str, *, base: str, script: bool = False) -> str:
    tag = f'<script type=module src="{html.escape(base)}pit.js"></script>' if script else ""
    shared = f'<link rel=stylesheet href="{html.escape(base)}static/studio.css">' if script else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title>"
        f'<base href="{html.escape(base)}">{shared}'
        f'<link rel=stylesheet href="{html.escape(base)}pit.css">'
        f"</head><body class=pit>{body}{tag}</body></html>"
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


def today_page(*, base: str, body: str) -> str:
    """The "today against the par sheet" page around its body (:mod:`.today`)."""
    return _page("Pit console: today against the par sheet", body, base=base)


def floor_page(
    *, base: str, user: str, role: str, csrf: str, archive: bool, deck_check: bool = False
) -> str:
    """The floor page's shell; the script fills it (``deck_check``: the pit has a reader)."""
    recall_note = (
        "from the studio archive"
        if archive
        else "from the rounds this console saw since it started (no archive configured)"
    )
    body = (
        f'<div id=config hidden data-user="{html.escape(user)}" data-role="{html.escape(role)}"'
        f' data-csrf="{html.escape(csrf)}" data-deck-check="{str(deck_check).lower()}"></div>'
        "<header><h1>Pit console</h1>"
        "<span>broker <span id=broker data-role=broker class='badge unknown'>?</span></span>"
        "<span>betting system <span id=betting data-role=betting class='badge unknown'>?</span>"
        "</span><span id=problems data-role=problems></span>"
        f"<a id=today-link href='{html.escape(base)}today'>today against the par sheet</a>"
        f"<span class=who data-role=user>{html.escape(user)} ({html.escape(role)})</span>"
        f'<form method=post action="{html.escape(base)}logout">'
        f'<input type=hidden name=csrf value="{html.escape(csrf)}">'
        "<button id=sign-out>Sign out</button></form></header>"
        "<div id=lost role=alert data-role=lost>Connection to the console lost: reconnecting..."
        "</div>"
        "<main><section><div id=tables data-role=tables></div>"
        "<section id=recall><h2>Recall a round</h2>"
        f"<p class=label>{html.escape(recall_note)}</p>"
        "<input id=recall-round data-role=recall-round"
        " placeholder='round id, e.g. tp-01-000042' size=22> "
        "<button id=recall-go data-role=recall-go>Recall</button>"
        "<div id=recall-result data-role=recall-result></div></section></section>"
        "<aside><h2>Alerts <span class=when>(oldest first)</span></h2>"
        "<p id=no-alerts data-role=no-alerts>No open alert.</p>"
        "<ol id=alerts data-role=alerts></ol>"
        "<details id=resolved data-role=resolved><summary>Resolved (0)</summary><ol></ol>"
        "</details></aside></main>"
        "<dialog id=confirm data-role=confirm><h3 id=confirm-title></h3>"
        "<p id=confirm-text data-role=confirm-text></p>"
        "<div class=confirm-card><label id=confirm-card-label for=confirm-card>"
        "Card (e.g. Qh, or a tile: 5p)</label> "
        "<input id=confirm-card data-role=confirm-card maxlength=16 size=8"
        " autocomplete=off spellcheck=false></div>"
        "<label id=confirm-reason-label for=confirm-reason>Reason (recorded with your name)"
        "</label><textarea id=confirm-reason data-role=confirm-reason maxlength=500></textarea>"
        "<div class=buttons><button id=confirm-cancel data-role=confirm-cancel>Cancel</button>"
        "<button id=confirm-go data-role=confirm-go class=danger>Confirm</button></div>"
        "</dialog>"
    )
    return _page("Pit console", body, base=base, script=True)


SCRIPT = r"""
// The pit console's page (an ES module). Everything received is drawn with textContent or
// built node by node (never parsed as HTML); cards come from the studio's shared drawing.
import { cardElement } from "./static/studio.js";

const config = document.getElementById("config").dataset;
const canAct = config.role === "pitboss";
const cards = new Map();
const tables = new Map();
const nonces = new Map();
let socket = null;
let retry = 500;

function el(tag, attrs, text) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null) node.setAttribute(key, value);
  }
  if (text !== undefined) node.textContent = text;
  return node;
}
function nonce() {
  const bytes = new Uint8Array(12);
  crypto.getRandomValues(bytes);
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
function actionKey(table, name, alertSeq) {
  return table + "/" + name + (alertSeq ? "/" + alertSeq : "");
}
function nonceFor(key) {
  if (!nonces.has(key)) nonces.set(key, nonce());
  return nonces.get(key);
}
// The same steps as controller/studio/pit/words.py age_words.
function age(at) {
  if (!at) return "";
  const ms = Date.parse(at);
  if (Number.isNaN(ms)) return "";
  const seconds = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (seconds < 120) return seconds + " s ago";
  if (seconds < 7200) return Math.round(seconds / 60) + " min ago";
  return Math.round(seconds / 3600) + " h ago";
}
function clock(at) {
  if (!at) return "";
  const when = new Date(at);
  return Number.isNaN(when.getTime()) ? at : when.toLocaleTimeString([], {hour12: false});
}
function ageSpan(at) {
  return el("span", {class: "age", "data-at": at || ""}, age(at));
}
const gameNames = new Map();  // game id -> its name for people, from the floor's views
function words(token) {
  return String(token || "").replace(/[_-]+/g, " ").replace(/\bseat(\d+)\b/g, "seat $1").trim();
}
function gameName(game) {
  return gameNames.get(game) || words(game);
}
function send(message) {
  if (socket && socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify(message));
    return true;
  }
  return false;
}

// -- the confirmation dialog -------------------------------------------------------------
const dialog = document.getElementById("confirm");
let onConfirm = null;
function confirmAction({title, text, reason, card, go, action}) {
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const box = document.getElementById("confirm-reason");
  const label = document.getElementById("confirm-reason-label");
  box.value = "";
  box.hidden = label.hidden = !reason;
  const cardBox = document.getElementById("confirm-card");
  cardBox.value = "";
  cardBox.hidden = document.getElementById("confirm-card-label").hidden = !card;
  const button = document.getElementById("confirm-go");
  button.textContent = go;
  button.disabled = !!reason || !!card;
  dialog.dataset.action = action;
  return new Promise((resolve) => {
    onConfirm = resolve;
    dialog.showModal();
    (card ? cardBox : reason ? box : document.getElementById("confirm-cancel")).focus();
  });
}
// Confirm stays disabled until every field the dialog shows is filled in.
function confirmReady() {
  const filled = (id) => {
    const input = document.getElementById(id);
    return input.hidden || input.value.trim() !== "";
  };
  document.getElementById("confirm-go").disabled =
    !(filled("confirm-reason") && filled("confirm-card"));
}
document.getElementById("confirm-reason").addEventListener("input", confirmReady);
document.getElementById("confirm-card").addEventListener("input", confirmReady);
// A double click on Confirm must not click what lies under the dialog once it closes.
let quietUntil = 0;
document.addEventListener("click", (event) => {
  if (performance.now() < quietUntil) {
    event.stopPropagation();
    event.preventDefault();
  }
}, true);
for (const kind of ["dblclick", "mousedown"]) {
  document.addEventListener(kind, (event) => {
    if (performance.now() < quietUntil) event.preventDefault();
  }, true);
}
document.getElementById("confirm-go").addEventListener("click", () => {
  const reason = document.getElementById("confirm-reason").value.trim();
  const card = document.getElementById("confirm-card").value.trim();
  quietUntil = performance.now() + 500;
  dialog.close();
  if (onConfirm) onConfirm({ok: true, reason, card});
  onConfirm = null;
});
document.getElementById("confirm-cancel").addEventListener("click", () => dialog.close());
dialog.addEventListener("close", () => {
  if (onConfirm) onConfirm({ok: false});
  onConfirm = null;
});

// -- pit actions -------------------------------------------------------------------------
function act(table, name, extra, answerBox, button) {
  const key = actionKey(table, name, extra.alert_seq);
  if (button) button.disabled = true;
  if (answerBox) {
    answerBox.className = "answer";
    answerBox.replaceChildren(el("span", {}, "Sending..."));
  }
  const sent = send(Object.assign(
    {type: "action", csrf: config.csrf, nonce: nonceFor(key), table: table, name: name}, extra));
  if (!sent) {
    if (button) button.disabled = false;
    if (answerBox) {
      answerBox.className = "answer no_answer";
      answerBox.textContent = "Not sent: the connection to the console is down.";
    }
  }
}

function actionForm(parts, table) {
  const box = el("div", {class: "actions", "data-role": "actions"});
  const answer = el("div", {class: "answer", role: "status", "data-role": "answer"});
  const resume = el("button", {class: "resume primary", "data-role": "resume"}, "Resume");
  resume.addEventListener("click", async () => {
    const view = tables.get(table) || {};
    const round = view.round;
    const choice = await confirmAction({
      title: "Resume round " + (round || "?") + "?",
      text: "Table " + table + ", round " + (round || "(none shown)")
        + ": the dealer deals on from the slot that waits (the held card is scanned again).",
      go: "Resume round " + (round || ""), action: "resume"});
    if (choice.ok) act(table, "resume", {round: round || null}, answer, resume);
  });
  const voidButton = el("button", {class: "void danger", "data-role": "void"}, "Void...");
  voidButton.addEventListener("click", async () => {
    const view = tables.get(table) || {};
    const round = view.round;
    const choice = await confirmAction({
      title: "Void round " + (round || "?") + "?",
      text: "Table " + table + ", round " + (round || "(none shown)")
        + ": every bet of the round is refunded. This cannot be undone. Give the reason.",
      reason: true, go: "Void round " + (round || ""), action: "void"});
    if (choice.ok) {
      act(table, "void", {round: round || null, reason: choice.reason}, answer, voidButton);
    }
  });
  const enter = el("button", {class: "enter-card", "data-role": "enter-card"}, "Enter card...");
  enter.addEventListener("click", async () => {
    const view = tables.get(table) || {};
    const round = view.round;
    const slot = view.next_slot || null;
    const choice = await confirmAction({
      title: "Enter a card by hand" + (slot ? " for " + slot : "") + "?",
      text: "Table " + table + ", round " + (round || "(none shown)") + ": the card "
        + (slot ? "for " + slot : "the round waits for") + " is entered by you, as if the "
        + "reader had read it (its reader is dead). It is checked against the deck, recorded "
        + "with your name and reason, and shown as entered by hand.",
      card: true, reason: true, go: "Enter card", action: "enter-card"});
    if (choice.ok) {
      act(table, "enter-card", {round: round || null, slot: slot, card: choice.card,
        reason: choice.reason}, answer, enter);
    }
  });
  const deck = el("button", {class: "deck-check", "data-role": "deck-check"}, "Deck check...");
  deck.hidden = config.deckCheck !== "true"; // no reader for deck checks at this pit
  deck.addEventListener("click", async () => {
    const view = tables.get(table) || {};
    const choice = await confirmAction({
      title: "Check a deck for table " + table + "?",
      text: "Put every card of the deck (" + (view.game_name || "the table's game") + ") on "
        + "the pit's deck-check reader, one at a time. The check ends a few seconds after the "
        + "last card; its report (missing, extra, duplicated and unknown cards) is recorded "
        + "at table " + table + " with your name.",
      go: "Start the deck check", action: "deck-check"});
    if (choice.ok) {
      act(table, "deck-check", {}, answer, deck);
      answer.replaceChildren(el("span", {}, "Checking the deck: put the cards on the reader..."));
    }
  });
  const replayRound = el("input", {class: "replay-round", "data-role": "replay-round",
    placeholder: "round id", "aria-label": "round to re-send"});
  const replay = el("button", {class: "replay", "data-role": "replay"}, "Re-send results");
  replay.addEventListener("click", async () => {
    const view = tables.get(table) || {};
    const round = replayRound.value.trim() || view.round;
    if (!round) {
      answer.className = "answer invalid";
      answer.textContent = "Type the round whose results to re-send.";
      return;
    }
    const span = (view.rounds || {})[round];
    const range = span ? " (its entries " + span[0] + " to " + span[1] + ")"
      : " (its entries are looked up in the archive)";
    const choice = await confirmAction({
      title: "Re-send the results of round " + round + "?",
      text: "Table " + table + " publishes the results of round " + round + " again"
        + range + ", marked as replayed.", go: "Re-send", action: "replay"});
    if (choice.ok) act(table, "replay", {round: round}, answer, replay);
  });
  box.append(resume, voidButton, enter, deck, replayRound, replay);
  parts.card.append(box, answer);
  parts.form = {answer: answer, replayRound: replayRound,
    buttons: {resume: resume, void: voidButton, replay: replay, "enter-card": enter,
      "deck-check": deck}};
}

// -- the tables --------------------------------------------------------------------------
function field(parts, name, label, role) {
  const row = el("div", {class: "row", "data-field": name});
  row.append(el("span", {class: "label"}, label));
  const value = el("span", {class: name, "data-role": role || name});
  row.append(value);
  parts.card.append(row);
  return value;
}

function makeCard(table) {
  const card = el("div", {class: "table-card card-" + table, id: "card-" + table,
    "data-table": table, "data-role": "table"});
  const title = el("h2");
  title.append(el("span", {}, "Table " + table));
  const online = el("span", {class: "badge unknown online", "data-role": "online"}, "?");
  const halted = el("span", {class: "badge warn halted-badge", "data-role": "halted",
    hidden: ""}, "HALTED");
  title.append(online, halted);
  card.append(title);
  const parts = {card: card, online: online, halted: halted};
  parts.headline = el("div", {class: "headline", "data-role": "headline"});
  card.append(parts.headline);
  parts.game = field(parts, "game", "game");
  parts.round = field(parts, "round", "round");
  parts.state = field(parts, "state", "state");
  parts.rescan = field(parts, "rescan", "awaiting rescan");
  parts.decision = field(parts, "decision", "decision");
  parts.result = field(parts, "result", "last result");
  parts.gate = field(parts, "gate", "table");
  const devicesRow = el("div", {class: "row"});
  devicesRow.append(el("span", {class: "label"}, "devices"));
  parts.devices = el("div", {class: "devices", "data-role": "devices"});
  devicesRow.append(parts.devices);
  card.append(devicesRow);
  parts.delayed = field(parts, "delayed", "late results");
  const feed = el("details", {"data-role": "feed"});
  feed.append(el("summary", {}, "Feed (last lines)"));
  parts.lines = el("div", {class: "lines"});
  feed.append(parts.lines);
  card.append(feed);
  if (canAct) actionForm(parts, table);
  document.getElementById("tables").append(card);
  cards.set(table, parts);
  return parts;
}

function headline(view) {
  if (view.online === false) return "Table offline" + (view.status_reason
    ? ": " + view.status_reason : "");
  if (!view.round) return view.online ? "Online, no round yet" : "Waiting for the table";
  const number = view.round_no ? "Round " + view.round_no : "Round " + view.round;
  if (view.halted) return number + " HALTED: waiting for the pit boss";
  if (view.awaiting_rescan) return number + ": the dealer rescans " + view.awaiting_rescan;
  if (view.state === "voided") {
    const why = String(view.result || "").replace(/^voided: /, "");
    return number + (why.startsWith("voided") ? ": " + why : " voided" + (why ? ": " + why : ""));
  }
  return number + ": " + (view.result && view.state === "settled" ? view.result
    : words(view.state));
}

function drawDevices(parts, devices) {
  const entries = Object.entries(devices || {});
  if (!entries.length) {
    parts.devices.replaceChildren(el("span", {}, "-"));
    return;
  }
  parts.devices.replaceChildren(...entries.map(([name, d]) => {
    const item = el("details", {"data-role": "device", "data-device": name,
      "data-state": d.state, class: d.ok ? "" : "fault"});
    const summary = el("summary", {"data-role": "device-words"});
    summary.append(document.createTextNode((d.headline || name + " " + d.state) + " "),
      ageSpan(d.age_at), document.createTextNode(d.tail || ""));
    const more = el("div", {class: "detail", "data-role": "device-detail"},
      "device: " + name + "\nstate: " + d.state + (d.at ? " at " + d.at : "")
      + (d.detail ? "\ndetail: " + d.detail : ""));
    item.append(summary, more);
    return item;
  }));
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
  parts.headline.textContent = headline(view);
  if (view.game && view.game_name) gameNames.set(view.game, view.game_name);
  parts.game.textContent = view.game ? gameName(view.game) : "-";
  parts.round.textContent = view.round ? view.round : "-";
  parts.state.textContent = (view.state ? words(view.state) : "-")
    + (view.halted ? " (HALTED)" : "");
  parts.rescan.textContent = view.awaiting_rescan || "-";
  parts.decision.textContent = view.decision || "-";
  parts.result.textContent = view.result || "-";
  parts.gate.textContent = view.gate ? words(view.gate.state) + (view.gate.detail ? ": "
    + view.gate.detail : "") : "-";
  drawDevices(parts, view.devices);
  parts.delayed.textContent = (view.delayed || []).length ? view.delayed.map(
    (d) => d.round + ": " + d.text + (d.replayed ? " (re-sent)" : "")).join("; ") : "-";
  parts.lines.textContent = (view.lines || []).join("\n");
  // Calm: a row with nothing to say is not shown (round, state and game always are).
  for (const name of ["rescan", "decision", "result", "gate", "delayed"]) {
    parts[name].parentElement.hidden = parts[name].textContent === "-";
  }
  if (parts.form && !parts.form.replayRound.value && document.activeElement
      !== parts.form.replayRound) {
    parts.form.replayRound.placeholder = view.round || "round id";
  }
}

// -- alerts ------------------------------------------------------------------------------
function alertItem(alert) {
  const item = el("li", {class: "alert" + (alert.ack ? " acked" : ""), "data-role": "alert",
    "data-kind": alert.kind, "data-table": alert.table, "data-seq": String(alert.seq)});
  const what = el("div", {class: "what"});
  what.append(document.createTextNode(alert.table + ": " + alert.text + " "));
  item.append(what);
  const when = el("div", {class: "when"});
  when.append(ageSpan(alert.at));
  if (alert.round) when.append(document.createTextNode(" \u00b7 round " + alert.round));
  if (alert.delayed) when.append(document.createTextNode(" \u00b7 published late"));
  item.append(when);
  if (alert.detail) {
    const more = el("details", {"data-role": "alert-detail"});
    more.append(el("summary", {}, "detail"), el("div", {class: "detail"}, alert.detail));
    item.append(more);
  }
  if (alert.ack) {
    item.append(el("div", {class: "ack-by", "data-role": "ack-by"},
      "acknowledged by " + alert.ack.by + " at " + clock(alert.ack.at)));
  } else if (canAct && !alert.resolved) {
    const button = el("button", {"data-role": "ack", class: "ack"}, "Acknowledge");
    button.addEventListener("click", () => {
      const parts = cards.get(alert.table);
      act(alert.table, "ack", {alert_seq: alert.seq},
        parts && parts.form ? parts.form.answer : null, button);
    });
    item.append(button);
  }
  return item;
}

function drawAlerts() {
  const all = [];
  for (const view of tables.values()) for (const alert of view.alerts || []) all.push(alert);
  all.sort((a, b) => (a.at || "~").localeCompare(b.at || "~"));
  const open = all.filter((alert) => !alert.resolved);
  const done = all.filter((alert) => alert.resolved).sort(
    (a, b) => (b.resolved.at || "").localeCompare(a.resolved.at || ""));
  document.getElementById("alerts").replaceChildren(...open.map(alertItem));
  document.getElementById("no-alerts").hidden = open.length > 0;
  const resolved = document.getElementById("resolved");
  resolved.querySelector("summary").textContent = "Resolved (" + done.length + ")";
  resolved.querySelector("ol").replaceChildren(...done.map((alert) => {
    const item = el("li", {"data-role": "resolved-alert", "data-kind": alert.kind,
      "data-table": alert.table, "data-seq": String(alert.seq)});
    item.textContent = alert.table + ": " + alert.text + " \u2014 resolved: "
      + alert.resolved.why + " at " + clock(alert.resolved.at)
      + (alert.ack ? " (acknowledged by " + alert.ack.by + ")" : "");
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
  if (parts && parts.form) {
    const button = parts.form.buttons[message.name];
    if (button) button.disabled = false;
    const box = parts.form.answer;
    box.className = "answer " + message.status;
    box.dataset.name = message.name;
    box.dataset.status = message.status;
    const again = message.repeated ? " (the answer to your first click)" : "";
    const said = el("div", {"data-role": "answer-words"}, (message.sentence || message.text)
      + again);
    box.replaceChildren(said);
    if (message.text && message.text !== message.sentence) {
      const more = el("details", {"data-role": "answer-detail"});
      more.append(el("summary", {}, "technical detail"),
        el("div", {class: "detail"}, message.text));
      box.append(more);
    }
  }
  if (message.status !== "no_answer") {
    nonces.delete(actionKey(message.table, message.name, message.alert_seq));
  }
  if (message.name === "ack") drawAlerts();
}

// -- recall ------------------------------------------------------------------------------
function recalledHands(record) {
  const result = record.result || {};
  const hands = new Map();
  for (const item of record.cards || []) {
    const hand = item.hand || "";
    if (!hands.has(hand)) hands.set(hand, []);
    hands.get(hand).push({slot: item.slot, hand: hand, card: item.card,
      manual: item.source === "manual"});
  }
  for (const [hand, shown] of Object.entries(result.cards || {})) {
    const dealt = hands.get(hand) || [];
    hands.set(hand, shown.map((card, i) => ({
      slot: (dealt[i] && dealt[i].slot) || hand + (i + 1), hand: hand, card: card,
      manual: Boolean(dealt[i] && dealt[i].manual)})));
  }
  return hands;
}

function drawRecalled(box, message) {
  const record = message.record || {};
  const result = record.result || {};
  const drawn = el("div", {class: "recalled", "data-role": "recalled",
    "data-round": message.round});
  const outcome = record.void ? "voided: " + record.void.reason
    : result.winner ? (result.winner === "tie" ? "tie" : words(result.winner) + " wins")
    : "unfinished";
  drawn.append(el("div", {class: "headline", "data-role": "recall-outcome"},
    "Round " + (record.round_no || message.round) + " \u00b7 " + gameName(record.game)
    + " \u00b7 " + outcome));
  const hands = el("div", {class: "hands"});
  const tiles = String(record.game || "").startsWith("mahjong");
  for (const [hand, items] of recalledHands(record)) {
    const winner = result.winner === hand;
    const node = el("div", {class: "hand" + (winner ? " winner" : ""), "data-role": "recall-hand",
      "data-hand": hand});
    const summary = (result.hands || {})[hand] || {};
    const seatHand = /^seat(\d+)$/.exec(hand || "");
    node.append(el("div", {class: "name"}, (seatHand ? "Seat " + seatHand[1]
      : hand ? "Hand " + hand : "Cards")
      + (summary.description ? ": " + summary.description : "") + (winner ? " (winner)" : "")));
    for (const item of items) node.append(cardElement(document, item, false, {tiles: tiles}));
    hands.append(node);
  }
  drawn.append(hands);
  const lines = message.bet_lines || [];
  if (lines.length) {
    const table = el("table", {class: "bets", "data-role": "bet-lines"});
    const head = el("tr");
    for (const name of ["bet", "outcome", "returns per 1 staked", "why"]) {
      head.append(el("th", {}, name));
    }
    table.append(head);
    for (const line of lines) {
      const row = el("tr", {"data-role": "bet-line", "data-bet": line.bet});
      row.append(el("td", {}, words(line.bet)), el("td", {class: line.outcome}, line.outcome),
        el("td", {}, line.payout), el("td", {}, words(line.reason)));
      table.append(row);
    }
    drawn.append(table);
  }
  const actions = [...(message.actions || [])];
  const journalled = (record.pit_actions || []).map((a) => ({at: a.at, by: a.operator || "?",
    action: a.name, said: a.name + ": " + (a.accepted ? "accepted" : "refused (" + a.reason
      + ")")}));
  if (actions.length || journalled.length) {
    drawn.append(el("div", {class: "label"}, "Pit actions on this round"));
    const list = el("ul", {class: "pit-actions"});
    for (const a of [...journalled, ...actions]) {
      list.append(el("li", {"data-role": "pit-action", "data-action": a.action},
        clock(a.at) + " \u00b7 " + a.by + " " + (a.said || a.sentence)));
    }
    drawn.append(list);
  }
  for (const line of message.signatures || []) {
    drawn.append(el("div", {class: "signature label", "data-role": "signature"},
      (line.kind === "round_voided" ? "the void" : "the result") + " (entry " + line.seq
      + (line.replayed ? ", re-sent" : "") + "): " + line.text));
  }
  const full = el("details", {"data-role": "recall-full"});
  full.append(el("summary", {}, "Full record"), el("pre", {id: "recall-text"}, message.text));
  drawn.append(full);
  box.append(drawn);
}

function drawRecall(message) {
  const box = document.getElementById("recall-result");
  box.replaceChildren();
  if (message.type === "recall_error") {
    box.append(el("p", {class: "error", id: "recall-error", "data-role": "recall-error"},
      message.text));
    return;
  }
  box.append(el("p", {class: "label"}, message.note));
  drawRecalled(box, message);
}

// -- the socket --------------------------------------------------------------------------
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
  for (const span of document.querySelectorAll(".age")) span.textContent = age(span.dataset.at);
}, 1000);
connect();
"""
