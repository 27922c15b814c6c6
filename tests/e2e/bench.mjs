// Headless benchmark of the web debugger (not part of the test run):
//   node tests/e2e/bench.mjs [SIZES...]        e.g. node tests/e2e/bench.mjs 100000 1000000
// For each size it writes the benchmark trace (single-block BlockStored events, 16
// tokens each, mixed GPU/CPU media, a parent chain, 16 events per batch) as JSON Lines, converts
// it to msgpack with `kvscope convert` (KVSCOPE_BIN, default target/release/kvscope), then loads
// each into the page through the file input and reports:
//   * the app's own figure: load start -> timeline model (read + parse + flatten + lanes; the
//     parent->child edge index is built in slices after the first paint, with the analysis), ms;
//   * wall time: file input -> whole timeline rendered (includes the browser reading the file);
//   * in the page (performance marks from the start of reading): the first painted timeline
//     (`kvscope:first-paint`: the records read so far, shown while reading goes on) and the
//     whole trace's timeline (`kvscope:first-timeline`);
//   * the core analysis (consumer models, violation index; runs after the first paint), ms, and
//     wall time file input -> analysis complete and re-rendered;
//   * after the analysis, per step while stepping (ArrowRight) and while scrubbing (random seeks): median / p95 ms
//     from the input event to the next animation frame (16.7 ms = 60 fps);
//   * main-thread blocking: the longest task (PerformanceObserver 'longtask') while loading
//     (bytes -> first timeline) and while analysing (first timeline -> analysis complete), and the
//     response time of a pan key pressed during the analysis (measured from Node: includes any
//     wait for a busy main thread);
//   * the app's wasm size, raw and gzip -9 (plus any lazily loaded wasm in dist/).
// KVSCOPE_SHOTS=1: instead of timing, take 1440x900 screenshots while loading, while analysing
// and when ready (msgpack in the light theme, JSONL in the dark one) into tests/e2e/screenshots/.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, createWriteStream, readFileSync, readdirSync, existsSync, rmSync, statSync } from 'node:fs';
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

// Screenshots of a load: while parsing, while analysing, ready.
async function shots(page, n, fmt, file) {
  const dir = join(here, 'screenshots');
  mkdirSync(dir, { recursive: true });
  const theme = fmt === 'jsonl' ? 'dark' : 'light';
  if ((await page.locator('html').getAttribute('data-theme')) !== theme) await page.keyboard.press('t');
  await page.setInputFiles('[data-testid=file-input]', file);
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=load-progress]')?.value) > 20, null, { timeout: 600000 });
  await page.screenshot({ path: join(dir, `bench-${n}-${fmt}-${theme}-loading.png`) });
  await page.waitForSelector('[data-testid=analysis-progress]', { timeout: 600000 });
  await page.waitForFunction(() => Number(document.querySelector('[data-testid=analysis-progress]')?.value) > 30, null, { timeout: 600000 }).catch(() => {});
  await page.screenshot({ path: join(dir, `bench-${n}-${fmt}-${theme}-analysing.png`) });
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 600000 });
  await page.keyboard.press('n');
  await page.keyboard.press('ArrowRight');
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  await page.screenshot({ path: join(dir, `bench-${n}-${fmt}-${theme}-ready.png`) });
}

const tmp = mkdtempSync(join(tmpdir(), 'kvscope-bench-'));
const port = await freePort();
const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dist], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const ctx = await chromium.launchPersistentContext(join(tmp, 'profile'), {
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  viewport: process.env.KVSCOPE_SHOTS ? { width: 1440, height: 900 } : { width: 1280, height: 720 },
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
// Long tasks from page start (installed before any page script runs).
await ctx.addInitScript(() => {
  window.__longtasks = [];
  try {
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longtasks.push([e.startTime, e.duration]); })
      .observe({ type: 'longtask', buffered: true });
  } catch { /* no longtask support */ }
});
for (const f of readdirSync(dist).filter((f) => f.endsWith('.wasm')).sort()) {
  const wasm = readFileSync(join(dist, f));
  console.log(`${f}: ${wasm.length} B raw, ${gzipSync(wasm, { level: 9 }).length} B gzip -9`);
}
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
      if (process.env.KVSCOPE_SHOTS) {
        await shots(page, n, fmt, file);
        console.log(`${n} events ${fmt}: screenshots taken` + (errors.length ? `; PAGE ERRORS: ${errors.join(' | ')}` : ''));
        await page.close();
        continue;
      }
      const t0 = Date.now();
      await page.setInputFiles('[data-testid=file-input]', file);
      await page.waitForSelector(`[data-testid=stats]:has-text("${n} events")`, { timeout: 600000 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const wall = Date.now() - t0;
      const status = await page.locator('[data-testid=status]').innerText();
      const appMs = Number((status.match(/in (\d+) ms/) || [])[1]);
      // Pan while the analysis runs: time from sending the key to the next frame, seen from Node.
      const pans = [];
      for (let k = 0; k < 8; k++) {
        const running = await page.locator('[data-testid=analysis-state]').innerText().catch(() => '');
        if (!/analysing/.test(running)) break;
        const tp = Date.now();
        await page.evaluate((key) => new Promise((r) => {
          window.dispatchEvent(new KeyboardEvent('keydown', { key, bubbles: true }));
          requestAnimationFrame(() => r());
        }), k % 2 ? 'a' : 'd');
        pans.push(Date.now() - tp);
        await new Promise((r) => setTimeout(r, 150));
      }
      // The core analysis runs after the first paint; wait for it.
      await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 600000 });
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      const wallDone = Date.now() - t0;
      const state = await page.locator('[data-testid=analysis-state]').innerText();
      const analysisMs = Number((state.match(/analysed in (\d+) ms/) || [])[1]);
      // In-page marks ("load" = bytes in memory -> first rendered timeline).
      const marks = await page.evaluate(() => Object.fromEntries(['bytes', 'first-paint', 'first-timeline', 'analysed']
        .map((k) => [k, (performance.getEntriesByName(`kvscope:${k}`).pop() || {}).startTime])));
      const firstMs = marks['first-timeline'] - marks.bytes, doneMs = marks.analysed - marks.bytes;
      // The first frame with a timeline: the records read so far, while reading goes on.
      const paintMs = marks['first-paint'] - marks.bytes;
      const longtasks = await page.evaluate(() => window.__longtasks || []);
      const longest = (keep) => Math.max(0, ...longtasks.filter(keep).map(([, d]) => d));
      // Loading: tasks that ended by the first painted timeline; analysing: tasks that ran
      // (partly) between it and the analysis' end.
      const ft = marks['first-timeline'];
      const loadBlock = longest(([s, d]) => s + d > marks.bytes - 50 && s + d <= ft + 1);
      const analysisBlock = longest(([s, d]) => s + d > ft + 1 && s < marks.analysed);
      // The per-phase milliseconds are the status line's hover text (timings left the line).
      const breakdown = ((await page.locator('[data-testid=loaded]').getAttribute('title')) || '').replace(/^milliseconds per phase: /, '');
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
      // Script work per step: keydown -> a zero-delay timeout (the effects, incl. the canvas
      // redraw, run in microtasks before it), and steps driven once per animation frame
      // (60 fps means a 16.7 ms frame interval).
      const work = await page.evaluate(async () => {
        const out = [];
        for (let k = 0; k < 120; k++) {
          const t = performance.now();
          window.dispatchEvent(new KeyboardEvent('keydown', { key: k % 2 ? 'ArrowLeft' : 'ArrowRight', bubbles: true }));
          await new Promise((r) => setTimeout(r, 0));
          out.push(performance.now() - t);
          await new Promise((r) => requestAnimationFrame(r));
        }
        return out;
      });
      const frames = await page.evaluate(async () => {
        const out = [];
        let last = await new Promise((r) => requestAnimationFrame(r));
        for (let k = 0; k < 120; k++) {
          window.dispatchEvent(new KeyboardEvent('keydown', { key: 'ArrowRight', bubbles: true }));
          const t = await new Promise((r) => requestAnimationFrame(r));
          out.push(t - last);
          last = t;
        }
        return out;
      });
      const st = stats(steps), sk = stats(seeks), wk = stats(work), fr = stats(frames);
      console.log(`${n} events ${fmt} (${(statSync(file).size / 1e6).toFixed(1)} MB): app bytes->timeline model ${appMs} ms, wall file->first timeline ${wall} ms; ` +
        `analysis ${analysisMs} ms, wall file->analysis complete ${wallDone} ms; ` +
        `IN PAGE bytes->first painted (partial) timeline ${Number.isFinite(paintMs) ? paintMs.toFixed(0) : '-'} ms, bytes->whole timeline painted ${firstMs.toFixed(0)} ms, bytes->analysis complete ${doneMs.toFixed(0)} ms [${breakdown}]; ` +
        `longest task: loading ${loadBlock.toFixed(0)} ms, analysing ${analysisBlock.toFixed(0)} ms; ` +
        `pan during analysis: ${pans.length ? `${pans.length} samples, max ${Math.max(...pans)} ms` : 'none (analysis already done)'}; ` +
        `step median ${st.median.toFixed(1)} ms p95 ${st.p95.toFixed(1)} ms; scrub-seek median ${sk.median.toFixed(1)} ms p95 ${sk.p95.toFixed(1)} ms; ` +
        `step script work median ${wk.median.toFixed(1)} ms p95 ${wk.p95.toFixed(1)} ms; one step per frame: frame interval median ${fr.median.toFixed(1)} ms p95 ${fr.p95.toFixed(1)} ms` +
        (errors.length ? `; PAGE ERRORS: ${errors.join(' | ')}` : ''));
      await page.close();
    }
  }
} finally {
  await ctx.close();
  server.kill();
  rmSync(tmp, { recursive: true, force: true });
}
