/* The telemonitor's dashboard script (index.html). The page's tables are
 * rendered by the server and work without this script; it adds
 *   - charts of the daily statistics of each report assertion
 *     (/api/v1/stats): a mapping (a histogram) as bars, one colour per day;
 *     a number as its mean, min and max over the days;
 *   - a refresh every REFRESH_MS: the tables are taken from a fresh copy
 *     of the page, the charts redrawn when their numbers changed.
 * A canvas gets data-drawn="1" once Chart.js has painted it. Vanilla JS
 * and Chart.js (Debian's libjs-chart.js) only: no framework, no build. */
"use strict";

(function () {
  var REFRESH_MS = 15000;
  var PAIRS_LIMIT = 1000;       /* failures looked at to find report assertions */
  var COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                 "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];
  var charts = [];              /* Chart objects drawn */
  var lastStats = "";           /* the stats answers they were drawn from */

  function getJSON(url) {
    return fetch(url, { headers: { "Accept": "application/json" } }).then(function (r) {
      if (!r.ok)
        throw new Error(url + ": " + r.status);
      return r.json();
    });
  }

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined)
      e.textContent = text;
    return e;
  }

  /* The (prog, assert) pairs of report assertions among recent failures. */
  function reportPairs(failures) {
    var seen = {}, pairs = [];
    failures.forEach(function (f) {
      var k = JSON.stringify([f.prog, f.assert]);
      if (f.report && f.assert !== null && !seen[k]) {
        seen[k] = true;
        pairs.push({ prog: f.prog, assert: f.assert });
      }
    });
    return pairs;
  }

  function numericSort(a, b) {
    var x = Number(a), y = Number(b);
    if (!isNaN(x) && !isNaN(y))
      return x - y;
    return a < b ? -1 : a > b ? 1 : 0;
  }

  /* A mapping's values as numbers per key (nested mappings: their total). */
  function flat(values) {
    var out = {};
    Object.keys(values).forEach(function (k) {
      var v = values[k];
      if (typeof v === "number")
        out[k] = v;
      else if (v && typeof v === "object")
        out[k] = Object.keys(v).reduce(function (s, j) {
          return s + (typeof v[j] === "number" ? v[j] : 0);
        }, 0);
    });
    return out;
  }

  /* Chart.js specs for one stats answer: one chart per metric. */
  function specs(st) {
    var names = {}, out = [];
    st.days.forEach(function (d) {
      Object.keys(d.metrics).forEach(function (m) { names[m] = d.metrics[m].kind; });
    });
    Object.keys(names).sort().forEach(function (m) {
      var days = st.days.filter(function (d) { return d.metrics[m]; });
      if (names[m] === "mapping") {
        var keys = {}, per = days.map(function (d) {
          var f = flat(d.metrics[m].values);
          Object.keys(f).forEach(function (k) { keys[k] = true; });
          return f;
        });
        var labels = Object.keys(keys).sort(numericSort);
        out.push({ metric: m, kind: "mapping", title: m + " per day (histogram)",
          config: { type: "bar", data: { labels: labels, datasets: days.map(function (d, i) {
            return { label: d.day, backgroundColor: COLOURS[i % COLOURS.length],
                     data: labels.map(function (k) { return per[i][k] || 0; }) };
          }) } } });
      } else if (names[m] === "number") {
        var series = function (key, i) {
          return { label: key, borderColor: COLOURS[i], backgroundColor: COLOURS[i],
                   data: days.map(function (d) { return d.metrics[m][key]; }) };
        };
        out.push({ metric: m, kind: "number", title: m + " over days",
          config: { type: "line", data: { labels: days.map(function (d) { return d.day; }),
            datasets: [series("mean", 0), series("min", 2), series("max", 3)] } } });
      }
    });
    return out;
  }

  /* Has anything been painted on the canvas? */
  function painted(canvas) {
    var ctx = canvas.getContext("2d");
    if (!canvas.width || !canvas.height)
      return false;
    var px = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
    for (var i = 3; i < px.length; i += 4)
      if (px[i] !== 0)
        return true;
    return false;
  }

  function draw(answers) {
    var box = document.getElementById("charts");
    charts.forEach(function (c) { c.destroy(); });
    charts = [];
    box.textContent = "";
    document.getElementById("stats-empty").hidden = answers.length > 0;
    answers.forEach(function (st) {
      specs(st).forEach(function (s) {
        var fig = el("figure", { "class": "chart" });
        var canvas = el("canvas", { "data-prog": st.prog, "data-assert": st.assert,
                                    "data-metric": s.metric, "data-kind": s.kind });
        fig.appendChild(el("h3", {}, st.prog + " · " + st.assert + " · " + s.title));
        var holder = el("div", { "class": "holder" });
        holder.appendChild(canvas);
        fig.appendChild(holder);
        box.appendChild(fig);
        s.config.options = { animation: false, responsive: true, maintainAspectRatio: false,
                             plugins: { legend: { position: "bottom" } } };
        var chart = new Chart(canvas.getContext("2d"), s.config);
        chart.draw();
        if (painted(canvas))
          canvas.setAttribute("data-drawn", "1");
        charts.push(chart);
      });
    });
  }

  function loadCharts() {
    if (typeof Chart === "undefined") {
      document.getElementById("charts").textContent =
        "Chart.js was not found (/static/chart.js: install libjs-chart.js).";
      return Promise.resolve();
    }
    return getJSON("/api/v1/failures?limit=" + PAIRS_LIMIT).then(function (failures) {
      return Promise.all(reportPairs(failures).map(function (p) {
        return getJSON("/api/v1/stats?prog=" + encodeURIComponent(p.prog) +
                       "&assert=" + encodeURIComponent(p.assert));
      }));
    }).then(function (answers) {
      var text = JSON.stringify(answers);
      if (text !== lastStats || !charts.length) {
        lastStats = text;
        draw(answers);
      }
    }).catch(function (e) {
      document.getElementById("charts").textContent = "Cannot load the statistics: " + e;
    });
  }

  /* Take the tables from a fresh rendering of the page. */
  function refreshTables() {
    return fetch("/", { cache: "no-store" }).then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["instances", "failures", "generated"].forEach(function (id) {
          var fresh = doc.getElementById(id), old = document.getElementById(id);
          if (fresh && old)
            old.replaceWith(document.importNode(fresh, true));
        });
      }).catch(function () { /* keep the tables shown; the next refresh tries again */ });
  }

  loadCharts();
  setInterval(function () { refreshTables().then(loadCharts); }, REFRESH_MS);
})();
