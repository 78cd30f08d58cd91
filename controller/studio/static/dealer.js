// The dealer screen: readable from two metres, no input. See docs/studio.md.
import { cardElement, follow, linkBanner, pageInfo, secondsLeft, stampPainted } from "./studio.js";

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

$("table").textContent = info.table;
document.title = `Dealer \u2014 ${info.table}`;

function show(el, on) {
  el.hidden = !on;
}

function renderPrompt(round) {
  const rescan = round.rescan;
  show($("rescan"), Boolean(rescan));
  $("rescan").dataset.attempt = rescan ? String(rescan.attempt ?? "") : "";
  $("rescan").dataset.slot = rescan ? rescan.slot : "";
  if (rescan) {
    $("rescan").textContent = `RESCAN ${rescan.slot} \u2014 attempt ${rescan.attempt}` +
      (rescan.cause ? ` (${rescan.cause})` : "");
  }
  const refused = round.refused;
  show($("refused"), Boolean(refused));
  $("refused").dataset.slot = refused ? refused.slot : "";
  $("refused").dataset.reason = refused ? refused.reason || "" : "";
  if (refused) {
    $("refused").textContent =
      `REFUSED ${refused.card || "card"} at ${refused.slot}: ${refused.reason}`;
  }
  show($("halted"), round.halted);
  $("halted").textContent = round.halted
    ? `HALTED \u2014 waiting for the pit boss${round.halt_reason ? ": " + round.halt_reason : ""}`
    : "";
  const next = round.next_slot || "";
  $("next").dataset.slot = next;
  $("next").querySelector("b").textContent = next;
  show($("next"), Boolean(next) && !round.halted);
}

const FINISHED = new Set(["idle", "settled", "voided"]);

function renderTable(view) {
  // The table waits (a gate: broker, betting system) between rounds; a scanner is lost.
  const status = view.table_state;
  const waiting = Boolean(status && status.state === "waiting" && FINISHED.has(view.round.state));
  show($("waiting"), waiting);
  $("waiting").dataset.reason = waiting ? status.detail || "" : "";
  $("waiting").textContent = waiting ? `WAITING — ${status.detail || "the table waits"}` : "";
  const lost = Object.entries(view.devices || {}).find(([, d]) => d.state === "lost");
  show($("device"), Boolean(lost));
  $("device").dataset.state = lost ? "lost" : "";
  $("device").textContent = lost ? "SCANNER LOST \u2014 check the cable" : "";
  if (lost && lost[1].detail) {
    const detail = document.createElement("small");
    detail.textContent = lost[1].detail;
    $("device").appendChild(detail);
  }
}

function renderDecision(round) {
  const d = round.decision;
  const el = $("decision");
  show(el, Boolean(d));
  el.dataset.window = d ? d.window : "";
  el.dataset.kind = d ? d.kind : "";
  if (!d) return;
  const seatName = d.seat && /^seat/i.test(d.seat) ? d.seat : `seat ${d.seat}`;
  const seat = d.seat ? ` \u2014 ${seatName}` : "";
  const options = (d.options || []).join(" / ");
  el.innerHTML = "";
  const title = document.createElement("div");
  title.className = "title";
  title.textContent = `${KINDS[d.kind] || d.kind}${seat}`;
  const opts = document.createElement("div");
  opts.className = "options";
  opts.textContent = options;
  const left = document.createElement("div");
  left.className = "left";
  left.dataset.closesAt = d.closes_at || "";
  el.append(title, opts, left);
}

function renderCards(round) {
  const holder = $("cards");
  const before = new Map([...holder.querySelectorAll(".card")].map((c) => [c.dataset.slot, c]));
  const fresh = [];
  holder.innerHTML = "";
  for (const item of round.cards) {
    const el = cardElement(document, item, false);
    const old = before.get(item.slot);
    if (old && old.dataset.card === el.dataset.card) {
      el.dataset.paintedAt = old.dataset.paintedAt || "";
    } else if (item.card) {
      fresh.push(el);
    }
    holder.appendChild(el);
  }
  stampPainted(fresh);
}

function renderResult(round) {
  const el = $("result");
  const result = round.result;
  show(el, Boolean(result));
  el.dataset.winner = result && result.winner ? result.winner : "";
  if (!result) return;
  el.textContent = result.voided
    ? `VOIDED: ${result.reason}`
    : `${result.winner === "tie" ? "TIE" : result.winner + " WINS"}`;
}

function tick() {
  if (!last) return;
  const round = last.view.round;
  let left = null;
  if (round.state === "betting_open") left = secondsLeft(round.betting_closes_at, offsetMs);
  if (round.decision) left = secondsLeft(round.decision.closes_at, offsetMs);
  const cd = $("countdown");
  cd.dataset.seconds = left === null ? "" : left.toFixed(1);
  cd.textContent = left === null ? "" : `${Math.ceil(left)} s`;
  const l = document.querySelector("#decision .left");
  if (l) l.textContent = left === null ? "" : `${Math.ceil(left)} s left`;
}

function render(message) {
  last = message;
  offsetMs = message.server_time * 1000 - Date.now();
  const view = message.view;
  const round = view.round;
  body.dataset.round = round.id || "";
  $("round").textContent = round.no ? `round ${round.no}` : "";
  $("state").dataset.state = round.state;
  $("state").textContent = round.halted ? "HALTED" : STATES[round.state] || round.state;
  renderPrompt(round);
  renderTable(view);
  renderDecision(round);
  renderCards(round);
  renderResult(round);
  // A delayed message is not live (docs/mqtt.md): the table is catching up after an outage.
  body.dataset.delayed = String(view.delayed);
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
