// Headless benchmark of the web debugger (not part of the test run):
//   node tests/e2e/bench.mjs [SIZES...]        e.g. node tests/e2e/bench.mjs 100000 1000000
// For each size it writes the DECISIONS.md benchmark trace (single-block BlockStored events, 16
// tokens each, mixed GPU/CPU media, a parent chain, 16 events per batch) as JSON Lines, converts
// it to msgpack with `kvscope convert` (KVSCOPE_BIN, default target/release/kvscope), then loads
// each into the page through the file input and reports:
//   * the app's own figure: bytes in memory -> timeline model (parse + flatten + layout), ms;
//   * wall time: file input -> first rendered timeline (includes the browser reading the file);
//   * the core analysis (consumer models, violation index; runs after the first paint), ms, and
//     wall time file input -> analysis complete and re-rendered;
//   * after the analysis, per step while stepping (ArrowRight) and while scrubbing (random seeks): median / p95 ms
//     from the input event to the next animation frame (16.7 ms = 60 fps);
//   * the app's wasm size, raw and gzip -9.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, createWriteStream, readFileSync, existsSync, rmSync, statSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const dist = process.env.KVSCOPE_DIST || join(root, 'dist');
const bin = process.env.KVSCOPE_BIN || join(root, 'target', 'release', 'kvscope');
const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
if (sizes.length === 0) sizes.push(100000, 1000000);

async function writeTrace(path, n) {
  const out = createWriteStream(path);
  const write = (s) => (out.write(s) ? Promise.resolve() : new Promise((r) => out.once('drain', r)));
  await write('{"kind":"header","kvscope":1,"scenario":"bench"}\n');
  const last = { GPU: null, CPU: null };
  let seq = 0;
  for (let i = 0; i < n; i += 16) {
    const evs = [];
    for (let j = i; j < Math.min(n, i + 16); j++) {
      const medium = j % 3 === 0 ? 'CPU' : 'GPU';
      const h = 1000000 + j;
      const toks = Array.from({ length: 16 }, (_, k) => (j * 16 + k) % 50000);
      evs.push(`{"type":"BlockStored","block_hashes":[${h}],"parent_block_hash":${last[medium] ?? 'null'},"token_ids":[${toks.join(',')}],"block_size":16,"lora_id":null,"medium":"${medium}","lora_name":null}`);
      last[medium] = h;
    }
    await write(`{"source":"bench","dp_rank":0,"seq":${seq},"ts":${1700000000 + seq}.0,"events":[${evs.join(',')}]}\n`);
    seq++;
  }
  await new Promise((r) => out.end(r));
}

function freePort() {
  return new Promise((res) => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
}

const stats = (xs) => { const s = [...xs].sort((a, b) => a - b); return { median: s[Math.floor(s.length / 2)], p95: s[Math.floor(s.length * 0.95)] }; };

const tmp = mkdtempSync(join(tmpdir(), 'kvscope-bench-'));
const port = await freePort();
const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dist], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const ctx = await chromium.launchPersistentContext(join(tmp, 'profile'), {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true, viewport: { width: 1280, height: 720 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const wasm = readFileSync(join(dist, 'kvscope_web_bg.wasm'));
console.log(`wasm: ${wasm.length} B raw, ${gzipSync(wasm, { level: 9 }).length} B gzip -9`);
try {
  for (const n of sizes) {
    const jsonl = join(tmp, `bench-${n}.jsonl`);
    await writeTrace(jsonl, n);
    const files = [['jsonl', jsonl]];
    if (existsSync(bin)) {
      const mp = join(tmp, `bench-${n}.msgpack`);
      execFileSync(bin, ['convert', jsonl, '--to', 'msgpack', '-o', mp], { stdio: 'ignore' });
      files.unshift(['msgpack', mp]);
    } else {
      console.log(`(no ${bin}: msgpack skipped)`);
    }
    for (const [fmt, file] of files) {
      const page = await ctx.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.waitForSelector('[data-testid=stats]:has-text("events")');
      const t0 = Date.now();
      await page.setInputFiles('[data-testid=file-input]', file);
      await page.waitForSelector(`[data-testid=stats]:has-text("${n} events")`, { timeout: 600000 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const wall = Date.now() - t0;
      const status = await page.locator('[data-testid=status]').innerText();
      const appMs = Number((status.match(/in (\d+) ms/) || [])[1]);
      // The core analysis runs after the first paint; wait for it.
      await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 600000 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const wallDone = Date.now() - t0;
      const state = await page.locator('[data-testid=analysis-state]').innerText();
      const analysisMs = Number((state.match(/analysed in (\d+) ms/) || [])[1]);
      // In-page marks (DECISIONS "load": bytes in memory -> first rendered timeline).
      const marks = await page.evaluate(() => Object.fromEntries(['bytes', 'first-timeline', 'analysed']
        .map((k) => [k, (performance.getEntriesByName(`kvscope:${k}`).pop() || {}).startTime])));
      const firstMs = marks['first-timeline'] - marks.bytes, doneMs = marks.analysed - marks.bytes;
      const breakdown = (status.match(/\(([^)]*ms)\)/) || [])[1] || '';
      const steps = await page.evaluate(async () => {
        const frame = () => new Promise((r) => requestAnimationFrame(r));
        const out = [];
        for (let k = 0; k < 120; k++) {
          const t = performance.now();
          window.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
          await frame();
          out.push(performance.now() - t);
        }
        return out;
      });
      const seeks = await page.evaluate(async (n) => {
        const frame = () => new Promise((r) => requestAnimationFrame(r));
        const s = document.querySelector('[data-testid=scrubber]');
        const out = [];
        for (let k = 0; k < 60; k++) {
          const t = performance.now();
          s.value = String(Math.floor(Math.random() * n));
          s.dispatchEvent(new Event('input', { bubbles: true }));
          await frame();
          out.push(performance.now() - t);
        }
        return out;
      }, n);
      const st = stats(steps), sk = stats(seeks);
      console.log(`${n} events ${fmt} (${(statSync(file).size / 1e6).toFixed(1)} MB): app bytes->timeline model ${appMs} ms, wall file->first timeline ${wall} ms; ` +
        `analysis ${analysisMs} ms, wall file->analysis complete ${wallDone} ms; ` +
        `IN PAGE bytes->first painted timeline ${firstMs.toFixed(0)} ms, bytes->analysis complete ${doneMs.toFixed(0)} ms [${breakdown}]; ` +
        `step median ${st.median.toFixed(1)} ms p95 ${st.p95.toFixed(1)} ms; scrub-seek median ${sk.median.toFixed(1)} ms p95 ${sk.p95.toFixed(1)} ms` +
        (errors.length ? `; PAGE ERRORS: ${errors.join(' | ')}` : ''));
      await page.close();
    }
  }
} finally {
  await ctx.close();
  server.kill();
  rmSync(tmp, { recursive: true, force: true });
}
