// MapProgressBar front end: a bar of items settled, the progress line, and a Stop button.
// DOM built with textContent only: the line names the map, whose id is the user's.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export default {
  render({ model, el }) {
    const root = h("div", "loom-map-progress");
    const track = h("div", "loom-map-track");
    const done = h("div", "loom-map-done");
    const failed = h("div", "loom-map-failed");
    track.append(done, failed);
    const line = h("div", "loom-map-line");
    const stop = h("button", "loom-button loom-map-stop", "Stop");
    stop.addEventListener("click", () => { stop.disabled = true; model.send({ type: "stop" }); });
    root.append(track, line, stop);
    el.appendChild(root);
    const draw = () => {
      const total = Math.max(1, model.get("total"));
      done.style.width = (100 * model.get("done") / total).toFixed(2) + "%";
      failed.style.width = (100 * model.get("failed") / total).toFixed(2) + "%";
      line.textContent = model.get("line");
      stop.hidden = model.get("finished");
    };
    model.on("change", draw);
    draw();
  },
};
