// The page script of render-dashboard.ts (runs in headless Chromium, not in Node): lays out
// window.dashboardModel's panels on Grafana's grid (24 columns, 30 px rows, 8 px gaps), draws each
// with uPlot in Grafana's dark theme, and sets window.dashboardRendered to the number of charts.
/* global uPlot */
(() => {
  const model = window.dashboardModel;
  // Grafana's dark theme and its default ("classic") series palette.
  const theme = { page: '#111217', panel: '#181b1f', border: 'rgba(204, 204, 220, 0.12)', text: '#ccccdc', weak: 'rgba(204, 204, 220, 0.65)', grid: 'rgba(240, 250, 255, 0.09)' };
  const palette = ['#73BF69', '#F2CC0C', '#8AB8FF', '#FF780A', '#F2495C', '#5794F2', '#B877D9', '#705DA0', '#37872D', '#FADE2A', '#447EBC', '#C15C17', '#890F02', '#0A437C', '#6D1F62', '#584477'];
  const font = '"Inter", "Helvetica Neue", Arial, "DejaVu Sans", sans-serif';
  const CELL = 30;
  const GAP = 8;
  const PAD = 16;
  const TITLE = 32;

  const style = document.createElement('style');
  style.textContent = `
    html, body { margin: 0; background: ${theme.page}; color: ${theme.text}; font-family: ${font}; }
    header { display: flex; align-items: baseline; justify-content: space-between; padding: 14px ${PAD}px 10px; }
    header h1 { font-size: 18px; font-weight: 500; margin: 0; }
    header .range { font-size: 12px; color: ${theme.weak}; }
    .grid { position: relative; margin: 0 ${PAD}px; }
    .panel { position: absolute; box-sizing: border-box; background: ${theme.panel}; border: 1px solid ${theme.border}; border-radius: 2px; overflow: hidden; }
    .panel h2 { height: ${TITLE}px; line-height: ${TITLE}px; margin: 0; padding: 0 8px; font-size: 14px; font-weight: 500; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
    .panel .chart { padding: 0 8px; }
    .panel .nodata { position: absolute; top: ${TITLE}px; bottom: 0; left: 0; right: 0; display: flex; align-items: center; justify-content: center; color: ${theme.weak}; font-size: 14px; }
    .legend { display: flex; flex-wrap: wrap; gap: 2px 16px; padding: 4px 8px 0; font-size: 12px; }
    .legend span { display: inline-flex; align-items: center; white-space: nowrap; }
    .legend i { display: inline-block; width: 14px; height: 4px; border-radius: 2px; margin-right: 6px; }
    footer { padding: 10px ${PAD}px 14px; font-size: 11px; color: ${theme.weak}; }
  `;
  document.head.appendChild(style);

  const header = document.createElement('header');
  const h1 = document.createElement('h1');
  h1.textContent = model.title;
  const range = document.createElement('span');
  range.className = 'range';
  const minutes = Math.round((model.range.end - model.range.start) / 60);
  range.textContent = `${clock(model.range.start, true)} to ${clock(model.range.end, true)} UTC (${minutes} min) · step ${model.range.step}s · $__rate_interval ${model.range.rateInterval}s`;
  header.append(h1, range);
  document.body.appendChild(header);

  const grid = document.createElement('div');
  grid.className = 'grid';
  document.body.appendChild(grid);
  const gridWidth = model.width - 2 * PAD;
  const column = (gridWidth + GAP) / 24;
  let bottom = 0;
  let drawn = 0;

  for (const panel of model.panels) {
    const { x, y, w, h } = panel.gridPos;
    const box = document.createElement('div');
    box.className = 'panel';
    const width = Math.round(w * column - GAP);
    const height = h * CELL + (h - 1) * GAP;
    Object.assign(box.style, { left: `${Math.round(x * column)}px`, top: `${y * (CELL + GAP)}px`, width: `${width}px`, height: `${height}px` });
    bottom = Math.max(bottom, y * (CELL + GAP) + height);
    const title = document.createElement('h2');
    title.textContent = panel.title;
    box.appendChild(title);
    grid.appendChild(box);

    const series = panel.series.filter((s) => s.points.some(([, v]) => v !== null));
    if (series.length === 0) {
      const empty = document.createElement('div');
      empty.className = 'nodata';
      empty.textContent = 'No data';
      box.appendChild(empty);
      continue;
    }
    // One x axis for every series: the step grid of the range (Prometheus answers on it).
    const xs = [];
    for (let t = model.range.start; t <= model.range.end + 1e-9; t += model.range.step) xs.push(Math.round(t * 1000) / 1000);
    const index = new Map(xs.map((t, i) => [t, i]));
    const columns = series.map((s) => {
      const ys = new Array(xs.length).fill(null);
      for (const [t, v] of s.points) {
        const i = index.get(Math.round(t * 1000) / 1000);
        if (i !== undefined) ys[i] = v;
      }
      return ys;
    });

    const legend = document.createElement('div');
    legend.className = 'legend';
    series.forEach((s, i) => {
      const item = document.createElement('span');
      const swatch = document.createElement('i');
      swatch.style.background = palette[i % palette.length];
      item.append(swatch, document.createTextNode(s.name));
      legend.appendChild(item);
    });
    const chart = document.createElement('div');
    chart.className = 'chart';
    box.append(chart, legend);
    const legendHeight = legend.getBoundingClientRect().height;

    const axisFont = `12px ${font}`;
    const axis = { stroke: theme.text, font: axisFont, grid: { stroke: theme.grid, width: 1 }, ticks: { stroke: theme.grid, width: 1, size: 4 } };
    new uPlot(
      {
        width: width - 16,
        height: Math.max(60, height - TITLE - legendHeight - 10),
        legend: { show: false },
        // Room on the right for the last time label, which uPlot centres on its tick.
        padding: [10, 28, 0, 0],
        cursor: { show: false },
        scales: {
          x: { time: true },
          // Counts, rates, latencies and bytes are never negative: keep 0 in view, as Grafana's soft min does for them.
          y: { range: (_u, min, max) => uPlot.rangeNum(Math.min(0, min), max === min ? max + 1 : max, 0.1, true) },
        },
        axes: [
          { ...axis, size: 28, space: 90, values: (_u, splits) => splits.map((t) => clock(t, model.range.end - model.range.start <= 900)) },
          { ...axis, size: 76, ...(panel.unit === 'bytes' ? { incrs: binaryIncrements() } : {}), values: (_u, splits, _i, _space, incr) => splits.map((v) => formatValue(panel.unit, v, incr)) },
        ],
        series: [{}, ...series.map((s, i) => ({ label: s.name, stroke: palette[i % palette.length], width: 1.5, points: { show: false }, spanGaps: false }))],
      },
      [xs, ...columns],
      chart,
    );
    drawn++;
  }
  grid.style.height = `${bottom}px`;

  const footer = document.createElement('footer');
  footer.textContent = model.footer;
  document.body.appendChild(footer);
  window.dashboardRendered = drawn;

  function clock(seconds, withSeconds) {
    const d = new Date(seconds * 1000);
    const two = (n) => String(n).padStart(2, '0');
    return `${two(d.getUTCHours())}:${two(d.getUTCMinutes())}${withSeconds ? `:${two(d.getUTCSeconds())}` : ''}`;
  }

  // Grafana's value formats for the units the dashboard uses; decimals follow the tick increment.
  function formatValue(unit, value, increment) {
    if (value === null || !Number.isFinite(value)) return '';
    const scaled = (factor, suffix) => `${fixed(value / factor, increment / factor)}${suffix}`;
    switch (unit) {
      case 'reqps':
        return scaled(1, ' req/s');
      case 'ms':
        return formatValue('s', value / 1000, increment / 1000);
      case 's': {
        const top = Math.abs(value) || increment;
        if (top < 1e-3) return scaled(1e-6, ' µs');
        if (top < 1) return scaled(1e-3, ' ms');
        return scaled(1, ' s');
      }
      case 'bytes': {
        const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
        let i = 0;
        while (i < units.length - 1 && Math.abs(value) >= 1024 ** (i + 1)) i++;
        return scaled(1024 ** i, ` ${units[i]}`);
      }
      case 'percentunit':
        return scaled(0.01, '%');
      default: {
        const abs = Math.abs(value);
        if (abs >= 1e9) return scaled(1e9, ' B');
        if (abs >= 1e6) return scaled(1e6, ' M');
        if (abs >= 1e3) return scaled(1e3, ' K');
        return scaled(1, '');
      }
    }
  }

  // As many decimals as the tick increment needs (2.5 → 1, 0.25 → 2, 50 → 0).
  function fixed(value, increment) {
    let decimals = 0;
    while (decimals < 6 && increment > 0 && Math.abs(Math.round(increment * 10 ** decimals) - increment * 10 ** decimals) > 1e-6 * 10 ** decimals) decimals++;
    return value.toFixed(decimals);
  }

  // Tick steps for bytes: 1, 2, 5, 10, 20, 50, 100, 200, 500 of B, KiB, MiB, GiB, TiB (ticks at 64 MiB, not 95.4 MiB).
  function binaryIncrements() {
    const out = [];
    for (let k = 0; k <= 4; k++) for (const m of [1, 2, 5, 10, 20, 50, 100, 200, 500]) out.push(m * 1024 ** k);
    return out;
  }
})();
