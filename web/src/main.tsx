import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { App } from './app';
import { getToken, syncTokenCookie, takeTokenFromUrl } from './api';

const notice = takeTokenFromUrl();
// a token stored before this page: its cookie too (the terminal, notebooks)
syncTokenCookie(getToken());
render(<App notice={notice} />, document.getElementById('app')!);
