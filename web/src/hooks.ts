import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, NetError } from './api';

export interface Polled<T> {
  data: T | null;
  error: string | null;
  refresh: () => void;
}

/**
 * usePoll: calls fetcher now and every interval ms; keeps the last data while the master is
 * unreachable (NetError: retried quietly, the header shows "reconnecting").
 */
export function usePoll<T>(fetcher: () => Promise<T>, interval: number, deps: unknown[]): Polled<T> {
  const [data, setData] = useState<T | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [tick, setTick] = useState(0);
  const f = useRef(fetcher);
  f.current = fetcher;
  useEffect(() => {
    let alive = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const d = await f.current();
        if (!alive) return;
        setData(d);
        setError(null);
      } catch (e) {
        if (!alive) return;
        if (e instanceof ApiError) setError(`${e.info.code}: ${e.info.message}`);
        else if (!(e instanceof NetError)) setError((e as Error).message);
      }
      if (alive && interval > 0) timer = setTimeout(run, document.hidden ? interval * 3 : interval);
    };
    setData(null);
    setError(null);
    run();
    return () => {
      alive = false;
      if (timer) clearTimeout(timer);
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  return { data, error, refresh: () => setTick((t) => t + 1) };
}

/** useHash: the location hash, kept current. */
export function useHash(): string {
  const [h, setH] = useState(window.location.hash);
  useEffect(() => {
    const on = () => setH(window.location.hash);
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return h;
}
