// TranscriptView front end, part 3 of 4 (see dom.js): the kernel round trips of a view.
// A request gets its answer by ticket; streamed media arrives as a start message, then numbered
// binary chunks, checked (order, length, SHA-256 where the page can hash) before it is shown.

// Types opened from a blob: URL (which has the page's origin): never markup, never SVG.
const STREAMABLE = new Set([...AUDIO, "application/pdf", "image/png", "image/jpeg", "image/gif", "image/webp"]);
const STREAM_IDLE_MS = 30000; // no message for this long: the kernel is gone or busy

class MediaDom {
  constructor(model) {
    this.model = model;
    this.waiting = new Map(); // request key -> callback
    this.streams = new Map(); // ticket -> stream being assembled
    this.urls = [];           // object URLs made here (revoked when the view goes)
    this.seq = 0;
    this.tag = Math.random().toString(36).slice(2, 10); // tickets unique across views of one model
  }

  ask(request, done) {
    const ticket = this.tag + ":" + (++this.seq);
    this.waiting.set(ticket, done);
    this.model.send({ ...request, ticket });
  }

  answer(msg, buffers) {
    if (!msg || typeof msg.ticket !== "string") return;
    if (msg.type === "stream") { this.streamed(msg, buffers); return; }
    const done = this.waiting.get(msg.ticket);
    if (done) { this.waiting.delete(msg.ticket); done(msg); }
  }

  fetchMedia(view, type, progress) {
    // A Promise of a Blob of the part's bytes, typed `type` (checked against the allowlist).
    return new Promise((resolve, reject) => {
      if (!STREAMABLE.has(type)) { reject(new Error("this media type is not opened in the browser")); return; }
      const ticket = this.tag + ":" + (++this.seq);
      const s = { type, resolve, reject, parts: [], count: 0, got: 0, size: null, chunks: null, timer: null, progress };
      s.arm = () => {
        clearTimeout(s.timer);
        s.timer = setTimeout(() => this.streamFailed(ticket, "no answer from the kernel (is it running?)"), STREAM_IDLE_MS);
      };
      this.streams.set(ticket, s);
      s.arm();
      this.model.send({ type: "stream", key: String(view.key), ticket });
    });
  }

  streamFailed(ticket, reason) {
    const s = this.streams.get(ticket);
    if (!s) return;
    clearTimeout(s.timer);
    this.streams.delete(ticket);
    s.reject(new Error(reason));
  }

  streamed(msg, buffers) {
    const s = this.streams.get(msg.ticket);
    if (!s) return;
    s.arm();
    if (msg.state === "error") { this.streamFailed(msg.ticket, String(msg.error || msg.code || "refused")); return; }
    if (msg.state === "start") {
      if (msg.media_type !== s.type) { this.streamFailed(msg.ticket, "the kernel sent another media type"); return; }
      if (!Number.isInteger(msg.size) || !Number.isInteger(msg.chunks) || msg.size < 0 || msg.chunks < 0) {
        this.streamFailed(msg.ticket, "bad stream header"); return;
      }
      s.size = msg.size; s.chunks = msg.chunks; s.sha256 = msg.sha256; s.parts = new Array(msg.chunks);
    } else if (msg.state === "chunk") {
      const buf = buffers && buffers[0];
      if (s.chunks === null || !Number.isInteger(msg.seq) || msg.seq < 0 || msg.seq >= s.chunks || s.parts[msg.seq] || !buf || buf.byteLength !== msg.length) {
        this.streamFailed(msg.ticket, "a chunk arrived out of order or damaged"); return;
      }
      s.parts[msg.seq] = buf;
      s.count += 1;
      s.got += buf.byteLength;
    } else return;
    if (s.progress) s.progress(s.got, s.size);
    const done = s.chunks !== null && s.count === s.chunks; // each seq is taken once (checked above)
    if (!done) return;
    clearTimeout(s.timer);
    this.streams.delete(msg.ticket);
    if (s.got !== s.size) { s.reject(new Error("received " + s.got + " of " + s.size + " bytes")); return; }
    const blob = new Blob(s.parts, { type: s.type });
    blob.loomSha256 = typeof s.sha256 === "string" ? s.sha256 : "";
    // Check the kernel's SHA-256 where the page may hash (a secure context); else the length only.
    if (!(globalThis.crypto && crypto.subtle) || !blob.loomSha256) { s.resolve(blob); return; }
    blob.arrayBuffer().then((bytes) => crypto.subtle.digest("SHA-256", bytes)).then((digest) => {
      const hex = [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
      if (hex === blob.loomSha256) s.resolve(blob);
      else s.reject(new Error("the bytes arrived damaged (SHA-256 differs)"));
    }, () => s.resolve(blob));
  }

  loader(view, type, label, show) {
    // The placeholder of streamed media: what it is, a control, progress, and a clear error.
    const box = h("div", "loom-stream");
    const offer = view.stream && typeof view.stream === "object" ? view.stream : null;
    if (offer) box.appendChild(h("div", "loom-stream-note", String(offer.reason) + " · streamed from the kernel when you ask"));
    const button = h("button", "loom-button loom-stream-load", label + " (" + humanSize(view.size) + ")");
    const bar = h("progress", "loom-stream-progress");
    bar.hidden = true;
    const status = h("span", "loom-stream-status");
    button.addEventListener("click", () => {
      button.disabled = true;
      bar.hidden = false;
      bar.removeAttribute("value");
      status.className = "loom-stream-status";
      status.textContent = "loading…";
      box.classList.remove("loom-stream-failed");
      this.fetchMedia(view, type, (got, size) => {
        if (size) { bar.max = size; bar.value = got; }
        status.textContent = "loading " + humanSize(got) + " of " + humanSize(size);
      }).then((blob) => {
        const url = URL.createObjectURL(blob);
        this.urls.push(url);
        bar.hidden = true;
        button.remove();
        status.textContent = "loaded " + humanSize(blob.size);
        box.dataset.loomBytes = String(blob.size);
        box.dataset.loomSha256 = blob.loomSha256;
        show(url, box);
      }, (error) => {
        bar.hidden = true;
        box.classList.add("loom-stream-failed");
        status.className = "loom-stream-status loom-error";
        status.textContent = "could not load: " + error.message;
        button.disabled = false;
        button.textContent = "retry " + label;
      });
    });
    box.append(button, bar, status);
    return box;
  }

  pdfFrame(url, box) {
    const frame = h("iframe", "loom-pdf-frame");
    frame.setAttribute("title", "PDF document");
    frame.setAttribute("src", url);
    box.appendChild(frame);
  }

  revoke() {
    for (const url of this.urls) URL.revokeObjectURL(url);
    this.urls = [];
    for (const ticket of [...this.streams.keys()]) this.streamFailed(ticket, "the view was closed");
  }
}
