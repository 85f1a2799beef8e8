// The console's script: SLA countdowns, and the live review queue (server-sent events from
// /ui/events). Every page works without it.
(function () {
  "use strict";

  function left(ms) {
    var s = Math.round(Math.abs(ms) / 1000);
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + r + "s";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("time.sla").forEach(function (t) {
      var ms = Date.parse(t.getAttribute("datetime")) - now;
      t.textContent = ms >= 0 ? "due in " + left(ms) : "overdue by " + left(ms);
      t.classList.toggle("overdue", ms < 0);
    });
  }
  tick();
  setInterval(tick, 1000);

  var queue = document.getElementById("queue");
  if (queue && window.EventSource) {
    var live = document.getElementById("live");
    var es = new EventSource("/ui/events");
    es.addEventListener("queue", function () {
      fetch(queue.dataset.live, { credentials: "same-origin" }).then(function (r) {
        if (!r.ok) { throw new Error(r.status); }
        return r.text();
      }).then(function (html) {
        queue.innerHTML = html;
        queue.dataset.updated = String(Date.now());
        if (live) { live.textContent = "Queue updated."; }
        tick();
      }).catch(function () {});
    });
    es.addEventListener("signed_out", function () { es.close(); window.location.href = "/ui/login"; });
  }
})();
