"use strict";
// The report's only script: conversations rendered from the JSON blob when opened (always
// with textContent, never as markup), links that open them, and the agent filter.
(function () {
  var PREVIEW_LINES = 12;
  var PREVIEW_CHARS = 1200;
  var data = null;

  function conversations() {
    if (data === null) {
      data = JSON.parse(document.getElementById("conversation-data").textContent);
    }
    return data;
  }

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  // The first lines of a long text, or null when folding would hide only a little.
  function previewOf(text, lines) {
    var parts = text.split("\n");
    if (parts.length <= lines + 3 && text.length <= PREVIEW_CHARS * 1.5) return null;
    var cut = parts.slice(0, lines).join("\n");
    if (cut.length > PREVIEW_CHARS) cut = cut.slice(0, PREVIEW_CHARS);
    return cut.length < text.length ? cut : null;
  }

  // Long text shows its first lines; the rest unfolds on demand.
  function folded(text, lines) {
    var preview = previewOf(text, lines || PREVIEW_LINES);
    if (preview === null) return el("pre", "", text);
    var box = el("div", "fold");
    var short = el("pre", "", preview + " …");
    var more = el("details");
    var count = text.split("\n").length;
    var label = "show all (" + text.length.toLocaleString() + " characters, " +
      count.toLocaleString() + " lines)";
    var summary = el("summary", "", label);
    more.appendChild(summary);
    more.addEventListener("toggle", function () {
      if (more.open && more.childNodes.length === 1) more.appendChild(el("pre", "", text));
      short.classList.toggle("hidden", more.open);
      summary.textContent = more.open ? "show less" : label;
    });
    box.appendChild(short);
    box.appendChild(more);
    return box;
  }

  function pretty(raw) {
    try {
      return JSON.stringify(JSON.parse(raw), null, 2);
    } catch (e) {
      return String(raw);
    }
  }

  function message(m) {
    var role = m.role || "message";
    var box = el("div", "msg " + role + (m.is_error ? " error" : ""));
    var who = role;
    if (role === "tool") who += " · " + (m.name || "") + (m.error_type ? " · " + m.error_type : "");
    box.appendChild(el("div", "who", who));
    if (m.reasoning) {
      box.appendChild(el("div", "who", "reasoning"));
      box.appendChild(folded(m.reasoning, 4));
    }
    // A number is an index into the texts that several messages share.
    var content = typeof m.content === "number" ? conversations().texts[m.content] : m.content;
    if (content) box.appendChild(folded(content, role === "system" ? 3 : PREVIEW_LINES));
    (m.tool_calls || []).forEach(function (call) {
      var line = el("div", "call");
      line.appendChild(el("b", "", call.name));
      line.appendChild(document.createTextNode("  (" + (call.id || "") + ")"));
      line.appendChild(folded(pretty(call.arguments || "{}"), 8));
      box.appendChild(line);
    });
    return box;
  }

  function fill(details) {
    var body = details.querySelector(".msgs");
    if (body.dataset.done) return;
    body.dataset.done = "1";
    var entry = conversations().agents[Number(details.dataset.index)];
    var messages = entry ? entry[1] : [];
    if (!messages.length) body.appendChild(el("p", "empty", "No messages."));
    messages.forEach(function (m) { body.appendChild(message(m)); });
  }

  function openFromHash() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.classList.contains("conv")) {
      target.open = true;
      target.scrollIntoView({ block: "start" });
    }
  }

  function filter(query) {
    var q = query.trim().toLowerCase();
    document.querySelectorAll("[data-agent]").forEach(function (node) {
      node.classList.toggle("hidden", q !== "" && node.dataset.agent.toLowerCase().indexOf(q) < 0);
    });
    document.querySelectorAll("svg.dag .node").forEach(function (node) {
      var hit = q === "" || node.dataset.path.toLowerCase().indexOf(q) >= 0;
      node.classList.toggle("dim", !hit);
    });
    document.querySelectorAll("svg.dag .edge").forEach(function (edge) {
      var hit = q === "" || edge.dataset.source.toLowerCase().indexOf(q) >= 0 ||
        edge.dataset.target.toLowerCase().indexOf(q) >= 0;
      edge.classList.toggle("dim", !hit);
    });
  }

  document.querySelectorAll("details.conv").forEach(function (details) {
    details.addEventListener("toggle", function () { if (details.open) fill(details); });
  });
  window.addEventListener("hashchange", openFromHash);
  document.getElementById("filter").addEventListener("input", function (event) {
    filter(event.target.value);
  });
  openFromHash();
  document.documentElement.dataset.ready = "1";
})();
