import { useEffect, useState } from 'preact/hooks';
import { getJson, getToken, onConnection, onUnauthorized, setToken, takeTokenFromUrl, ApiError, errorText } from './api';
import { useHash } from './hooks';
import { ClusterPage } from './pages/cluster';
import { QueuePage } from './pages/queue';
import { JobsPage } from './pages/jobs';
import { JobPage } from './pages/job';
import { SubmitPage } from './pages/submit';
import { ExperimentPage, ExperimentsPage } from './pages/experiments';
import { TemplatePage, TemplatesPage } from './pages/templates';
import { UsagePage } from './pages/usage';
import { formatView, parseView } from './lib/experiments';

interface Who {
  user: string;
  admin: boolean;
}

function SignIn({ onDone, message }: { onDone: () => void; message: string | null }) {
  const [token, setT] = useState('');
  return (
    <main class="signin">
      <h1>Trainyard</h1>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!token.trim()) return;
          setToken(token.trim());
          onDone();
        }}
      >
        <label for="signin-token">Token</label>
        <input id="signin-token" data-testid="signin-token" type="password" autoComplete="off" value={token} onInput={(e) => setT((e.target as HTMLInputElement).value)} placeholder="yard_u_..." />
        <button type="submit" data-testid="signin-submit">
          Sign in
        </button>
        {message && (
          <p class="error" role="alert">
            {message}
          </p>
        )}
      </form>
      <p class="hint">Ask an admin for a token (<code>yard token create --user NAME</code>), or open the URL <code>yard up</code> prints (<code>/#token=T</code>).</p>
    </main>
  );
}

const NAV = [
  ['cluster', '#/cluster', 'Cluster'],
  ['queue', '#/queue', 'Queue'],
  ['jobs', '#/jobs', 'Jobs'],
  ['experiments', '#/experiments', 'Experiments'],
  ['templates', '#/templates', 'Templates'],
  ['usage', '#/usage', 'Usage'],
  ['submit', '#/submit', 'Submit'],
] as const;

/** App: notice, a message from the sign-in address (a refused ?token=), is shown first. */
export function App({ notice = null }: { notice?: string | null }) {
  const hash = useHash();
  const [who, setWho] = useState<Who | null>(null);
  const [authMsg, setAuthMsg] = useState<string | null>(notice);
  const [hasToken, setHasToken] = useState(!!getToken());
  const [reconnecting, setReconnecting] = useState(false);

  useEffect(() => onConnection(setReconnecting), []);
  // a /#token=T pasted into this tab (no new load): signs in as at start
  useEffect(() => {
    if (!hash.startsWith('#token=')) return;
    takeTokenFromUrl();
    if (!getToken()) return;
    setAuthMsg(null);
    setHasToken(true);
  }, [hash]);
  useEffect(() => {
    onUnauthorized(() => {
      setToken(null);
      setWho(null);
      setHasToken(false);
      setAuthMsg('The token was refused (401); sign in again.');
    });
  }, []);
  useEffect(() => {
    if (!hasToken) return;
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      try {
        const w = await getJson<Who>('/v1/whoami');
        if (alive) setWho(w);
      } catch (e) {
        if (!alive) return;
        if (e instanceof ApiError) {
          if (e.info.status !== 401) setAuthMsg(errorText(e));
          return;
        }
        timer = setTimeout(load, 2000); // master down: retry quietly
      }
    };
    load();
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
  }, [hasToken]);

  if (!hasToken) return <SignIn message={authMsg} onDone={() => { setAuthMsg(null); setHasToken(true); }} />;

  const [route, query = ''] = hash.replace(/^#\/?/, '').split('?');
  const [section, ...rest] = route.split('/');
  let page;
  let current = section || 'cluster';
  if (section === 'jobs' && rest[0]) {
    page = <JobPage id={Number(rest[0])} />;
    current = 'jobs';
  } else if (section === 'experiments' && rest[0]) {
    const id = Number(rest[0]);
    page = <ExperimentPage id={id} view={parseView(query)} setView={(v) => { window.location.hash = `#/experiments/${id}${formatView(v) ? `?${formatView(v)}` : ''}`; }} />;
    current = 'experiments';
  } else if (section === 'experiments') page = <ExperimentsPage />;
  else if (section === 'templates' && rest[0]) {
    page = <TemplatePage name={decodeURIComponent(rest[0])} />;
    current = 'templates';
  } else if (section === 'templates') page = <TemplatesPage />;
  else if (section === 'queue') page = <QueuePage />;
  else if (section === 'usage') page = <UsagePage />;
  else if (section === 'jobs') page = <JobsPage />;
  else if (section === 'submit') page = <SubmitPage key={hash} />;
  else {
    page = <ClusterPage />;
    current = 'cluster';
  }

  return (
    <>
      <header class="top">
        <a class="brand" href="#/cluster">
          Trainyard
        </a>
        <nav aria-label="Main">
          <ul>
            {NAV.map(([id, href, label]) => (
              <li key={id}>
                <a href={href} data-testid={`nav-${id}`} aria-current={current === id ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <div class="conn" role="status" aria-live="polite" data-testid="connection">
          {reconnecting ? <span class="reconnecting">reconnecting…</span> : null}
        </div>
        <div class="who" data-testid="whoami">
          {who ? (
            <>
              {who.user}
              {who.admin ? ' (admin)' : ''}
            </>
          ) : (
            '…'
          )}
          <button
            type="button"
            class="link"
            data-testid="signout"
            onClick={() => {
              setToken(null);
              setWho(null);
              setHasToken(false);
            }}
          >
            Sign out
          </button>
        </div>
      </header>
      {authMsg && <p class="error banner" role="alert">{authMsg}</p>}
      <main class="page">{page}</main>
    </>
  );
}
