// Rhythm delivery console: shows every <time datetime> relative ("3 min ago") with the absolute
// time in the viewer's timezone as its title, again after each htmx swap. No other behaviour.
(function () {
  "use strict";
  var units = [["year", 31536000], ["month", 2592000], ["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];
  var rtf = typeof Intl !== "undefined" && Intl.RelativeTimeFormat ? new Intl.RelativeTimeFormat(undefined, { numeric: "auto" }) : null;
  function relative(date) {
    var secs = Math.round((date.getTime() - Date.now()) / 1000);
    for (var i = 0; i < units.length; i++) {
      var size = units[i][1];
      if (Math.abs(secs) >= size || size === 1) {
        var n = Math.round(secs / size);
        return rtf ? rtf.format(n, units[i][0]) : n + " " + units[i][0] + "s";
      }
    }
    return "";
  }
  function render(root) {
    var times = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < times.length; i++) {
      var t = times[i];
      var d = new Date(t.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      var absolute = d.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "medium" });
      t.title = absolute;
      t.textContent = t.hasAttribute("data-absolute") ? absolute : relative(d);
    }
  }
  document.addEventListener("DOMContentLoaded", function () { render(document); });
  document.addEventListener("htmx:afterSettle", function (e) { render(e.target); });
  setInterval(function () { render(document); }, 30000);
})();
