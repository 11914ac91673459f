// TranscriptView front end, part 2 of 4 (see dom.js): markdown trees to DOM.

// Markdown trees (loom_nb.render._markdown) become DOM here: tags from these fixed sets only,
// strings as text nodes, links only to http(s)/mailto, images never loaded (inert text).
const MD_BLOCK = new Set(["p", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "ul", "ol", "li",
  "hr", "pre", "table", "thead", "tbody", "tr", "th", "td"]);
const MD_INLINE = new Set(["em", "strong", "s", "code", "a", "br", "img"]);
const SAFE_HREF = /^(?:https?:\/\/[^\s\x00-\x1f\x7f]+|mailto:[^\s\x00-\x1f\x7f:\/]+)$/i;
const HL = new Set(["k", "nb", "nf", "nt", "na", "nd", "s", "m", "c", "o", "p", "e"]);

function safeHref(url) {
  return typeof url === "string" && SAFE_HREF.test(url) ? url : null;
}

function link(href, children) {
  const a = h("a", "loom-md-link");
  a.setAttribute("href", href);
  a.setAttribute("rel", "noopener noreferrer nofollow");
  a.setAttribute("target", "_blank");
  a.append(...children);
  return a;
}

function mdNodes(nodes) {
  const out = [];
  for (const node of Array.isArray(nodes) ? nodes : []) {
    const made = mdNode(node);
    if (made) out.push(made);
  }
  return out;
}

function mdNode(node) {
  if (typeof node === "string") return document.createTextNode(node);
  if (!node || typeof node !== "object") return null;
  const tag = node.tag;
  if (!MD_BLOCK.has(tag) && !MD_INLINE.has(tag)) return null;
  if (tag === "pre") return codeBlock(node);
  if (tag === "img") {
    const span = h("span", "loom-md-img", "[image: " + String(node.alt || "no description") + "] · not loaded");
    const href = safeHref(node.href);
    if (href) span.append(": ", link(href, [document.createTextNode(href)]));
    return span;
  }
  const children = mdNodes(node.children);
  if (tag === "a") {
    const href = safeHref(node.href);
    if (!href) { const span = h("span"); span.append(...children); return span; }
    return link(href, children);
  }
  const el = document.createElement(tag);
  if ((tag === "th" || tag === "td") && ["left", "right", "center"].includes(node.align)) el.style.textAlign = node.align;
  if (tag === "ol" && Number.isInteger(node.start) && node.start >= 0) el.setAttribute("start", String(node.start));
  el.append(...children);
  return el;
}

function codeBlock(node) {
  const box = h("div", "loom-codeblock");
  const bar = h("div", "loom-code-bar");
  const lang = String(node.lang || "");
  const code = String(node.code || "");
  const copy = h("button", "loom-button loom-copy", "copy");
  copy.setAttribute("title", "copy this code");
  copy.addEventListener("click", (event) => {
    event.stopPropagation();
    const done = (ok) => { copy.textContent = ok ? "copied" : "copy failed: select the code"; setTimeout(() => { copy.textContent = "copy"; }, 1500); };
    if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(code).then(() => done(true), () => done(false));
    else done(false);
  });
  bar.append(h("span", "loom-code-lang", lang), copy);
  const pre = h("pre", "loom-code loom-md-pre");
  const inner = h("code");
  if (Array.isArray(node.hl)) {
    for (const run of node.hl) {
      if (!Array.isArray(run) || run.length !== 2) continue;
      const [cls, text] = run;
      if (HL.has(cls)) inner.appendChild(h("span", "loom-hl-" + cls, text));
      else inner.appendChild(document.createTextNode(String(text)));
    }
  } else inner.textContent = code;
  pre.appendChild(inner);
  box.append(bar, pre);
  return box;
}

