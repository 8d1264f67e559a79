// Kadence console: progressive enhancement only (every page works without it).
// Written for this project; no third-party code.
(function () {
  "use strict";

  // confirm destructive buttons and forms (data-confirm="question")
  document.addEventListener("submit", function (ev) {
    var form = ev.target;
    var button = ev.submitter;
    var question = (button && button.getAttribute("data-confirm")) || form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      ev.preventDefault();
    }
  });

  // follow an open run's timeline: poll the rows, replace them when the history grew, and
  // reload the page once the run closed (to show its result)
  var timeline = document.getElementById("timeline");
  if (!timeline || timeline.getAttribute("data-follow") !== "yes") {
    return;
  }
  var src = timeline.getAttribute("data-src");
  var last = timeline.getAttribute("data-last-seq");
  var busy = false;

  function openGroups() {
    var open = {};
    timeline.querySelectorAll("li.group details[open]").forEach(function (d) {
      open[d.parentElement.getAttribute("data-seq")] = true;
    });
    return open;
  }

  function poll() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(src, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (resp) {
        if (!resp.ok) {
          throw new Error("HTTP " + resp.status);
        }
        var seq = resp.headers.get("Kadence-Last-Seq");
        var closed = resp.headers.get("Kadence-Closed") === "true";
        return resp.text().then(function (html) {
          if (seq !== last) {
            var open = openGroups();
            timeline.innerHTML = html;
            timeline.querySelectorAll("li.group").forEach(function (li) {
              if (open[li.getAttribute("data-seq")]) {
                li.querySelector("details").setAttribute("open", "");
              }
            });
            last = seq;
            timeline.setAttribute("data-last-seq", seq);
          }
          if (closed) {
            window.clearInterval(timer);
            window.location.reload();
          }
        });
      })
      .catch(function () { /* the next tick tries again */ })
      .finally(function () { busy = false; });
  }

  var timer = window.setInterval(poll, 1000);
})();

// follow a workflow's stream live (the stream page): one row per value, until the end event
(function () {
  "use strict";
  var body = document.getElementById("stream");
  if (!body || !window.EventSource) {
    return;
  }
  var state = document.getElementById("stream-state");
  var source = new EventSource(body.getAttribute("data-src"));
  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
  }
  source.addEventListener("value", function (ev) {
    var data = JSON.parse(ev.data);
    var row = document.createElement("tr");
    cell(row, ev.lastEventId);
    cell(row, data.time);
    cell(row, data.activity_id ? "activity " + data.activity_id + " attempt " + data.attempt : "workflow");
    cell(row, JSON.stringify(data.value));
    body.appendChild(row);
  });
  source.addEventListener("end", function () {
    source.close();
    state.textContent = "the workflow closed: the stream is complete";
    state.setAttribute("data-ended", "yes");
  });
  source.onerror = function () {
    // EventSource reconnects by itself with Last-Event-ID; say so while it does
    if (source.readyState === EventSource.CONNECTING) {
      state.textContent = "reconnecting...";
    }
  };
})();
