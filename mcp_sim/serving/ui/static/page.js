// The world page's few behaviours beyond htmx: live updates over SSE, and a confirm step before an export.
(function () {
  "use strict";

  // Refresh the element that shows the world (or the list of worlds) whenever the server says it changed.
  // The refresh asks for the same point in time the address shows (?at=N), so time travel survives new calls.
  function follow(live) {
    var events = new EventSource(live.dataset.events);
    events.addEventListener("changed", function (event) {
      if (event.data === live.dataset.signature) return;
      live.dataset.signature = event.data;
      htmx.ajax("GET", live.dataset.refresh + window.location.search, {target: live, swap: "innerHTML"});
    });
    events.addEventListener("open", function () { document.body.classList.add("connected"); });
    events.addEventListener("error", function () { document.body.classList.remove("connected"); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("[data-events]").forEach(follow);
  });

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-confirm]");
    if (link && !window.confirm(link.dataset.confirm)) event.preventDefault();
  });

  // A refused operation (a fork onto a taken name, say) says why instead of doing nothing.
  document.addEventListener("htmx:responseError", function (event) {
    var text = event.detail.xhr.responseText;
    try { text = JSON.parse(text).error || text; } catch (ignored) { /* not JSON: show it as it is */ }
    window.alert(text);
  });
})();
