// The stream overlay: broadcast graphics for a browser source (OBS, vMix), transparent.
//
// Designed on a 1920x1080 stage scaled to the window (1280x720 is the same picture at 2/3),
// everything inside the title-safe area (#safe: 5% in from each edge). The layout is built
// once per game and table (the view's round.layout: every hand and slot the game can deal),
// so nothing reflows as cards arrive: a slot not dealt yet is an empty, reserved outline.
// One layout per game: Teen Patti's face-off, Hold'em's seats and board, Three Card
// Mulligan's player against dealer with both paths, Break Poker's house-way split, Mahjong
// Pai Gow's positions and banker. The page only shows what the state message says.
//
// What tests and tools read (stable):
//   #safe[data-title-safe]            the title-safe area
//   [data-role="card"]                every card or tile slot: data-slot, data-hand,
//                                     data-card (empty while hidden or not dealt),
//                                     data-face (up | hidden | empty), data-kind
//                                     (card | joker | tile | back | empty), data-painted-at
//   [data-role="label"]               every text box (names, stacks, actions, lines)
//   [data-role="hand"][data-hand]     a hand's box; data-winner="true" on the winners
//   [data-role="seat"][data-seat]     a Hold'em seat: data-folded, data-button, data-all-in
//   [data-role="bar"][data-who]       a win-probability bar (data-win: 0..1)
//   #state[data-state]                the round's state; its text is the state line
//   #result[data-winner], #equity[data-street], #banner[data-state]
//   body[data-game], body[data-round], body[data-conn|feed|online|mode]
//   window.studioPaints               the paint stamps (bench/studio_overlay.py)
//   window.studioRenders              each state message's render time in ms (the bench)
import {
  asList,
  follow,
  handName,
  linkBanner,
  pageInfo,
  secondsLeft,
  stampPainted,
  title,
  updateSlot,
  winnerWords,
  words,
} from "./studio.js";

const info = pageInfo();
const body = document.body;
const $ = (id) => document.getElementById(id);
const link = { state: "connecting", attempt: 0, retry: 0 };
let last = null;
let offsetMs = 0;
body.dataset.mode = info.mode;

// -- the stage: 1920x1080, scaled to the window ------------------------------------------------

function fit() {
  const scale = Math.min(window.innerWidth / 1920, window.innerHeight / 1080);
  $("stage").style.transform = `scale(${scale})`;
}
window.addEventListener("resize", fit);
fit();

// -- branding (studio config: name, colour, logo) ---------------------------------------------

function branding() {
  let brand = {};
  try {
    brand = JSON.parse($("branding").textContent || "{}") || {};
  } catch {
    brand = {};
  }
  if (typeof brand.colour === "string" && /^#[0-9a-fA-F]{3,8}$/.test(brand.colour)) {
    document.documentElement.style.setProperty("--brand", brand.colour);
  }
  $("brand-name").textContent = typeof brand.name === "string" ? brand.name : "";
  if (brand.logo) {
    $("logo").src = "/branding/logo";
    $("logo").hidden = false;
  }
  $("brand").hidden = !brand.name && !brand.logo;
}
branding();

// -- building blocks -----------------------------------------------------------------------------

function div(cls, attrs = {}, parent = null) {
  const el = document.createElement("div");
  if (cls) el.className = cls;
  for (const [k, v] of Object.entries(attrs)) el.dataset[k] = v;
  if (parent) parent.appendChild(el);
  return el;
}

function label(cls, parent, text = "") {
  const el = div(cls, { role: "label" }, parent);
  el.textContent = text;
  return el;
}

/** The page's reserved slots: slot -> {el, hand, tiles}. */
let slots = new Map();
let built = "";

function slotCard(parent, hand, slot, tiles) {
  const el = div("card", { role: "card", slot, hand, face: "" }, parent);
  slots.set(slot, { el, hand, tiles });
  return el;
}

function handBox(game, hand, slotNames, parent, opts = {}) {
  const box = div(`hand ${opts.cls || ""}`, { role: "hand", hand }, parent);
  label("name", box, opts.name || handName(game, hand));
  const row = div("slots", {}, box);
  for (const slot of slotNames) slotCard(row, hand, slot, Boolean(opts.tiles));
  label("desc", box, "");
  return box;
}

const layoutOf = (round) => new Map((round.layout || []).map((h) => [h.hand, h.slots]));

// -- one layout per game -------------------------------------------------------------------------

const BUILD = {
  "teen-patti-20-20"(game, table, hands) {
    const row = div("faceoff", {}, table);
    handBox(game, "A", hands.get("A") || ["A1", "A2", "A3"], row);
    label("vs", row, "VS");
    handBox(game, "B", hands.get("B") || ["B1", "B2", "B3"], row);
    const bets = div("bets", { role: "bets" }, table);
    for (const bet of ["player_a", "tie", "player_b", "pair_plus_a", "six_card_bonus", "pair_plus_b"]) {
      const chip = div("bet", { bet }, bets);
      label("bet-name", chip, BET_NAMES[bet] || title(bet));
      label("bet-outcome", chip, "");
    }
  },
  "three-card-mulligan"(game, table, hands) {
    const row = div("faceoff two-paths", {}, table);
    const player = div("side", {}, row);
    handBox(game, "P", hands.get("P") || [], player);
    handBox(game, "PM", hands.get("PM") || [], player, { cls: "second" });
    const middle = div("choice", {}, row);
    label("choice-title", middle, "Players' choice");
    label("choice-value", middle, "");
    label("path", middle, "").dataset.path = "stayed";
    label("path", middle, "").dataset.path = "mulliganed";
    const dealer = div("side", {}, row);
    handBox(game, "D", hands.get("D") || [], dealer);
    handBox(game, "DM", hands.get("DM") || [], dealer, { cls: "second" });
  },
  "break-poker"(game, table, hands) {
    const row = div("faceoff split-game", {}, table);
    for (const hand of ["player", "dealer"]) {
      const side = div("side", {}, row);
      handBox(game, hand, hands.get(hand) || [], side);
      const split = div("split", { hand }, side);
      label("split-title", split, hand === "player" ? "House way" : "Dealer's setting");
      const parts = div("split-parts", {}, split);
      for (const [part, n] of [["low", 2], ["high", 3]]) {
        const group = div("split-part", { part }, parts);
        label("part-name", group, part === "low" ? "Two-card hand" : "Three-card hand");
        const cards = div("slots", {}, group);
        for (let i = 0; i < n; i += 1) slotCard(cards, hand, `${hand}-${part}-${i + 1}`, false);
        label("part-desc", group, "");
      }
    }
  },
  "texas-holdem"(game, table, hands) {
    const board = div("board-row", {}, table);
    handBox(game, "board", hands.get("board") || ["F1", "F2", "F3", "T", "R"], board, { name: "Board" });
    const pot = div("pot", {}, board);
    label("pot-main", pot, "");
    label("pot-side", pot, "");
    const seats = [...hands.keys()].filter((h) => h.startsWith("seat"));
    const row = div("seats", {}, table);
    table.style.setProperty("--seats", String(Math.max(seats.length, 2)));
    for (const seat of seats) {
      const pod = div("seat", { role: "seat", seat }, row);
      handBox(game, seat, hands.get(seat), pod);
      label("stack", pod, "");
      label("action", pod, "");
      const bar = div("bar", { role: "bar", who: seat, win: "" }, pod);
      div("fill", {}, bar);
      label("pct", bar, "");
    }
  },
  "mahjong-pai-gow"(game, table, hands, round) {
    const banker = bankerOf(round);
    const positions = [...hands.keys()].filter((h) => h !== "B");
    table.style.setProperty("--positions", String(Math.max(positions.length, 2)));
    const row = div("positions", {}, table);
    for (const pos of positions) {
      const isBanker = pos === banker;
      const box = handBox(game, isBanker ? "B" : pos, isBanker ? hands.get("B") || ["Ba", "Bb"] : hands.get(pos), row, {
        tiles: true,
        name: isBanker ? `${handName(game, pos)} \u2014 Banker` : handName(game, pos),
        cls: isBanker ? "banker" : "",
      });
      box.dataset.position = pos;
      label("outcome", box, "");
    }
  },
};

const BET_NAMES = {
  player_a: "Player A",
  player_b: "Player B",
  tie: "Tie",
  pair_plus_a: "Pair Plus A",
  pair_plus_b: "Pair Plus B",
  six_card_bonus: "Six Card Bonus",
};

function bankerOf(round) {
  const bank = (round.info || {}).bank || {};
  const details = round.details || {};
  return bank.banker || details.banker || null;
}

function generic(game, table, hands) {
  const row = div("faceoff", {}, table);
  for (const [hand, names] of hands) handBox(game, hand, names, row);
}

function build(round, game) {
  const table = $("table");
  const hands = layoutOf(round);
  const key = `${game}|${JSON.stringify(round.layout || [])}|${game === "mahjong-pai-gow" ? bankerOf(round) : ""}`;
  if (key === built) return;
  built = key;
  slots = new Map();
  table.replaceChildren();
  table.dataset.game = game || "";
  body.dataset.game = game || "";
  if (!game) return;
  (BUILD[game] || generic)(game, table, hands, round);
}

// -- filling it in -------------------------------------------------------------------------------

function q(sel, root = document) {
  return root.querySelector(sel);
}

function setText(el, text) {
  if (el && el.textContent !== text) el.textContent = text;
}

function fillSlots(round) {
  const fresh = [];
  const byslot = new Map(round.cards.map((c) => [c.slot, c]));
  for (const [slot, s] of slots) {
    if (slot.includes("-low-") || slot.includes("-high-")) continue; // Break Poker's split
    updateSlot(document, s.el, byslot.get(slot) || null, fresh, { slot, hand: s.hand, tiles: s.tiles });
  }
  return fresh;
}

function fillHands(round, game) {
  const result = round.result && !round.result.voided ? round.result : null;
  const described = (result && result.hands) || {};
  const winners = new Set(String((result && result.winner) || "").split("+"));
  for (const box of document.querySelectorAll("#table [data-role='hand']")) {
    const hand = box.dataset.hand;
    const summary = described[hand];
    setText(q(".desc", box), summary ? summary.description || words(summary.category) : "");
    box.dataset.winner = String(Boolean(result) && winners.has(hand));
    const seat = box.closest("[data-role='seat']");
    if (seat) seat.dataset.winner = box.dataset.winner; // (no :has(): OBS's CEF may be older)
  }
  if (game === "teen-patti-20-20") fillBets(round);
  if (game === "three-card-mulligan") fillMulligan(round);
  if (game === "break-poker") fillSplit(round);
  if (game === "texas-holdem") fillHoldem(round);
  if (game === "mahjong-pai-gow") fillMahjong(round);
}

const OUTCOME = { win: "WIN", lose: "LOSE", push: "PUSH", refund: "RETURNED", tie: "PUSH" };

function fillBets(round) {
  // A result's settlement lines; a void's refunds come as a map of bet -> settlement.
  const settled = round.settlement;
  const lines = Array.isArray(settled)
    ? settled
    : settled && typeof settled === "object"
      ? Object.entries(settled).map(([bet, line]) => ({ ...(line || {}), bet }))
      : [];
  const byBet = new Map(lines.map((l) => [l.bet, l]));
  for (const chip of document.querySelectorAll("#table .bet")) {
    const line = byBet.get(chip.dataset.bet);
    chip.dataset.outcome = line ? line.outcome : "";
    const reason = line && line.reason && line.reason !== line.outcome ? ` \u00b7 ${words(line.reason)}` : "";
    setText(q(".bet-outcome", chip), line ? `${OUTCOME[line.outcome] || title(line.outcome)}${reason}` : "");
  }
}

function fillMulligan(round) {
  const decision = (round.decisions || []).find((d) => d.window === "mulligan");
  const choice = decision ? decision.decision.choice : null;
  setText(q(".choice-value"), choice === "mulligan" ? "MULLIGAN" : choice === "stay" ? "STAY" : "\u2014");
  q(".choice-value").dataset.choice = choice || "";
  const paths = (round.details || {}).paths || {};
  const say = (name, path) => {
    if (!path) return "";
    if (path === "not_dealt") return `${name}: not dealt`;
    return `${name}: ${winnerWords("three-card-mulligan", path.winner === "player" ? "P" : path.winner === "dealer" ? "D" : path.winner)}`;
  };
  setText(q(".path[data-path='stayed']"), say("Stay", paths.stayed));
  setText(q(".path[data-path='mulliganed']"), say("Mulligan", paths.mulliganed));
}

function fillSplit(round) {
  const details = round.details || {};
  const settings = { player: details.house_way, dealer: details.dealer_setting };
  const fresh = [];
  for (const hand of ["player", "dealer"]) {
    const setting = settings[hand] || null;
    for (const part of ["low", "high"]) {
      const cards = setting ? asList(setting[part]) : [];
      const n = part === "low" ? 2 : 3;
      for (let i = 0; i < n; i += 1) {
        const slot = `${hand}-${part}-${i + 1}`;
        const s = slots.get(slot);
        if (!s) continue;
        const card = cards[i];
        updateSlot(document, s.el, card ? { slot, hand, card, face: "up" } : null, fresh, { slot, hand });
      }
      const group = q(`.split[data-hand='${hand}'] .split-part[data-part='${part}'] .part-desc`);
      setText(group, setting ? String(setting[`${part}_hand`] || "") : "");
    }
  }
  return fresh;
}

function percent(value) {
  const n = Number(value);
  return Number.isFinite(n) ? `${Math.round(n * 100)}%` : "";
}

const STREETS = ["preflop", "flop", "turn", "river"];

function equitySource(round) {
  const secure = round.secure_equity || {};
  return Object.keys(secure).length ? secure : round.equity || {};
}

function fillHoldem(round) {
  const holdem = round.holdem || { seats: [], pots: [] };
  const seats = new Map((holdem.seats || []).map((s) => [s.seat, s]));
  const source = equitySource(round);
  const streets = STREETS.filter((name) => source[name]);
  const street = streets.length ? streets[streets.length - 1] : null;
  const shown = new Set();
  const byhand = new Map();
  for (const c of round.cards) {
    if (!byhand.has(c.hand)) byhand.set(c.hand, []);
    byhand.get(c.hand).push(c);
  }
  let barsShown = 0;
  const live = (holdem.seats || []).filter((s) => !s.folded).length;
  for (const pod of document.querySelectorAll("#table [data-role='seat']")) {
    const name = pod.dataset.seat;
    const seat = seats.get(name) || {};
    pod.dataset.folded = String(Boolean(seat.folded));
    pod.dataset.allIn = String(Boolean(seat.all_in));
    pod.dataset.button = String(holdem.button === name);
    setText(q(".stack", pod), seat.stack_text ? `${seat.stack_text}${holdem.button === name ? "  \u25cf D" : ""}` : holdem.button === name ? "\u25cf D" : "");
    setText(q(".action", pod), seat.folded ? "fold" : seat.action || "");
    // Public overlay: a seat's chances only once its hand is shown; secure-delay: every seat.
    const cards = byhand.get(name) || [];
    const open = info.mode === "secure-delay" || (cards.length >= 2 && cards.every((c) => c.face === "up" && c.card));
    // Once fewer than two seats are in, the hand is decided: no chances are shown.
    const value = street && open && !seat.folded && live >= 2 ? (source[street].seats || {})[name] : null;
    const bar = q("[data-role='bar']", pod);
    bar.hidden = !value;
    bar.dataset.win = value ? String(value.win) : "";
    if (value) {
      barsShown += 1;
      q(".fill", bar).style.width = `${Math.max(0, Math.min(1, Number(value.win) || 0)) * 100}%`;
      setText(q(".pct", bar), percent(value.win));
      shown.add(name);
    }
  }
  const eq = $("equity");
  eq.hidden = !barsShown;
  eq.dataset.street = barsShown ? street : "";
  setText(eq, barsShown ? `Win chances \u00b7 ${street === "preflop" ? "before the flop" : `after the ${street}`}` : "");
  const pots = holdem.pots || [];
  const main = pots.length ? pots[0].amount_text : holdem.pot_text;
  setText(q(".pot-main"), main ? `Pot ${main}` : "");
  const side = pots.slice(1).map((p, i) => `Side pot ${i + 1}: ${p.amount_text}`);
  setText(q(".pot-side"), side.join("  \u00b7  "));
}

function fillMahjong(round) {
  const positions = (round.details || {}).positions || {};
  for (const box of document.querySelectorAll("#table [data-role='hand']")) {
    const pos = box.dataset.position;
    const out = q(".outcome", box);
    if (!out) continue;
    const p = positions[pos];
    if (box.dataset.hand === "B") {
      setText(out, round.result && !round.result.voided ? "Banker" : "");
      continue;
    }
    out.dataset.outcome = p ? p.winner : "";
    setText(out, p ? (p.winner === "player" ? "beats the banker" : p.winner === "banker" ? "loses to the banker" : words(p.winner)) : "");
    if (round.result && !p && !box.classList.contains("banker")) setText(q(".desc", box), "");
  }
}

// -- the title and the state line ----------------------------------------------------------------

const DECIDING = {
  action: (d) => `${handName("texas-holdem", d.seat)} to act`,
  mulligan: () => "Players choose: stay or mulligan",
  setting: () => "Players set their hands",
  bank: (d) => `Bank offered to ${handName("mahjong-pai-gow", d.seat)}`,
};

function stateLine(round, view, game) {
  const result = round.result;
  if (round.halted) return { text: "Play paused \u2014 " + (round.halt_reason || "the pit boss is checking the table"), tone: "warn" };
  if (result && result.voided) return { text: "Round void \u2014 all bets returned", tone: "warn" };
  if (result) return { text: resultLine(round, game), tone: "win" };
  if (round.state === "betting_open") {
    const left = secondsLeft(round.betting_closes_at, offsetMs);
    return { text: `Place your bets${left === null ? "" : ` \u00b7 ${Math.ceil(left)} s`}`, tone: "go", left };
  }
  if (round.refused) return { text: "Card refused \u2014 the dealer replaces it", tone: "warn" };
  if (round.rescan) return { text: "Checking a card \u2014 the dealer scans it again", tone: "" };
  if (round.decision) {
    const d = round.decision;
    const left = secondsLeft(d.closes_at, offsetMs);
    const say = DECIDING[d.kind];
    return { text: `${say ? say(d) : title(d.kind)}${left === null ? "" : ` \u00b7 ${Math.ceil(left)} s`}`, tone: "go", left };
  }
  if (round.state === "dealing") return { text: "Bets closed \u00b7 dealing", tone: "" };
  if (round.state === "opening") return { text: game === "mahjong-pai-gow" ? "Offering the bank" : "Round opening", tone: "" };
  if (view.online === false) return { text: "Table offline", tone: "warn" };
  return { text: "Next round starting soon", tone: "" };
}

function resultLine(round, game) {
  const result = round.result;
  const hands = result.hands || {};
  let text = winnerWords(game, result.winner);
  if (game === "three-card-mulligan") {
    text = winnerWords(game, result.winner === "player" ? "P" : result.winner === "dealer" ? "D" : result.winner);
  }
  if (game === "break-poker" && result.winner !== "tie") {
    text = winnerWords(game, result.winner);
  }
  const top = hands[String(result.winner).split("+")[0]] || hands[result.winner === "player" ? "P" : "D"];
  if (top && result.winner !== "tie" && game !== "mahjong-pai-gow" && game !== "break-poker") text += ` \u00b7 ${top.description}`;
  if (game === "texas-holdem" && round.holdem && round.holdem.pots && round.holdem.pots.length) {
    text = `${text.split(" \u00b7 ")[0]} ${round.holdem.pots[0].amount_text}${top ? ` \u00b7 ${top.description}` : ""}`;
  }
  return text;
}

function renderResult(round, game) {
  const el = $("result");
  const result = round.result;
  el.hidden = !result;
  el.dataset.winner = result && result.winner ? result.winner : "";
  if (!result) return;
  const text = result.voided
    ? `Round void \u2014 all bets returned (${result.reason})`
    : winnerWords(game, game === "three-card-mulligan" ? { player: "P", dealer: "D" }[result.winner] || result.winner : result.winner);
  el.dataset.long = String(text.length > 30);
  setText(el, text);
}


function renderTitle(round, view, game) {
  $("game").textContent = round.game_name || view.status.game_name || "";
  $("round").textContent = round.no ? `Round ${round.no}` : "";
  $("state").dataset.state = round.halted ? "halted" : round.state;
  const line = stateLine(round, view, game);
  $("state").dataset.tone = line.tone;
  setText($("state"), line.text);
}

const RENDERS_KEPT = 5000;

function render(message) {
  const started = performance.now();
  draw(message);
  // The page's own share of scan -> pixel (bench/studio_overlay.py reports it).
  const renders = (window.studioRenders ||= []);
  renders.push(performance.now() - started);
  if (renders.length > RENDERS_KEPT) renders.splice(0, renders.length - RENDERS_KEPT);
}

function draw(message) {
  last = message;
  offsetMs = message.server_time * 1000 - Date.now();
  const view = message.view;
  const round = view.round;
  const game = round.game || view.status.game || "";
  body.dataset.round = round.id || "";
  build(round, game);
  const fresh = fillSlots(round);
  fillHands(round, game);
  renderTitle(round, view, game);
  renderResult(round, game);
  linkBanner(document, body, link, message, true);
  stampPainted(fresh);
}

function tick() {
  if (!last) return;
  const view = last.view;
  const round = view.round;
  renderTitle(round, view, round.game || view.status.game || "");
}

follow({
  ...info,
  onState: render,
  onLink(state, detail, retry) {
    link.state = state;
    link.attempt = state === "connecting" ? detail : 0;
    link.retry = retry || 0;
    linkBanner(document, body, link, state === "lost" ? null : last, true);
  },
});
setInterval(tick, 250);
