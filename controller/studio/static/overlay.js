// The stream overlay (1920x1080, transparent): cards as dealt, hands, result, equities.
import { cardElement, follow, linkBanner, pageInfo, stampPainted } from "./studio.js";

const info = pageInfo();
const body = document.body;
const $ = (id) => document.getElementById(id);
const link = { state: "connecting", attempt: 0, retry: 0 };
let last = null;
body.dataset.mode = info.mode;

function percent(value) {
  const n = Number(value);
  return Number.isFinite(n) ? `${(n * 100).toFixed(1)}%` : String(value);
}

function renderHands(round) {
  const holder = $("hands");
  const before = new Map([...holder.querySelectorAll(".card")].map((c) => [c.dataset.slot, c]));
  const fresh = [];
  const hands = new Map();
  for (const item of round.cards) {
    const hand = item.hand || "";
    if (!hands.has(hand)) hands.set(hand, []);
    hands.get(hand).push(item);
  }
  const described = (round.result && round.result.hands) || {};
  holder.innerHTML = "";
  for (const [hand, items] of hands) {
    const box = document.createElement("div");
    box.className = "hand";
    box.dataset.hand = hand;
    const name = document.createElement("div");
    name.className = "name";
    const summary = described[hand];
    const words = summary ? ` \u2014 ${summary.description || summary.category || ""}` : "";
    name.textContent = `${hand}${words}`;
    box.appendChild(name);
    const row = document.createElement("div");
    row.className = "row";
    for (const item of items) {
      const el = cardElement(document, item, false);
      const old = before.get(item.slot);
      if (old && old.dataset.card === el.dataset.card) {
        el.dataset.paintedAt = old.dataset.paintedAt || "";
      } else if (item.card) {
        fresh.push(el);
      }
      row.appendChild(el);
    }
    box.appendChild(row);
    holder.appendChild(box);
  }
  stampPainted(fresh);
}

const STREETS = ["preflop", "flop", "turn", "river"];

function renderEquity(round) {
  // The latest street's win probabilities, each seat's earlier streets beside them.
  const el = $("equity");
  const secure = round.secure_equity || {};
  const source = Object.keys(secure).length ? secure : round.equity || {};
  const streets = STREETS.filter((name) => source[name]);
  const street = streets.length ? streets[streets.length - 1] : null;
  el.hidden = !street;
  el.dataset.street = street || "";
  el.innerHTML = "";
  if (!street) return;
  const head = document.createElement("div");
  head.className = "title";
  head.textContent = `win probability \u2014 ${street}`;
  el.appendChild(head);
  for (const [who, value] of Object.entries(source[street].seats || {})) {
    const row = document.createElement("div");
    row.className = "who";
    row.dataset.who = who;
    row.dataset.win = String(value.win);
    const tie = value.tie ? ` (tie ${percent(value.tie)})` : "";
    const before = streets
      .slice(0, -1)
      .filter((name) => (source[name].seats || {})[who])
      .map((name) => `${name} ${percent(source[name].seats[who].win)}`);
    const win = document.createElement("b");
    win.textContent = percent(value.win);
    row.append(`${who} `, win, tie);
    if (before.length) {
      const history = document.createElement("small");
      history.textContent = `  (${before.join(", ")})`;
      row.append(history);
    }
    el.appendChild(row);
  }
}

function renderResult(round) {
  const el = $("result");
  const result = round.result;
  el.hidden = !result;
  el.dataset.winner = result && result.winner ? result.winner : "";
  if (!result) return;
  el.textContent = result.voided
    ? `round voided: ${result.reason}`
    : result.winner === "tie" ? "TIE" : `${result.winner} WINS`;
}

function render(message) {
  last = message;
  const round = message.view.round;
  body.dataset.round = round.id || "";
  $("game").textContent = round.game || "";
  $("round").textContent = round.no ? `round ${round.no}` : "";
  $("state").dataset.state = round.state;
  $("state").textContent = round.state.replace("_", " ");
  renderHands(round);
  renderEquity(round);
  renderResult(round);
  linkBanner(document, body, link, message);
}

follow({
  ...info,
  onState: render,
  onLink(state, detail, retry) {
    link.state = state;
    link.attempt = state === "connecting" ? detail : 0;
    link.retry = retry || 0;
    linkBanner(document, body, link, state === "lost" ? null : last);
  },
});
