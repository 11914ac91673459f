// TranscriptView front end, part 1 of 4 (dom.js, markdown.js, media.js, transcript.js, after the
// shared icons.js, joined into one module by loom_nb.widgets._base.esm_of): the helpers every
// part uses. The DOM is built with textContent and setAttribute only; no string from the kernel
// is ever parsed as HTML.

const B64 = /^[A-Za-z0-9+/]*={0,2}$/;
const AUDIO = new Set(["audio/wav", "audio/x-wav", "audio/wave", "audio/mpeg", "audio/mp3",
  "audio/ogg", "audio/webm", "audio/flac", "audio/aac", "audio/mp4"]);

function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

function statsText(stats) {
  // A turn's reported tokens (cached ones too), latency and who answered, as the static HTML writes them.
  if (!stats || typeof stats !== "object") return "";
  const bits = [];
  const tin = stats.input_tokens, tout = stats.output_tokens;
  const cache = [];  // the prompt cache's share of the input, as the static HTML writes it
  if (Number.isInteger(stats.cache_read_tokens) && stats.cache_read_tokens > 0) cache.push(stats.cache_read_tokens.toLocaleString("en-US") + " cached");
  if (Number.isInteger(stats.cache_write_tokens) && stats.cache_write_tokens > 0) cache.push(stats.cache_write_tokens.toLocaleString("en-US") + " to cache");
  const cached = cache.length ? " (" + cache.join(", ") + ")" : "";
  if (Number.isInteger(tin) && Number.isInteger(tout) && (tin || tout)) bits.push(tin.toLocaleString("en-US") + " in" + cached + " · " + tout.toLocaleString("en-US") + " out tokens");
  const s = stats.latency_s;
  if (typeof s === "number" && s >= 0) bits.push(s >= 0.1 ? s.toFixed(1) + " s" : Math.round(s * 1000) + " ms");
  if (stats.status === "stopped") bits.push("stopped");
  if (typeof stats.provider === "string" && stats.provider) bits.push("via " + stats.provider + (typeof stats.model === "string" && stats.model ? " " + stats.model : ""));
  return bits.join(" · ");
}

function png(b64) {
  return typeof b64 === "string" && B64.test(b64) ? "data:image/png;base64," + b64 : null;
}

function humanSize(size) {
  if (typeof size !== "number") return "size unknown";
  const units = ["bytes", "KB", "MB", "GB"];
  let value = size, unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
  return unit === 0 ? size + " bytes" : value.toFixed(1) + " " + units[unit];
}

function meta(view) {
  const bits = [String(view.media_type)];
  if (view.name) bits.push(String(view.name));
  bits.push(humanSize(view.size));
  if (view.width) bits.push(view.width + "×" + view.height);
  if (view.pages) bits.push(view.pages + (view.pages === 1 ? " page" : " pages"));
  if (view.address) bits.push(String(view.address));
  return h("div", "loom-meta", bits.join(" · "));
}

