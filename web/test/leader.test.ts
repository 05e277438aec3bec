import { afterEach, describe, expect, it, vi } from 'vitest';
import { leaderAddress, NetError, request } from '../src/api';

const standby = (leader: string | null) =>
  JSON.stringify({
    error: { code: 'not_leader', message: 'this master is a standby; the leader is at ' + leader, leader },
  });

describe('leaderAddress', () => {
  it('sends a standby page to the leader, the token in the fragment', () => {
    expect(leaderAddress(503, standby('http://10.0.0.1:7420'), 'http://10.0.0.2:7420/#/jobs', 'yard_u_a+b')).toBe(
      'http://10.0.0.1:7420/#token=yard_u_a%2Bb',
    );
    expect(leaderAddress(503, standby('http://10.0.0.1:7420/'), 'http://10.0.0.2:7420/', null)).toBe('http://10.0.0.1:7420/');
  });
  it('stays for any other reply, no leader, itself, or another scheme', () => {
    expect(leaderAddress(503, standby(null), 'http://b:1/', 't')).toBeNull();
    expect(leaderAddress(503, standby('http://b:1'), 'http://b:1/#/jobs', 't')).toBeNull();
    expect(leaderAddress(503, standby('http://a:1'), 'https://b:1/', 't')).toBeNull();
    expect(leaderAddress(503, standby('javascript:alert(1)'), 'http://b:1/', 't')).toBeNull();
    expect(leaderAddress(503, '{"error": {"code": "unavailable", "message": "x"}}', 'http://b:1/', 't')).toBeNull();
    expect(leaderAddress(500, standby('http://a:1'), 'http://b:1/', 't')).toBeNull();
    expect(leaderAddress(503, 'Service Unavailable', 'http://b:1/', 't')).toBeNull();
  });
});

describe('request on a standby', () => {
  afterEach(() => vi.unstubAllGlobals());
  it('moves the browser to the leader once, keeping the token', async () => {
    const assign = vi.fn();
    vi.stubGlobal('window', { location: { href: 'http://10.0.0.2:7420/#/jobs', assign } });
    vi.stubGlobal('localStorage', { getItem: () => 'yard_u_t', setItem: () => {}, removeItem: () => {} });
    vi.stubGlobal(
      'fetch',
      vi.fn(async () => new Response(standby('http://10.0.0.1:7420'), { status: 503, headers: { 'X-Yard-Leader': 'http://10.0.0.1:7420' } })),
    );
    await expect(request('GET', '/v1/jobs')).rejects.toBeInstanceOf(NetError);
    await expect(request('GET', '/v1/queue')).rejects.toBeInstanceOf(NetError);
    expect(assign).toHaveBeenCalledTimes(1);
    expect(assign).toHaveBeenCalledWith('http://10.0.0.1:7420/#token=yard_u_t');
  });
  it('reports a standby that knows no leader as the API error it is', async () => {
    const assign = vi.fn();
    vi.stubGlobal('window', { location: { href: 'http://10.0.0.2:7420/', assign } });
    vi.stubGlobal('fetch', vi.fn(async () => new Response(standby(null), { status: 503 })));
    await expect(request('GET', '/v1/jobs')).rejects.toMatchObject({ info: { code: 'not_leader', status: 503 } });
    expect(assign).not.toHaveBeenCalled();
  });
});
