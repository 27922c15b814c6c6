// End-to-end tests of the kvscope web debugger in Debian's Chromium (playwright-core, no
// downloads). Serves dist/ (built by scripts/build-web.sh) with `kvscope serve` when the binary
// exists (KVSCOPE_BIN), else python's http.server. Fails on any `pageerror`. Screenshots go to
// tests/e2e/screenshots/ (gitignored): look at them.
//
//   node --test tests/e2e/e2e.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const dist = process.env.KVSCOPE_DIST || join(root, 'dist');
const shots = join(here, 'screenshots');
const fixtures = join(here, 'fixtures');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
mkdirSync(shots, { recursive: true });

// The legacy fixture (`kvscope generate two-tiers-async --order cpython`): `kvscope check`
// reports its first ordering violation at event 2, child-before-parent-in-job.
const LEGACY = join(fixtures, 'legacy.jsonl');
const FIRST_VIOLATION = 2;

let server, base, context, userDir;
const pageErrors = [];

function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); });
    s.on('error', rej);
  });
}

async function waitForHttp(url, ms = 15000) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    try { const r = await fetch(url); if (r.ok) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server did not come up at ${url}`);
}

before(async () => {
  assert.ok(existsSync(join(dist, 'index.html')), `${dist}/index.html missing: run scripts/build-web.sh`);
  const port = await freePort();
  const bin = process.env.KVSCOPE_BIN;
  server = bin && existsSync(bin)
    ? spawn(bin, ['serve', '--port', String(port), '--dist', dist], { stdio: ['ignore', 'pipe', 'inherit'] })
    : spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dist], { stdio: 'ignore' });
  base = `http://127.0.0.1:${port}/`;
  await waitForHttp(base);
  userDir = mkdtempSync(join(tmpdir(), 'kvscope-e2e-'));
  context = await chromium.launchPersistentContext(userDir, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1280, height: 720 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

after(async () => {
  await context?.close();
  server?.kill();
  if (userDir) rmSync(userDir, { recursive: true, force: true });
});

async function open(url = base) {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(`${url}: ${e.message}`));
  await page.goto(url);
  return page;
}

const text = (page, id) => page.locator(`[data-testid=${id}]`).innerText();

test('the demo opens on first visit, with lanes, violations and no page error', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  assert.match(await text(page, 'trace-name'), /demo/);
  assert.match(await text(page, 'status'), /Loaded demo: 12 events/);
  // The analysis runs in slices after the first paint: wait for it to finish (a signal other
  // than the text under test), then its rule names must be in the violations list.
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  assert.match(await text(page, 'violations'), /child-before-parent-in-job/);
  await page.screenshot({ path: join(shots, 'demo.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('lanes per tier × job on the demo: one lane per job, in the permalink', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("violations")');
  await page.getByRole('combobox', { name: 'Lanes' }).selectOption('job');
  await page.waitForSelector('[data-testid=stats]:has-text("2 lanes")');
  const lanes = await page.locator('[data-testid=lane-list] li').allTextContents();
  assert.deepEqual(lanes, ['CPU · job 0', 'CPU · job 1']);
  await page.waitForURL(/[#&]l=job\b/);
  await page.screenshot({ path: join(shots, 'demo-lanes-per-job.png') });
  // The permalink restores the lane mode.
  const again = await open(page.url());
  await again.waitForSelector('[data-testid=stats]:has-text("2 lanes")');
  assert.deepEqual(await again.locator('[data-testid=lane-list] li').allTextContents(), lanes);
  assert.equal(await again.getByRole('combobox', { name: 'Lanes' }).inputValue(), 'job');
  await again.close();
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('lanes per tier × job with many jobs: the lanes scroll, the overview strip stays put', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("violations")');
  // 60 batches of CPU stores, each an inferred job; every 7th child names a later parent.
  const lines = [];
  for (let b = 0; b < 60; b++) {
    const evs = [0, 1, 2].map((j) => {
      const h = 5000 + b * 3 + j;
      const parent = j === 0 ? 'null' : (b % 7 === 0 && j === 1 ? h + 1 : h - 1);
      return `{"type":"BlockStored","block_hashes":[${h}],"parent_block_hash":${parent},"token_ids":[1,2],"block_size":2,"lora_id":null,"medium":"CPU","lora_name":null}`;
    });
    lines.push(`{"source":"p","dp_rank":0,"seq":${b},"ts":${1700000000 + b}.0,"events":[${evs.join(',')}]}`);
  }
  const file = join(mkdtempSync(join(tmpdir(), 'kvscope-jobs-')), 'jobs.jsonl');
  writeFileSync(file, lines.join('\n') + '\n');
  await page.setInputFiles('[data-testid=file-input]', file);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded jobs.jsonl")');
  await page.getByRole('combobox', { name: 'Lanes' }).selectOption('job');
  await page.waitForSelector('[data-testid=stats]:has-text("60 lanes")');
  const head = page.locator('[data-testid=timeline-head]');
  const lanes = page.locator('[data-testid=timeline]');
  const before = [await head.boundingBox(), await lanes.boundingBox()];
  await page.locator('[data-testid=timeline-scroll]').evaluate((el) => { el.scrollTop = 600; });
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-scroll]').scrollTop > 500);
  const after = [await head.boundingBox(), await lanes.boundingBox()];
  assert.deepEqual(after[0], before[0], 'the head (overview + axis) did not move');
  assert.ok(after[1].y < before[1].y - 500, `the lanes scrolled: ${before[1].y} -> ${after[1].y}`);
  // A step keeps the current event's lane in view, under the head.
  await page.keyboard.press('End');
  await page.waitForSelector('[data-testid=counter]:has-text("180 / 180")');
  assert.deepEqual(await head.boundingBox(), before[0]);
  await page.screenshot({ path: join(shots, 'jobs-lanes-scrolled.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('load a legacy trace through the file input, press n: first violation selected, details shown', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  await page.setInputFiles('[data-testid=file-input]', LEGACY);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded legacy.jsonl")');
  assert.match(await text(page, 'stats'), /^48 events/);
  assert.match(await text(page, 'counter'), /^0 \/ 48$/);
  await page.keyboard.press('n');
  await page.waitForSelector(`[data-testid=details-title]:has-text("#${FIRST_VIOLATION} BlockStored")`);
  assert.equal(await text(page, 'counter'), `${FIRST_VIOLATION + 1} / 48`);
  const detail = await text(page, 'violation-detail');
  assert.match(detail, /child-before-parent-in-job/);
  const details = await text(page, 'details');
  assert.match(details, /parent_block_hash/);
  assert.match(details, /0x[0-9a-f]{16}/, 'hashes are shown in hex too');
  assert.match(details, /llmd\s+dropped_orphan/, 'llm-d drops the orphan');
  // The violation list marks the same row as current.
  assert.match(await page.locator('.vlist li.current').innerText(), new RegExp(`#${FIRST_VIOLATION}\\b`));
  await page.screenshot({ path: join(shots, 'legacy-first-violation.png') });

  // Next again, then back with p, and step with the named buttons.
  await page.keyboard.press('n');
  const second = await text(page, 'counter');
  assert.notEqual(second, `${FIRST_VIOLATION + 1} / 48`);
  await page.keyboard.press('p');
  assert.equal(await text(page, 'counter'), `${FIRST_VIOLATION + 1} / 48`);
  await page.getByRole('button', { name: 'Step forward' }).click();
  assert.equal(await text(page, 'counter'), `${FIRST_VIOLATION + 2} / 48`);
  await page.getByRole('button', { name: 'Step back' }).click();
  assert.equal(await text(page, 'counter'), `${FIRST_VIOLATION + 1} / 48`);

  // Inspector tabs.
  await page.getByRole('tab', { name: 'Topology' }).click();
  await page.waitForSelector('[data-testid=topology] .node.s-dropped');
  await page.screenshot({ path: join(shots, 'legacy-topology.png') });
  await page.getByRole('tab', { name: 'Job order' }).click();
  assert.match(await text(page, 'job-title'), /inversion/);
  await page.screenshot({ path: join(shots, 'legacy-job-order.png') });

  // The permalink reproduces the view (inline trace in the hash).
  const url = page.url();
  assert.match(url, /#c=3&.*t=/);
  const again = await open(url);
  await again.waitForSelector('[data-testid=stats]:has-text("48 events")');
  await again.waitForSelector(`[data-testid=counter]:has-text("${FIRST_VIOLATION + 1} / 48")`);
  await again.close();
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('accessible names, help overlay, dark theme, search', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  for (const name of ['Play', 'Step forward', 'Step back', 'Next violation', 'Previous violation']) {
    assert.equal(await page.getByRole('button', { name, exact: true }).count(), 1, name);
  }
  assert.equal(await page.getByLabel('Open trace').count(), 1);
  assert.equal(await page.getByRole('combobox', { name: 'Consumer' }).count(), 1);
  assert.equal(await page.getByRole('searchbox', { name: 'Search' }).count(), 1);
  await page.getByRole('button', { name: 'Play', exact: true }).click();
  assert.equal(await page.getByRole('button', { name: 'Pause', exact: true }).count(), 1);
  await page.keyboard.press(' ');
  await page.keyboard.press('?');
  await page.waitForSelector('[data-testid=help]');
  assert.match(await text(page, 'help'), /Next \/ previous violation/);
  await page.screenshot({ path: join(shots, 'help.png') });
  await page.keyboard.press('Escape');
  await page.keyboard.press('t');
  await page.keyboard.press('/');
  await page.keyboard.type('tier=CPU');
  await page.keyboard.press('Enter');
  assert.match(await text(page, 'details-title'), /CPU/);
  await page.screenshot({ path: join(shots, 'dark-search.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('bad input shows a located error, not a blank page', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  const bad = join(mkdtempSync(join(tmpdir(), 'kvscope-bad-')), 'bad.jsonl');
  writeFileSync(bad, '{"kvscope": 1}\n{"source": "x", "seq": 0, "ts": 1.0, "events": [{"type": "BlockStored", "block_hashes": "oops"}]}\n');
  await page.setInputFiles('[data-testid=file-input]', bad);
  await page.waitForSelector('[data-testid=load-error]');
  assert.match(await text(page, 'load-error'), /line 2/);
  // The previous trace is still shown.
  assert.match(await text(page, 'stats'), /12 events/);
  await page.screenshot({ path: join(shots, 'bad-input.png') });
  // ?url= must be same-origin.
  const p2 = await open(`${base}?url=${encodeURIComponent('http://example.invalid/x.jsonl')}`);
  await p2.waitForSelector('[data-testid=load-error]');
  assert.match(await text(p2, 'load-error'), /same-origin/);
  await p2.close();
  await page.close();
  assert.deepEqual(pageErrors, []);
});

test('compare: generate legacy-vs-fixed in cpython and fixed order in the page', async () => {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(`compare: ${e.message}`));
  const fetched = [];
  page.on('request', (r) => fetched.push(new URL(r.url()).pathname));
  await page.goto(base);
  await page.waitForSelector('[data-testid=stats]:has-text("violations")');
  // The simulator is a separate module, fetched only when Compare opens.
  assert.ok(fetched.includes('/kvscope_web_bg.wasm'), fetched.join(' '));
  assert.ok(!fetched.some((p) => p.includes('kvscope_sim')), `not fetched yet: ${fetched.join(' ')}`);
  await page.getByRole('button', { name: 'Compare', exact: true }).click();
  await page.getByRole('button', { name: 'Generate and compare' }).click();
  await page.waitForSelector('[data-testid=compare-table]');
  assert.ok(fetched.includes('/kvscope_sim_bg.wasm'), fetched.join(' '));
  const row = await page.locator('[data-testid=compare-table] tr', { hasText: 'child-before-parent-in-job' }).innerText();
  const [, left, right] = row.split('\t').map((s) => s.trim());
  assert.ok(Number(left) > 0, `legacy side has in-job violations: ${row}`);
  assert.equal(Number(right), 0, `the fixed side has none: ${row}`);
  await page.screenshot({ path: join(shots, 'compare.png') });
  await page.getByRole('button', { name: 'Open right in the debugger' }).click();
  await page.waitForSelector('[data-testid=status]:has-text("Loaded legacy-vs-fixed (fixed)")');
  await page.keyboard.press('n');
  assert.equal(await text(page, 'counter'), '0 / 12', 'no ordering violation to jump to in the fixed trace');
  await page.close();
  assert.deepEqual(pageErrors, []);
});
