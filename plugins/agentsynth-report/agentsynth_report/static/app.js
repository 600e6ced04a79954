/* agentsynth report / viewer. One file for the static report and the local server.
 *
 * Everything that comes from a run (task ids, tool arguments, observations, verdict details) is put
 * on the page with textContent / createTextNode only, never as markup: an agent that writes
 * "<script>" in a tool argument gets that text shown, not run. */
(function () {
  "use strict";
  var COLORS = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#ca8a04", "#db2777"];
  var STATUS_NAME = { 1: "passed", 0: "failed", 2: "error" };
  var CFG = {};
  var STATE = { bundle: null, chunkCache: {}, timer: null };

  // --- tiny DOM helpers --------------------------------------------------------------------------
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      for (var key in attrs) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) continue;
        if (key === "class") node.className = value;
        else if (key === "text") node.textContent = String(value);
        else if (key.slice(0, 2) === "on") node.addEventListener(key.slice(2), value);
        else if (key === "style") node.setAttribute("style", value);
        else node.setAttribute(key, value === true ? "" : String(value));
      }
    }
    append(node, children);
    return node;
  }
  function append(node, children) {
    if (children === null || children === undefined) return node;
    if (!Array.isArray(children)) children = [children];
    for (var i = 0; i < children.length; i++) {
      var c = children[i];
      if (c === null || c === undefined || c === false) continue;
      node.appendChild(typeof c === "object" ? c : document.createTextNode(String(c)));
    }
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function pct(x) { return x === null || x === undefined ? "–" : (100 * x).toFixed(1) + "%"; }
  function ci(c) { return c ? "[" + (100 * c[0]).toFixed(1) + ", " + (100 * c[1]).toFixed(1) + "]" : ""; }
  function money(x) { return x === null || x === undefined ? "unknown" : "$" + Number(x).toFixed(4); }
  function num(x) { return Number(x || 0).toLocaleString("en-US"); }
  function pretty(value) {
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }
  function section(title, id, children) {
    return el("section", { id: id, class: "card" }, [el("h2", { text: title })].concat(children || []));
  }
  function color(i) { return COLORS[i % COLORS.length]; }
  function chip(run, i) {
    return el("span", { class: "chip", style: "border-color:" + color(i) }, [
      el("span", { class: "dot", style: "background:" + color(i) }), run.label]);
  }

  // --- data sources: embedded (static report) or the local server ------------------------------
  function embeddedBundle() {
    var node = document.getElementById("report-data");
    return node ? JSON.parse(node.textContent) : null;
  }
  function api(path, options) {
    return fetch(path, options).then(function (r) {
      return r.json().then(function (body) {
        if (!r.ok) throw new Error(body && body.error ? body.error : r.status + " " + r.statusText);
        return body;
      });
    });
  }
  function gunzipBase64(text) {
    var bin = atob(text.trim());
    var bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function loadEpisode(runIndex, rowIndex) {
    var bundle = STATE.bundle, run = bundle.runs[runIndex], row = run.episodes_rows[rowIndex];
    if (bundle.mode === "server") {
      var task = run.tasks[row[0]].id;
      return api("/api/runs/" + encodeURIComponent(run.key) + "/episode?task=" + encodeURIComponent(task) +
                 "&trial=" + row[1] + "&seed=" + row[2]);
    }
    var chunk = Math.floor(rowIndex / bundle.chunk), id = "c" + runIndex + "-" + chunk;
    var cached = STATE.chunkCache[id];
    if (!cached) {
      var node = document.getElementById(id);
      if (!node && document.readyState === "loading") {
        // the page is still being read (episode data comes last in the file): wait for it
        return new Promise(function (resolve) { document.addEventListener("DOMContentLoaded", resolve); })
          .then(function () { return loadEpisode(runIndex, rowIndex); });
      }
      if (!node) return Promise.reject(new Error("episode data " + id + " is missing from this file"));
      cached = STATE.chunkCache[id] = gunzipBase64(node.textContent);
    }
    return cached.then(function (list) {
      var item = list[rowIndex % bundle.chunk], ep = item.e;
      if (item.s >= 0 && ep.trajectory) {  // the run's shared system prompt and tools, stored once
        var shared = sharedOf(runIndex)[item.s] || {};
        ep.trajectory.system_prompt = shared.system_prompt || "";
        ep.trajectory.tools = shared.tools || [];
      }
      return ep;
    });
  }
  function sharedOf(runIndex) {
    var key = "shared-" + runIndex;
    if (!STATE.chunkCache[key]) {
      var node = document.getElementById(key);
      STATE.chunkCache[key] = node ? JSON.parse(node.textContent) : [];
    }
    return STATE.chunkCache[key];
  }

  // --- charts (uPlot) ----------------------------------------------------------------------------
  function chartWidth(node) { return Math.max(320, Math.min(900, (node.clientWidth || 800) - 8)); }

  function whiskers(bounds) {
    // a draw hook: vertical 95 % interval bars for point series (bounds[s] = [[lo, hi] or null, ...])
    return function (u) {
      var ctx = u.ctx;
      ctx.save();
      for (var s = 1; s < u.series.length; s++) {
        var b = bounds[s];
        if (!b || !u.series[s].show) continue;
        ctx.strokeStyle = u.series[s].stroke();
        ctx.lineWidth = 2 * devicePixelRatio;
        for (var i = 0; i < b.length; i++) {
          if (!b[i] || u.data[s][i] === null || u.data[s][i] === undefined) continue;
          var x = u.valToPos(u.data[0][i], "x", true);
          var y0 = u.valToPos(b[i][0], "y", true), y1 = u.valToPos(b[i][1], "y", true);
          ctx.beginPath(); ctx.moveTo(x, y0); ctx.lineTo(x, y1);
          ctx.moveTo(x - 5 * devicePixelRatio, y0); ctx.lineTo(x + 5 * devicePixelRatio, y0);
          ctx.moveTo(x - 5 * devicePixelRatio, y1); ctx.lineTo(x + 5 * devicePixelRatio, y1);
          ctx.stroke();
        }
      }
      ctx.restore();
    };
  }

  function decayChart(node, runs, pick, title, small) {
    // pass^k (solid) with its 95 % band and pass@k (dashed) against k, one colour per run
    var kmax = 1;
    runs.forEach(function (r) { var c = pick(r); if (c && c.length) kmax = Math.max(kmax, c[c.length - 1].k); });
    var xs = []; for (var k = 1; k <= kmax; k++) xs.push(k);
    var data = [xs], series = [{ label: "k" }], bands = [];
    runs.forEach(function (r, i) {
      var curve = pick(r) || [], byK = {};
      curve.forEach(function (p) { byK[p.k] = p; });
      var get = function (f) { return xs.map(function (k) { return byK[k] ? f(byK[k]) : null; }); };
      var base = data.length;
      data.push(get(function (p) { return p.pass_hat; }));
      data.push(get(function (p) { return p.pass_hat_ci[1]; }));
      data.push(get(function (p) { return p.pass_hat_ci[0]; }));
      data.push(get(function (p) { return p.pass_at; }));
      series.push({ label: r.label + " pass^k", stroke: color(i), width: 2, points: { show: true, size: 6 } });
      series.push({ label: "95% high", stroke: color(i) + "55", width: 1, points: { show: false } });
      series.push({ label: "95% low", stroke: color(i) + "55", width: 1, points: { show: false } });
      series.push({ label: r.label + " pass@k", stroke: color(i), width: 1, dash: [6, 4], points: { show: false } });
      bands.push({ series: [base + 1, base + 2], fill: color(i) + "22" });
    });
    var opts = {
      title: title, width: small ? 520 : chartWidth(node), height: small ? 200 : 260, bands: bands, series: series,
      scales: { x: { time: false, range: [0.8, kmax + 0.2] }, y: { range: [0, 1] } },
      axes: [{ label: "k", splits: function () { return xs; }, values: function (u, v) { return v.map(String); } },
             { label: "rate", values: function (u, v) { return v.map(function (x) { return Math.round(x * 100) + "%"; }); } }],
      legend: { show: false },
    };
    return makeChart(node, opts, data);
  }

  function pointsChart(node, title, xLabel, categories, runs, points) {
    // one point with a 95 % whisker per (run, x); categories (strings) or numeric xs
    var xs = [], bounds = [null], data, series = [{ label: xLabel }];
    if (categories) {
      xs = categories.map(function (_, i) { return i; });
      data = [xs];
      runs.forEach(function (r, i) {
        var ys = [], bs = [];
        categories.forEach(function (c) { var p = points(r, c); ys.push(p ? p.y : null); bs.push(p ? [p.lo, p.hi] : null); });
        data.push(ys); bounds.push(bs);
        series.push({ label: r.label, stroke: color(i), fill: color(i), paths: function () { return null; },
                      points: { show: true, size: 10, fill: color(i) } });
      });
    } else {
      var order = runs.map(function (r, i) { return { i: i, p: points(r) }; }).filter(function (o) { return o.p; });
      order.sort(function (a, b) { return a.p.x - b.p.x; });
      xs = order.map(function (o) { return o.p.x; });
      data = [xs];
      runs.forEach(function (r, i) {
        var ys = order.map(function (o) { return o.i === i ? o.p.y : null; });
        var bs = order.map(function (o) { return o.i === i ? [o.p.lo, o.p.hi] : null; });
        data.push(ys); bounds.push(bs);
        series.push({ label: r.label, stroke: color(i), fill: color(i), paths: function () { return null; },
                      points: { show: true, size: 10, fill: color(i) } });
      });
    }
    var lo = Infinity, hi = -Infinity, ymax = 1;
    xs.forEach(function (x) { lo = Math.min(lo, x); hi = Math.max(hi, x); });
    bounds.forEach(function (b) { (b || []).forEach(function (p) { if (p && p[1] > ymax) ymax = p[1]; }); });
    var percent = ymax <= 1;  // rates and 0..1 scores as percentages; other judge scales as they are
    if (!isFinite(lo)) { lo = 0; hi = 1; }
    var pad;
    if (categories) pad = 0.5;
    else { lo = 0; pad = hi > 0 ? hi * 0.1 : 1; }  // costs and tokens start at 0
    var xlo = categories ? lo - pad : 0;
    var opts = {
      title: title, width: chartWidth(node), height: 260, series: series,
      scales: { x: { time: false, range: [xlo, hi + pad] }, y: { range: [0, percent ? 1 : ymax * 1.05] } },
      axes: [
        categories
          ? { label: xLabel, splits: function () { return xs; }, values: function (u, v) { return v.map(function (i) { return categories[i] || ""; }); } }
          : { label: xLabel },
        { label: "rate / score", values: function (u, v) { return v.map(function (x) { return percent ? Math.round(x * 100) + "%" : String(x); }); } }],
      hooks: { draw: [whiskers(bounds)] }, legend: { show: false },
    };
    return makeChart(node, opts, data);
  }

  function makeChart(node, opts, data) {
    var holder = el("div", { class: "chart", "data-points": String(countPoints(data)) });
    node.appendChild(holder);
    if (typeof uPlot === "undefined") { holder.textContent = "charting library missing"; return null; }
    return new uPlot(opts, data, holder);
  }
  function countPoints(data) {
    var n = 0;
    for (var s = 1; s < data.length; s++) for (var i = 0; i < data[s].length; i++) if (data[s][i] !== null) n++;
    return n;
  }

  // --- the report ----------------------------------------------------------------------------------
  function renderReport(root, bundle) {
    var runs = bundle.runs;
    var main = el("div", { class: "report" });
    var head = el("header", { class: "card head" }, [
      el("h1", { text: bundle.title || "agentsynth report" }),
      el("div", { class: "chips" }, runs.map(chip)),
    ]);
    main.appendChild(head);
    main.appendChild(summarySection(runs));
    if (bundle.compare) main.appendChild(compareSection(bundle, bundle.compare));
    if (runs.some(function (r) { return r.state === "running"; })) {
      main.appendChild(el("p", { class: "live", text: "live: this page follows the running run (refreshes every 2 s)" }));
    }
    var curves = section("pass^k decay", "curves", [el("p", { class: "muted",
      text: "solid: pass^k (all k trials pass) · shaded: its 95% Wilson band over tasks · dashed: pass@k (at least one of k passes) · colours as above" })]);
    main.appendChild(curves);
    var tierNames = {};
    runs.forEach(function (r) { Object.keys(r.tiers || {}).forEach(function (t) { tierNames[t] = 1; }); });
    var tiers = Object.keys(tierNames).sort();
    var tierBox = tiers.length > 1 ? section("pass^k decay per tier", "tiers") : null;
    var tierGrid = el("div", { class: "chartgrid" });
    if (tierBox) tierBox.appendChild(tierGrid);
    if (tierBox) main.appendChild(tierBox);
    main.appendChild(attributionSection(runs));
    var cost = section("cost and accuracy", "cost");
    main.appendChild(cost);
    var judgeDims = {};
    runs.forEach(function (r) { Object.keys(r.judge || {}).forEach(function (d) { judgeDims[d] = 1; }); });
    var dims = Object.keys(judgeDims).sort();
    var judge = dims.length ? section("judge dimensions (mean, 95% interval)", "judge") : null;
    if (judge) main.appendChild(judge);
    main.appendChild(flakySection(runs));
    main.appendChild(tasksSection(runs));
    main.appendChild(episodesSection(runs));
    clear(root).appendChild(main);
    // charts need their container laid out to know the width
    decayChart(curves, runs, function (r) { return r.curve; }, "all tasks");
    tiers.forEach(function (t) {
      decayChart(tierGrid, runs, function (r) { return r.tiers[t] && r.tiers[t].curve; }, /^tier/i.test(t) ? t : "tier " + t, true);
    });
    var useCost = runs.some(function (r) { return r.usage.cost_usd; });
    var noteCost = el("p", { class: "muted", text: useCost ? "x: total cost of the run (USD)" :
      "no run recorded a cost: x is the total tokens" });
    cost.appendChild(costTable(runs));
    cost.appendChild(noteCost);
    pointsChart(cost, "pass@1 against " + (useCost ? "cost" : "tokens"), useCost ? "USD" : "tokens", null, runs,
      function (r) {
        var x = useCost ? (r.usage.cost_usd || 0) : (r.usage.prompt_tokens + r.usage.completion_tokens);
        return { x: x, y: r.pass1.rate, lo: r.pass1.ci[0], hi: r.pass1.ci[1] };
      });
    if (judge) {
      pointsChart(judge, "judge scores", "dimension", dims, runs, function (r, d) {
        var j = r.judge && r.judge[d]; return j ? { y: j.mean, lo: j.lo, hi: j.hi } : null;
      });
      judge.appendChild(judgeTable(runs, dims));
    }
    window.__reportReady = performance.now();
    document.body.setAttribute("data-ready", String(Math.round(window.__reportReady)));
  }

  function userFailures(r) { return (r.attribution && r.attribution[USER_KIND]) || 0; }
  function userRateCell(r) {
    var ex = r.pass1_excluding_user, n = userFailures(r);
    if (!ex) return el("td", { class: "num muted", text: "–" });
    return el("td", { class: "num pass1-user", title: n + " simulated-user failure(s) left out" },
      [pct(ex.rate) + " " + ci(ex.ci), el("div", { class: "muted small", text: ex.passed + " / " + ex.n + (n ? " · " + n + " left out" : "") })]);
  }
  function summarySection(runs) {
    var users = runs.reduce(function (n, r) { return n + userFailures(r); }, 0);
    var rows = runs.map(function (r, i) {
      var last = r.curve.length ? r.curve[r.curve.length - 1] : null;
      return el("tr", null, [
        el("td", { title: r.run_dir }, chip(r, i)),
        el("td", null, el("span", { class: "state " + r.state, text: r.state })),
        el("td", { class: "num" }, [num(r.episodes) + " / " + num(r.planned),
          r.planned ? el("div", { class: "bar" }, el("div", { style: "width:" + Math.min(100, 100 * r.episodes / r.planned) + "%" })) : null]),
        el("td", { class: "num pass1", text: pct(r.pass1.rate) + " " + ci(r.pass1.ci) }),
        el("td", { class: "num", text: last ? "pass^" + last.k + " " + pct(last.pass_hat) + " " + ci(last.pass_hat_ci) : "–" }),
        el("td", { class: "num", text: money(r.usage.cost_usd) }),
        el("td", { class: "num", text: num(r.usage.prompt_tokens + r.usage.completion_tokens) }),
        el("td", { class: "num", text: r.duration_s.toFixed(1) + " s" }),
      ].concat(users ? [userRateCell(r)] : []));
    });
    var heads = ["run (policy · pack)", "state", "episodes", "pass@1 [95% CI]", "pass^k [95% CI]", "cost", "tokens", "episode time"];
    var box = section("summary", "summary", [table(users ? heads.concat(["pass@1 without simulated-user failures"]) : heads, rows)]);
    if (users) box.querySelector("thead th:last-child").className = "wrap";
    if (users) box.appendChild(el("p", { class: "muted", text: "in " + users + " episode(s) the simulated user broke its " +
      "instructions or failed (error kind user): the simulator's failure, not the agent's, left out of the last column" }));
    return box;
  }

  function table(headers, rows, cls) {
    return el("table", { class: cls || "" }, [
      el("thead", null, el("tr", null, headers.map(function (h) { return el("th", { text: h }); }))),
      el("tbody", null, rows)]);
  }

  function attributionSection(runs) {
    var kinds = {};
    runs.forEach(function (r) { Object.keys(r.attribution).forEach(function (k) { kinds[k] = 1; }); });
    var names = Object.keys(kinds).sort();
    var box = section("why episodes did not pass", "attribution");
    if (!names.length) { box.appendChild(el("p", { class: "muted", text: "every episode passed" })); return box; }
    var rows = runs.map(function (r, i) {
      var failed = r.episodes - r.counts.passed;
      var bar = el("div", { class: "stack" }, names.map(function (k) {
        var n = r.attribution[k] || 0;
        return n ? el("div", { class: "seg kind-" + k, style: "flex:" + n, title: kindName(k) + ": " + n, text: kindName(k) + " " + n }) : null;
      }));
      return el("tr", null, [el("td", null, chip(r, i)), el("td", { class: "num", text: num(failed) })]
        .concat(names.map(function (k) { return el("td", { class: "num", text: num(r.attribution[k] || 0) }); }))
        .concat([el("td", { class: "wide" }, bar)]));
    });
    box.appendChild(table(["run", "not passed"].concat(names.map(kindName)).concat(["share"]), rows));
    box.appendChild(el("p", { class: "muted", text: "agent: the checkers said no; environment / checker / provider / timeout / budget: " +
      "the episode could not be completed (infrastructure); policy: the agent's own code failed." +
      (kinds[USER_KIND] ? " simulated user: the simulated user of a conversation broke its instructions or failed " +
        "(the simulator's failure, not the agent's)." : "") }));
    return box;
  }

  function costTable(runs) {
    return table(["run", "cost", "prompt tokens", "completion tokens", "requests", "cost / episode", "cost / pass"],
      runs.map(function (r, i) {
        var c = r.usage.cost_usd;
        return el("tr", null, [el("td", null, chip(r, i)), el("td", { class: "num", text: money(c) }),
          el("td", { class: "num", text: num(r.usage.prompt_tokens) }), el("td", { class: "num", text: num(r.usage.completion_tokens) }),
          el("td", { class: "num", text: num(r.usage.requests) }),
          el("td", { class: "num", text: c === null || !r.episodes ? "–" : money(c / r.episodes) }),
          el("td", { class: "num", text: c === null || !r.counts.passed ? "–" : money(c / r.counts.passed) })]);
      }));
  }

  function judgeTable(runs, dims) {
    return table(["run"].concat(dims), runs.map(function (r, i) {
      return el("tr", null, [el("td", null, chip(r, i))].concat(dims.map(function (d) {
        var j = r.judge[d]; return el("td", { class: "num", text: j ? j.mean.toFixed(3) + " (n=" + j.n + ")" : "–" });
      })));
    }));
  }

  function compareSection(bundle, comp) {
    var t = comp.test;
    var box = section("paired comparison: " + comp.a + " → " + comp.b, "compare", [
      el("p", { text: "over " + comp.common_tasks + " common tasks: pass@1 " + pct(comp.pass1_a) + " → " + pct(comp.pass1_b) +
        " (mean difference " + (t.mean_diff >= 0 ? "+" : "") + (100 * t.mean_diff).toFixed(1) + " points); " +
        "B better on " + t.wins_b + ", A better on " + t.wins_a + ", equal on " + t.ties +
        "; exact sign test p = " + (t.p_value < 1e-4 ? t.p_value.toExponential(2) : t.p_value.toFixed(4)) },
      ),
    ]);
    if (comp.only_a.length || comp.only_b.length) {
      box.appendChild(el("p", { class: "muted", text: "only in A: " + (comp.only_a.join(", ") || "none") +
        " · only in B: " + (comp.only_b.join(", ") || "none") }));
    }
    if (!comp.changed.length) { box.appendChild(el("p", { text: "no task changed" })); return box; }
    box.appendChild(table(["task", "change", "A pass@1", "B pass@1", "Δ", "A trials", "B trials"],
      comp.changed.map(function (c) {
        return el("tr", null, [el("td", { text: c.id }), el("td", null, el("span", { class: "change " + c.change, text: c.change })),
          el("td", { class: "num", text: pct(c.a) }), el("td", { class: "num", text: pct(c.b) }),
          el("td", { class: "num", text: (c.delta > 0 ? "+" : "") + (100 * c.delta).toFixed(0) }),
          el("td", null, gridCells(0, c.id)), el("td", null, gridCells(1, c.id))]);
      }), "changed"));
    return box;
  }

  function taskIndex(run) {
    if (!run._taskIndex) {
      run._taskIndex = {};
      run.tasks.forEach(function (t, i) { run._taskIndex[t.id] = i; });
      run._rowIndex = {};
      run.episodes_rows.forEach(function (row, i) { run._rowIndex[row[0] + ":" + row[1]] = i; });
    }
    return run._taskIndex;
  }

  function gridCells(runIndex, taskId) {
    var run = STATE.bundle.runs[runIndex], ti = taskIndex(run)[taskId];
    if (ti === undefined) return el("span", { class: "muted", text: "–" });
    var t = run.tasks[ti];
    return el("span", { class: "cells" }, t.grid.map(function (code, j) {
      var trial = t.trial_ids[j], row = run._rowIndex[ti + ":" + trial];
      return el("button", { class: "cell s" + code, title: t.id + " · trial " + trial + " · " + STATUS_NAME[code],
        "data-run": runIndex, "data-row": row, "aria-label": STATUS_NAME[code],
        onclick: function () { openEpisode(runIndex, row); } });
    }));
  }

  function flakySection(runs) {
    var box = section("flaky tasks (pass some trials, fail others)", "flaky");
    var rows = [];
    runs.forEach(function (r, i) {
      r.tasks.forEach(function (t) {
        if (t.flaky) rows.push(el("tr", null, [el("td", null, chip(r, i)), el("td", { text: t.id }), el("td", { text: t.tier }),
          el("td", { class: "num", text: t.passed + " / " + t.n }), el("td", null, gridCells(i, t.id))]));
      });
    });
    if (!rows.length) box.appendChild(el("p", { class: "muted", text: "no flaky task: every task passed all its trials or none" }));
    else box.appendChild(table(["run", "task", "tier", "passed", "trials"], rows.slice(0, 500)));
    return box;
  }

  function sparkline(values) {
    var ns = "http://www.w3.org/2000/svg", w = 60, h = 18;
    var svg = document.createElementNS(ns, "svg");
    svg.setAttribute("width", w); svg.setAttribute("height", h); svg.setAttribute("class", "spark");
    if (values.length > 1) {
      var pts = values.map(function (v, i) { return (i * (w - 4) / (values.length - 1) + 2) + "," + (h - 2 - v * (h - 4)); });
      var line = document.createElementNS(ns, "polyline");
      line.setAttribute("points", pts.join(" ")); svg.appendChild(line);
    }
    return svg;
  }

  function tasksSection(runs) {
    var box = section("tasks × trials", "tasks");
    var ids = [], seen = {};
    runs.forEach(function (r) { r.tasks.forEach(function (t) { if (!seen[t.id]) { seen[t.id] = 1; ids.push(t.id); } }); });
    var filter = el("input", { type: "search", placeholder: "filter tasks", class: "filter" });
    var failing = el("input", { type: "checkbox" });
    var body = el("tbody");
    var more = el("button", { class: "more", text: "show more" });
    var shown = 0, list = ids;
    function row(id) {
      var cells = [el("td", { class: "task", text: id })];
      runs.forEach(function (r, i) {
        var t = r.tasks[taskIndex(r)[id]];
        if (!t) { cells.push(el("td", { class: "muted", text: "–" }), el("td"), el("td")); return; }
        cells.push(el("td", { class: "num", title: "95% Wilson interval over its " + t.n + " trials" },
          [pct(t.pass1) + (t.flaky ? " ~" : ""), el("div", { class: "muted small", text: ci(t.pass1_ci) })]));
        cells.push(el("td", { title: "pass^1.." + t.n + ": " + t.pass_hat.map(pct).join(", ") }, sparkline(t.pass_hat)));
        cells.push(el("td", null, gridCells(i, id)));
      });
      return el("tr", null, cells);
    }
    function page() {
      var end = Math.min(list.length, shown + 200);
      for (; shown < end; shown++) body.appendChild(row(list[shown]));
      more.style.display = shown < list.length ? "" : "none";
      more.textContent = "show more (" + (list.length - shown) + " left)";
    }
    function refilter() {
      var q = filter.value.toLowerCase();
      list = ids.filter(function (id) {
        if (q && id.toLowerCase().indexOf(q) < 0) return false;
        if (failing.checked) return runs.some(function (r) { var t = r.tasks[taskIndex(r)[id]]; return t && t.passed < t.n; });
        return true;
      });
      clear(body); shown = 0; page();
    }
    // a live page is redrawn every 2 s: keep what the user filtered
    var kept = STATE.taskFilter || { q: "", failing: false };
    filter.value = kept.q; failing.checked = kept.failing;
    function remember() { STATE.taskFilter = { q: filter.value, failing: failing.checked }; refilter(); }
    filter.addEventListener("input", remember);
    failing.addEventListener("change", remember);
    more.addEventListener("click", page);
    var heads = ["task"];
    runs.forEach(function (r) { heads.push(r.label + " pass@1", "pass^1..k", "trials"); });
    box.appendChild(el("div", { class: "tools" }, [filter, el("label", null, [failing, " only tasks that did not always pass"]),
      el("span", { class: "legend" }, [el("span", { class: "cell s1" }), "passed ", el("span", { class: "cell s0" }), "failed ",
        el("span", { class: "cell s2" }), "error · click a cell to open the episode"])]));
    box.appendChild(el("table", { class: "grid" }, [el("thead", null, el("tr", null, heads.map(function (h) { return el("th", { text: h }); }))), body]));
    box.appendChild(more);
    if (kept.q || kept.failing) refilter(); else page();
    return box;
  }

  function episodesSection(runs) {
    var box = section("episodes that did not pass", "episodes");
    var body = el("tbody"), more = el("button", { class: "more", text: "show more" });
    var items = [];
    runs.forEach(function (r, i) {
      r.episodes_rows.forEach(function (row, j) { if (row[3] !== 1) items.push([i, j]); });
    });
    var shown = 0;
    function page() {
      var end = Math.min(items.length, shown + 100);
      for (; shown < end; shown++) {
        var it = items[shown], r = runs[it[0]], row = r.episodes_rows[it[1]];
        body.appendChild(el("tr", null, [el("td", null, chip(r, it[0])), el("td", { text: r.tasks[row[0]].id }),
          el("td", { class: "num", text: row[1] }),
          el("td", null, el("span", { class: "kind kind-" + (row[3] === 0 ? "agent" : row[4]), text: row[3] === 0 ? "agent" : (kindName(row[4]) || "error") })),
          el("td", { class: "why", text: row[9] }),
          el("td", null, el("button", { class: "open", "data-run": it[0], "data-row": it[1], text: "open",
            onclick: (function (a, b) { return function () { openEpisode(a, b); }; })(it[0], it[1]) }))]));
      }
      more.style.display = shown < items.length ? "" : "none";
      more.textContent = "show more (" + (items.length - shown) + " left)";
    }
    more.addEventListener("click", page);
    if (!items.length) box.appendChild(el("p", { class: "muted", text: "every episode passed" }));
    else {
      box.appendChild(el("table", null, [el("thead", null, el("tr", null, ["run", "task", "trial", "who", "why", ""].map(function (h) {
        return el("th", { text: h }); }))), body]));
      box.appendChild(more);
      page();
    }
    return box;
  }

  // --- the trajectory viewer -------------------------------------------------------------------------
  function viewerPanel() {
    var panel = document.getElementById("viewer");
    if (!panel) {
      panel = el("aside", { id: "viewer", class: "viewer", role: "dialog", "aria-label": "episode" });
      document.body.appendChild(panel);
      document.addEventListener("keydown", function (e) { if (e.key === "Escape") closeViewer(); });
    }
    return panel;
  }
  function closeViewer() {
    var panel = document.getElementById("viewer");
    if (panel) panel.classList.remove("open");
    if (location.hash.indexOf("#ep=") === 0) history.replaceState(null, "", location.pathname + location.search);
  }
  function openEpisode(runIndex, rowIndex) {
    var panel = viewerPanel();
    clear(panel).appendChild(el("p", { class: "muted", text: "loading episode…" }));
    panel.classList.add("open");
    history.replaceState(null, "", "#ep=" + runIndex + ":" + rowIndex);
    loadEpisode(runIndex, rowIndex).then(function (ep) {
      clear(panel);
      panel.appendChild(el("button", { class: "close", text: "close ✕", onclick: closeViewer }));
      panel.appendChild(renderEpisode(ep, STATE.bundle.runs[runIndex]));
    }).catch(function (err) {
      clear(panel).appendChild(el("p", { class: "error", text: "could not load the episode: " + err.message }));
      panel.appendChild(el("button", { class: "close", text: "close ✕", onclick: closeViewer }));
    });
  }

  function pre(value, cls) { return el("pre", { class: cls || "" , text: pretty(value) }); }

  function renderSteps(steps) {
    return el("ol", { class: "steps" }, (steps || []).map(function (s, i) { return stepItem(s, i); }));
  }
  function stepItem(s, i, who) {
    // one step: the agent's (who undefined) or, in dual control, the simulated user's own ("user")
    var a = s.action || {}, parts = [], mine = who === USER_KIND;
    parts.push(el("div", { class: "stephead" }, [el("b", { text: mine ? "the user's tool call" : "step " + (i + 1) }),
      (mine ? " · dual control" : " · turn " + (s.turn || 0)) +
      (s.duration_s ? " · " + (1000 * s.duration_s).toFixed(1) + " ms" : "") + (s.invalid ? " · invalid call" : "")]));
    if (s.thought) parts.push(el("div", { class: "thought" }, [el("span", { class: "lbl", text: "thought" }), pre(s.thought)]));
    if (a.type === "answer") {
      var reply = fromUser(s.observation) ? s.observation : null;  // a conversation's step, seen one by one
      parts.push(el("div", { class: "answer" }, [el("span", { class: "lbl", text: reply ? "message to the user" : "answer" }), pre(a.content || "")]));
      if (reply) parts.push(userReply(reply));
    } else {
      parts.push(el("div", { class: "call" }, [el("span", { class: "lbl", text: mine ? "user's tool call" : "tool call" }),
        el("code", { class: "tool", text: a.name }), pre(a.arguments || {}, "args")]));
      if (s.observation) {
        var o = s.observation;
        parts.push(el("div", { class: "obs" + (o.error ? " err" : "") }, [el("span", { class: "lbl", text: o.error ? "observation (error)" : "observation" }),
          pre(o.content || ""), o.data !== undefined && o.data !== null ? el("details", null, [el("summary", { text: "structured data" }), pre(o.data)]) : null]));
      }
    }
    return el("li", mine ? { class: "step by-user", "data-who": "user", "data-kind": "tool" } : { class: "step" }, parts);
  }

  // --- conversations: a task with a simulated user (the kernel's agentsynth_kernel/user.py) -----------
  // Every Answer of the agent is a message to the user, and that step's observation is the user's reply
  // (data.from "user", done when the user ended the talk); trajectory.user is the user's own side: its
  // instructions (never shown to the agent), its messages, and its own tool calls (dual control), the
  // ones made while it answered the agent's k-th message having turn k.
  var USER_KIND = "user";
  function kindName(kind) { return kind === USER_KIND ? "simulated user" : kind; }
  function fromUser(o) { return !!(o && o.data && typeof o.data === "object" && o.data.from === "user"); }
  function isConversation(t) {
    if (t.user && typeof t.user === "object") return true;
    return (t.steps || []).some(function (s) { return s.action && s.action.type === "answer" && fromUser(s.observation); });
  }
  function userReply(o) {
    var parts = [];
    if (o.content) parts.push(el("span", { class: "lbl", text: "user" }), pre(o.content));
    if (o.done) parts.push(el("div", { class: "convend", text: o.data && o.data.stopped === "max_turns" ?
      "the conversation reached the user's max_turns" : "the user ended the conversation" }));
    return el("div", { class: "reply" }, parts);
  }
  function message(who, text, head, extra) {
    return el("li", { class: "msg from-" + who, "data-who": who, "data-kind": "message" }, [
      el("div", { class: "stephead" }, [el("b", { text: who === USER_KIND ? "user" : "agent" }), head ? " · " + head : ""]),
      extra || null, pre(text || "")]);
  }
  function userCallsByMessage(side) {
    var calls = {};
    ((side && side.steps) || []).forEach(function (s) {
      if (s.action && s.action.type !== "answer") (calls[s.turn || 0] = calls[s.turn || 0] || []).push(s);
    });
    return calls;
  }
  function renderConversation(t, userFailed) {
    // the user's opening message, then the agent's steps in order: its tool calls with their results,
    // each of its messages followed by the user's own tool calls and the user's reply
    var items = [message(USER_KIND, t.instruction, "opening message")];
    var calls = userCallsByMessage(t.user), sent = 0;
    (t.steps || []).forEach(function (s, i) {
      var a = s.action || {};
      if (a.type !== "answer") { items.push(stepItem(s, i)); return; }
      sent += 1;
      var head = "step " + (i + 1) + " · turn " + (s.turn || 0) + (s.duration_s ? " · " + (1000 * s.duration_s).toFixed(1) + " ms" : "");
      items.push(message("agent", a.content, head, s.thought ? el("div", { class: "thought" }, [el("span", { class: "lbl", text: "thought" }), pre(s.thought)]) : null));
      (calls[sent] || []).forEach(function (u) { items.push(stepItem(u, -1, USER_KIND)); });
      var o = s.observation;
      if (!o) {
        if (userFailed && i === t.steps.length - 1) items.push(el("li", { class: "convend", text: "the simulated user failed before it replied" }));
        return;
      }
      if (o.content) items.push(message(USER_KIND, o.content, "reply to message " + sent));
      if (o.done) items.push(el("li", { class: "convend", text: o.data && o.data.stopped === "max_turns" ?
        "the conversation reached the user's max_turns" : "the user ended the conversation" }));
    });
    return el("ol", { class: "steps conversation" }, items);
  }
  function conversationCounts(t) {
    var steps = t.steps || [], said = 0, replies = 0, own = 0;
    steps.forEach(function (s) {
      if (s.action && s.action.type === "answer") { said++; if (s.observation && s.observation.content) replies++; }
    });
    ((t.user && t.user.steps) || []).forEach(function (s) { if (s.action && s.action.type !== "answer") own++; });
    return "conversation (" + steps.length + " steps: " + said + " message(s) of the agent, " + (steps.length - said) +
      " tool call(s); " + replies + " repl" + (replies === 1 ? "y" : "ies") + " of the user" +
      (own ? ", " + own + " tool call(s) of the user" : "") + ")";
  }
  function userFailure() {
    return el("div", { class: "userfail" }, [el("b", { text: "the simulated user failed: " }),
      "it broke its instructions (user.checks), failed or overspent. This is the simulator's failure, not the agent's: " +
      "the episode is left out of the pass rate without simulated-user failures."]);
  }

  function compact(value) {
    if (value === null || value === undefined) return "";
    return typeof value === "string" ? value : JSON.stringify(value);
  }
  function worldDiff(changes) {
    // the sql world's collateral diff: one row per changed row (table, op, key, columns, before -> after)
    return table(["table", "change", "row", "before", "after"], changes.map(function (c) {
      var cols = c.columns && c.columns.length ? c.columns : null;
      var pick = function (row) {
        if (!row || !cols) return compact(row);
        var out = {}; cols.forEach(function (k) { out[k] = row[k]; }); return compact(out);
      };
      return el("tr", null, [el("td", { text: c.table }), el("td", { text: c.op }), el("td", { text: compact(c.key) }),
        el("td", { class: "why", text: pick(c.before) }), el("td", { class: "why", text: pick(c.after) })]);
    }), "diff");
  }
  function renderVerdicts(verdicts) {
    return el("ul", { class: "verdicts" }, (verdicts || []).map(function (v) {
      var data = v.data, diff = data && Array.isArray(data.unexpected) ? data.unexpected : null;
      return el("li", { class: v.passed ? "ok" : "bad" }, [el("b", { text: (v.passed ? "✓ " : "✗ ") + v.checker }), " ", v.detail || "",
        diff ? el("div", { class: "worlddiff" }, [el("span", { class: "lbl", text: "world diff: unexpected changes" }), worldDiff(diff)]) : null,
        data !== undefined && data !== null ? el("details", null, [el("summary", { text: "verdict data" }), pre(data)]) : null]);
    }));
  }

  function renderEpisode(ep, run) {
    var t = ep.trajectory || {}, u = ep.usage || {}, talk = isConversation(t);
    var box = el("div", { class: "episode" + (talk ? " talk" : "") });
    box.appendChild(el("h2", { text: ep.task_id + " · trial " + ep.trial }));
    box.appendChild(el("p", null, [el("span", { class: "state " + ep.status + (ep.error_kind === USER_KIND ? " by-user" : ""),
      text: ep.status + (ep.error_kind ? " (" + kindName(ep.error_kind) + ")" : "") }),
      " seed " + ep.seed + " · " + (ep.duration_s || 0).toFixed(2) + " s · " + money(u.cost_usd === undefined ? 0 : u.cost_usd) +
      " · " + num((u.prompt_tokens || 0) + (u.completion_tokens || 0)) + " tokens" + (run ? " · " + run.label : "")]));
    if (ep.error_kind === USER_KIND) box.appendChild(userFailure());
    if (ep.error) box.appendChild(el("div", { class: "error" + (ep.error_kind === USER_KIND ? " by-user" : "") }, [el("b", { text: "error: " }), ep.error]));
    if (t.metadata && t.metadata.traceback) box.appendChild(el("details", null, [el("summary", { text: "traceback" }), pre(t.metadata.traceback)]));
    // the verdicts first: they say why; the trajectory below says how
    var verdicts = ep.verdicts || [];
    var ruled = verdicts.filter(function (v) { return /^user\./.test(v.checker || ""); });
    var world = ruled.length ? verdicts.filter(function (v) { return ruled.indexOf(v) < 0; }) : verdicts;
    box.appendChild(el("h3", { text: "verdicts" }));
    box.appendChild(world.length ? renderVerdicts(world) : el("p", { class: "muted", text: "no verdict (the episode did not reach its checkers)" }));
    if (ruled.length) {
      box.appendChild(el("h3", { text: "the simulated user's rules (user.checks: the simulator's, not the agent's)" }));
      box.appendChild(renderVerdicts(ruled));
    }
    if (!talk) {
      box.appendChild(el("h3", { text: "instruction" }));
      box.appendChild(pre(t.instruction || ""));
    }
    if (t.system_prompt) box.appendChild(el("details", null, [el("summary", { text: "system prompt" }), pre(t.system_prompt)]));
    if (t.initial_observation) box.appendChild(el("details", null, [el("summary", { text: "first observation" }), pre(t.initial_observation)]));
    if (t.tools && t.tools.length) box.appendChild(el("details", null, [el("summary", { text: "tools: " + t.tools.map(function (x) { return x.name; }).join(", ") }), pre(t.tools)]));
    if (talk && t.user && typeof t.user === "object") box.appendChild(userSide(t.user));
    box.appendChild(el("h3", { text: talk ? conversationCounts(t) : "trajectory (" + (t.steps || []).length + " steps)" }));
    box.appendChild(talk ? renderConversation(t, ep.error_kind === USER_KIND) : renderSteps(t.steps));
    if (talk && t.metadata && t.metadata.user_cut) box.appendChild(el("p", { class: "muted", text: "the user's rules were " +
      "broken in a talk the agent cut short (the user never ended it), so they count against the agent: " + t.metadata.user_cut }));
    if (t.metadata && t.metadata.stopped) box.appendChild(el("p", { class: "muted", text: "stopped: " + t.metadata.stopped }));
    var scores = ep.scores || {};
    if (Object.keys(scores).length) {
      box.appendChild(el("h3", { text: "judge" }));
      box.appendChild(table(["dimension", "score"], Object.keys(scores).map(function (k) { return el("tr", null, [el("td", { text: k }), el("td", { class: "num", text: Number(scores[k]).toFixed(3) })]); })));
    }
    if (ep.judge_error) box.appendChild(el("p", { class: "error", text: "judge failed: " + ep.judge_error }));
    var meta = Object.assign({}, t.metadata || {}); delete meta.traceback;
    if (Object.keys(meta).length) box.appendChild(el("details", null, [el("summary", { text: "metadata" }), pre(meta)]));
    return box;
  }
  function userSide(side) {
    // what the simulated user was told (collapsed: the agent never saw it) and how its side ended
    var tools = (side.tools || []).map(function (x) { return x.name; });
    var stopped = side.metadata && side.metadata.stopped;
    return el("details", { class: "userside" }, [
      el("summary", { text: "the user's instructions (hidden from the agent)" }),
      pre(side.instruction || ""),
      tools.length ? el("p", { class: "muted", text: "the user's own tools (dual control; the agent cannot call them): " + tools.join(", ") }) : null,
      stopped ? el("p", { class: "muted", text: "the user's side stopped: " + stopped }) : null,
      side.system_prompt ? el("details", null, [el("summary", { text: "the simulator's system prompt" }), pre(side.system_prompt)]) : null]);
  }

  // --- server pages ------------------------------------------------------------------------------
  function nav(active) {
    var links = [["/", "runs"], ["/leaderboard", "leaderboard"], ["/playground", "playground"]];
    return el("nav", { class: "top" }, [el("b", { text: "agentsynth" })].concat(links.map(function (l) {
      return el("a", { href: l[0], class: l[1] === active ? "active" : "", text: l[1] });
    })));
  }

  function runsPage(root) {
    var box = el("div");
    clear(root).appendChild(box);
    function draw(data) {
      clear(box);
      var selected = {};
      var go = el("button", { text: "compare selected", disabled: true, onclick: function () {
        location.href = "/compare?runs=" + Object.keys(selected).map(encodeURIComponent).join(",");
      } });
      var rows = data.runs.map(function (r) {
        var box2 = el("input", { type: "checkbox", "aria-label": "select " + r.label, onchange: function (e) {
          if (e.target.checked) selected[r.key] = 1; else delete selected[r.key];
          go.disabled = Object.keys(selected).length < 2;
        } });
        if (r.error) return el("tr", null, [el("td"), el("td", { text: r.run_dir }), el("td", { class: "error", colspan: 6, text: r.error })]);
        return el("tr", null, [el("td", null, box2), el("td", null, el("a", { href: "/runs/" + encodeURIComponent(r.key), text: r.name })),
          el("td", { text: r.pack }), el("td", { text: r.policy }), el("td", null, el("span", { class: "state " + r.state, text: r.state })),
          el("td", { class: "num" }, [num(r.episodes) + " / " + num(r.planned), el("div", { class: "bar" }, el("div", { style: "width:" + (r.planned ? Math.min(100, 100 * r.episodes / r.planned) : 0) + "%" }))]),
          el("td", { class: "num" }, [pct(r.pass1.rate) + " " + ci(r.pass1.ci), r.user_failures && r.pass1_excluding_user ?
            el("div", { class: "muted small", text: "without simulated-user failures " + pct(r.pass1_excluding_user.rate) +
              " (" + r.user_failures + " left out)" }) : null]), el("td", { class: "num", text: money(r.cost_usd) })]);
      });
      box.appendChild(section("run directories", "runs", [
        el("p", { class: "muted", text: "from " + data.roots.join(", ") + " · refreshes every 2 s" }),
        rows.length ? table(["", "run", "pack", "policy", "state", "episodes", "pass@1 [95% CI]", "cost"], rows, "runs") :
          el("p", { text: "no run directory found (make one with agentsynth bench --run-dir DIR)" }), go]));
    }
    function tick() { api("/api/runs").then(draw).catch(function (e) { clear(box).appendChild(el("p", { class: "error", text: e.message })); }); }
    tick();
    STATE.timer = setInterval(function () { if (!document.querySelector("#runs input:checked")) tick(); }, 2000);
  }

  function reportPage(root, keys) {
    var url = "/api/report?runs=" + keys.map(encodeURIComponent).join(",");
    var download = "/report.html?runs=" + keys.map(encodeURIComponent).join(",");
    var hadViewer = false;
    function load() {
      return api(url).then(function (bundle) {
        bundle.mode = "server";
        STATE.bundle = bundle;
        var scrollY = window.scrollY;
        renderReport(root, bundle);
        var head = root.querySelector("header.head");
        if (head) head.appendChild(el("a", { class: "download", href: download, text: "download as one HTML file" }));
        window.scrollTo(0, scrollY);
        if (!hadViewer) { hadViewer = true; openFromHash(); }
        if (bundle.runs.some(function (r) { return r.state === "running"; })) setTimeout(load, 2000);
      }).catch(function (e) { clear(root).appendChild(el("p", { class: "error", text: e.message })); });
    }
    load();
  }

  function leaderboardPage(root) {
    api("/api/leaderboard").then(function (data) {
      clear(root);
      var packs = Object.keys(data.packs);
      if (!packs.length) root.appendChild(el("p", { text: "no finished episodes in the run directories yet" }));
      packs.forEach(function (p) {
        var entries = data.packs[p];
        var rows = entries.map(function (e) {
          var band = el("div", { class: "ciband" }, [el("div", { class: "range", style: "left:" + 100 * e.ci[0] + "%;width:" + 100 * (e.ci[1] - e.ci[0]) + "%" }),
            el("div", { class: "mark", style: "left:" + 100 * e.rate + "%" })]);
          return el("tr", null, [el("td", { class: "num rank", text: (e.tied ? "=" : "") + e.rank }),
            el("td", null, el("a", { href: "/runs/" + encodeURIComponent(e.key), text: e.label })), el("td", { text: e.policy }),
            el("td", { class: "num", text: pct(e.rate) + " " + ci(e.ci) }), el("td", { class: "wide" }, band),
            el("td", { class: "num", text: "pass^" + e.k + " " + pct(e.pass_hat) }), el("td", { class: "num", text: num(e.episodes) }),
            el("td", { class: "num", text: money(e.cost_usd) }), el("td", { text: e.tied ? "statistically tied" : "" })]);
        });
        root.appendChild(section("pack " + p, "pack-" + p, [table(["rank", "run", "policy", "pass@1 [95% CI]", "interval", "pass^k", "episodes", "cost", ""], rows, "leaderboard"),
          el("p", { class: "muted", text: "entries whose 95% interval overlaps their group leader's share its rank (=)" })]));
      });
    }).catch(function (e) { clear(root).appendChild(el("p", { class: "error", text: e.message })); });
  }

  function playgroundPage(root) {
    var packSel = el("select", { id: "pg-pack", "aria-label": "pack" });
    var taskSel = el("select", { id: "pg-task", "aria-label": "task" });
    var polSel = el("select", { id: "pg-policy", "aria-label": "policy" },
      ["oracle", "noop", "random", "claim_success", "llm"].map(function (p) { return el("option", { value: p, text: p }); }));
    var llm = el("input", { id: "pg-llm", placeholder: "llm,model=openai/gpt-4o-mini  (or model=local)", size: 48 });
    var seed = el("input", { id: "pg-seed", type: "number", value: "0", style: "width:6em" });
    var run = el("button", { id: "pg-run", text: "run episode" });
    var status = el("p", { id: "pg-status", class: "muted" });
    var out = el("div", { id: "pg-out" });
    var instr = el("pre", { id: "pg-instruction" });
    var packs = {};
    clear(root).appendChild(section("playground", "playground", [
      el("div", { class: "form" }, [el("label", null, ["pack ", packSel]), el("label", null, ["task ", taskSel]),
        el("label", null, ["policy ", polSel]), el("label", null, ["llm spec ", llm]), el("label", null, ["seed ", seed]), run]),
      instr, status, out]));
    function fillTasks() {
      clear(taskSel);
      var p = packs[packSel.value]; if (!p) return;
      p.tasks.forEach(function (t) { taskSel.appendChild(el("option", { value: t.id, text: t.id + (t.tier ? " (" + t.tier + ")" : "") })); });
      showInstruction();
    }
    function showInstruction() {
      var p = packs[packSel.value]; if (!p) return;
      var t = p.tasks.filter(function (x) { return x.id === taskSel.value; })[0];
      instr.textContent = t ? t.instruction : "";
    }
    packSel.addEventListener("change", fillTasks);
    taskSel.addEventListener("change", showInstruction);
    api("/api/packs").then(function (data) {
      data.packs.forEach(function (p) { packs[p.name] = p; packSel.appendChild(el("option", { value: p.name, text: p.name + " — " + p.tasks.length + " tasks" + (p.error ? " (" + p.error + ")" : "") })); });
      fillTasks();
    }).catch(function (e) { status.textContent = e.message; });
    run.addEventListener("click", function () {
      var body = { pack: packSel.value, task: taskSel.value, policy: polSel.value === "llm" ? (llm.value || "llm") : polSel.value,
        seed: parseInt(seed.value || "0", 10) };
      run.disabled = true; clear(out); status.textContent = "starting…";
      api("/api/playground", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
        .then(function (r) { follow(r.id); })
        .catch(function (e) { status.textContent = "error: " + e.message; status.className = "error"; run.disabled = false; });
    });
    function follow(id) {
      var first = el("details", { id: "pg-first", style: "display:none" }, [el("summary", { text: "what the world showed first" }), el("pre")]);
      var list = el("ol", { class: "steps" }), verdict = el("div", { id: "pg-verdict" });
      out.appendChild(first); out.appendChild(list); out.appendChild(verdict);
      var seen = 0;
      function poll() {
        api("/api/playground/" + encodeURIComponent(id) + "?since=" + seen).then(function (r) {
          if (r.first_observation && first.style.display === "none") {
            first.querySelector("pre").textContent = r.first_observation; first.style.display = "";
          }
          var fresh = renderSteps(r.steps);
          Array.prototype.slice.call(fresh.childNodes).forEach(function (li, i) {
            li.querySelector(".stephead b").textContent = "step " + (seen + i + 1); list.appendChild(li); });
          seen += r.steps.length;
          status.className = "muted";
          status.textContent = r.status === "running" ? "running… " + seen + " step(s) so far" : "finished: " + r.status;
          if (r.status === "running") { setTimeout(poll, 250); return; }
          run.disabled = false;
          var res = r.result || {};
          clear(verdict).appendChild(el("div", { class: "final state " + res.status, text: "verdict: " + res.status + (res.error_kind ? " (" + kindName(res.error_kind) + ")" : "") }));
          if (res.error_kind === USER_KIND) verdict.appendChild(userFailure());
          if (res.error) verdict.appendChild(el("div", { class: "error", text: res.error }));
          var played = res.trajectory;
          if (played && isConversation(played)) {  // now with the user's own side: its tool calls, its instructions
            var talk = renderConversation(played);
            list.parentNode.replaceChild(talk, list);
            list = talk;
            if (played.user) talk.parentNode.insertBefore(userSide(played.user), talk);
          }
          verdict.appendChild(renderVerdicts(res.verdicts));
        }).catch(function (e) { status.textContent = "error: " + e.message; run.disabled = false; });
      }
      poll();
    }
  }

  function openFromHash() {
    var m = /^#ep=(\d+):(\d+)$/.exec(location.hash);
    if (m && STATE.bundle && STATE.bundle.runs[+m[1]] && STATE.bundle.runs[+m[1]].episodes_rows[+m[2]]) openEpisode(+m[1], +m[2]);
  }

  function start() {
    var root = document.getElementById("app");
    var cfgNode = document.getElementById("page-config");
    CFG = cfgNode ? JSON.parse(cfgNode.textContent) : {};
    if (CFG.page) {
      document.body.insertBefore(nav(CFG.page === "report" ? "runs" : CFG.page), document.body.firstChild);
    }
    if (CFG.page === "runs") return runsPage(root);
    if (CFG.page === "report") return reportPage(root, CFG.runs || []);
    if (CFG.page === "leaderboard") return leaderboardPage(root);
    if (CFG.page === "playground") return playgroundPage(root);
    var bundle = embeddedBundle();
    if (!bundle) { root.textContent = "no report data in this page"; return; }
    bundle.mode = "static";
    STATE.bundle = bundle;
    renderReport(root, bundle);
    openFromHash();
  }

  window.agentsynthReport = { openEpisode: openEpisode };
  // the page puts #app and its data before this script: draw now, while episode data is still read
  start();
})();
