import { describe, expect, it } from 'vitest';
import { parseSignInUrl } from '../src/api';

describe('parseSignInUrl', () => {
  it('takes the token from the fragment and drops it from the address', () => {
    expect(parseSignInUrl('http://m:7420/#token=yard_u_abc')).toEqual({ token: 'yard_u_abc', queryToken: false, clean: '/' });
    expect(parseSignInUrl('http://m:7420/jobs/3?x=1#token=a%2Bb')).toEqual({ token: 'a+b', queryToken: false, clean: '/jobs/3?x=1' });
  });
  it('never uses a ?token= query, and says so', () => {
    expect(parseSignInUrl('http://m:7420/?token=T')).toEqual({ token: null, queryToken: true, clean: '/' });
    expect(parseSignInUrl('http://m:7420/?a=1&token=T#/jobs')).toEqual({ token: null, queryToken: true, clean: '/?a=1#/jobs' });
    // both: the fragment's is the one taken, the query's is dropped
    expect(parseSignInUrl('http://m:7420/?token=Q#token=F')).toEqual({ token: 'F', queryToken: true, clean: '/' });
  });
  it('leaves other addresses alone', () => {
    expect(parseSignInUrl('http://m:7420/#/jobs/3')).toEqual({ token: null, queryToken: false, clean: null });
    expect(parseSignInUrl('http://m:7420/')).toEqual({ token: null, queryToken: false, clean: null });
    expect(parseSignInUrl('http://m:7420/#/submit?token=x')).toEqual({ token: null, queryToken: false, clean: null });
  });
  it('an empty or broken fragment token is no token, but is still removed', () => {
    expect(parseSignInUrl('http://m:7420/#token=')).toEqual({ token: null, queryToken: false, clean: '/' });
    expect(parseSignInUrl('http://m:7420/#token=%E0%A4%A')).toEqual({ token: null, queryToken: false, clean: '/' });
  });
});
