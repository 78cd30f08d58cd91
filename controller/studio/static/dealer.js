// The dealer screen: read from two metres, no input (docs/studio.md).
//
// The cards are grouped by hand, every slot of the game reserved from the round's start
// (the view's round.layout), each card at least a fifth of the screen's height; the next slot
// to deal and its hand huge on the left; the betting or decision countdown as a bar under
// the header; rescan, refusal, halt and device prompts across the whole width. Only words a
// dealer uses: no raw tokens (all_in, seat3, None). The socket's last line (tablectl watch's
// words) stays in the DOM (#line, hidden) for tools.
//
// What tests and tools read (stable):
//   [data-role="card"]            each reserved slot: data-slot, data-hand, data-card (empty
//                                 while hidden or not dealt), data-face (up | hidden | empty),
//                                 data-kind, data-next="true" on the slot to deal next
//   [data-role="label"]           every text (names, prompts, the next slot)
//   [data-role="hand"][data-hand] a hand's group (data-next="true": the next card's hand)
//   [data-role="timer"]           the countdown bar (data-seconds, data-total)
//   #state[data-state], #next[data-slot], #rescan[data-attempt][data-slot],
//   #refused[data-slot][data-reason], #halted, #waiting, #device[data-state],
//   #decision[data-window][data-kind], #countdown[data-seconds], #result[data-winner],
//   body[data-round|game|conn|feed|online|delayed]
import {
  follow,
  handName,
  linkBanner,
  pageInfo,
  secondsLeft,
  stampPainted,
  title,
  updateSlot,
  winnerWords,
} from "./studio.js";
import { pieceWords } from "./faces.js";

const info = pageInfo();
const body = document.body;
const $ = (id) => document.getElementById(id);
let last = null;
let offsetMs = 0;
const link = { state: "connecting", attempt: 0, retry: 0 };

const STATES = {
  idle: "WAITING",
  opening: "OPENING",
  betting_open: "BETTING OPEN",
  dealing: "DEALING",
  settled: "RESULT",
  voided: "VOIDED",
};

const KINDS = {
  action: "Hold'em action",
  mulligan: "Mulligan choice",
  setting: "Break Poker setting window",
  bank: "Mahjong bank offer",
};

const OPTIONS = {
  all_in: "all-in",
  close: "close early",
  stay: "stay",
  mulligan: "mulligan",
  accept: "accept",
  decline: "decline",
};

const CAUSES = {
  device: "reader error",
  crc: "bad read",
  malformed: "bad read",
  gap: "missed read",
  line: "line error",
  checksum: "bad read",
  unknown_code: "unknown card",
  position: "wrong reader",
  away: "reader was away",
};

$("table").textContent = info.table;
document.title = `Dealer \u2014 ${info.table}`;

function show(el, on) {
  el.hidden = !on;
}

function setText(el, text) {
  if (el.textContent !== text) el.textContent = text;
}

/** A seat or position in words ("seat3" -> "Seat 3", "P2" -> "Position 2"). */
function who(game, seat) {
  if (!seat) return "";
  return handName(game || (/^seat/.test(seat) ? "texas-holdem" : "mahjong-pai-gow"), seat);
}

function handOfSlot(round, slot) {
  for (const h of round.layout || []) if (h.slots.includes(slot)) return h.hand;
  const card = round.cards.find((c) => c.slot === slot);
  return card ? card.hand : null;
}

function renderPrompt(round, game) {
  const rescan = round.rescan;
  show($("rescan"), Boolean(rescan));
  $("rescan").dataset.attempt = rescan ? String(rescan.attempt ?? "") : "";
  $("rescan").dataset.slot = rescan ? rescan.slot : "";
  if (rescan) {
    const cause = CAUSES[rescan.cause] || (rescan.cause ? title(rescan.cause).toLowerCase() : "");
    setText($("rescan"), `RESCAN ${rescan.slot} \u2014 attempt ${rescan.attempt}${cause ? ` (${cause})` : ""}`);
  }
  const refused = round.refused;
  show($("refused"), Boolean(refused));
  $("refused").dataset.slot = refused ? refused.slot || "" : "";
  $("refused").dataset.reason = refused ? refused.reason || "" : "";
  if (refused) {
    const card = refused.card ? pieceWords(refused.card) : "the card";
    setText($("refused"), `REFUSED ${card} at ${refused.slot || "the slot"}: ${refused.reason}`);
  }
  show($("halted"), round.halted);
  setText(
    $("halted"),
    round.halted ? `HALTED \u2014 waiting for the pit boss${round.halt_reason ? ": " + round.halt_reason : ""}` : "",
  );
  const next = round.next_slot || "";
  const hand = next ? handOfSlot(round, next) : null;
  $("next").dataset.slot = next;
  setText($("next").querySelector("b"), next);
  $("next").querySelector("b").dataset.len = String(next.length);
  setText($("next-hand"), hand ? handName(game, hand) : "");
  show($("next"), Boolean(next) && !round.halted);
}

const FINISHED = new Set(["idle", "settled", "voided"]);

function renderTable(view) {
  // The table waits (a gate: broker, betting system) between rounds; a scanner is lost.
  const status = view.table_state;
  const waiting = Boolean(status && status.state === "waiting" && FINISHED.has(view.round.state));
  show($("waiting"), waiting);
  $("waiting").dataset.reason = waiting ? status.detail || "" : "";
  setText($("waiting"), waiting ? `WAITING \u2014 ${status.detail || "the table waits"}` : "");
  const lost = Object.entries(view.devices || {}).find(([, d]) => d.state === "lost");
  show($("device"), Boolean(lost));
  $("device").dataset.state = lost ? "lost" : "";
  $("device").textContent = lost ? "SCANNER LOST \u2014 check the cable" : "";
}

function renderDecision(round, game) {
  const d = round.decision;
  const el = $("decision");
  show(el, Boolean(d));
  el.dataset.window = d ? d.window : "";
  el.dataset.kind = d ? d.kind : "";
  if (!d) {
    el.replaceChildren();
    return;
  }
  const seat = d.seat ? ` \u2014 ${who(game, d.seat)}` : "";
  const options = (d.options || []).map((o) => OPTIONS[o] || title(o).toLowerCase()).join(" / ");
  const make = (cls, text) => {
    const node = document.createElement("div");
    node.className = cls;
    node.dataset.role = "label";
    node.textContent = text;
    return node;
  };
  const left = make("left", "");
  left.dataset.closesAt = d.closes_at || "";
  el.replaceChildren(make("title", `${KINDS[d.kind] || title(d.kind)}${seat}`), make("options", options), left);
}

// -- the hands, every slot reserved ------------------------------------------------------------

let built = "";
let slots = new Map();

function build(round, game) {
  const layout = round.layout || [];
  const bank = (round.info || {}).bank || {};
  const key = `${game}|${JSON.stringify(layout)}|${bank.banker || ""}`;
  if (key === built) return;
  built = key;
  slots = new Map();
  const holder = $("cards");
  holder.replaceChildren();
  holder.dataset.game = game || "";
  body.dataset.game = game || "";
  const tiles = game === "mahjong-pai-gow";
  const seats = layout.filter((h) => h.hand.startsWith("seat")).length;
  holder.dataset.count = String(layout.length);
  holder.style.setProperty("--seats", String(seats));
  for (const h of layout) {
    if (tiles && h.hand === bank.banker) continue; // the banker's own position is not dealt
    const box = document.createElement("div");
    box.className = `hand hand-${h.hand === "board" ? "board" : "box"}`;
    box.dataset.role = "hand";
    box.dataset.hand = h.hand;
    const name = document.createElement("div");
    name.className = "name";
    name.dataset.role = "label";
    name.textContent =
      tiles && h.hand === "B" && bank.banker ? `Banker (${handName(game, bank.banker)})` : handName(game, h.hand);
    const row = document.createElement("div");
    row.className = "slots";
    for (const slot of h.slots) {
      const cell = document.createElement("div");
      cell.className = "cell";
      const card = document.createElement("div");
      card.className = "card";
      card.dataset.role = "card";
      const tag = document.createElement("div");
      tag.className = "slot";
      tag.dataset.role = "label";
      tag.textContent = slot;
      cell.append(card, tag);
      row.appendChild(cell);
      slots.set(slot, { el: card, hand: h.hand, tiles });
    }
    box.append(name, row);
    holder.appendChild(box);
  }
}

function renderCards(round, game) {
  build(round, game);
  const fresh = [];
  const byslot = new Map(round.cards.map((c) => [c.slot, c]));
  for (const [slot, s] of slots) {
    updateSlot(document, s.el, byslot.get(slot) || null, fresh, { slot, hand: s.hand, tiles: s.tiles });
    s.el.dataset.next = String(slot === round.next_slot && !round.halted);
  }
  const nextHand = round.next_slot ? handOfSlot(round, round.next_slot) : null;
  for (const box of document.querySelectorAll("#cards [data-role='hand']")) {
    box.dataset.next = String(box.dataset.hand === nextHand && !round.halted);
  }
  stampPainted(fresh);
}

function renderResult(round, game) {
  const el = $("result");
  const result = round.result;
  show(el, Boolean(result));
  el.dataset.winner = result && result.winner ? result.winner : "";
  if (!result) return;
  if (result.voided) {
    setText(el, `VOIDED: ${result.reason}`);
    return;
  }
  const winner = game === "three-card-mulligan" ? { player: "P", dealer: "D" }[result.winner] || result.winner : result.winner;
  setText(el, winnerWords(game, winner).toUpperCase());
}

// -- the countdown: a bar under the header ---------------------------------------------------

const totals = new Map();

function tick() {
  if (!last) return;
  const round = last.view.round;
  let left = null;
  let deadline = null;
  let total = null;
  if (round.state === "betting_open") {
    deadline = round.betting_closes_at;
    left = secondsLeft(deadline, offsetMs);
  }
  if (round.decision) {
    deadline = round.decision.closes_at;
    left = secondsLeft(deadline, offsetMs);
    total = Number(round.decision.seconds) || null;
  }
  if (deadline && left !== null) {
    if (!totals.has(deadline)) totals.set(deadline, Math.max(left, 0.1));
    total = total || totals.get(deadline);
  }
  const cd = $("countdown");
  cd.dataset.seconds = left === null ? "" : left.toFixed(1);
  setText(cd, left === null ? "" : `${Math.ceil(left)} s`);
  const timer = $("timer");
  // The bar keeps its room when there is no countdown: the cards never move for it.
  timer.style.visibility = left === null ? "hidden" : "visible";
  timer.dataset.seconds = left === null ? "" : left.toFixed(1);
  timer.dataset.total = total ? total.toFixed(1) : "";
  if (left !== null && total) {
    const share = Math.max(0, Math.min(1, left / total));
    timer.firstElementChild.style.width = `${(share * 100).toFixed(1)}%`;
    timer.dataset.urgent = String(left <= 3);
  }
  const l = document.querySelector("#decision .left");
  if (l) setText(l, left === null ? "" : `${Math.ceil(left)} s left`);
}

function render(message) {
  last = message;
  offsetMs = message.server_time * 1000 - Date.now();
  const view = message.view;
  const round = view.round;
  const game = round.game || view.status.game || "";
  body.dataset.round = round.id || "";
  setText($("game"), round.game_name || view.status.game_name || "");
  setText($("round"), round.no ? `Round ${round.no}` : "");
  $("state").dataset.state = round.state;
  setText($("state"), round.halted ? "HALTED" : STATES[round.state] || title(round.state).toUpperCase());
  renderPrompt(round, game);
  renderTable(view);
  renderDecision(round, game);
  renderCards(round, game);
  renderResult(round, game);
  // A delayed message is not live (docs/mqtt.md): the table is catching up after an outage.
  body.dataset.delayed = String(view.delayed);
  show($("delayed"), Boolean(view.delayed));
  $("line").textContent = (view.delayed ? "[delayed: catching up] " : "") + (view.line || "");
  linkBanner(document, body, link, message);
  tick();
}

follow({
  ...info,
  mode: "public",
  onState: render,
  onLink(state, detail, retry) {
    link.state = state;
    link.attempt = state === "connecting" ? detail : 0;
    link.retry = retry || 0;
    linkBanner(document, body, link, state === "open" ? last : state === "lost" ? null : last);
  },
});
setInterval(tick, 250);
