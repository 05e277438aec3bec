import { getJson } from '../api';
import { usePoll } from '../hooks';
import type { QueueEntry } from '../lib/types';

export function QueuePage() {
  const { data, error } = usePoll(() => getJson<{ queue: QueueEntry[] }>('/v1/queue'), 2000, []);
  const q = data?.queue ?? [];
  return (
    <section aria-labelledby="queue-h">
      <h1 id="queue-h">Queue</h1>
      {error && <p class="error" role="alert">{error}</p>}
      {!data && !error && <p>Loading…</p>}
      {data && q.length === 0 && <p data-testid="queue-empty">No job is waiting.</p>}
      {q.length > 0 && (
        <table class="list">
          <thead>
            <tr>
              <th scope="col">Position</th>
              <th scope="col">Job</th>
              <th scope="col">Name</th>
              <th scope="col">User</th>
              <th scope="col">Ahead</th>
              <th scope="col">Reason</th>
            </tr>
          </thead>
          <tbody>
            {q.map((e) => (
              <tr key={e.id} data-testid={`queue-row-${e.id}`}>
                <td>{e.position}</td>
                <td>
                  <a href={`#/jobs/${e.id}`}>{e.id}</a>
                </td>
                <td>{e.name}</td>
                <td>{e.user}</td>
                <td>
                  {e.ahead_count}
                  {e.ahead?.length ? (
                    <span class="muted">
                      {' '}
                      (
                      {e.ahead.map((a, i) => (
                        <>
                          {i ? ', ' : ''}
                          <a href={`#/jobs/${a}`}>{a}</a>
                        </>
                      ))}
                      )
                    </span>
                  ) : null}
                </td>
                <td data-testid={`queue-reason-${e.id}`}>
                  {e.reason ? (
                    <>
                      <code class="reason-code">{e.reason.code}</code> {e.reason.message}
                    </>
                  ) : (
                    '–'
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
