// The studio pages' shared part: the socket (state first, then updates; reconnects with
// back-off and reads the state again), the server clock offset, card glyphs, timestamps.

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

/** A card's notation as rank and suit glyph ("Td" -> "10", "\u2666", red). */
export function glyph(card) {
  if (!card) return { rank: "", suit: "", red: false, text: "" };
  const suit = card.slice(-1).toLowerCase();
  if (card.length >= 2 && SUITS[suit]) {
    let rank = card.slice(0, -1).toUpperCase();
    if (rank === "T") rank = "10";
    return { rank, suit: SUITS[suit], red: RED.has(suit), text: card };
  }
  return { rank: card, suit: "", red: false, text: card }; // tiles and other pieces: as named
}

/** A card element: data-slot, data-card (empty while hidden), data-face. */
export function cardElement(doc, item, big) {
  const el = doc.createElement("div");
  el.className = big ? "card big" : "card";
  el.dataset.slot = item.slot;
  el.dataset.face = item.card ? "up" : "hidden";
  el.dataset.card = item.card || "";
  if (item.secure) el.dataset.secure = "true";
  const g = glyph(item.card);
  if (g.red) el.classList.add("red");
  // Built node by node: what a table publishes is never parsed as HTML.
  const part = (name, text) => {
    const span = doc.createElement("span");
    span.className = name;
    span.textContent = text;
    el.appendChild(span);
  };
  if (item.card) {
    part("rank", g.rank);
    part("suit", g.suit);
  } else {
    part("back", "");
  }
  const label = doc.createElement("span");
  label.className = "slot";
  label.textContent = item.slot;
  el.appendChild(label);
  return el;
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

/** The banner of a page: its link to the studio, the studio's feed, the table's status. */
export function linkBanner(doc, body, link, message) {
  const banner = doc.getElementById("banner");
  body.dataset.conn = link.state;
  let text = "";
  if (link.state === "lost") {
    text = `CONNECTION LOST \u2014 reconnecting in ${(link.retry / 1000).toFixed(1)} s`;
  } else if (link.state === "connecting" && link.attempt > 0) {
    text = "RECONNECTING\u2026";
  } else if (message && !message.feed.up) {
    text = "FEED LOST \u2014 the studio has no broker connection";
  } else if (message && message.view.online === false) {
    const reason = message.view.status.reason ? `: ${message.view.status.reason}` : "";
    text = `TABLE OFFLINE${reason}`;
  }
  body.dataset.feed = message ? (message.feed.up ? "up" : "down") : "unknown";
  body.dataset.online = message ? String(message.view.online) : "unknown";
  banner.textContent = text;
  banner.hidden = !text;
}
