// ReplayStepper front end (appended after the TranscriptView front end, whose TranscriptDom draws the
// transcripts). Builds the DOM with textContent and setAttribute only.

function viewModel(get, model, turnOf) {
  // The part of a model TranscriptDom uses, over one field of the current turn view.
  return {
    get: (name) => get(name),
    send: (msg) => model.send({ ...msg, turn: turnOf() }),
  };
}

function section(title, cls) {
  const box = h("div", "loom-step-section " + cls);
  box.appendChild(h("div", "loom-step-title", title));
  return box;
}

class StepperDom {
  constructor(model, el) {
    this.model = model;
    this.root = h("div", "loom-tv loom-stepper");
    this.title = h("div", "loom-header loom-step-head");
    const bar = h("div", "loom-step-bar");
    this.prev = h("button", "loom-button loom-prev", "◄ previous");
    this.next = h("button", "loom-button loom-next", "next ►");
    this.slider = h("input", "loom-slider");
    this.slider.setAttribute("type", "range");
    this.slider.setAttribute("min", "0");
    this.slider.setAttribute("step", "1");
    this.label = h("span", "loom-turn-label");
    this.fork = h("button", "loom-button loom-fork", "fork here");
    this.fork.setAttribute("title", "a new execution with the turns before this one: edit this turn and go on");
    this.forked = h("div", "loom-meta loom-forked");
    this.live = h("span", "loom-meta loom-following");
    bar.append(this.prev, this.slider, this.next, this.label, this.fork, this.live);
    this.facts = h("div", "loom-step-facts");
    this.changes = h("div", "loom-changes");
    this.error = h("div", "loom-error loom-step-error");
    const seen = section("transcript as the model saw it", "loom-step-seen");
    const said = section("response", "loom-step-response");
    this.tools = section("tool calls and results", "loom-step-tools");
    this.toolList = h("div", "loom-step-toollist");
    this.tools.appendChild(this.toolList);
    const current = () => this.model.get("current") || {};
    const turnOf = () => current().index;
    this.seenDom = new TranscriptDom(viewModel((n) => (n === "messages" ? current().messages : current().header), model, turnOf), seen);
    this.saidDom = new TranscriptDom(viewModel((n) => (n === "messages" ? (current().response ? [current().response] : []) : ""), model, turnOf), said);
    this.root.append(this.title, bar, this.forked, this.facts, this.changes, this.error, said, this.tools, seen);
    el.appendChild(this.root);
    const go = (index) => {
      const count = Number(this.model.get("count")) || 0;
      const next = Math.max(0, Math.min(count - 1, index));
      if (next === this.model.get("turn")) return;
      this.model.set("turn", next);
      this.model.save_changes();
    };
    this.prev.addEventListener("click", () => go(Number(this.model.get("turn")) - 1));
    this.next.addEventListener("click", () => go(Number(this.model.get("turn")) + 1));
    this.slider.addEventListener("change", () => go(Number(this.slider.value)));
    this.fork.addEventListener("click", () => {
      this.forked.textContent = "forking…";
      this.model.send({ type: "fork", turn: Number(this.model.get("turn")) || 0 });
    });
  }

  update() {
    const view = this.model.get("current") || {};
    const count = Number(this.model.get("count")) || 0;
    const turn = Number(this.model.get("turn")) || 0;
    this.title.textContent = String(this.model.get("title") || "");
    this.slider.setAttribute("max", String(Math.max(count - 1, 0)));
    this.slider.value = String(turn);
    this.slider.disabled = count < 2;
    this.prev.disabled = turn <= 0;
    this.next.disabled = turn >= count - 1;
    this.label.textContent = count ? String(view.label || "") : "no model calls recorded";
    this.facts.textContent = count
      ? "step " + view.step_id + " · stop reason: " + view.stop_reason + " · usage: " + view.usage
        + (view.latency ? " · latency: " + view.latency : "")
      : "";
    this.changes.textContent = count ? "changes: " + view.changes : "";
    this.fork.disabled = count === 0;
    this.forked.textContent = String(this.model.get("forked") || "");
    this.live.textContent = this.model.get("following") ? "● following the live run" : "";
    this.error.textContent = view.error ? "error: " + view.error : "";
    this.error.hidden = !view.error;
    this.seenDom.update();
    this.saidDom.update();
    this.drawTools(view.tools || []);
  }

  drawTools(tools) {
    this.toolList.replaceChildren();
    this.tools.hidden = tools.length === 0;
    for (const tool of tools) {
      const card = h("div", "loom-step-tool");
      card.append(
        h("div", "loom-tool-label", "tool call · " + tool.name + " · call " + tool.id + " · " + tool.status),
        h("pre", "loom-code", tool.input),
      );
      if (tool.result) card.appendChild(this.saidDom.item(tool.result));
      else card.appendChild(h("div", "loom-meta", "no result recorded"));
      this.toolList.appendChild(card);
    }
  }
}

export default {
  render({ model, el }) {
    const dom = new StepperDom(model, el);
    dom.update();
    const onChange = () => dom.update();
    const onMsg = (msg, buffers) => { dom.seenDom.answer(msg, buffers); dom.saidDom.answer(msg, buffers); };
    for (const name of ["change:current", "change:turn", "change:count", "change:title", "change:forked", "change:following"]) model.on(name, onChange);
    model.on("msg:custom", onMsg);
    return () => {
      for (const name of ["change:current", "change:turn", "change:count", "change:title", "change:forked", "change:following"]) model.off(name, onChange);
      model.off("msg:custom", onMsg);
      dom.seenDom.revoke();
      dom.saidDom.revoke();
    };
  },
};
