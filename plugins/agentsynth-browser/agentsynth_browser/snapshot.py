"""A compact text snapshot of a page, with element ids the agent can refer to.

The page is walked in document order. Visible text is kept, one line per block
element; every element one can act on (links, buttons, inputs, selects,
checkboxes, ARIA widgets) becomes ``[eN] role "name"`` plus its state
(``value=``, ``checked``, the options of a select). ``eN`` is written to the
element's ``data-agent-id`` attribute, so it stays stable while the page lives
(new elements get new numbers) and tools find it with a plain selector. The
same page gives the same ids on every run, which keeps trajectories
reproducible.
"""

from __future__ import annotations

import re

ID_ATTR = "data-agent-id"
ID_RE = re.compile(r"^e\d+$")

SNAPSHOT_JS = r"""
(root) => {
  const ATTR = "data-agent-id";
  const SKIP = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEMPLATE", "HEAD", "META", "LINK", "SVG", "IFRAME"]);
  const BLOCK = new Set(["P", "DIV", "SECTION", "ARTICLE", "HEADER", "FOOTER", "NAV", "MAIN", "ASIDE", "UL",
    "OL", "LI", "TABLE", "THEAD", "TBODY", "TFOOT", "TR", "FORM", "FIELDSET", "LEGEND", "H1", "H2", "H3", "H4",
    "H5", "H6", "BR", "HR", "DL", "DT", "DD", "BLOCKQUOTE", "PRE", "FIGURE", "FIGCAPTION", "DETAILS", "DIALOG",
    "CAPTION", "BODY", "LABEL"]);
  const ROLES = new Set(["button", "link", "checkbox", "radio", "tab", "menuitem", "option", "switch",
    "textbox", "combobox", "searchbox", "slider", "spinbutton"]);
  if (window.__agentNextId === undefined) window.__agentNextId = 1;
  // bounded whatever the page holds: what crosses to Python is at most MAX_LINES short lines
  const MAX_LINES = 5000, MAX_LINE = 400, FULL = {};
  const lines = [];
  let cur = "";
  const clean = (s) => (s || "").replace(/\s+/g, " ").trim();
  const push = (s) => {
    s = clean(s);
    if (s) cur += (cur && !cur.endsWith(" ") ? " " : "") + s;
    if (cur.length > 4 * MAX_LINE) cur = cur.slice(0, 4 * MAX_LINE);
  };
  const flush = (prefix) => {
    const t = clean(cur);
    if (t) {
      if (lines.length >= MAX_LINES) throw FULL;
      lines.push(t.length > MAX_LINE ? t.slice(0, MAX_LINE - 3) + "..." : t);
    }
    cur = prefix || "";
  };
  const visible = (el) => {
    if (el.hidden) return false;
    if (typeof el.checkVisibility === "function") {
      if (!el.checkVisibility({visibilityProperty: true})) return false;
    } else {
      const st = getComputedStyle(el);
      if (st.display === "none" || st.visibility === "hidden") return false;
    }
    return el.getAttribute("aria-hidden") !== "true";
  };
  const labelOf = (el) => {
    const aria = el.getAttribute("aria-label");
    if (aria) return clean(aria);
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const t = by.split(/\s+/).map((id) => document.getElementById(id)).filter(Boolean)
        .map((n) => n.innerText || n.textContent).join(" ");
      if (clean(t)) return clean(t);
    }
    if (el.labels && el.labels.length) {
      const t = Array.from(el.labels).map((l) => {
        const c = l.cloneNode(true);
        c.querySelectorAll("select,textarea,input,button").forEach((n) => n.remove());
        return c.textContent;
      }).join(" ");
      if (clean(t)) return clean(t);
    }
    return clean(el.getAttribute("placeholder") || el.getAttribute("title") || el.getAttribute("name") || "");
  };
  const roleOf = (el) => {
    const r = el.getAttribute("role");
    if (r && ROLES.has(r)) return r;
    const tag = el.tagName;
    if (tag === "A" && el.hasAttribute("href")) return "link";
    if (tag === "BUTTON" || tag === "SUMMARY") return "button";
    if (tag === "SELECT") return "select";
    if (tag === "TEXTAREA") return "textbox";
    if (tag === "INPUT") {
      const t = (el.getAttribute("type") || "text").toLowerCase();
      if (t === "hidden") return null;
      if (["submit", "button", "reset", "image"].includes(t)) return "button";
      if (t === "checkbox" || t === "radio") return t;
      if (t === "search") return "searchbox";
      if (t === "number") return "spinbutton";
      if (t === "range") return "slider";
      return "textbox";
    }
    return null;
  };
  const idOf = (el) => {
    let id = el.getAttribute(ATTR);
    if (!id) { id = "e" + (window.__agentNextId++); el.setAttribute(ATTR, id); }
    return id;
  };
  const describe = (el, role) => {
    const id = idOf(el);
    let name;
    if (role === "textbox" || role === "searchbox" || role === "spinbutton" || role === "slider"
        || role === "select" || role === "checkbox" || role === "radio" || role === "combobox") {
      name = labelOf(el);
    } else if (el.tagName === "INPUT") {
      name = clean(el.value || el.getAttribute("aria-label") || "");
    } else {
      name = clean(el.getAttribute("aria-label") || el.innerText || el.textContent || el.getAttribute("title") || "");
    }
    let s = `[${id}] ${role}` + (name ? ` "${name.slice(0, 80)}"` : "");
    if (role === "textbox" || role === "searchbox" || role === "spinbutton" || role === "slider") {
      const t = (el.getAttribute("type") || "").toLowerCase();
      const v = t === "password" ? (el.value ? "********" : "") : el.value;
      s += ` value="${clean(v).slice(0, 80)}"`;
      if (el.required) s += " required";
    } else if (role === "select") {
      const opts = Array.from(el.options);
      const sel = opts.filter((o) => o.selected).map((o) => clean(o.label || o.text));
      s += ` selected="${sel.join(", ")}"`;
      const shown = opts.slice(0, 15).map((o) => clean(o.label || o.text));
      s += ` options=[${shown.join(" | ")}${opts.length > 15 ? ` | … ${opts.length - 15} more` : ""}]`;
    } else if (role === "checkbox" || role === "radio" || role === "switch") {
      const on = el.checked !== undefined ? el.checked : el.getAttribute("aria-checked") === "true";
      s += on ? " checked" : " unchecked";
    }
    if (el.disabled) s += " disabled";
    return s;
  };
  const walk = (node, depth) => {
    if (node.nodeType === Node.TEXT_NODE) { push(node.nodeValue); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node;
    if (SKIP.has(el.tagName.toUpperCase())) return;
    if (!visible(el)) return;
    const tag = el.tagName.toUpperCase();
    const role = roleOf(el);
    if (role) {
      const block = BLOCK.has(tag);
      if (block) flush();
      push(describe(el, role));
      if (block) flush();
      // a link or button wrapping other controls still exposes them
      if (role === "link" || role === "button") {
        for (const child of el.querySelectorAll("input,select,textarea,button,a[href]")) walk(child, depth + 1);
      }
      return;
    }
    if (tag === "LABEL" && el.control) {
      // the control carries the label as its name: keep only the elements inside the label
      flush();
      for (const child of el.children) walk(child, depth + 1);
      flush();
      return;
    }
    const block = BLOCK.has(tag);
    if (block) {
      let prefix = "";
      if (/^H[1-6]$/.test(tag)) prefix = "#".repeat(Number(tag[1])) + " ";
      else if (tag === "LI") prefix = "- ";
      flush(prefix);
    }
    if (tag === "TD" || tag === "TH") { if (clean(cur)) push("|"); }
    if (tag === "IMG") { const alt = clean(el.getAttribute("alt")); if (alt) push(`[image: ${alt}]`); }
    for (const child of el.childNodes) walk(child, depth + 1);
    if (block) flush();
  };
  try {
    walk(root || document.body, 0);
    flush();
  } catch (e) {
    if (e !== FULL) throw e;
    lines.push(`[... the page is longer than ${MAX_LINES} lines; the rest is not shown]`);
  }
  return {title: String(document.title).slice(0, 200), lines};
}
"""



def selector_for(element: str) -> str:
    """A Playwright selector for an ``eN`` id from a snapshot, or the selector itself."""
    element = element.strip()
    if ID_RE.match(element):
        return f'[{ID_ATTR}="{element}"]'
    return element


def render(lines: list[str], *, offset: int = 0, max_chars: int = 4000) -> tuple[str, int, int]:
    """Join snapshot lines from ``offset`` within ``max_chars``; returns (text, shown_until, total)."""
    total = len(lines)
    out: list[str] = []
    size = 0
    i = max(0, offset)
    while i < total:
        line = lines[i]
        if len(line) > 400:
            line = line[:397] + "..."
        if out and size + len(line) + 1 > max_chars:
            break
        out.append(line)
        size += len(line) + 1
        i += 1
    text = "\n".join(out)
    if len(text) > max_chars:
        text = text[: max_chars - 3] + "..."
    return text, i, total
