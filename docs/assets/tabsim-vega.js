/* The interactive crossover figure (docs/science.md): a Vega-Lite view with a slider over the grid that
   experiments/crossover_grid.py computed. The grid is inlined in the page by docs/_site/hooks.py as
   <script type="application/json" class="tabsim-vega-data"> right after the figure's <div>, so the
   figure also works when the site is opened from disk. */
(function () {
  "use strict";

  function crossoverSpec(grid, width) {
    var arms = ["frozen", "random", "majority", "true"];
    var terms = ["d_null", "d_elicit", "d_rd"];
    var priors = Array.from(new Set(grid.rows.map(function (r) { return r.p_s; }))).sort(function (a, b) { return a - b; });
    var last = Math.max.apply(null, grid.rows.map(function (r) { return r.step; }));
    var fin = {};
    grid.rows.forEach(function (r) {
      if (r.step === last) { (fin[r.p_s] = fin[r.p_s] || {})[r.arm] = r.pass1; }
    });
    var partition = [];
    priors.forEach(function (p) {
      var a = fin[p];
      partition.push({p_s: p, term: "d_null", value: a.random - a.frozen});
      partition.push({p_s: p, term: "d_elicit", value: a.majority - a.random});
      partition.push({p_s: p, term: "d_rd", value: a["true"] - a.majority});
    });
    var step = Math.round((priors[1] - priors[0]) * 1000) / 1000;
    var start = priors.reduce(function (best, p) { return Math.abs(p - 0.5) < Math.abs(best - 0.5) ? p : best; });
    var font = 15;
    return {
      $schema: "https://vega.github.io/schema/vega-lite/v5.json",
      params: [{name: "p_s", value: start,
                bind: {input: "range", min: priors[0], max: priors[priors.length - 1], step: step,
                       name: "prior strength p_s "}}],
      config: {font: "Helvetica, Arial, sans-serif", axis: {labelFontSize: font, titleFontSize: font, titlePadding: 8, tickCount: 5,
                                        labelOverlap: true},
               legend: {labelFontSize: font, titleFontSize: font, orient: "bottom", columns: width < 420 ? 2 : 4, columnPadding: 16},
               title: {fontSize: font + 1, anchor: "start"}, view: {stroke: null}},
      vconcat: [
        {
          title: {text: {expr: "'pass@1 during training, p_s = ' + format(p_s, '.3f')"}},
          width: width, height: 230,
          data: {values: grid.rows},
          encoding: {
            x: {field: "step", type: "quantitative", title: "step"},
            y: {field: "pass1", type: "quantitative", title: "pass@1", scale: {domain: [0, 1]}},
            color: {field: "arm", type: "nominal", title: "arm", sort: arms,
                    scale: {domain: arms, range: arms.map(function (a) { return grid.colors[a]; })}},
            strokeDash: {field: "arm", type: "nominal", sort: arms, legend: null,
                         scale: {domain: arms, range: [[6, 3], [1, 0], [1, 0], [1, 0]]}},
            order: {field: "step"}
          },
          // FROZEN is drawn last, dashed, so it stays visible where RANDOM lies on it
          layer: [
            {transform: [{filter: "abs(datum.p_s - p_s) < 1e-6 && datum.arm != 'frozen'"}],
             mark: {type: "line", point: {size: 30}}},
            {transform: [{filter: "abs(datum.p_s - p_s) < 1e-6 && datum.arm == 'frozen'"}],
             mark: {type: "line", point: {size: 30, filled: false}}}
          ]
        },
        {
          title: "final terms against p_s",
          width: width, height: 200,
          layer: [
            {data: {values: partition},
             mark: {type: "line", point: {size: 25}},
             encoding: {
               x: {field: "p_s", type: "quantitative", title: "prior strength p_s"},
               y: {field: "value", type: "quantitative", title: "change of pass@1"},
               color: {field: "term", type: "nominal", title: "term", sort: terms,
                       scale: {domain: terms, range: terms.map(function (t) { return grid.colors[t]; })}}
             }},
            {data: {values: [{y: 0}]}, mark: {type: "rule", color: "#888"}, encoding: {y: {field: "y", type: "quantitative"}}},
            {data: {values: [{x: grid.mode_switch}]}, mark: {type: "rule", strokeDash: [4, 4], color: "#555"},
             encoding: {x: {field: "x", type: "quantitative"}}},
            {data: {values: [{}]}, transform: [{calculate: "p_s", as: "x"}],
             mark: {type: "rule", strokeWidth: 2, color: "#000"},
             encoding: {x: {field: "x", type: "quantitative"}}}
          ]
        }
      ],
      resolve: {scale: {color: "independent"}}
    };
  }

  function draw(el) {
    var data = el.nextElementSibling;
    if (!data || !data.classList.contains("tabsim-vega-data") || !window.vega || !window.vegaLite) {
      el.textContent = "(the interactive figure needs JavaScript)";
      return;
    }
    var grid = JSON.parse(data.textContent);
    var width = Math.max(240, Math.min(560, el.clientWidth - 90));
    var spec = window.vegaLite.compile(crossoverSpec(grid, width)).spec;
    // the slider above the figure (the two panels are taller than a phone's screen), the chart below it
    var controls = document.createElement("div");
    controls.className = "tabsim-vega-controls";
    var chart = document.createElement("div");
    el.appendChild(controls);
    el.appendChild(chart);
    var view = new window.vega.View(window.vega.parse(spec), {renderer: "svg", container: chart, bind: controls,
                                                              hover: true});
    el.tabsimView = view;
    view.runAsync();
  }

  function init() {
    document.querySelectorAll(".tabsim-vega").forEach(function (el) {
      if (!el.tabsimView) { draw(el); }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", init);
  } else {
    init();
  }
}());
