// The console's live updates: one EventSource on the page's feed (body data-events, which
// starts right after what the page shows; a reconnect resumes by Last-Event-ID). A worker's
// line on its Run page is appended as text; any other change asks the page's live part to
// read itself again (htmx, `executor:changed`). Never inserts a worker's text as HTML.
(function () {
  "use strict";
  var body = document.body;
  var live = { source: null, stop: function () {} };
  window.executorConsole = live;
  // Refusals (a stale answer, a missing token) carry their notice: show it.
  htmx.config.responseHandling = [{ code: "204", swap: false }, { code: ".*", swap: true }];
  var feed = body.dataset.events;
  if (!feed || !window.EventSource) return;
  var pending = null;
  var stopped = false;
  function changed() {
    if (pending || stopped) return;
    pending = setTimeout(function () {
      pending = null;
      htmx.trigger(body, "executor:changed");
    }, 150);
  }
  var source = new EventSource(feed);
  live.source = source;
  // Stops following (as a page whose connection is lost): no more refreshes.
  live.stop = function () {
    stopped = true;
    source.close();
    if (pending) clearTimeout(pending);
    pending = null;
  };
  source.addEventListener("task", changed);
  source.addEventListener("decision", changed);
  source.addEventListener("line", function (event) {
    var list = document.getElementById("lines");
    var message = JSON.parse(event.data);
    if (list && String(message.run_id) === list.dataset.run) {
      var item = document.createElement("li");
      item.textContent = message.line;
      item.dataset.id = String(message.id);
      list.appendChild(item);
    } else {
      changed();
    }
  });
})();
