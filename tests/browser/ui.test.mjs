// The web app in a real browser (Debian's chromium through playwright-core),
// against a real master that tests/e2e/test_web.py started and filled.
//
// usage: node ui.test.mjs CONFIG.json
//
// CONFIG (written by test_web.py):
//   url          the master, e.g. http://127.0.0.1:40123
//   token        an admin token
//   artifacts    directory for the screenshots (one per page) and result.json
//   mode         "fixture": the harness's own placeholder page (title, a
//                module script from /assets/ ran, a screenshot);
//                "app": the web app's flow below; "experiments",
//                "interactive" and "git": the flows of those pages
//   node         (app) the agent's name: node-<name> on the cluster page
//   cancel_job   (app) id of a running job to cancel from its page
//   queued_job   (app) id of a job that cannot start
//   queued_reason (app) its reason's message, as GET /v1/queue says it
//   example_dir  (app) examples/pytorch-ddp-digits, uploaded as the code
//   epochs       (app) the parameter the form changes (params.epochs)
//   experiment   (experiments) the id of an experiment of two finished trials
//                that differ in params.lr (0.1 and 0.2), reporting "acc"
//   trial_job    (experiments) one trial's job, which left outputs (lr.txt: trial_lr)
//   template     (experiments) a template whose one run (rows@2) is job template_job
//   queued_job   (experiments) a job that cannot start, to hold and release
//   notebook_job (interactive) a running notebook job (framework jupyter) of
//                the token's user
//   notebook_path (interactive) the path (and query) yard notebook printed
//   git_job      (git) a job whose code came from git, and its git_repo,
//                git_ref and git_sha: its page shows all three
//
// The experiments flow: sign in; the experiments page lists it; its page
// shows both trials; ticking both draws one "acc" chart whose two lines are
// labelled lr=0.1 and lr=0.2 (the param that differs); smoothing and the log
// scale go into the address; that address, opened afresh, shows the same
// comparison with the same settings; a trial's page links to it and
// downloads its outputs; a waiting job is held ("held by admin") and released
// from its page.
//
// The app flow: a /?token=T address is refused (the sign-in form says to use
// the fragment, and the token leaves the address bar); sign in with
// /#token=T, which the app takes out of the address bar; no Content Security
// Policy violation anywhere; the cluster page shows the node;
// the queue page shows the queued job's reason; the jobs page lists the
// jobs; the running job is cancelled with its cancel button; the digits
// example is submitted through the form with params.epochs changed, and its
// page shows it succeed, its log and a loss chart with points. It writes
// result.json ({"submitted": ID}) for test_web.py to check through the API.
// Exit status 0 when everything held; on a failure the page at that moment
// is saved as failure.png and the error printed.
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const tid = (id) => `[data-testid="${id}"]`;
let shots = 0;

fs.mkdirSync(cfg.artifacts, { recursive: true });

async function shot(page, name) {
	const file = path.join(cfg.artifacts, `${String(++shots).padStart(2, '0')}-${name}.png`);
	await page.screenshot({ path: file, fullPage: true });
	console.log(`screenshot ${file}`);
}

function check(cond, msg) {
	if (!cond) throw new Error(msg);
}

// Waits until the element's text matches re; returns the text.
async function waitText(page, testid, re, timeout = 30000) {
	const loc = page.locator(tid(testid)).first();
	await loc.waitFor({ state: 'visible', timeout });
	const end = Date.now() + timeout;
	let text = '';
	while (Date.now() < end) {
		text = (await loc.textContent()) || '';
		if (re.test(text)) return text;
		await page.waitForTimeout(250);
	}
	throw new Error(`${testid}: text ${JSON.stringify(text.slice(0, 300))} never matched ${re}`);
}

async function fixture(page) {
	await page.goto(`${cfg.url}/#token=${encodeURIComponent(cfg.token)}`);
	await page.locator(tid('fixture')).waitFor({ timeout: 10000 });
	// the module script under /assets/ ran: served with a JavaScript type
	await page.waitForFunction(() => document.title.endsWith('(js ran)'), null, { timeout: 10000 });
	await shot(page, 'fixture');
	// an app route (SPA fallback) loads the same page
	await page.goto(`${cfg.url}/jobs/1#/jobs/1`);
	await page.locator(tid('fixture')).waitFor({ timeout: 10000 });
	await shot(page, 'fixture-fallback');
}

async function nav(page, which, hash) {
	const link = page.locator(tid(`nav-${which}`));
	if (await link.count()) await link.first().click();
	else await page.goto(`${cfg.url}/${hash}`);
	await page.waitForFunction((h) => location.hash.startsWith(h), hash, { timeout: 10000 });
}

// The job the form made: the app is expected to open its page (#/jobs/ID);
// if it stays elsewhere, the newest job named ui-digits (asked of the API)
// is opened instead, so that the rest of the flow still runs.
async function submittedJob(page) {
	const end = Date.now() + 60000;
	while (Date.now() < end) {
		const m = /^#\/jobs\/(\d+)/.exec(await page.evaluate(() => location.hash));
		if (m) return Number(m[1]);
		const r = await fetch(`${cfg.url}/v1/jobs`, { headers: { Authorization: `Bearer ${cfg.token}` } });
		const job = r.ok ? (await r.json()).jobs.find((j) => j.name === 'ui-digits') : null;
		if (job && Date.now() > end - 50000) {
			console.log(`the app did not open #/jobs/${job.id} after submitting; opening it`);
			await page.goto(`${cfg.url}/#/jobs/${job.id}`);
			return job.id;
		}
		await page.waitForTimeout(250);
	}
	throw new Error('no job named ui-digits after submitting the form');
}

async function app(page) {
	// a token in the query string is not used: the form asks to sign in,
	// says why, and the token is gone from the address bar
	await page.goto(`${cfg.url}/?token=${encodeURIComponent(cfg.token)}`);
	const signin = page.locator(tid('signin-token'));
	const navCluster = page.locator(tid('nav-cluster'));
	await signin.waitFor({ timeout: 15000 });
	const alert = (await page.locator('[role="alert"]').first().textContent()) || '';
	check(/\?token=/.test(alert) && /#token=/.test(alert), `no message about ?token=: ${JSON.stringify(alert)}`);
	check(!page.url().includes('token'), `the ?token= address stays in the address bar: ${page.url()}`);
	check(!(await navCluster.count()), 'signed in by a ?token= query');
	await shot(page, 'signin-query-refused');

	// sign in with the fragment: taken, and removed from the address bar
	await page.goto('about:blank'); // a new load, as a link opened from a terminal is
	await page.goto(`${cfg.url}/#token=${encodeURIComponent(cfg.token)}`);
	await navCluster.waitFor({ timeout: 15000 });
	check(!page.url().includes('token'), `the token stays in the address bar: ${page.url()}`);

	// cluster: the agent's node and its GPUs
	await nav(page, 'cluster', '#/cluster');
	await page.locator(tid(`node-${cfg.node}`)).waitFor({ timeout: 15000 });
	await page.locator(tid(`gpu-${cfg.node}-0`)).waitFor({ timeout: 15000 });
	// the cluster's GPUs over time: allocated and utilised (sampled every 5 s)
	const gchart = page.locator(tid('chart-GPUs %'));
	await gchart.waitFor({ timeout: 20000 });
	check((await gchart.getAttribute('data-lines')) === 'allocated\nutilised', 'the cluster chart has both lines');
	await shot(page, 'cluster');

	// queue: the job that cannot start, with the master's reason
	await nav(page, 'queue', '#/queue');
	await page.locator(tid(`queue-row-${cfg.queued_job}`)).waitFor({ timeout: 15000 });
	const reason = (cfg.queued_reason || '').trim();
	await waitText(page, `queue-reason-${cfg.queued_job}`,
		reason ? new RegExp(reason.slice(0, 40).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')) : /\S/);
	await shot(page, 'queue');

	// jobs: both prepared jobs are listed
	await nav(page, 'jobs', '#/jobs');
	await page.locator(tid(`job-row-${cfg.cancel_job}`)).waitFor({ timeout: 15000 });
	await page.locator(tid(`job-row-${cfg.queued_job}`)).waitFor({ timeout: 15000 });
	await shot(page, 'jobs');

	// cancel the running job from its page (accepting a confirmation)
	page.on('dialog', (d) => d.accept());
	await page.goto(`${cfg.url}/#/jobs/${cfg.cancel_job}`);
	await waitText(page, 'job-state', /running/i, 30000);
	// its GPU's utilisation, as the simulated GPU says (40%)
	await waitText(page, 'job-gpu-util', /40% now, mean 40%/, 20000);
	await page.locator(tid('cancel-button')).click();
	await waitText(page, 'job-state', /cancel/i, 30000);
	// its timeline is the job's history: queued ... running ... cancelled
	await waitText(page, 'timeline', /running[\s\S]*cancelled/i, 15000);
	await shot(page, `job-${cfg.cancel_job}-cancelled`);

	// submit the digits example with the code folder and one parameter changed
	await nav(page, 'submit', '#/submit');
	await page.locator(tid('code-upload')).setInputFiles(cfg.example_dir);
	await page.locator(tid('submit-name')).fill('ui-digits');
	const fw = page.locator(tid('submit-framework'));
	if ((await fw.evaluate((e) => e.tagName)) === 'SELECT') await fw.selectOption('pytorch');
	else await fw.fill('pytorch');
	// the app's command is a textarea of argv entries, one per line (web/README.md)
	await page.locator(tid('submit-command')).fill(
		['/usr/bin/python3', 'train.py', '--epochs', '{params.epochs}', '--epoch-sleep', '0'].join('\n'));
	await page.locator(tid('param-key-0')).fill('epochs');
	await page.locator(tid('param-value-0')).fill(String(cfg.epochs));
	await shot(page, 'submit');
	await page.locator(tid('submit-button')).click();
	const submitted = await submittedJob(page);
	console.log(`submitted job ${submitted}`);
	fs.writeFileSync(path.join(cfg.artifacts, 'result.json'), JSON.stringify({ submitted }));

	// watch it run to the end: state, log, loss chart with points
	await waitText(page, 'job-state', /succeeded|failed|cancelled/i, 240000);
	await shot(page, `job-${submitted}`);
	await waitText(page, 'job-state', /succeeded/i, 1000);
	await waitText(page, 'log-view', /\S/, 30000);
	const chart = page.locator(tid('chart-loss'));
	await chart.waitFor({ timeout: 30000 });
	check(await chart.locator('canvas, svg').count() > 0, 'chart-loss has no canvas or svg');
	// the chart says how many points it draws ("N points"), or data-points="N"
	const points = async () => {
		const attr = await chart.getAttribute('data-points');
		if (attr) return Number(attr);
		const m = /(\d+)\s*points?/i.exec((await chart.textContent()) || '');
		return m ? Number(m[1]) : 0;
	};
	const end = Date.now() + 30000;
	while ((await points()) <= 0 && Date.now() < end) await page.waitForTimeout(250);
	check((await points()) > 0, 'chart-loss shows no points (expected "N points" or data-points="N", N > 0)');
	await chart.scrollIntoViewIfNeeded();
	await shot(page, `job-${submitted}-done`);
}

// The labels of chart NAME's lines, as the chart element lists them.
async function chartLines(page, name) {
	const fig = page.locator(tid(`chart-${name}`)).first();
	await fig.waitFor({ state: 'visible', timeout: 20000 });
	const end = Date.now() + 20000;
	let lines = '';
	while (Date.now() < end) {
		lines = (await fig.getAttribute('data-lines')) || '';
		const points = Number((await fig.getAttribute('data-points')) || 0);
		if (lines.includes('\n') && points > 0) return lines.split('\n').sort();
		await page.waitForTimeout(200);
	}
	throw new Error(`chart ${name}: lines ${JSON.stringify(lines)}`);
}

// The git flow: a job whose code came from git shows its repository, ref
// and commit on its page.
async function gitJob(page) {
	await page.goto(`${cfg.url}/#token=${encodeURIComponent(cfg.token)}`);
	await page.locator(tid('nav-jobs')).waitFor({ timeout: 15000 });
	await page.goto(`${cfg.url}/#/jobs/${cfg.git_job}`);
	const exact = (s) => new RegExp(`^\\s*${s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);
	await waitText(page, 'job-git-repo', exact(cfg.git_repo));
	await waitText(page, 'job-git-ref', exact(cfg.git_ref));
	await waitText(page, 'job-git-sha', exact(cfg.git_sha));
	await shot(page, `job-${cfg.git_job}-git`);
}

async function experiments(page) {
	const id = cfg.experiment;
	await page.goto(`${cfg.url}/#token=${encodeURIComponent(cfg.token)}`);
	await page.locator(tid('nav-experiments')).waitFor({ timeout: 15000 });
	await nav(page, 'experiments', '#/experiments');
	await page.locator(tid(`experiment-row-${id}`)).waitFor({ timeout: 15000 });
	await shot(page, 'experiments');
	await page.locator(`${tid(`experiment-row-${id}`)} a`).first().click();
	await page.locator(tid('trials')).waitFor({ timeout: 15000 });
	await waitText(page, 'experiment-state', /completed/);
	const boxes = page.locator(`${tid('trials')} input[type=checkbox]`);
	check((await boxes.count()) === 2, `two trials listed, got ${await boxes.count()}`);
	await boxes.nth(0).check();
	await page.waitForFunction(() => /compare=\d+/.test(location.hash), null, { timeout: 10000 });
	await page.locator(`${tid('trials')} input[type=checkbox]`).nth(1).check();
	await page.waitForFunction(() => /compare=\d+,\d+/.test(location.hash), null, { timeout: 10000 });
	let lines = await chartLines(page, 'acc');
	check(JSON.stringify(lines) === JSON.stringify(['lr=0.1', 'lr=0.2']), `the compared lines: ${JSON.stringify(lines)}`);
	await page.locator(tid('log-scale')).check();
	await page.locator(tid('smooth')).fill('0.5');
	await page.waitForFunction(() => /log=1/.test(location.hash) && /smooth=0.5/.test(location.hash), null, { timeout: 10000 });
	await shot(page, `experiment-${id}-compare`);
	// the address opens the same comparison
	const url = page.url();
	await page.goto('about:blank');
	await page.goto(url);
	lines = await chartLines(page, 'acc');
	check(JSON.stringify(lines) === JSON.stringify(['lr=0.1', 'lr=0.2']), `the lines from the URL: ${JSON.stringify(lines)}`);
	check(await page.locator(tid('log-scale')).isChecked(), 'the log scale from the URL');
	check((await page.locator(tid('smooth')).inputValue()) === '0.5', 'the smoothing from the URL');
	const ticked = await page.locator(`${tid('trials')} input[type=checkbox]:checked`).count();
	check(ticked === 2, `both trials ticked from the URL, got ${ticked}`);
	await shot(page, `experiment-${id}-reopened`);
	// a trial's job page: its experiment, its outputs listed from their manifest and a
	// file downloaded from its chunks
	await page.goto(`${cfg.url}/#/jobs/${cfg.trial_job}`);
	await waitText(page, 'job-experiment', new RegExp(`of experiment ${id}`));
	const row = page.locator(tid('outputs-worker-0-0'));
	await row.waitFor({ timeout: 20000 });
	await row.locator('summary').click();
	await row.locator('ul.files li').first().waitFor({ timeout: 20000 });
	const listed = await row.locator('ul.files li').allInnerTexts();
	check(listed.length === 1 && /^lr\.txt\b/.test(listed[0]), `the outputs' one file listed: ${JSON.stringify(listed)}`);
	const [dl] = await Promise.all([page.waitForEvent('download', { timeout: 20000 }), row.locator(tid('download-file')).click()]);
	check(dl.suggestedFilename() === 'lr.txt', `saved under the file's name: ${dl.suggestedFilename()}`);
	const file = path.join(cfg.artifacts, 'lr.txt');
	await dl.saveAs(file);
	const text = fs.readFileSync(file, 'utf8');
	check(text === `${cfg.trial_lr}\n`, `the downloaded file is what the trial wrote: ${JSON.stringify(text)}`);
	// the templates page lists it with its last run; its page links the run's job
	await page.goto(`${cfg.url}/#/templates`);
	const trow = page.locator(tid(`template-row-${cfg.template}`));
	await trow.waitFor({ timeout: 20000 });
	const cells = await trow.locator('td').allInnerTexts();
	check(cells[3] === 'dataset rows' && cells[4] === '1' && cells[5].includes(`rows@2 → job ${cfg.template_job}`),
		`the template's row: ${JSON.stringify(cells)}`);
	await trow.locator('a').first().click();
	await waitText(page, 'template-runs', new RegExp(`rows@2 → job ${cfg.template_job}`));
	await shot(page, `template-${cfg.template}`);
	await page.locator(`${tid('template-runs')} a`).click();
	await page.waitForURL(new RegExp(`#/jobs/${cfg.template_job}$`), { timeout: 20000 });
	// the usage page: the admin's GPU-hours as the API has them, a chart over time, by pool
	await page.goto(`${cfg.url}/#/usage`);
	const gpu = page.locator(tid('usage-gpu-admin'));
	await gpu.waitFor({ timeout: 20000 });
	const u = await (await fetch(`${cfg.url}/v1/usage?by=user&since=30d`, { headers: { Authorization: `Bearer ${cfg.token}` } })).json();
	const mine = u.rows.find((r) => r.key === 'admin');
	const shown = Number(await gpu.innerText());
	check(mine && Math.abs(shown - mine.gpu_seconds / 3600) < 0.01, `the admin's GPU-hours: ${shown} shown, ${JSON.stringify(mine)} from the API`);
	const points = Number(await page.locator(tid('chart-GPU-hours')).getAttribute('data-points'));
	check(points >= 30, `the chart's points (a day each over 30 days, a line per user): ${points}`);
	await page.locator(tid('usage-by')).selectOption('pool');
	await page.locator(tid('usage-row-default')).waitFor({ timeout: 20000 });
	await shot(page, 'usage-by-pool');
	// hold and release of a job that waits
	await page.goto(`${cfg.url}/#/jobs/${cfg.queued_job}`);
	await page.locator(tid('hold-button')).click();
	await waitText(page, 'job-reason', /held by admin/);
	await shot(page, `job-${cfg.queued_job}-held`);
	await page.locator(tid('release-button')).click();
	await page.locator(tid('hold-button')).waitFor({ timeout: 20000 });
}

// The interactive flow: signed in as the notebook's owner, the notebook
// job's page links to its server through the proxy (in a tab of its own,
// with no way back to the app's); Jupyter's page opens through the master,
// a new notebook runs print(6*7) and shows 42 (its kernel's WebSocket
// through the proxy too); the job's page opens a terminal (xterm.js over
// the exec WebSocket, the cookie as the token) in the notebook's task: a
// command typed into it answers, its size is the terminal's, and closing it
// ends the session.
async function interactive(page) {
	await page.goto(`${cfg.url}/#token=${encodeURIComponent(cfg.token)}`);
	await page.locator(tid('nav-jobs')).waitFor({ timeout: 15000 });
	await page.goto(`${cfg.url}/#/jobs/${cfg.notebook_job}`);
	await waitText(page, 'job-state', /running/i, 30000);
	const link = page.locator(tid('notebook-link'));
	await link.waitFor({ timeout: 20000 });
	const href = await link.getAttribute('href');
	check(href === cfg.notebook_path, `the notebook link is ${href}, expected ${cfg.notebook_path}`);
	check(/noopener/.test((await link.getAttribute('rel')) || ''), 'the notebook tab can reach back to the app (no noopener)');
	await shot(page, 'notebook-job');

	const [tree] = await Promise.all([page.context().waitForEvent('page'), link.click()]);
	await tree.locator('#notebook_list').waitFor({ timeout: 30000 });
	check(tree.url().startsWith(`${cfg.url}/v1/jobs/${cfg.notebook_job}/proxy/`), `Jupyter's page is not the proxy's: ${tree.url()}`);
	await shot(tree, 'notebook-tree');
	// a new Python 3 notebook, which Jupyter opens in a tab of its own
	await tree.locator('#new-dropdown-button').click();
	const [nb] = await Promise.all([
		tree.context().waitForEvent('page'),
		tree.locator('#kernel-python3 a').first().click(),
	]);
	await nb.waitForURL(/\/notebooks\/.*\.ipynb/, { timeout: 30000 });
	await nb.locator('#kernel_indicator_icon.kernel_idle_icon').waitFor({ timeout: 60000 });
	await nb.locator('.cell .CodeMirror').first().click();
	await nb.keyboard.type('print(6*7)');
	await nb.keyboard.press('Shift+Enter');
	const out = nb.locator('.output_area pre').first();
	await out.waitFor({ timeout: 60000 });
	const text = ((await out.textContent()) || '').trim();
	check(text === '42', `the cell printed ${JSON.stringify(text)}, expected 42`);
	console.log(`notebook ${nb.url()}: print(6*7) -> ${text}`);
	await shot(nb, 'notebook-cell');
	await nb.close();
	await tree.close();

	// a terminal in the notebook's task
	await page.bringToFront();
	await page.locator(tid('terminal-open')).click();
	await waitText(page, 'terminal-status', /connected/, 30000);
	const screen = page.locator(`${tid('terminal')} .xterm-rows`);
	await page.locator(tid('terminal')).click();
	await page.keyboard.type('echo hello-$((6*7)); stty size');
	await page.keyboard.press('Enter');
	const end = Date.now() + 30000;
	let shown = '';
	while (Date.now() < end) {
		shown = (await screen.textContent()) || '';
		if (/hello-42\s*\d+ \d+/.test(shown)) break;
		await page.waitForTimeout(200);
	}
	const m = /hello-42\s*(\d+) (\d+)/.exec(shown);
	check(m, `the terminal shows ${JSON.stringify(shown.slice(-400))}`);
	// the task's terminal is as wide as the page's (fitted), not the 80 x 24 of none
	check(Number(m[2]) > 80, `the terminal's size went through: stty size says ${m[1]} ${m[2]}`);
	await shot(page, 'terminal');
	await page.locator(tid('terminal-close')).click();
	await waitText(page, 'terminal-status', /ended|exited|signal/, 15000);
}

const browser = await chromium.launch({
	executablePath: CHROMIUM,
	headless: true,
	args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
const errors = [];
// every Content Security Policy violation (the master's header) is an error
await page.exposeFunction('__cspViolation', (v) => errors.push(`CSP: ${v}`));
await page.addInitScript(() => {
	document.addEventListener('securitypolicyviolation', (e) =>
		window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`));
});
page.on('pageerror', (e) => errors.push(String(e)));
// the issue asks for no console errors: on this flow (no API error is
// provoked) any error the page logs fails the test
page.on('console', (m) => {
	if (m.type() === 'error') {
		console.log(`browser console: ${m.text()}`);
		errors.push(`console: ${m.text()}`);
	}
});
let rc = 0;
try {
	if (cfg.mode === 'fixture') await fixture(page);
	else if (cfg.mode === 'experiments') await experiments(page);
	else if (cfg.mode === 'interactive') await interactive(page);
	else if (cfg.mode === 'git') await gitJob(page);
	else await app(page);
	check(errors.length === 0, `errors in the page: ${errors.join('; ')}`);
	console.log('ui test: ok');
} catch (e) {
	rc = 1;
	console.error(`ui test failed: ${e.stack || e}`);
	try {
		await page.screenshot({ path: path.join(cfg.artifacts, 'failure.png'), fullPage: true });
		console.error(`screenshot ${path.join(cfg.artifacts, 'failure.png')} (at ${page.url()})`);
	} catch {}
} finally {
	await browser.close();
}
process.exit(rc);
