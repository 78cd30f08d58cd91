// Card and tile faces, drawn as SVG from declared data (no image files, no fonts fetched).
//
// The notation is controller/cards.py's: a card is a rank of 23456789TJQKA and a suit of
// cdhs ("As", "Td"); the joker is "JK"; a Mahjong tile is dots "1p".."9p" or the white
// dragon "wd". A tile never carries a suit glyph; "wd" is a tile, not a red "W" of diamonds.
// Everything is built with createElementNS and textContent: what a table publishes is never
// parsed as markup. Every face has the same height (the card baseline); a tile is narrower.
//
// faceNode(doc, piece, opts) -> an <svg> element:
//   data-face-kind = "card" | "joker" | "tile" | "back" | "empty" | "unknown"
//   data-suit = "s" | "h" | "d" | "c" (cards only; absent on tiles, jokers, backs)

const NS = "http://www.w3.org/2000/svg";

/** The four suits: the glyph's path in a 100x100 box, its colour, its name. */
export const SUITS = {
  s: {
    name: "spades",
    colour: "#111111",
    path:
      "M50 2 C62 22 100 40 100 62 C100 79 88 89 74 89 C64 89 57 85 53 78 C54 88 59 95 68 100 " +
      "L32 100 C41 95 46 88 47 78 C43 85 36 89 26 89 C12 89 0 79 0 62 C0 40 38 22 50 2 Z",
  },
  h: {
    name: "hearts",
    colour: "#c8102e",
    path:
      "M50 96 C22 70 0 52 0 30 C0 13 12 2 27 2 C38 2 46 9 50 18 C54 9 62 2 73 2 " +
      "C88 2 100 13 100 30 C100 52 78 70 50 96 Z",
  },
  d: { name: "diamonds", colour: "#c8102e", path: "M50 0 L88 50 L50 100 L12 50 Z" },
  c: {
    name: "clubs",
    colour: "#111111",
    circles: [
      [50, 26, 23],
      [25, 58, 23],
      [75, 58, 23],
    ],
    path: "M44 55 L56 55 L62 100 L38 100 Z",
  },
};

const RANKS = { T: "10", J: "J", Q: "Q", K: "K", A: "A" };

/** Width and height of every face's box (a card is 5:7; a tile 3.6:5 of the same height). */
export const CARD_BOX = { w: 250, h: 350 };
export const TILE_BOX = { w: 256, h: 350 };

/** What a piece of notation is: {kind, rank, suit, dots}; never throws. */
export function parsePiece(piece) {
  if (piece === null || piece === undefined || piece === "") return { kind: "back" };
  const text = String(piece);
  if (text === "JK") return { kind: "joker" };
  if (text === "wd") return { kind: "tile", dragon: true };
  let m = /^([1-9])p$/.exec(text);
  if (m) return { kind: "tile", dots: Number(m[1]) };
  m = /^([2-9TJQKA])([cdhs])$/.exec(text);
  if (m) return { kind: "card", rank: RANKS[m[1]] || m[1], suit: m[2] };
  return { kind: "unknown", text: text.slice(0, 6) };
}

/** A piece in words, for a label or a screen reader ("ten of diamonds", "3 dots tile"). */
export function pieceWords(piece) {
  const p = parsePiece(piece);
  const names = { A: "ace", K: "king", Q: "queen", J: "jack" };
  if (p.kind === "card") return `${names[p.rank] || p.rank} of ${SUITS[p.suit].name}`;
  if (p.kind === "joker") return "joker";
  if (p.kind === "tile") return p.dragon ? "white dragon tile" : `${p.dots} dots tile`;
  if (p.kind === "back") return "face down";
  return "unknown piece";
}

function el(doc, name, attrs, parent) {
  const node = doc.createElementNS(NS, name);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (parent) parent.appendChild(node);
  return node;
}

function text(doc, parent, value, attrs) {
  const node = el(doc, "text", attrs, parent);
  node.textContent = value;
  return node;
}

function suitGlyph(doc, parent, suit, x, y, size) {
  const s = SUITS[suit];
  const g = el(doc, "g", { transform: `translate(${x} ${y}) scale(${size / 100})`, fill: s.colour }, parent);
  el(doc, "path", { d: s.path }, g);
  for (const [cx, cy, r] of s.circles || []) el(doc, "circle", { cx, cy, r }, g);
  return g;
}

function svgRoot(doc, box, kind, label) {
  const svg = el(doc, "svg", {
    viewBox: `0 0 ${box.w} ${box.h}`,
    class: `face face-${kind}`,
    role: "img",
    "aria-label": label,
    "data-face-kind": kind,
  });
  return svg;
}

const FONT = "DejaVu Sans, Liberation Sans, Arial, sans-serif";

function cardFace(doc, p, label) {
  const svg = svgRoot(doc, CARD_BOX, "card", label);
  svg.setAttribute("data-suit", p.suit);
  el(doc, "rect", { x: 3, y: 3, width: 244, height: 344, rx: 22, fill: "#ffffff", stroke: "#2b2b2b", "stroke-width": 5 }, svg);
  const colour = SUITS[p.suit].colour;
  // Broadcast style: the rank large at the top left, the suit large at the bottom right.
  const wide = p.rank === "10";
  text(doc, svg, p.rank, {
    x: wide ? 14 : 22, y: 150, fill: colour, "font-family": FONT, "font-weight": 700,
    "font-size": wide ? 150 : 170, "letter-spacing": wide ? -14 : 0,
  });
  suitGlyph(doc, svg, p.suit, 26, 178, 62);
  suitGlyph(doc, svg, p.suit, 104, 196, 128);
  return svg;
}

function jokerFace(doc, label) {
  const svg = svgRoot(doc, CARD_BOX, "joker", label);
  el(doc, "rect", { x: 3, y: 3, width: 244, height: 344, rx: 22, fill: "#ffffff", stroke: "#2b2b2b", "stroke-width": 5 }, svg);
  // A jester's star and the word, so the joker reads as a joker at a glance.
  const star = [];
  for (let i = 0; i < 10; i += 1) {
    const r = i % 2 ? 34 : 82;
    const a = (Math.PI / 5) * i - Math.PI / 2;
    star.push(`${(125 + r * Math.cos(a)).toFixed(1)},${(205 + r * Math.sin(a)).toFixed(1)}`);
  }
  el(doc, "polygon", { points: star.join(" "), fill: "#6a1b9a" }, svg);
  el(doc, "circle", { cx: 125, cy: 205, r: 18, fill: "#ffd600" }, svg);
  text(doc, svg, "JOKER", {
    x: 125, y: 92, "text-anchor": "middle", fill: "#6a1b9a", "font-family": FONT,
    "font-weight": 700, "font-size": 58, "letter-spacing": 2,
  });
  return svg;
}

// Where the dots go on a tile, in a 200x270 field (standard arrangements).
const DOTS = {
  1: [[100, 135]],
  2: [[100, 70], [100, 200]],
  3: [[45, 55], [100, 135], [155, 215]],
  4: [[55, 70], [145, 70], [55, 200], [145, 200]],
  5: [[50, 55], [150, 55], [100, 135], [50, 215], [150, 215]],
  6: [[60, 45], [140, 45], [60, 135], [140, 135], [60, 225], [140, 225]],
  7: [[40, 35], [100, 65], [160, 95], [60, 160], [140, 160], [60, 235], [140, 235]],
  8: [[60, 35], [140, 35], [60, 102], [140, 102], [60, 168], [140, 168], [60, 235], [140, 235]],
  9: [[40, 45], [100, 45], [160, 45], [40, 135], [100, 135], [160, 135], [40, 225], [100, 225], [160, 225]],
};
const DOT_COLOUR = { blue: "#1f4e9e", green: "#1b7a3a", red: "#c8102e" };

function dotColour(n, i) {
  if (n === 1) return DOT_COLOUR.red;
  if (n === 5 && i === 2) return DOT_COLOUR.red;
  if (n === 9 && i >= 3 && i < 6) return DOT_COLOUR.red;
  if (n === 7 && i < 3) return DOT_COLOUR.green;
  if (n === 7) return DOT_COLOUR.red;
  if (n === 3) return [DOT_COLOUR.blue, DOT_COLOUR.red, DOT_COLOUR.green][i];
  if (n === 6 && i >= 2) return DOT_COLOUR.red;
  return i % 2 ? DOT_COLOUR.green : DOT_COLOUR.blue;
}

function tileBody(doc, svg) {
  // The tile's green back shows as its thickness, below and to the right.
  el(doc, "rect", { x: 14, y: 14, width: 238, height: 333, rx: 26, fill: "#1b6b3a" }, svg);
  el(doc, "rect", { x: 3, y: 3, width: 238, height: 333, rx: 26, fill: "#fbf6e6", stroke: "#8d8264", "stroke-width": 4 }, svg);
}

function tileFace(doc, p, label) {
  const svg = svgRoot(doc, TILE_BOX, "tile", label);
  svg.setAttribute("data-tile", p.dragon ? "wd" : `${p.dots}p`);
  tileBody(doc, svg);
  if (p.dragon) {
    // The white dragon: a blue frame (the tile's own face), no dots, no suit.
    el(doc, "rect", { x: 40, y: 40, width: 164, height: 259, rx: 8, fill: "none", stroke: "#1f4e9e", "stroke-width": 16 }, svg);
    el(doc, "rect", { x: 62, y: 62, width: 120, height: 215, rx: 4, fill: "none", stroke: "#1f4e9e", "stroke-width": 6 }, svg);
    return svg;
  }
  const field = el(doc, "g", { transform: "translate(22 34)" }, svg);
  const r = p.dots === 1 ? 70 : p.dots <= 4 ? 36 : p.dots <= 6 ? 31 : 27;
  DOTS[p.dots].forEach(([cx, cy], i) => {
    const colour = dotColour(p.dots, i);
    el(doc, "circle", { cx, cy, r, fill: colour }, field);
    el(doc, "circle", { cx, cy, r: r * 0.62, fill: "#fbf6e6" }, field);
    el(doc, "circle", { cx, cy, r: r * 0.34, fill: colour }, field);
  });
  return svg;
}

function backFace(doc, label) {
  const svg = svgRoot(doc, CARD_BOX, "back", label);
  el(doc, "rect", { x: 3, y: 3, width: 244, height: 344, rx: 22, fill: "#ffffff", stroke: "#2b2b2b", "stroke-width": 5 }, svg);
  el(doc, "rect", { x: 20, y: 20, width: 210, height: 310, rx: 12, fill: "var(--brand, #1a4d8f)" }, svg);
  const g = el(doc, "g", { stroke: "rgba(255,255,255,0.35)", "stroke-width": 6 }, svg);
  for (let i = -300; i < 300; i += 36) {
    el(doc, "line", { x1: 20 + i, y1: 20, x2: 330 + i, y2: 330 }, g);
    el(doc, "line", { x1: 230 - i, y1: 20, x2: -80 - i, y2: 330 }, g);
  }
  // The lines overrun the inner panel: a white border covers them at the edge.
  el(doc, "rect", { x: 11, y: 11, width: 228, height: 328, rx: 16, fill: "none", stroke: "#ffffff", "stroke-width": 18 }, svg);
  el(doc, "rect", { x: 3, y: 3, width: 244, height: 344, rx: 22, fill: "none", stroke: "#2b2b2b", "stroke-width": 5 }, svg);
  return svg;
}

function emptyFace(doc, box) {
  const svg = svgRoot(doc, box, "empty", "not dealt yet");
  el(doc, "rect", {
    x: 6, y: 6, width: box.w - 12, height: box.h - 12, rx: 22, fill: "rgba(255,255,255,0.08)",
    stroke: "rgba(255,255,255,0.55)", "stroke-width": 6, "stroke-dasharray": "18 14",
  }, svg);
  return svg;
}

function unknownFace(doc, p) {
  const svg = svgRoot(doc, CARD_BOX, "unknown", `piece ${p.text}`);
  el(doc, "rect", { x: 3, y: 3, width: 244, height: 344, rx: 22, fill: "#eeeeee", stroke: "#2b2b2b", "stroke-width": 5 }, svg);
  text(doc, svg, p.text, { x: 125, y: 200, "text-anchor": "middle", fill: "#333", "font-family": FONT, "font-size": 60 });
  return svg;
}

/**
 * The face of one piece as an <svg>.
 * @param doc the document
 * @param piece notation ("As", "JK", "5p", "wd"), or null/"" for a face-down piece
 * @param opts {empty: true} for a slot not dealt yet; {tiles: true} for a tile game's slot
 */
export function faceNode(doc, piece, opts = {}) {
  if (opts.empty) return emptyFace(doc, opts.tiles ? TILE_BOX : CARD_BOX);
  const p = parsePiece(piece);
  const label = pieceWords(piece);
  if (p.kind === "card") return cardFace(doc, p, label);
  if (p.kind === "joker") return jokerFace(doc, label);
  if (p.kind === "tile") return tileFace(doc, p, label);
  if (p.kind === "back") return backFace(doc, label);
  return unknownFace(doc, p);
}
