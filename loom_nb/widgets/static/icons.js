// Icons drawn as inline SVG, shared by the widgets' front ends (joined before them into one
// module by loom_nb.widgets._base.esm_of). No icon is a character: emoji and pictographs
// (a speaker, a page, a pause sign, a warning sign) are empty boxes on a system without an emoji
// font, which most Linux machines are. Shapes and attributes are constants, never data.

const SVG_NS = "http://www.w3.org/2000/svg";

const ICONS = {
  // [tag, {attribute: value}] per shape, on a 16 x 16 grid, coloured by the text colour.
  pause: [
    ["rect", { x: "3.5", y: "2.5", width: "3", height: "11", rx: "0.6", fill: "currentColor" }],
    ["rect", { x: "9.5", y: "2.5", width: "3", height: "11", rx: "0.6", fill: "currentColor" }],
  ],
  file: [
    ["path", { d: "M3.5 1.5H9.5L12.5 4.5V14.5H3.5ZM9.5 1.5V4.5H12.5", fill: "none",
      stroke: "currentColor", "stroke-width": "1.2", "stroke-linejoin": "round" }],
    ["path", { d: "M5.5 8H10.5M5.5 10.5H10.5", stroke: "currentColor", "stroke-width": "1" }],
  ],
  speaker: [
    ["path", { d: "M1.5 6H4.5L8.5 2.5V13.5L4.5 10H1.5Z", fill: "currentColor" }],
    ["path", { d: "M10.5 5.5Q12.5 8 10.5 10.5M12.5 3.5Q15.5 8 12.5 12.5", fill: "none",
      stroke: "currentColor", "stroke-width": "1.2", "stroke-linecap": "round" }],
  ],
};

function icon(name) {
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", "loom-icon");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "1em");
  svg.setAttribute("height", "1em");
  svg.setAttribute("aria-hidden", "true");
  for (const [tag, attrs] of ICONS[name] || []) {
    const shape = document.createElementNS(SVG_NS, tag);
    for (const [key, value] of Object.entries(attrs)) shape.setAttribute(key, value);
    svg.appendChild(shape);
  }
  return svg;
}

function badge(text) {
  // A bordered mark such as "!", as the static HTML draws it (plain text, in every font).
  const node = document.createElement("span");
  node.className = "loom-badge";
  node.textContent = text;
  return node;
}
