/* rmlens report: draws the Plotly figures from the JSON block and wires the map's
   click -> details panel and colour dropdown. Data text is only ever set with
   textContent (or escaped for Plotly's pseudo-HTML), never parsed as HTML. */
(function () {
  "use strict";
  var status = document.getElementById("rmlens-status");
  var data = JSON.parse(document.getElementById("rmlens-data").textContent);
  var PLOT_CONFIG = { displaylogo: false, responsive: true, scrollZoom: true };
  var PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31",
    "#843c39", "#7b4173", "#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363"];

  function escPlotly(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function fmt(value) {
    return value === null || value === undefined ? "n/a" : Number(value).toFixed(3);
  }
  function oneLine(text, limit) {
    var flat = String(text || "").replace(/\s+/g, " ").trim();
    return flat.length > limit ? flat.slice(0, limit - 1) + "\u2026" : flat;
  }
  function hasWebGL() {
    try {
      var canvas = document.createElement("canvas");
      return !!(canvas.getContext("webgl") || canvas.getContext("experimental-webgl"));
    } catch (err) {
      return false;
    }
  }

  var drawn = [];
  (data.figures || []).forEach(function (item) {
    var el = document.getElementById(item.id);
    if (el) drawn.push(Plotly.newPlot(el, item.figure.data, item.figure.layout, PLOT_CONFIG));
  });

  var map = data.map;
  var mapDiv = document.getElementById("map-plot");
  if (map && mapDiv) {
    var pts = map.points;
    var trace = map.figure.data[map.point_trace];
    if (trace.type === "scattergl" && !hasWebGL()) trace.type = "scatter";
    var hover = new Array(pts.n);
    for (var i = 0; i < pts.n; i++) {
      hover[i] = "<b>" + escPlotly(oneLine(pts.id[i], 40)) + "</b><br>CM " + fmt(pts.cm[i]) +
        " \u00b7 TM " + fmt(pts.tm[i]) + " \u00b7 TG " + fmt(pts.tg[i]) +
        (pts.conflict && pts.conflict[i] ? "<br>conflict: another group judged it the other way" : "") +
        (pts.text.prompt ? "<br>" + escPlotly(oneLine(pts.text.prompt[i], 70)) : "");
    }
    trace.hovertext = hover;
    applyColor(trace, map.colors[0]);
    drawn.push(Plotly.newPlot(mapDiv, map.figure.data, map.figure.layout, PLOT_CONFIG)
      .then(function () {
        mapDiv.on("plotly_click", function (event) {
          var hit = (event.points || []).filter(function (p) {
            return p.curveNumber === map.point_trace;
          })[0];
          if (hit) showDetails(hit.pointNumber);
        });
      }));

    var select = document.getElementById("map-color");
    map.colors.forEach(function (option, k) {
      var el = document.createElement("option");
      el.value = String(k);
      el.textContent = option.name;
      select.appendChild(el);
    });
    select.addEventListener("change", function () {
      var option = map.colors[Number(select.value)];
      var update = {};
      applyColor(update, option);
      Plotly.restyle(mapDiv, {
        "marker.color": [update.marker.color],
        "marker.colorscale": [update.marker.colorscale],
        "marker.cmin": [update.marker.cmin],
        "marker.cmax": [update.marker.cmax],
        "marker.cmid": [update.marker.cmid],
        "marker.colorbar": [update.marker.colorbar]
      }, [map.point_trace]);
    });

    Array.prototype.forEach.call(document.querySelectorAll("[data-point]"), function (row) {
      function open() {
        showDetails(Number(row.getAttribute("data-point")));
        document.getElementById("details").scrollIntoView({ block: "nearest" });
      }
      row.addEventListener("click", open);
      row.addEventListener("keydown", function (event) {
        if (event.key === "Enter") open();
      });
    });
  }

  function applyColor(target, option) {
    var marker = target.marker || {};
    target.marker = marker;
    marker.color = option.values.map(function (v) { return v === null ? NaN : v; });
    marker.cmid = undefined;
    if (option.kind === "categorical") {
      var k = option.categories.length;
      var scale = [];
      for (var c = 0; c < k; c++) {
        var colour = PALETTE[c % PALETTE.length];
        scale.push([c / k, colour], [(c + 1) / k, colour]);
      }
      marker.colorscale = scale;
      marker.cmin = -0.5;
      marker.cmax = k - 0.5;
      marker.colorbar = {
        title: { text: option.title }, tickvals: option.categories.map(function (_, c) {
          return c;
        }), ticktext: option.categories, len: 0.8
      };
    } else {
      var finite = option.values.filter(function (v) { return v !== null; });
      var lo = Math.min.apply(null, finite.length ? finite : [0]);
      var hi = Math.max.apply(null, finite.length ? finite : [1]);
      if (option.diverging) {
        var bound = Math.max(Math.abs(lo), Math.abs(hi), 1e-6);
        marker.cmin = -bound;
        marker.cmax = bound;
        marker.colorscale = [[0, "#2166ac"], [0.5, "#f7f7f7"], [1, "#b2182b"]];
      } else {
        marker.colorscale = "Viridis";
        marker.cmin = lo;
        marker.cmax = hi > lo ? hi : lo + 1;
      }
      marker.colorbar = { title: { text: option.title }, len: 0.8 };
    }
  }

  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  function showDetails(i) {
    var pts = map.points;
    var panel = document.getElementById("details");
    panel.classList.remove("empty");
    setText("details-id", pts.id[i]);
    ["tm", "tg", "cm"].forEach(function (name) {
      var lo = pts[name + "_lo"], hi = pts[name + "_hi"];
      setText("details-" + name, fmt(pts[name][i]) +
        (lo && hi ? " [" + fmt(lo[i]) + ", " + fmt(hi[i]) + "]" : ""));
    });
    setText("details-runs", (pts.n_in ? pts.n_in[i] : "n/a") + " in / " +
      (pts.n_out ? pts.n_out[i] : "n/a") + " out");
    ["prompt", "chosen", "rejected"].forEach(function (name) {
      var texts = pts.text[name];
      var cut = (pts.cut[name] || []).indexOf(i) >= 0;
      setText("details-" + name, texts ? texts[i] + (cut ? "\u2026 [cut: full text in memorization.csv]" : "") : "");
    });
    var meta = document.getElementById("details-meta");
    while (meta.firstChild) meta.removeChild(meta.firstChild);
    pts.meta_columns.forEach(function (column, c) {
      var dt = document.createElement("dt");
      dt.textContent = column;
      var dd = document.createElement("dd");
      var value = pts.meta[c][i];
      dd.textContent = value === null ? "n/a" : value;
      meta.appendChild(dt);
      meta.appendChild(dd);
    });
    Array.prototype.forEach.call(document.querySelectorAll("tr.selected"), function (row) {
      row.classList.remove("selected");
    });
    Array.prototype.forEach.call(document.querySelectorAll('[data-point="' + i + '"]'),
      function (row) { row.classList.add("selected"); });
    Plotly.restyle(mapDiv, { x: [[pts.tm[i]]], y: [[pts.tg[i]]] }, [map.selected_trace]);
    status.setAttribute("data-selected", String(i));
  }

  Promise.all(drawn).then(function () {
    status.setAttribute("data-ready", "1");
    status.setAttribute("data-figures", String(drawn.length));
  }, function (err) {
    status.setAttribute("data-ready", "error");
    console.error("rmlens report: a figure failed to draw", err);
  });
})();
