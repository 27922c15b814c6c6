// Profiling helper (dev only, not a test): loads TRACE_FILE into the page served from DIST, then
// CPU-profiles 120 steps (`step`, default) or the whole load (`load`) through the DevTools
// protocol and prints self time per function. For wasm function names, profile a dist built
// without wasm-opt (wasm-bindgen keeps the name section):
//   node tests/e2e/prof.mjs /tmp/dist-names trace.msgpack step
import { spawn } from 'node:child_process';
import net from 'node:net';
import { chromium } from 'playwright-core';
const [dist, file, what = 'step'] = process.argv.slice(2);
const port = await new Promise((res) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dist], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 720 } });
page.on('pageerror', (e) => console.log('PAGEERROR', e.message));
page.on('console', (m) => console.log('console:', m.text()));
await page.goto(`http://127.0.0.1:${port}/`);
await page.waitForSelector('[data-testid=stats]:has-text("events")');
const cdp = await page.context().newCDPSession(page);
await cdp.send('Profiler.enable');
await cdp.send('Profiler.setSamplingInterval', { interval: 200 });
if (what === 'load') await cdp.send('Profiler.start');
await page.setInputFiles('[data-testid=file-input]', file);
await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 600000 });
if (what !== 'load') {
  await cdp.send('Profiler.start');
  await page.evaluate(async () => {
    for (let k = 0; k < 120; k++) {
      window.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
      await new Promise((r) => requestAnimationFrame(r));
    }
  });
}
const { profile } = await cdp.send('Profiler.stop');
const self = new Map();
const dt = new Map();
for (let i = 0; i < profile.samples.length; i++) dt.set(profile.samples[i], (dt.get(profile.samples[i]) || 0) + (profile.timeDeltas[i] || 0));
let total = 0;
for (const n of profile.nodes) {
  const t = (dt.get(n.id) || 0) / 1000;
  const k = n.callFrame.functionName || `(${n.callFrame.url.split('/').pop()})`;
  self.set(k, (self.get(k) || 0) + t);
  total += t;
}
console.log(`total ${total.toFixed(0)} ms`);
for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(v.toFixed(1).padStart(8), k.slice(0, 150));
await browser.close();
server.kill();
