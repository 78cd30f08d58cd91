// The studio pages' shared part: the socket (state first, then updates; reconnects with
// back-off and reads the state again), the server clock offset, card faces, timestamps,
// the words people read for the game's tokens.
import { faceNode, parsePiece, pieceWords } from "./faces.js";

const SUITS = { s: "\u2660", h: "\u2665", d: "\u2666", c: "\u2663" };
const RED = new Set(["h", "d"]);

/** The table id and the page's mode, from the URL (/tables/{id}/{page}?mode=...). */
export function pageInfo() {
  const parts = location.pathname.split("/").filter(Boolean);
  const table = decodeURIComponent(parts[1] || "");
  const params = new URLSearchParams(location.search);
  const mode = params.get("mode") === "secure-delay" ? "secure-delay" : "public";
  return { table, mode, token: params.get("token") || "" };
}

/**
 * A card's notation as rank and suit glyph ("Td" -> "10", "\u2666", red). Only a card of the
 * notation has a suit: a tile ("wd", "5p"), the joker and anything else have none.
 */
export function glyph(card) {
  if (!card) return { rank: "", suit: "", red: false, text: "" };
  const piece = parsePiece(card);
  if (piece.kind === "card") {
    return { rank: piece.rank, suit: SUITS[piece.suit], red: RED.has(piece.suit), text: card };
  }
  return { rank: card, suit: "", red: false, text: card }; // tiles, the joker: as named
}

/** The cards a holder shows now, by slot (to keep their paint stamps across a redraw). */
export function cardsBySlot(holder) {
  return new Map([...holder.querySelectorAll(".card")].map((c) => [c.dataset.slot, c]));
}

/**
 * A card element for a redraw: the same card as before keeps its paint stamp; a card newly
 * shown is pushed to `fresh` (stamped once painted, see stampPainted).
 */
export function redrawnCard(doc, item, before, fresh) {
  const el = cardElement(doc, item, false);
  const old = before.get(item.slot);
  if (old && old.dataset.card === el.dataset.card) {
    el.dataset.paintedAt = old.dataset.paintedAt || "";
  } else if (item.card) {
    fresh.push(el);
  }
  return el;
}

/**
 * A card element: data-role="card", data-slot, data-hand, data-card (empty while hidden or
 * not dealt), data-face ("up", "hidden" or "empty": a slot reserved, not dealt yet) and
 * data-kind (the face: "card", "joker", "tile", "back", "empty"). Its face is an SVG
 * (faces.js), built node by node: what a table publishes is never parsed as HTML.
 */
export function cardElement(doc, item, big, opts = {}) {
  const el = doc.createElement("div");
  el.className = big ? "card big" : "card";
  el.dataset.role = "card";
  fillCard(doc, el, item, opts);
  return el;
}

/** (Re)draws a card element's face for `item` (null: the slot is not dealt yet). */
export function fillCard(doc, el, item, opts = {}) {
  const dealt = Boolean(item);
  el.dataset.slot = item ? item.slot : opts.slot || "";
  el.dataset.hand = (item && item.hand) || opts.hand || "";
  el.dataset.face = !dealt ? "empty" : item.card ? "up" : "hidden";
  el.dataset.card = (item && item.card) || "";
  if (item && item.secure) el.dataset.secure = "true";
  else delete el.dataset.secure;
  // A card the pit boss entered by hand (its reader was dead): marked on every page.
  if (item && item.manual) el.dataset.manual = "true";
  else delete el.dataset.manual;
  const face = faceNode(doc, item ? item.card : null, { empty: !dealt, tiles: opts.tiles });
  el.dataset.kind = face.getAttribute("data-face-kind");
  el.classList.toggle("tile", el.dataset.kind === "tile" || (!dealt && Boolean(opts.tiles)));
  el.title = dealt ? pieceWords(item.card) + (item.manual ? " (entered by hand)" : "") : "";
  el.replaceChildren(face);
  if (item && item.manual) {
    const mark = doc.createElement("span");
    mark.className = "manual";
    mark.dataset.role = "manual";
    mark.textContent = "by hand";
    el.append(mark);
  }
}

/**
 * Keeps a reserved slot's card element in step with the state: redrawn only when what it
 * shows changed; a card newly shown goes to `fresh` (stamped once painted).
 */
export function updateSlot(doc, el, item, fresh, opts = {}) {
  const face = !item ? "empty" : item.card ? "up" : "hidden";
  const card = (item && item.card) || "";
  const manual = item && item.manual ? "true" : undefined;
  if (
    el.dataset.face === face && el.dataset.card === card && el.dataset.slot
    && el.dataset.manual === manual
  ) return;
  fillCard(doc, el, item, opts);
  el.dataset.paintedAt = "";
  if (card) fresh.push(el);
}

/** Now on the machine's clock, in epoch milliseconds (what the benchmark compares). */
export function nowMs() {
  return performance.timeOrigin + performance.now();
}

const PAINTS_KEPT = 5000;

/**
 * In the frame after rendering, stamp each card element newly shown (data-painted-at, epoch
 * ms on the machine's clock), and keep the stamps in window.studioPaints (the last 5000:
 * bench/studio_overlay.py reads them).
 */
export function stampPainted(elements) {
  if (!elements.length) return;
  const round = document.body.dataset.round || "";
  requestAnimationFrame(() => {
    const at = nowMs();
    const paints = (window.studioPaints ||= []);
    for (const el of elements) {
      el.dataset.paintedAt = at.toFixed(3);
      paints.push({ round, slot: el.dataset.slot, card: el.dataset.card, at });
    }
    if (paints.length > PAINTS_KEPT) paints.splice(0, paints.length - PAINTS_KEPT);
  });
}

/**
 * Follows a table's socket. onState(message) gets each state message (the first after every
 * (re)connection is the whole current state); onLink(state, detail) gets "connecting",
 * "open" or "lost". Reconnects by itself with a capped, jittered back-off.
 */
export function follow({ table, mode, token, onState, onLink }) {
  let attempt = 0;
  let socket = null;
  const path = `/ws/tables/${encodeURIComponent(table)}/${mode}`;
  const query = mode === "secure-delay" && token ? `?token=${encodeURIComponent(token)}` : "";

  function connect() {
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    onLink("connecting", attempt);
    socket = new WebSocket(`${scheme}://${location.host}${path}${query}`);
    socket.onopen = () => {
      attempt = 0;
      onLink("open", 0);
    };
    socket.onmessage = (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      if (message.type === "state") onState(message);
    };
    socket.onclose = (event) => {
      attempt += 1;
      const delay = Math.min(5000, 250 * 2 ** Math.min(attempt, 5)) * (0.5 + Math.random() / 2);
      onLink("lost", `${event.code}${event.reason ? ": " + event.reason : ""}`, delay);
      setTimeout(connect, delay);
    };
  }
  connect();
  return () => socket && socket.close();
}

/** Seconds left until an ISO time, on the server's clock (offset in ms: server - page). */
export function secondsLeft(iso, offsetMs) {
  if (!iso) return null;
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return null;
  return Math.max(0, (at - (Date.now() + offsetMs)) / 1000);
}

/**
 * The banner of a page: its link to the studio, the studio's feed, the table's status.
 * `viewer`: the overlay's words, for a stream's audience (no codes, no internals).
 */
export function linkBanner(doc, body, link, message, viewer = false) {
  const banner = doc.getElementById("banner");
  body.dataset.conn = link.state;
  let text = "";
  let state = "";
  if (link.state === "lost") {
    state = "conn";
    text = viewer
      ? "Live data paused \u2014 reconnecting"
      : `CONNECTION LOST \u2014 reconnecting in ${(link.retry / 1000).toFixed(1)} s`;
  } else if (link.state === "connecting" && link.attempt > 0) {
    state = "conn";
    text = viewer ? "Live data paused \u2014 reconnecting" : "RECONNECTING\u2026";
  } else if (message && !message.feed.up) {
    state = "feed";
    text = viewer
      ? "Live data paused \u2014 the table's feed is reconnecting"
      : "FEED LOST \u2014 the studio has no broker connection";
  } else if (message && message.view.online === false) {
    state = "offline";
    const reason = message.view.status.reason ? `: ${message.view.status.reason}` : "";
    text = viewer ? "Table offline \u2014 the game resumes shortly" : `TABLE OFFLINE${reason}`;
  }
  body.dataset.feed = message ? (message.feed.up ? "up" : "down") : "unknown";
  body.dataset.online = message ? String(message.view.online) : "unknown";
  banner.dataset.state = state;
  banner.textContent = text;
  banner.hidden = !text;
}

/** A token as words ("pair_plus_a" -> "pair plus a"); text, never markup. */
export function words(token) {
  return String(token ?? "").replace(/[_-]+/g, " ").trim();
}

/** Capitalised words ("six_card_bonus" -> "Six Card Bonus"). */
export function title(token) {
  return words(token).replace(/\b\w/g, (c) => c.toUpperCase());
}

/** A hand's name for people, by game ("seat3" -> "Seat 3", "B" -> "Banker"...). */
export function handName(game, hand) {
  const names = {
    "teen-patti-20-20": { A: "Player A", B: "Player B" },
    "three-card-mulligan": { P: "Player", D: "Dealer", PM: "Mulligan hand", DM: "Dealer's second hand" },
    "break-poker": { player: "Player", dealer: "Dealer" },
    "texas-holdem": { board: "Board" },
    "mahjong-pai-gow": { B: "Banker" },
  };
  const known = (names[game] || {})[hand];
  if (known) return known;
  let m = /^seat(\d+)$/.exec(hand || "");
  if (m) return `Seat ${m[1]}`;
  m = /^P(\d+)$/.exec(hand || "");
  if (m && game === "mahjong-pai-gow") return `Position ${m[1]}`;
  return title(hand);
}

/** "a", "a and b", "a, b and c". */
export function listWords(items) {
  return items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`;
}

/** A result's winner in words ("A" -> "Player A wins", "P2+P4" -> "Positions 2 and 4 beat the banker"). */
export function winnerWords(game, winner) {
  if (!winner) return "";
  if (winner === "tie") return "Tie";
  if (winner === "void") return "Round void \u2014 all bets returned";
  const hands = String(winner).split("+");
  if (game === "mahjong-pai-gow") {
    if (winner === "B") return "Banker wins every hand";
    const numbers = hands.map((h) => (/^P(\d+)$/.exec(h) || [])[1]);
    if (numbers.every(Boolean)) {
      const many = numbers.length > 1;
      return `Position${many ? "s" : ""} ${listWords(numbers)} beat${many ? "" : "s"} the banker`;
    }
  }
  const names = hands.map((hand) => handName(game, hand));
  return names.length > 1 ? `${listWords(names)} split the pot` : `${names[0]} wins`;
}

/** A setting's card list in words-free notation order, for the house way split. */
export function asList(value) {
  return Array.isArray(value) ? value.filter((v) => typeof v === "string") : [];
}
