/* The telemonitor's dashboard script (index.html, and the instance and
 * failure pages). The pages' tables are rendered by the server and work
 * without this script; it adds
 *   - the time series of each <figure data-series data-src=URL>: failures
 *     per minute by assertion (/api/v1/failures/series), and interval
 *     durations p50/p90/p99 per minute (/api/v1/durations/series); its
 *     canvas gets data-points="N", the points drawn;
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
    if (!document.getElementById("charts"))
      return Promise.resolve();
    if (typeof Chart === "undefined") {
      document.getElementById("charts").textContent =
        "Chart.js was not found (/static/chart.js: install libjs-chart.js).";
      return Promise.resolve();
    }
    return getJSON("/api/v1/failures?kind=report&limit=" + PAIRS_LIMIT).then(function (failures) {
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
    return fetch(location.pathname + location.search, { cache: "no-store" })
      .then(function (r) { return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["instances", "failures", "reports", "generated"].forEach(function (id) {
          var fresh = doc.getElementById(id), old = document.getElementById(id);
          if (fresh && old)
            old.replaceWith(document.importNode(fresh, true));
        });
      }).catch(function () { /* keep the tables shown; the next refresh tries again */ });
  }

  /* --- time series ------------------------------------------------------ */

  var seriesCharts = {};        /* figure id -> Chart */
  var lastSeries = {};          /* figure id -> the answer it was drawn from */

  function hhmm(t) {
    return new Date(t * 1000).toISOString().slice(5, 16).replace("T", " ");
  }

  /* Failures per step: every step of the range, 0 where none came. */
  function failureDatasets(a) {
    var n = Math.floor((a.until - a.since) / a.step), start = Math.floor(a.since / a.step) * a.step;
    return a.series.map(function (s, i) {
      var counts = {}, data = [];
      s.points.forEach(function (p) { counts[p[0]] = p[1]; });
      if (n <= 2000) {
        for (var k = 0; k <= n; k++) {
          var t = start + k * a.step;
          data.push({ x: t, y: counts[t] || 0 });
        }
      } else {
        data = s.points.map(function (p) { return { x: p[0], y: p[1] }; });
      }
      return { label: s.prog + " · " + s.assert + (s.report ? " (report)" : ""),
               borderColor: COLOURS[i % COLOURS.length],
               backgroundColor: COLOURS[i % COLOURS.length], data: data,
               pointRadius: 0, borderWidth: 1.5, stepped: true };
    });
  }

  /* Duration percentiles in ms, one line each. */
  function durationDatasets(a) {
    var out = [];
    a.series.forEach(function (s, i) {
      ["p50", "p90", "p99"].forEach(function (q, j) {
        out.push({ label: s.prog + " · " + s.type + " " + q,
                   borderColor: COLOURS[(i * 3 + j) % COLOURS.length],
                   backgroundColor: COLOURS[(i * 3 + j) % COLOURS.length],
                   pointRadius: 1.5, borderWidth: 1.5,
                   data: s.points.map(function (p) { return { x: p.t, y: p[q] / 1e6 }; }) });
      });
    });
    return out;
  }

  function drawSeries(fig, a) {
    var canvas = fig.querySelector("canvas"), durations = fig.dataset.series === "durations";
    var points = a.series.reduce(function (n, s) { return n + s.points.length; }, 0);
    var old = seriesCharts[fig.id], note = fig.querySelector("p.empty");
    if (old)
      old.destroy();
    if (note)
      note.remove();
    var chart = new Chart(canvas.getContext("2d"), {
      type: "line",
      data: { datasets: durations ? durationDatasets(a) : failureDatasets(a) },
      options: { animation: false, responsive: true, maintainAspectRatio: false, parsing: false,
                 plugins: { legend: { position: "bottom" } },
                 scales: { x: { type: "linear", min: a.since, max: a.until,
                                ticks: { callback: hhmm, maxTicksLimit: 8 },
                                title: { display: true, text: "UTC" } },
                           y: { beginAtZero: true,
                                title: { display: true,
                                         text: durations ? "ms" : "per " + a.step + " s" } } } }
    });
    chart.draw();
    seriesCharts[fig.id] = chart;
    canvas.setAttribute("data-points", String(points));
    if (painted(canvas))
      canvas.setAttribute("data-drawn", "1");
    if (!points)
      fig.appendChild(el("p", { "class": "empty" }, durations
        ? "No interval summaries in this time range." : "No failures in this time range."));
  }

  function loadSeries() {
    var figs = Array.prototype.slice.call(document.querySelectorAll("figure[data-series]"));
    if (typeof Chart === "undefined")
      return Promise.resolve();
    return Promise.all(figs.map(function (fig) {
      return getJSON(fig.getAttribute("data-src")).then(function (a) {
        var text = JSON.stringify(a.series);
        if (text !== lastSeries[fig.id] || !seriesCharts[fig.id]) {
          lastSeries[fig.id] = text;
          drawSeries(fig, a);
        }
      }).catch(function (e) {
        fig.appendChild(el("p", { "class": "empty" }, "Cannot load the series: " + e));
      });
    }));
  }

  loadSeries();
  loadCharts();
  if (document.getElementById("instances"))
    setInterval(function () { refreshTables().then(loadSeries).then(loadCharts); }, REFRESH_MS);
})();
