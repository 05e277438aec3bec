import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { getJson } from '../api';
import { linesFor, mergeSeries, metricNames, parseJobIds, type Line } from '../lib/metrics';
import type { Series } from '../lib/types';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

/**
 * Chart: one metric's lines on a step axis; log: a log-scale y axis (positive values only);
 * time: x is Unix seconds, drawn as dates.
 */
export function Chart({ name, lines, log = false, time = false }: { name: string; lines: Line[]; log?: boolean; time?: boolean }) {
  const div = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const labels = lines.map((l) => l.label).join('\n');
  useEffect(() => {
    if (!div.current) return;
    const width = Math.max(300, Math.min(div.current.clientWidth || 600, 900));
    const opts: uPlot.Options = {
      width,
      height: 240,
      scales: { x: { time }, y: log ? { distr: 3 } : {} },
      axes: [{ label: time ? 'time' : 'step' }, { label: name }],
      series: [{ label: time ? 'time' : 'step' }, ...lines.map((l, i) => ({ label: l.label, stroke: COLORS[i % COLORS.length], width: 1.5, spanGaps: true }))],
    };
    plot.current = new uPlot(opts, mergeSeries(lines) as uPlot.AlignedData, div.current);
    const onResize = () => {
      if (div.current && plot.current) plot.current.setSize({ width: Math.max(300, Math.min(div.current.clientWidth || 600, 900)), height: 240 });
    };
    window.addEventListener('resize', onResize);
    return () => {
      window.removeEventListener('resize', onResize);
      plot.current?.destroy();
      plot.current = null;
    };
  }, [name, labels, log, time]);
  useEffect(() => {
    plot.current?.setData(mergeSeries(lines) as uPlot.AlignedData);
  }, [lines]);
  const npoints = lines.reduce((n, l) => n + l.points.length, 0);
  return (
    <figure class="chart" data-testid={`chart-${name}`} data-points={npoints} data-lines={labels}>
      <figcaption>
        {name} <span class="muted">({npoints} {npoints === 1 ? 'point' : 'points'})</span>
      </figcaption>
      <div ref={div} />
    </figure>
  );
}

/** useJobsMetrics: every series of each job in ids, fetched again every 3 s while live. */
export function useJobsMetrics(ids: number[], live: boolean): { data: Map<number, Series[]>; error: string | null } {
  const [data, setData] = useState<Map<number, Series[]>>(new Map());
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      const m = new Map<number, Series[]>();
      const errs: string[] = [];
      for (const id of ids) {
        try {
          const r = await getJson<{ series: Series[] }>(`/v1/jobs/${id}/metrics`);
          m.set(id, r.series ?? []);
        } catch (e) {
          errs.push(`job ${id}: ${(e as Error).message}`);
        }
      }
      if (!alive) return;
      setData(m);
      setError(errs.length ? errs.join('; ') : null);
      if (live) timer = setTimeout(load, 3000);
    };
    load();
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
  }, [ids.join(','), live]);
  return { data, error };
}

/** Charts: one chart per metric name of the job, with other jobs' series overlaid. */
export function Charts({ job, live }: { job: number; live: boolean }) {
  const [others, setOthers] = useState<number[]>([]);
  const [input, setInput] = useState('');
  const ids = [job, ...others.filter((o) => o !== job)];
  const { data, error } = useJobsMetrics(ids, live);
  const all = [...data.values()].flat();
  const names = metricNames(all);
  const multi = ids.length > 1;
  return (
    <section aria-labelledby="metrics-h" class="metrics">
      <h2 id="metrics-h">Metrics</h2>
      <form
        class="toolbar"
        onSubmit={(e) => {
          e.preventDefault();
          setOthers([...new Set([...others, ...parseJobIds(input)])]);
          setInput('');
        }}
      >
        <label>
          Compare with job
          <input data-testid="overlay-input" value={input} onInput={(e) => setInput((e.target as HTMLInputElement).value)} placeholder="ids, e.g. 12 14" />
        </label>
        <button type="submit" data-testid="overlay-add">
          Add
        </button>
        {others.map((o) => (
          <span class="chip" key={o}>
            #{o}{' '}
            <button type="button" class="link" aria-label={`remove job ${o}`} onClick={() => setOthers(others.filter((x) => x !== o))}>
              ×
            </button>
          </span>
        ))}
      </form>
      {error && <p class="error" role="alert">{error}</p>}
      {names.length === 0 && <p class="muted">No metrics reported yet (print <code>@yard {'{"step": 1, "loss": 0.5}'}</code>).</p>}
      <div class="charts">
        {names.map((n) => (
          <Chart key={n} name={n} lines={ids.flatMap((id) => linesFor(id, data.get(id) ?? [], n, multi))} />
        ))}
      </div>
    </section>
  );
}
