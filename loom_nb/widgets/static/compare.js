// CompareGrid front end (appended after the TranscriptView front end, whose TranscriptDom draws
// each cell's reply and the opened transcript). Builds the DOM with textContent and setAttribute
// only; no string from the kernel is ever parsed as HTML.

function gridModel(model, where, get) {
  // The part of a model a TranscriptDom uses: reads through `get`, requests tagged with `where`
  // ("cells" or "opened") so the kernel answers from the right render context.
  return {
    get: (name) => get(name),
    send: (msg) => model.send({ ...msg, where }),
  };
}

class GridDom {
  constructor(model, el) {
    this.model = model;
    this.root = h("div", "loom-tv loom-compare");
    this.title = h("div", "loom-header");
    this.scroll = h("div", "loom-grid-scroll");
    this.table = h("table", "loom-grid");
    this.scroll.appendChild(this.table);
    this.more = h("div", "loom-meta loom-grid-more");
    // The opened item's transcript: a panel under the grid, filled by the kernel (``opened``).
    this.panel = h("div", "loom-grid-panel");
    const bar = h("div", "loom-grid-panel-bar");
    this.panelNote = h("span", "loom-meta loom-grid-panel-note");
    this.closeButton = h("button", "loom-button loom-grid-close", "close");
    this.closeButton.addEventListener("click", () => this.select(null));
    bar.append(this.panelNote, this.closeButton);
    this.panelBody = h("div", "loom-grid-panel-body");
    this.panel.append(bar, this.panelBody);
    this.panel.hidden = true;
    this.cells = new TranscriptDom(gridModel(model, "cells", () => undefined), h("div"));
    const opened = () => this.model.get("opened") || {};
    this.openDom = new TranscriptDom(gridModel(model, "opened", (name) => {
      if (name === "messages") return opened().messages || [];
      if (name === "header") return opened().header || "";
      return undefined;
    }), this.panelBody);
    this.root.append(this.title, this.scroll, this.more, this.panel);
    el.appendChild(this.root);
    this.drawn = null;
    this.cellNodes = [];
    this.shown = "";
  }

  update() {
    this.title.textContent = String(this.model.get("title") || "");
    const sig = JSON.stringify([this.model.get("variants"), this.model.get("rows"), this.model.get("totals")]);
    if (sig !== this.drawn) { this.drawTable(); this.drawn = sig; }
    const omitted = Number(this.model.get("omitted")) || 0;
    this.more.textContent = omitted ? "… " + omitted + " more input" + (omitted === 1 ? "" : "s") + " not shown (comparison.to_pandas() has every row)" : "";
    this.more.hidden = !omitted;
    this.updatePanel();
  }

  drawTable() {
    const variants = this.model.get("variants") || [];
    const rows = this.model.get("rows") || [];
    const totals = this.model.get("totals") || [];
    const head = h("thead");
    const top = h("tr");
    top.appendChild(h("th", "loom-grid-corner", "input"));
    for (const name of variants) top.appendChild(h("th", "loom-grid-variant", name));
    head.appendChild(top);
    const body = h("tbody");
    this.cellNodes = [];
    rows.forEach((row, r) => {
      const line = h("tr");
      const label = h("th", "loom-grid-input");
      label.setAttribute("scope", "row");
      label.append(h("div", "loom-meta", "input " + (r + 1)), h("div", "loom-grid-input-text", row.input));
      line.appendChild(label);
      const nodes = [];
      (Array.isArray(row.cells) ? row.cells : []).forEach((cell, c) => {
        const td = this.cell(cell || {}, r, c);
        nodes.push(td);
        line.appendChild(td);
      });
      this.cellNodes.push(nodes);
      body.appendChild(line);
    });
    const foot = h("tfoot");
    const sums = h("tr");
    sums.appendChild(h("th", "loom-grid-total", "totals"));
    for (const text of totals) sums.appendChild(h("td", "loom-grid-total", text));
    foot.appendChild(sums);
    this.table.replaceChildren(head, body, foot);
  }

  cell(cell, r, c) {
    const td = h("td", "loom-grid-cell");
    td.setAttribute("tabindex", "0");
    td.setAttribute("title", "click to open the full transcript");
    const reply = h("div", "loom-grid-reply");
    for (const item of Array.isArray(cell.items) ? cell.items : []) reply.appendChild(this.cells.item(item));
    td.appendChild(reply);
    if (cell.error) td.appendChild(h("div", "loom-grid-error", "failed: " + cell.error));
    if (cell.stats) td.appendChild(h("div", "loom-stats", cell.stats));
    const open = h("button", "loom-button loom-grid-open", "transcript");
    open.addEventListener("click", () => this.select({ row: r, col: c }));
    td.appendChild(open);
    td.addEventListener("click", (event) => {
      // Links, buttons, summaries and players inside a reply keep their own click.
      if (event.target.closest("button, summary, audio, a, input")) return;
      this.select({ row: r, col: c });
    });
    td.addEventListener("keydown", (event) => {
      if (event.target !== td || (event.key !== "Enter" && event.key !== " ")) return;
      event.preventDefault();
      this.select({ row: r, col: c });
    });
    return td;
  }

  select(where) {
    this.model.set("selected", where ? { row: where.row, col: where.col } : {});
    this.model.save_changes();
    this.updatePanel();
  }

  updatePanel() {
    const sel = this.model.get("selected") || {};
    const opened = this.model.get("opened") || {};
    const has = Number.isInteger(sel.row) && Number.isInteger(sel.col);
    for (const row of this.cellNodes) for (const td of row) td.classList.remove("loom-grid-active");
    this.panel.hidden = !has;
    if (!has) { this.shown = ""; return; }
    const td = (this.cellNodes[sel.row] || [])[sel.col];
    if (td) td.classList.add("loom-grid-active");
    const ready = opened.row === sel.row && opened.col === sel.col;
    this.panelNote.textContent = ready ? "" : "opening… (the transcript comes from the running kernel)";
    this.panelBody.hidden = !ready;
    if (!ready) return;
    this.openDom.update();
    const key = sel.row + ":" + sel.col;
    if (this.shown !== key) {
      this.shown = key;
      this.panel.scrollIntoView({ block: "nearest" });
    }
  }
}

export default {
  render({ model, el }) {
    const dom = new GridDom(model, el);
    dom.update();
    const onChange = () => dom.update();
    const onPanel = () => dom.updatePanel();
    const onMsg = (msg, buffers) => { dom.cells.answer(msg, buffers); dom.openDom.answer(msg, buffers); };
    const table = ["change:title", "change:variants", "change:rows", "change:totals", "change:omitted"];
    const panel = ["change:selected", "change:opened"];
    for (const name of table) model.on(name, onChange);
    for (const name of panel) model.on(name, onPanel);
    model.on("msg:custom", onMsg);
    return () => {
      for (const name of table) model.off(name, onChange);
      for (const name of panel) model.off(name, onPanel);
      model.off("msg:custom", onMsg);
      dom.cells.revoke();
      dom.openDom.revoke();
    };
  },
};
