// A real browser for tests: Debian's `chromium-headless-shell` driven over the Chrome DevTools
// Protocol (Node's own WebSocket, no library). What fetch cannot show — which cookies a browser
// stores and sends (SameSite, Path), the `Origin` a page's form carries under its referrer
// policy, a `required` box that stops a form — a browser does.
import { spawn } from 'node:child_process';
import { exited, printedMatch, tempDir } from './helpers.mjs';
import { findCommand } from '../scripts/debian.mjs';

/** How long one page may take to load. */
const LOAD_MS = 15_000;

/** Start the browser: { newPage(), close() }. */
export async function launchBrowser() {
  const path = findCommand('chromium-headless-shell');
  if (!path) throw new Error('chromium-headless-shell is missing: `sudo apt-get install -y chromium-headless-shell` (npm test installs it as root)');
  const child = spawn(
    path,
    [
      '--remote-debugging-port=0',
      `--user-data-dir=${tempDir('anygpt-chromium-')}`,
      // Containers run tests as root, where Chromium's sandbox cannot start.
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--no-first-run',
      'about:blank',
    ],
    // Its own process group: Debian's command is a shell script that runs the browser as its
    // child, so killing the script alone would leave the browser (and this test) running.
    { stdio: ['ignore', 'ignore', 'pipe'], detached: true },
  );
  const [, endpoint] = await printedMatch(child, 'stderr', /DevTools listening on (ws:\/\/\S+)/);
  const cdp = await protocol(endpoint);
  return {
    newPage: () => newPage(cdp),
    async close() {
      // Asked to close, given a moment; the group kill below ends it whatever it answers.
      const asked = cdp.send('Browser.close').catch(() => {});
      await Promise.race([asked, new Promise((resolve) => setTimeout(resolve, 2_000))]);
      cdp.close();
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is gone already.
      }
      child.stderr.destroy();
      await exited(child);
    },
  };
}

/** A DevTools connection: send(method, params, session) and the events it receives. */
async function protocol(endpoint) {
  const socket = new WebSocket(endpoint);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = () => reject(new Error(`cannot reach the browser at ${endpoint}`));
  });
  let next = 0;
  const pending = new Map();
  const listeners = new Set();
  // A browser that closes (Browser.close) may drop the socket before it answers: nothing waits
  // for an answer that will never come.
  socket.onclose = () => {
    for (const { reject } of pending.values()) reject(new Error('the browser closed'));
    pending.clear();
  };
  socket.onmessage = ({ data }) => {
    const message = JSON.parse(data);
    if (message.id === undefined) {
      for (const listener of listeners) listener(message);
      return;
    }
    const waiting = pending.get(message.id);
    if (!waiting) return;
    const { resolve, reject } = waiting;
    pending.delete(message.id);
    if (message.error) reject(new Error(`${message.error.message} (${message.error.code})`));
    else resolve(message.result);
  };
  return {
    send(method, params = {}, sessionId = undefined) {
      const id = ++next;
      socket.send(JSON.stringify({ id, method, params, sessionId }));
      return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
    },
    /** The next event `method` of `sessionId`. */
    once(method, sessionId) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          listeners.delete(listener);
          reject(new Error(`no ${method} within ${LOAD_MS} ms`));
        }, LOAD_MS);
        const listener = (message) => {
          if (message.method !== method || message.sessionId !== sessionId) return;
          clearTimeout(timer);
          listeners.delete(listener);
          resolve(message.params);
        };
        listeners.add(listener);
      });
    },
    close: () => socket.close(),
  };
}

/** A tab: goto(url), act(script) (runs it, waits for the page it loads), evaluate, text, url. */
async function newPage(cdp) {
  const { targetId } = await cdp.send('Target.createTarget', { url: 'about:blank' });
  const { sessionId } = await cdp.send('Target.attachToTarget', { targetId, flatten: true });
  await cdp.send('Page.enable', {}, sessionId);
  const evaluate = async (expression) => {
    const { result, exceptionDetails } = await cdp.send('Runtime.evaluate', { expression, returnByValue: true }, sessionId);
    if (exceptionDetails) throw new Error(`${expression}: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
    return result.value;
  };
  return {
    evaluate,
    async goto(url) {
      const loaded = cdp.once('Page.loadEventFired', sessionId);
      await cdp.send('Page.navigate', { url }, sessionId);
      await loaded;
    },
    /** Run `script` (a click, a submit) and wait for the page it leads to. */
    async act(script) {
      const loaded = cdp.once('Page.loadEventFired', sessionId);
      await evaluate(script);
      await loaded;
    },
    text: () => evaluate('document.body.innerText'),
    url: () => evaluate('location.href'),
  };
}
