// A terminal in a running task (yard exec -t from the browser): xterm.js over
// the exec WebSocket (yard.exec.v1, tty and stdin), the browser's cookie
// as the token. xterm is loaded when a terminal is first opened.
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  CH_STATUS,
  CH_STDERR,
  CH_STDOUT,
  EXEC_PROTOCOL,
  SHELL_ARGV,
  closeText,
  execUrl,
  parseMessage,
  resizeMessage,
  statusText,
  stdinMessage,
  type ExecStatus,
} from '../lib/session';

/**
 * xterm.js writes its theme and cell sizes into <style> elements, which
 * the app's Content-Security-Policy (style-src 'self', no inline styles)
 * blocks. While it builds its DOM (Terminal.open), a "style" element it
 * asks for is an inert <template> whose text goes into a constructed
 * stylesheet of the document's (adoptedStyleSheets: not an inline style,
 * allowed), dropped with the element.
 */
function openWithoutInlineStyles(open: () => void): void {
  const make = document.createElement;
  document.createElement = function (this: Document, tag: string, opts?: ElementCreationOptions): HTMLElement {
    if (String(tag).toLowerCase() !== 'style') return make.call(this, tag, opts);
    const el = make.call(this, 'template', opts);
    const sheet = new CSSStyleSheet();
    let text = '';
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    Object.defineProperty(el, 'textContent', {
      get: () => text,
      set: (v: string | null) => {
        text = v ?? '';
        sheet.replaceSync(text);
      },
    });
    const remove = el.remove.bind(el);
    el.remove = () => {
      document.adoptedStyleSheets = document.adoptedStyleSheets.filter((x) => x !== sheet);
      remove();
    };
    return el;
  } as typeof document.createElement;
  try {
    open();
  } finally {
    document.createElement = make;
  }
}

export function TerminalPanel({ job, tasks }: { job: number; tasks: string[] }) {
  const [task, setTask] = useState(tasks[0] ?? '');
  const [open, setOpen] = useState(false);
  const [status, setStatus] = useState<string | null>(null);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => {
    if (!tasks.includes(task) && tasks.length) setTask(tasks[0]);
  }, [tasks.join(' ')]);

  useEffect(() => {
    if (!open || !box.current) return;
    let gone = false;
    let dispose = () => {};
    setStatus('connecting…');
    (async () => {
      const [{ Terminal }, { FitAddon }] = await Promise.all([
        import('@xterm/xterm'),
        import('@xterm/addon-fit'),
        import('@xterm/xterm/css/xterm.css'),
      ]);
      if (gone || !box.current) return;
      const term = new Terminal({ cursorBlink: true, fontSize: 13, scrollback: 5000 });
      const fit = new FitAddon();
      term.loadAddon(fit);
      const at = box.current;
      openWithoutInlineStyles(() => term.open(at));
      fit.fit();
      const sock = new WebSocket(execUrl(window.location, job, task, SHELL_ARGV, term.cols, term.rows), EXEC_PROTOCOL);
      sock.binaryType = 'arraybuffer';
      let ended: string | null = null;
      sock.onopen = () => {
        setStatus(`connected to ${task}`);
        term.focus();
      };
      sock.onmessage = (ev) => {
        if (typeof ev.data === 'string') return;
        const m = parseMessage(ev.data as ArrayBuffer);
        if (!m) return;
        if (m.channel === CH_STDOUT || m.channel === CH_STDERR) term.write(m.payload);
        else if (m.channel === CH_STATUS) {
          try {
            ended = statusText(JSON.parse(new TextDecoder().decode(m.payload)) as ExecStatus);
          } catch {
            ended = 'ended';
          }
        }
      };
      sock.onclose = (ev) => {
        const why = ended ?? closeText(ev.code, ev.reason);
        term.write(`\r\n[${why}]\r\n`);
        setStatus(why);
      };
      const send = (b: Uint8Array<ArrayBuffer>) => {
        if (sock.readyState === WebSocket.OPEN) sock.send(b);
      };
      const onData = term.onData((d) => send(stdinMessage(d)));
      const onBinary = term.onBinary((d) => send(stdinMessage(Uint8Array.from(d, (ch) => ch.charCodeAt(0) & 0xff))));
      const onResize = term.onResize(({ cols, rows }) => send(resizeMessage(cols, rows)));
      const refit = () => fit.fit();
      window.addEventListener('resize', refit);
      dispose = () => {
        window.removeEventListener('resize', refit);
        onData.dispose();
        onBinary.dispose();
        onResize.dispose();
        sock.close(1000);
        term.dispose();
      };
    })().catch((e) => setStatus(`cannot open a terminal: ${String(e)}`));
    return () => {
      gone = true;
      dispose();
    };
  }, [open]);

  if (!tasks.length) return null;
  return (
    <section aria-labelledby="terminal-h" class="terminal-panel">
      <h2 id="terminal-h">Terminal</h2>
      <div class="terminal-bar">
        <label>
          Task{' '}
          <select value={task} disabled={open} data-testid="terminal-task" onChange={(e) => setTask((e.target as HTMLSelectElement).value)}>
            {tasks.map((t) => (
              <option key={t} value={t}>
                {t}
              </option>
            ))}
          </select>
        </label>
        {open ? (
          <button type="button" data-testid="terminal-close" onClick={() => setOpen(false)}>
            Close
          </button>
        ) : (
          <button type="button" data-testid="terminal-open" onClick={() => setOpen(true)}>
            Open a shell
          </button>
        )}
        {status && (
          <span class="muted" role="status" data-testid="terminal-status">
            {status}
          </span>
        )}
      </div>
      {open && <div class="terminal" ref={box} data-testid="terminal" />}
    </section>
  );
}
