// PromptPad front end: a text box, send and stop buttons, the live stream (text and tool-call
// deltas), a "stopped" mark on a cancelled reply, refusals in place, and two child widgets drawn inside (the conversation TranscriptView and the
// MediaUpload). DOM built with textContent and setAttribute only.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

async function child(model, ref, into) {
  // Draw a child widget (a trait serialized as "IPY_MODEL_<id>") inside this one.
  if (typeof ref !== "string" || !ref.startsWith("IPY_MODEL_")) return null;
  const manager = model.widget_manager;
  const childModel = await manager.get_model(ref.slice("IPY_MODEL_".length));
  const view = await manager.create_view(childModel);
  into.appendChild(view.el);
  if (typeof view.trigger === "function") view.trigger("displayed");
  return view;
}

export default {
  render({ model, el }) {
    const root = h("div", "loom-pp");
    const status = h("div", "loom-pp-status");
    const conversation = h("div", "loom-pp-conversation");
    const live = h("div", "loom-pp-live");
    const liveText = h("div", "loom-pp-live-text");
    const liveTools = h("div", "loom-pp-live-tools");
    live.append(liveText, liveTools);
    const error = h("div", "loom-pp-error");
    error.setAttribute("role", "alert");
    const uploads = h("div", "loom-pp-uploads");
    const pending = h("div", "loom-pp-pending");
    const box = h("div", "loom-pp-box");
    const input = h("textarea", "loom-pp-input");
    input.setAttribute("rows", "3");
    input.setAttribute("placeholder", "Type a prompt; Ctrl+Enter sends");
    const send = h("button", "loom-button loom-pp-send", "send");
    const stop = h("button", "loom-button loom-pp-stop", "stop");
    stop.setAttribute("title", "Stop the reply: its partial text is kept, marked stopped");
    box.append(input, send, stop);
    const stopped = h("div", "loom-pp-stopped", "stopped · the reply was cancelled; its partial text is kept above");
    root.append(status, conversation, live, stopped, error, uploads, pending, box);
    el.appendChild(root);

    const views = [];
    child(model, model.get("transcript"), conversation).then((v) => v && views.push(v)).catch(() => {
      conversation.textContent = "the conversation view could not be drawn here";
    });
    child(model, model.get("upload"), uploads).then((v) => v && views.push(v)).catch(() => {
      uploads.textContent = "the upload box could not be drawn here";
    });

    const draw = () => {
      status.textContent = "prompt pad · " + String(model.get("status") || "");
      const busy = Boolean(model.get("busy"));
      send.disabled = busy;
      send.textContent = busy ? "streaming…" : "send";
      stop.hidden = !busy;
      stopped.hidden = busy || !model.get("stopped");
      liveText.textContent = String(model.get("live_text") || "");
      liveTools.replaceChildren();
      for (const call of model.get("live_tools") || []) {
        const row = h("div", "loom-pp-tool");
        row.append(h("div", "loom-tool-label", "tool call streaming · " + call.name + " · call " + call.id),
          h("pre", "loom-code", String(call.input_json || "")));
        liveTools.appendChild(row);
      }
      live.hidden = !busy && !liveText.textContent && liveTools.childElementCount === 0;
      const refusal = model.get("error") || {};
      error.replaceChildren();
      error.hidden = !refusal.code;
      if (refusal.code) {
        error.append(h("div", "loom-pp-error-head", "refused · " + refusal.kind + " · " + refusal.code),
          h("div", "loom-pp-error-message", refusal.message),
          h("div", "loom-pp-error-remedy", "what to do: " + refusal.remedy));
      }
      const files = model.get("pending") || [];
      pending.textContent = files.length ? "attached to the next message: " + files.join(", ") : "";
    };
    const submit = () => {
      if (model.get("busy")) return;
      const text = input.value;
      model.send({ type: "send", text });
    };
    send.addEventListener("click", submit);
    stop.addEventListener("click", () => { if (model.get("busy")) model.send({ type: "stop" }); });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); submit(); }
    });
    let wasBusy = false;
    const onChange = () => {
      const busy = Boolean(model.get("busy"));
      if (wasBusy && !busy && !(model.get("error") || {}).code) input.value = "";
      wasBusy = busy;
      draw();
    };
    const names = ["change:live_text", "change:live_tools", "change:busy", "change:stopped", "change:error", "change:pending", "change:status"];
    for (const name of names) model.on(name, onChange);
    draw();
    return () => {
      for (const name of names) model.off(name, onChange);
      for (const view of views) if (typeof view.remove === "function") view.remove();
    };
  },
};
