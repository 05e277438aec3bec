import { render } from 'preact';
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { App } from './app';
import { takeTokenFromUrl } from './api';

const notice = takeTokenFromUrl();
render(<App notice={notice} />, document.getElementById('app')!);
