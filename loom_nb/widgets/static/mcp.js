// MCPServerView front end: the server's line, a refused change's diff, and an Accept button.
// DOM built with textContent only: the diff is the server's own text.

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export default {
  render({ model, el }) {
    const root = h("div", "loom-mcp");
    el.appendChild(root);
    const draw = () => {
      root.replaceChildren();
      root.appendChild(h("div", "loom-mcp-head", "MCP server " + model.get("server_name") + " · " + model.get("state")));
      const diff = model.get("diff");
      if (diff) {
        root.appendChild(h("div", "loom-mcp-label", "Its tool definitions changed since this journal pinned them. Review the change:"));
        root.appendChild(h("pre", "loom-mcp-diff", diff));
        const accept = h("button", "loom-button loom-mcp-accept", "Accept changes");
        accept.addEventListener("click", () => { accept.disabled = true; model.send({ type: "accept" }); });
        root.appendChild(accept);
      }
      const note = model.get("note");
      if (note) root.appendChild(h("div", "loom-mcp-note", note));
    };
    model.on("change", draw);
    draw();
  },
};
