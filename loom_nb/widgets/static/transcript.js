// TranscriptView front end, part 4 of 4 (see dom.js): the transcript's cards, kept in step with
// the model's render-ready views, and the widget's entry points.

class TranscriptDom extends MediaDom {
  constructor(model, el) {
    super(model);
    this.root = h("div", "loom-tv");
    this.header = h("div", "loom-header");
    this.list = h("div", "loom-list");
    // A reply still streaming (a displayed Chat's live_text): a provisional card below the list.
    // Not a .loom-msg: it is no message of the transcript (yet).
    this.live = h("div", "loom-live");
    this.liveText = h("div", "loom-text loom-live-text");
    // Stop (shown while the kernel has an on_stop callback, i.e. a Chat reply is in flight):
    // the kernel cancels the reply; its partial text is kept as the turn, marked stopped.
    this.stopButton = h("button", "loom-button loom-stop", "■ Stop");
    this.stopNote = h("span", "loom-stop-note");
    this.stopButton.addEventListener("click", () => {
      this.stopButton.disabled = true;
      this.stopNote.textContent = "stopping…";
      this.ask({ type: "stop" }, (msg) => {
        if (msg.error) { this.stopNote.textContent = String(msg.error); this.stopButton.disabled = false; }
      });
    });
    this.stopBar = h("div", "loom-stop-bar");
    this.stopBar.append(this.stopButton, this.stopNote);
    this.live.append(h("div", "loom-role", "assistant · streaming"), this.liveText, this.stopBar);
    this.live.hidden = true;
    this.root.append(this.header, this.list, this.live);
    el.appendChild(this.root);
    this.rendered = [];       // [{sig, node}]
    this.uses = new Map();    // tool_use id -> element
    this.results = new Map(); // tool_use id -> [elements]
  }

  update() {
    this.header.textContent = String(this.model.get("header") || "");
    const views = this.model.get("messages") || [];
    views.forEach((view, i) => {
      const sig = JSON.stringify(view);
      const old = this.rendered[i];
      if (old && old.sig === sig) return;
      const node = this.message(view);
      if (old) this.list.replaceChild(node, old.node); else this.list.appendChild(node);
      this.rendered[i] = { sig, node };
    });
    while (this.rendered.length > views.length) this.rendered.pop().node.remove();
    this.relink();
  }

  updateLive() {
    const text = String(this.model.get("live_text") || "");
    const stoppable = this.model.get("stoppable") === true;
    this.liveText.textContent = text;
    this.live.hidden = !text && !stoppable;
    this.stopBar.hidden = !stoppable;
    if (!stoppable) { this.stopButton.disabled = false; this.stopNote.textContent = ""; }
  }

  relink() {
    this.uses.clear();
    this.results.clear();
    for (const node of this.list.querySelectorAll(".loom-tool-use")) this.uses.set(node.loomId, node);
    for (const node of this.list.querySelectorAll(".loom-tool-result")) {
      const list = this.results.get(node.loomId) || [];
      list.push(node);
      this.results.set(node.loomId, list);
    }
  }

  pairOf(node) {
    if (node.classList.contains("loom-tool-use")) return this.results.get(node.loomId) || [];
    const use = this.uses.get(node.loomId);
    return use ? [use] : [];
  }

  link(node) {
    const light = (on) => {
      for (const other of this.pairOf(node)) other.classList.toggle("loom-hl", on);
      node.classList.toggle("loom-hl-self", on);
    };
    node.addEventListener("mouseenter", () => light(true));
    node.addEventListener("mouseleave", () => light(false));
    node.addEventListener("click", (event) => {
      if (event.target.closest("button, summary, audio, a")) return;
      for (const old of this.list.querySelectorAll(".loom-active")) old.classList.remove("loom-active");
      const pair = this.pairOf(node);
      for (const other of pair) other.classList.add("loom-active");
      if (pair.length) pair[0].scrollIntoView({ block: "nearest", behavior: "smooth" });
    });
  }

  message(view) {
    const role = String(view.role);
    const card = h("div", "loom-msg loom-" + role.replace(/[^a-z]/g, ""));
    const label = view.index < 0 ? role : role + " · message " + (view.index + 1);
    card.appendChild(h("div", "loom-role", label));
    for (const item of view.items || []) card.appendChild(this.item(item));
    const stats = statsText(view.stats);
    if (stats) card.appendChild(h("div", "loom-stats", stats));
    return card;
  }

  item(view) {
    switch (view.kind) {
      case "text": return this.text(view);
      case "fence": return this.fence(view);
      case "tool_use": return this.toolUse(view);
      case "tool_result": return this.toolResult(view);
      case "image": return this.image(view);
      case "audio": return this.audio(view);
      case "file": return this.file(view);
      case "reasoning": return this.reasoning(view);
      default: return h("div", "loom-unavailable", "unknown part kind");
    }
  }

  text(view) {
    let body;
    if (Array.isArray(view.md)) { body = h("div", "loom-text loom-md"); body.append(...mdNodes(view.md)); }
    else body = h("div", "loom-text", view.text);
    let node = body;
    if (view.collapsed) {
      node = h("details", "loom-long");
      const head = String(view.text).slice(0, 240).replace(/\n/g, " ");
      node.append(h("summary", null, head + "… (" + String(view.text).length + " characters, expand)"), body);
    }
    if (!view.omitted) return node;
    const wrap = h("div");
    wrap.append(node, h("div", "loom-meta", "… " + view.omitted + " more characters not shown"));
    return wrap;
  }

  reasoning(view) {
    // The model's thinking: always collapsed (its working, not its answer); never markdown.
    const box = h("details", "loom-reasoning");
    const text = typeof view.text === "string" ? view.text : "";
    const total = text.length + (Number(view.omitted) || 0);
    const summary = view.redacted ? "reasoning · redacted by the vendor (kept for the next turn, not shown)"
      : (text ? "reasoning · " + total + " characters (expand)" : "reasoning · not shown by the vendor");
    box.appendChild(h("summary", null, summary));
    if (text) box.appendChild(h("div", "loom-text", text));
    if (view.omitted) box.appendChild(h("div", "loom-meta", "… " + view.omitted + " more characters not shown"));
    return box;
  }

  fence(view) {
    const box = h("fieldset", "loom-fence");
    const legend = h("legend", null, " untrusted · " + view.origin + (view.closed === false ? " (fence not closed)" : ""));
    legend.prepend(badge("!"));
    box.appendChild(legend);
    for (const item of view.items || []) box.appendChild(this.item(item));
    return box;
  }

  toolUse(view) {
    const card = h("div", "loom-tool-use");
    card.loomId = String(view.id);
    card.append(h("div", "loom-tool-label", "tool call · " + (view.server ? "MCP " + view.server + " · " : "") + view.name + " · call " + view.id),
      h("pre", "loom-code", view.input + (view.omitted ? " … " + view.omitted + " more characters" : "")));
    if (view.approval && typeof view.approval === "object") card.appendChild(this.approval(view));
    this.link(card);
    return card;
  }

  approval(view) {
    // "awaiting approval" with Approve / Decline (when the kernel has an on_decision callback),
    // or who decided what. The kernel records the decision and redraws this card.
    const a = view.approval;
    const bar = h("div", "loom-approval");
    const by = typeof a.by === "string" && a.by ? " by " + a.by : "";
    const why = typeof a.reason === "string" && a.reason ? ": " + a.reason : "";
    if (a.state === "awaiting") {
      const state = h("span", "loom-approval-state", "awaiting approval" + why);
      state.prepend(icon("pause"));
      bar.appendChild(state);
      if (this.model.get("decidable") === true) {
        const note = h("span", "loom-approval-note");
        const buttons = [];
        const decide = (approved) => {
          for (const b of buttons) b.disabled = true;
          note.textContent = approved ? "approving…" : "declining…";
          this.ask({ type: "decision", call_id: String(view.id), approved }, (msg) => {
            if (msg.error) { note.textContent = String(msg.error); for (const b of buttons) b.disabled = false; }
          });
        };
        const yes = h("button", "loom-button loom-approve", "Approve");
        const no = h("button", "loom-button loom-decline", "Decline");
        yes.addEventListener("click", () => decide(true));
        no.addEventListener("click", () => decide(false));
        buttons.push(yes, no);
        bar.append(yes, no, note);
      }
    } else if (a.state === "approved") bar.appendChild(h("span", "loom-approval-state", "✓ approved" + by + why));
    else if (a.state === "declined") bar.appendChild(h("span", "loom-approval-state", "✗ declined" + by + why + "; the call was not run"));
    else if (a.state === "undecidable") bar.appendChild(h("span", "loom-approval-state", "✗ not decided" + by + why));
    return bar;
  }

  toolResult(view) {
    const card = h("div", "loom-tool-result" + (view.is_error ? " loom-is-error" : ""));
    card.loomId = String(view.tool_use_id);
    card.appendChild(h("div", "loom-tool-label", (view.tool_name ? "result of " + (view.server ? "MCP " + view.server + " · " : "") + view.tool_name + " · " : "result of call ") + view.tool_use_id));
    if (view.is_error) card.appendChild(h("div", "loom-error", "error: the tool failed or the call was refused"));
    for (const item of view.items || []) card.appendChild(this.item(item));
    this.link(card);
    return card;
  }

  unavailable(node, view) {
    node.appendChild(h("div", "loom-unavailable", view.unavailable));
    if (typeof view.svg_source === "string") {
      const more = h("details");
      more.append(h("summary", null, "SVG source (as text)"), h("pre", "loom-code", view.svg_source));
      node.appendChild(more);
    }
    node.appendChild(meta(view));
    return node;
  }

  image(view) {
    const node = h("div", "loom-image");
    if (view.stream) {
      node.appendChild(this.loader(view, String(view.stream.media_type), "open the original image", (url, box) => {
        const big = h("img", "loom-full");
        big.setAttribute("alt", "original image · " + view.media_type);
        big.setAttribute("src", url);
        box.appendChild(big);
      }));
      node.appendChild(meta(view));
      return node;
    }
    const src = png(view.thumb);
    if (view.unavailable || !src) return this.unavailable(node, { ...view, unavailable: view.unavailable || "image unavailable" });
    const img = h("img", "loom-thumb");
    img.setAttribute("alt", "image · " + view.media_type);
    img.setAttribute("src", src);
    node.appendChild(img);
    const full = h("button", "loom-button", "full size");
    full.addEventListener("click", () => {
      full.disabled = true;
      full.textContent = "loading…";
      this.ask({ type: "full", key: String(view.key) }, (msg) => {
        const url = png(msg.data);
        if (!url) { full.replaceWith(h("div", "loom-unavailable", msg.unavailable || "full size unavailable")); return; }
        const big = h("img", "loom-full");
        big.setAttribute("alt", "full size image");
        big.setAttribute("src", url);
        full.replaceWith(big);
      });
    });
    node.append(full, meta(view));
    return node;
  }

  audio(view) {
    const node = h("div", "loom-audio");
    if (view.stream) {
      node.appendChild(this.loader(view, String(view.stream.media_type), "► load and play", (url, box) => {
        const player = h("audio");
        player.controls = true;
        player.loop = false;
        player.setAttribute("preload", "auto");
        player.setAttribute("src", url);
        box.appendChild(player);
        const started = player.play();
        if (started && started.catch) started.catch(() => {}); // no audio device: the controls remain
      }));
      node.appendChild(meta(view));
      return node;
    }
    const type = String(view.player_type || "");
    if (view.unavailable || !AUDIO.has(type) || typeof view.data !== "string" || !B64.test(view.data)) {
      return this.unavailable(node, { ...view, unavailable: view.unavailable || "audio unavailable" });
    }
    const player = h("audio");
    player.controls = true;
    player.autoplay = false;
    player.loop = false;
    player.setAttribute("preload", "metadata");
    player.setAttribute("src", "data:" + type + ";base64," + view.data);
    node.append(player, meta(view));
    return node;
  }

  file(view) {
    const node = h("div", "loom-file");
    if (view.stream && view.stream.media_type === "application/pdf") {
      node.classList.add("loom-pdf");
      node.append(this.loader(view, "application/pdf", "open the PDF", (url, box) => this.pdfFrame(url, box)), meta(view));
      return node;
    }
    if (view.unavailable) return this.unavailable(node, view);
    const thumb = png(view.thumb);
    if (thumb) return this.pdf(node, view, thumb);
    node.append(icon("file"), meta(view));
    if (typeof view.preview === "string") {
      const more = h("details");
      more.append(h("summary", null, "contents"), h("pre", "loom-code", view.preview + (view.preview_omitted ? " …" : "")));
      node.appendChild(more);
    }
    return node;
  }

  pdf(node, view, thumb) {
    node.classList.add("loom-pdf");
    const img = h("img", "loom-thumb loom-pdf-thumb");
    img.setAttribute("alt", "first page of " + view.media_type);
    img.setAttribute("src", thumb);
    const pages = Number(view.pages) || 1;
    const bar = h("div", "loom-pager");
    const prev = h("button", "loom-button", "◄");
    const next = h("button", "loom-button", "►");
    const label = h("span", "loom-page-label", "page 1 / " + pages);
    const page = h("img", "loom-page");
    page.setAttribute("alt", "PDF page");
    page.hidden = true;
    let current = -1;
    const known = Array.isArray(view.page_images) ? view.page_images : [];
    const show = (index) => {
      if (index < 0 || index >= pages) return;
      current = index;
      label.textContent = "page " + (index + 1) + " / " + pages;
      const url = png(known[index]);
      if (url) { page.setAttribute("src", url); page.hidden = false; return; }
      this.ask({ type: "page", key: String(view.key), page: index }, (msg) => {
        const got = png(msg.data);
        if (got && current === index) { page.setAttribute("src", got); page.hidden = false; }
        else if (!got) label.textContent = String(msg.unavailable || "page unavailable");
      });
    };
    prev.addEventListener("click", () => show(Math.max(0, current - 1)));
    next.addEventListener("click", () => show(Math.min(pages - 1, current + 1)));
    img.addEventListener("click", () => show(0));
    bar.append(prev, label, next);
    // The document itself, in the browser's PDF viewer (text, zoom, search), streamed on demand.
    const open = this.loader(view, "application/pdf", "open the PDF", (url, box) => this.pdfFrame(url, box));
    node.append(img, meta(view), bar, page, open);
    return node;
  }
}

// The kernel sends a long transcript's new cards as a "splice" (start index + the views from
// there) instead of the whole list; the model applies it to its own state, once per model (not
// per view), so every view redraws from the change event and saved widget state stays whole.
function applySplice(model, msg) {
  if (!msg || msg.type !== "splice") return;
  const current = model.get("messages") || [];
  if (!Number.isInteger(msg.start) || msg.start < 0 || msg.start > current.length || !Array.isArray(msg.views)) {
    model.send({ type: "resync" }); // a missed message: ask for the whole state
    return;
  }
  model.set("messages", current.slice(0, msg.start).concat(msg.views));
}

// Each model's latest view, by the model's _key (the front end hands each view its own model
// object), so a view drawn in its place can take over its DOM (see render).
const LATEST = new Map();

export default {
  initialize({ model }) {
    const onSplice = (msg) => applySplice(model, msg);
    model.on("msg:custom", onSplice);
    model.send({ type: "splices" }); // the kernel sends whole lists until it hears this
    return () => model.off("msg:custom", onSplice);
  },
  render({ model, el }) {
    // JupyterLab draws an output again when its display is updated (a displayed chat republishes
    // its static HTML as turns land): a new view, while the old view's element is taken out of
    // the page without the view being removed. The new view takes over the old one's DOM (cards,
    // opened details, loaded media), so an update costs no redraw; an old view that is not taken
    // over stops listening at its next event, so replaced views do not pile up redrawing. A view
    // counts as replaced once its element, having been on the page, has no parent: a cell
    // scrolled out of a windowed notebook keeps its output's element in place.
    const key = String(model.get("_key") || "");
    const previous = key ? LATEST.get(key) : undefined;
    let dom;
    if (previous && previous.replaced()) {
      previous.handOver();
      dom = previous.dom;
      el.appendChild(dom.root);
    } else {
      dom = new TranscriptDom(model, el);
    }
    dom.update();
    dom.updateLive();
    let attached = false, listening = true, handedOver = false;
    const replaced = () => {
      if (el.parentNode) attached = true;
      return attached && !el.parentNode;
    };
    const unlisten = () => {
      if (!listening) return;
      listening = false;
      model.off("change:messages", onChange);
      model.off("change:header", onChange);
      model.off("change:decidable", onRedraw);
      model.off("change:live_text", onLive);
      model.off("change:stoppable", onLive);
      model.off("msg:custom", onMsg);
    };
    for (const wait of [0, 1000]) setTimeout(replaced, wait); // notes when it is on the page
    const record = { dom, replaced, handOver: () => { unlisten(); handedOver = true; } };
    if (key) LATEST.set(key, record);
    const live = () => {
      if (replaced()) unlisten();
      return listening;
    };
    const onChange = () => { if (live()) dom.update(); };
    const onLive = () => { if (live()) dom.updateLive(); };
    const onRedraw = () => {
      if (!live()) return;
      dom.rendered = dom.rendered.map((r) => ({ ...r, sig: "" }));
      dom.update();
    };
    const onMsg = (msg, buffers) => { if (live()) dom.answer(msg, buffers); };
    model.on("change:messages", onChange);
    model.on("change:header", onChange);
    model.on("change:decidable", onRedraw);
    model.on("change:live_text", onLive);
    model.on("change:stoppable", onLive);
    model.on("msg:custom", onMsg);
    return () => {
      unlisten();
      if (handedOver) return; // the DOM lives on in the view that took it over, media URLs too
      dom.revoke();
      if (LATEST.get(key) === record) LATEST.delete(key);
    };
  },
};
