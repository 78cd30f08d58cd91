"""What the page tests check in the DOM: geometry by bounding boxes, and the words shown.

:data:`CHECK_PAGE` runs in a page and returns a list of problems (empty: fine), each a short
sentence naming the elements. It reads the stable data attributes the pages document at the top
of overlay.js and dealer.js:

* every ``[data-role="card"]`` inside the viewport, and inside ``[data-title-safe]`` when the
  page has one (the overlay's title-safe area);
* no two cards overlap, and no visible ``[data-role="label"]`` overlaps a card;
* the cards of one row (``.slots``) end on one baseline;
* no visible label is covered by another element (the element at its centre is the label or
  inside it), and each fits its box (no text cut or spilling over a neighbour);
* no raw token in the visible text: ``None``, ``null``, ``undefined``, ``NaN``,
  ``snake_case`` ids (``all_in``), a lower-case seat id (``seat3``), a game slug.
"""

from __future__ import annotations

from typing import Any

from playwright.async_api import Page

CHECK_PAGE = """
() => {
  const problems = [];
  const vw = window.innerWidth, vh = window.innerHeight;
  const visible = (el) => {
    if (el.closest('[hidden]')) return false;
    const style = getComputedStyle(el);
    if (style.visibility === 'hidden' || style.display === 'none') return false;
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0;
  };
  const name = (el) => `${el.id ? '#' + el.id : el.className || el.tagName}` +
    `[${el.dataset.slot || el.dataset.hand || ''}] "${(el.textContent || '').trim().slice(0, 30)}"`;
  const overlap = (a, b) => {
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    return w > 1 && h > 1;
  };
  const cards = [...document.querySelectorAll('[data-role="card"]')].filter(visible);
  const boxes = cards.map((el) => [el, el.getBoundingClientRect()]);
  const safe = document.querySelector('[data-title-safe]');
  const area = safe ? safe.getBoundingClientRect() : {left: 0, top: 0, right: vw, bottom: vh};
  for (const [el, r] of boxes) {
    if (r.left < -0.5 || r.top < -0.5 || r.right > vw + 0.5 || r.bottom > vh + 0.5) {
      problems.push(`card ${name(el)} outside the viewport`);
    }
    if (r.left < area.left - 0.5 || r.top < area.top - 0.5 || r.right > area.right + 0.5 ||
        r.bottom > area.bottom + 0.5) {
      problems.push(`card ${name(el)} outside the title-safe area`);
    }
  }
  for (let i = 0; i < boxes.length; i += 1) {
    for (let j = i + 1; j < boxes.length; j += 1) {
      if (overlap(boxes[i][1], boxes[j][1])) {
        problems.push(`cards ${name(boxes[i][0])} and ${name(boxes[j][0])} overlap`);
      }
    }
  }
  const labels = [...document.querySelectorAll('[data-role="label"]')]
    .filter(visible).filter((el) => (el.textContent || '').trim());
  for (const label of labels) {
    const r = label.getBoundingClientRect();
    for (const [card, c] of boxes) {
      if (label.contains(card) || card.contains(label)) continue;
      if (overlap(r, c)) problems.push(`label ${name(label)} overlaps card ${name(card)}`);
    }
    if (label.scrollWidth > label.clientWidth + 1 && getComputedStyle(label).display !== 'inline') {
      problems.push(`label ${name(label)} does not fit its box (cut or spilling over)`);
    }
    const x = Math.min(Math.max(r.left + r.width / 2, 0), vw - 1);
    const y = Math.min(Math.max(r.top + r.height / 2, 0), vh - 1);
    const top = document.elementFromPoint(x, y);
    if (top && !label.contains(top) && !top.contains(label)) {
      problems.push(`label ${name(label)} is covered by ${name(top)}`);
    }
    if (r.right > vw + 0.5 || r.bottom > vh + 0.5 || r.left < -0.5 || r.top < -0.5) {
      problems.push(`label ${name(label)} outside the viewport`);
    }
  }
  // One baseline: the cards of a hand (jokers and tiles too) end at the same height.
  const rows = new Map();
  for (const [el, r] of boxes) {
    const row = el.parentElement.closest('.slots') || el.parentElement;
    if (!rows.has(row)) rows.set(row, []);
    rows.get(row).push([el, r]);
  }
  for (const members of rows.values()) {
    const bottoms = members.map(([, r]) => r.bottom);
    if (Math.max(...bottoms) - Math.min(...bottoms) > 1.5) {
      problems.push(`cards ${members.map(([el]) => name(el)).join(', ')} off one baseline`);
    }
  }
  const text = document.body.innerText;
  const raw = [
    /\\b(None|null|undefined|NaN)\\b/, /\\b[a-z]+_[a-z_]+\\b/, /\\bseat\\d+\\b/,
    /teen-patti|three-card-mulligan|break-poker|texas-holdem|mahjong-pai-gow/,
  ];
  for (const pattern of raw) {
    const m = pattern.exec(text);
    if (m) problems.push(`raw token ${JSON.stringify(m[0])} in the visible text`);
  }
  return problems;
}
"""
"""A page's problems (see the module notes), as sentences."""


async def page_problems(page: Page) -> list[str]:
    """What :data:`CHECK_PAGE` finds in ``page`` now."""
    found: list[Any] = await page.evaluate(CHECK_PAGE)
    return [str(problem) for problem in found]
