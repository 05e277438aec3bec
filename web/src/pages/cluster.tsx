import { getJson } from '../api';
import { usePoll } from '../hooks';
import { formatBytes, formatTime, formatUtil, stateClass } from '../lib/format';
import { poolTotals } from '../lib/cluster';
import type { Node } from '../lib/types';
import { pointsLine } from '../lib/usage';
import { Chart } from './charts';

/** GET /v1/nodes's gpu_util: the cluster's GPUs over time, [unix s, percent] each. */
interface ClusterUtil {
  util: [number, number][];
  allocated: [number, number][];
}

export function ClusterPage() {
  const { data, error } = usePoll(() => getJson<{ nodes: Node[]; gpu_util?: ClusterUtil }>('/v1/nodes'), 2000, []);
  const nodes = data?.nodes ?? [];
  return (
    <section aria-labelledby="cluster-h">
      <h1 id="cluster-h">Cluster</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {data && (
        <table class="totals" data-testid="pool-totals">
          <caption>GPUs per pool</caption>
          <thead>
            <tr>
              <th scope="col">Pool</th>
              <th scope="col">Nodes</th>
              <th scope="col">GPUs</th>
              <th scope="col">Used</th>
              <th scope="col">Free</th>
            </tr>
          </thead>
          <tbody>
            {poolTotals(nodes).map((p) => (
              <tr key={p.pool} data-testid={`pool-${p.pool}`}>
                <td>{p.pool}</td>
                <td>{p.nodes}</td>
                <td>{p.gpus}</td>
                <td>{p.used}</td>
                <td>{p.free}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {data?.gpu_util && data.gpu_util.allocated.length > 0 && (
        <Chart name="GPUs %" lines={[pointsLine('allocated', data.gpu_util.allocated), pointsLine('utilised', data.gpu_util.util)]} time />
      )}
      {data && nodes.length === 0 && <p>No nodes have joined yet.</p>}
      {!data && !error && <p>Loading…</p>}
      <div class="nodes">
        {nodes.map((n) => (
          <article class="node" key={n.name} data-testid={`node-${n.name}`} aria-label={`node ${n.name}`}>
            <header>
              <h2>{n.name}</h2>
              <span class={`state ${stateClass(n.state)}`} data-testid="node-state">
                {n.state}
              </span>
              {n.drained && (
                <span class={`state ${stateClass('drained')}`} data-testid="node-drain"
                      title={n.drain?.by ? `drained by ${n.drain.by}` : 'drained'}>
                  drained{n.drain?.reason ? `: ${n.drain.reason}` : ''}
                </span>
              )}
            </header>
            <dl class="facts">
              <dt>Pool</dt>
              <dd>{n.pool || 'default'}</dd>
              <dt>Address</dt>
              <dd>{n.addr ?? '–'}</dd>
              <dt>CPUs</dt>
              <dd>
                {n.cpus}
                {n.free ? ` (${(n.free.cpus_milli / 1000).toFixed(1)} free)` : ''}
              </dd>
              <dt>Memory</dt>
              <dd>
                {formatBytes(n.memory)}
                {n.free ? ` (${formatBytes(n.free.memory)} free)` : ''}
              </dd>
              <dt>Runtimes</dt>
              <dd>
                {(n.runtimes ?? ['process']).join(', ')}
                {n.engine ? ` (${n.engine})` : ''}
              </dd>
              <dt>Labels</dt>
              <dd>
                {n.labels && Object.keys(n.labels).length
                  ? Object.entries(n.labels).map(([k, v]) => (
                      <span class="label" key={k}>
                        {k}={v}
                      </span>
                    ))
                  : '–'}
              </dd>
              <dt>Last seen</dt>
              <dd>{formatTime(n.last_seen)}</dd>
            </dl>
            <ul class="gpus" aria-label={`GPUs of ${n.name}`}>
              {(n.gpus ?? []).map((g) => (
                <li key={g.index} class={`gpu ${g.job != null ? 'busy' : 'idle'}`} data-testid={`gpu-${n.name}-${g.index}`}>
                  <div class="gpu-idx">GPU {g.index}</div>
                  <div class="gpu-model" title={g.uuid}>
                    {g.model}
                  </div>
                  <div class="gpu-mem">{formatBytes(g.memory)}</div>
                  <div class="gpu-job">
                    {g.job != null ? (
                      <a href={`#/jobs/${g.job}`} data-testid={`gpu-job-${n.name}-${g.index}`}>
                        job {g.job}
                      </a>
                    ) : (
                      'free'
                    )}
                  </div>
                  <div class="gpu-util" title="utilisation">
                    util {formatUtil(g.util)}
                  </div>
                </li>
              ))}
              {(n.gpus ?? []).length === 0 && <li class="gpu none">no GPUs</li>}
            </ul>
          </article>
        ))}
      </div>
    </section>
  );
}
