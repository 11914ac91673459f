// MediaUpload front end (after icons.js, joined into one module): sends files to the kernel in acknowledged chunks (binary buffers),
// shows a progress bar, and lists stored uploads. DOM built with textContent/setAttribute.

const B64 = /^[A-Za-z0-9+/]*={0,2}$/;

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function humanSize(size) {
  if (typeof size !== "number") return "size unknown";
  const units = ["bytes", "KB", "MB", "GB"];
  let value = size, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return unit === 0 ? size + " bytes" : value.toFixed(1) + " " + units[unit];
}

export default {
  render({ model, el }) {
    const root = h("div", "loom-up");
    const input = h("input");
    input.type = "file";
    input.multiple = true;
    input.hidden = true;
    const drop = h("button", "loom-up-drop", "Choose files to upload (or drop them here)");
    const progress = h("progress");
    progress.max = 1;
    progress.value = 0;
    progress.hidden = true;
    const status = h("div", "loom-up-status");
    const error = h("div", "loom-up-error");
    const list = h("div", "loom-up-list");
    root.append(input, drop, progress, status, error, list);
    el.appendChild(root);

    let waiting = null;
    const onMsg = (msg) => { if (waiting && msg && msg.upload === waiting.uid) { const w = waiting; waiting = null; w.resolve(msg); } };
    model.on("msg:custom", onMsg);
    const ask = (uid, content, buffers) => new Promise((resolve) => {
      waiting = { uid, resolve };
      model.send({ ...content, upload: uid }, undefined, buffers || []);
    });

    async function upload(file) {
      const uid = String(Date.now()) + "-" + Math.random().toString(16).slice(2);
      const chunk = Number(model.get("chunk_size")) || 1048576;
      progress.hidden = false;
      progress.value = 0;
      status.textContent = "uploading " + file.name + " (" + humanSize(file.size) + ")";
      let reply = await ask(uid, { type: "begin", name: file.name, media_type: file.type, size: file.size });
      if (reply.type !== "ack") { error.textContent = String(reply.reason || "refused"); status.textContent = ""; progress.hidden = true; return; }
      for (let offset = 0, index = 0; offset < file.size; offset += chunk, index += 1) {
        const buffer = await file.slice(offset, offset + chunk).arrayBuffer();
        reply = await ask(uid, { type: "chunk", index }, [buffer]);
        if (reply.type !== "ack") { error.textContent = String(reply.reason || "refused"); status.textContent = ""; progress.hidden = true; return; }
        progress.value = file.size ? reply.received / file.size : 1;
      }
      reply = await ask(uid, { type: "end" });
      if (reply.type !== "done") { error.textContent = String(reply.reason || "refused"); status.textContent = ""; progress.hidden = true; return; }
      progress.value = 1;
      status.textContent = "stored " + file.name;
    }

    async function uploadAll(files) {
      error.textContent = "";
      for (const file of files) await upload(file);
    }

    drop.addEventListener("click", () => input.click());
    input.addEventListener("change", () => { uploadAll(Array.from(input.files || [])); input.value = ""; });
    drop.addEventListener("dragover", (e) => e.preventDefault());
    drop.addEventListener("drop", (e) => { e.preventDefault(); uploadAll(Array.from(e.dataTransfer.files || [])); });

    const draw = () => {
      list.replaceChildren();
      for (const item of model.get("uploads") || []) {
        const row = h("div", "loom-up-item");
        if (typeof item.thumb === "string" && B64.test(item.thumb)) {
          const img = h("img");
          img.setAttribute("alt", "thumbnail of " + item.name);
          img.setAttribute("src", "data:image/png;base64," + item.thumb);
          row.appendChild(img);
        } else {
          const mark = h("div", "loom-up-icon");
          mark.appendChild(icon(String(item.media_type).startsWith("audio/") ? "speaker" : "file"));
          row.appendChild(mark);
        }
        const text = h("div");
        text.append(h("div", null, item.name), h("div", "loom-up-meta", [item.media_type, humanSize(item.size), item.address].join(" · ")));
        row.appendChild(text);
        list.appendChild(row);
      }
      const err = String(model.get("error") || "");
      if (err) error.textContent = err;
    };
    draw();
    model.on("change:uploads", draw);
    model.on("change:error", draw);
    return () => {
      model.off("msg:custom", onMsg);
      model.off("change:uploads", draw);
      model.off("change:error", draw);
    };
  },
};
