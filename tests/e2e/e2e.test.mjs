// End-to-end tests of the kvscope web debugger in Debian's Chromium (playwright-core, no
// downloads). Serves dist/ (built by scripts/build-web.sh) with `kvscope serve` when the binary
// exists (KVSCOPE_BIN), else python's http.server. Fails on any `pageerror`. Screenshots go to
// tests/e2e/screenshots/ (gitignored): look at them.
//
//   node --test tests/e2e/e2e.test.mjs
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';
import { large, chain150 } from './traces.mjs';

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

// The page with the two-tier legacy trace opened through the file input and analysed.
async function openLegacyAnalysed() {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  await page.setInputFiles('[data-testid=file-input]', LEGACY);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded legacy.jsonl")');
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
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
  // Only the lanes in view are drawn (timeline::geometry's test counts them): the canvas is
  // as tall as the view, not the 60 lanes.
  assert.ok((await lanes.boundingBox()).height <= 312, 'the canvas is the view, not the stack');
  // The cursor on the first event (the first job's lane), then the lanes scrolled away from it:
  // its lane is pinned to the bottom row, so the cursor's job stays visible.
  await page.keyboard.press('Home');
  await page.keyboard.press('ArrowRight');
  const lanesBox = page.locator('[data-testid=timeline-lanes]');
  assert.equal(await lanesBox.getAttribute('data-pinned'), '');
  await page.locator('[data-testid=timeline-scroll]').evaluate((el) => { el.scrollTop = 600; });
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-scroll]').scrollTop > 500);
  const after = [await head.boundingBox(), await lanes.boundingBox()];
  assert.deepEqual(after[0], before[0], 'the head (overview + axis) did not move');
  assert.deepEqual(after[1], before[1], 'the canvas stays in view (sticky) while the lanes scroll under it');
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-lanes]').dataset.pinned !== '');
  const laneTitles = await page.locator('[data-testid=lane-list] li').allTextContents();
  assert.equal(await lanesBox.getAttribute('data-pinned'), laneTitles[0], 'the cursor\'s lane is pinned');
  await page.screenshot({ path: join(shots, 'jobs-lanes-pinned.png') });
  // A step to another lane scrolls it into view: nothing pinned.
  await page.keyboard.press('End');
  await page.waitForSelector('[data-testid=counter]:has-text("180 / 180")');
  await page.waitForFunction(() => document.querySelector('[data-testid=timeline-lanes]').dataset.pinned === '');
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
  // The load sets the analysis running before it shows "Loaded": wait for this one to finish.
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  assert.match(await text(page, 'stats'), /^48 events/);
  assert.match(await text(page, 'counter'), /^0 \/ 48$/);
  await page.keyboard.press('n');
  await page.waitForSelector(`[data-testid=details-title]:has-text("#${FIRST_VIOLATION} BlockStored")`);
  assert.equal(await text(page, 'counter'), `${FIRST_VIOLATION + 1} / 48`);
  const detail = await text(page, 'violation-detail');
  assert.match(detail, /child-before-parent-in-job/);
  const details = await text(page, 'details');
  assert.match(details, /parent_block_hash/);
  // Hashes are shortened in the middle; the hover text holds the full decimal and hex values.
  const hashTitle = await page.locator('[data-testid=details] .hash-text .hash').first().getAttribute('title');
  assert.match(hashTitle, /^\d{15,20} \(0x[0-9a-f]{16}\)$/, 'full decimal and hex on hover');
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

  // The permalink reproduces the view (inline trace in the hash). The hash follows the view
  // once it has been still for 120 ms (permalink::sync_permalink), and the inline trace once
  // it is compressed: the steps above can come faster than that, so wait for it.
  await page.waitForURL(/#c=3&.*t=/);
  const url = page.url();
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

// Issue 16, point 4: compare what the user loaded. The demo (legacy-vs-fixed in CPython set
// order, JSON Lines) against the same scenario in the fixed order as a msgpack stream
// (`kvscope generate legacy-vs-fixed --order fixed --format msgpack`).
const DEMO_FIXED = join(fixtures, 'demo-fixed.msgpack');

test('compare with trace: the loaded trace beside another, aligned by block, each differing count explained', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  // The simulator runs in a worker (a comparison of large traces must not block the page).
  const workers = [];
  page.on('worker', (w) => workers.push(w));
  await page.getByRole('button', { name: 'Compare', exact: true }).click();
  const dialog = page.getByRole('dialog', { name: 'Compare' });
  await dialog.getByRole('button', { name: 'Generate and compare' }).waitFor();
  assert.equal(workers.length, 1, 'the simulator has its own worker');
  assert.equal(await workers[0].evaluate(() => typeof document), 'undefined', 'off the page thread');
  // Keys pressed in a dialog never act on the page behind it: not on the body, not in one of
  // its selects, not in one of its number fields.
  const counter = await text(page, 'counter');
  const theme = await page.evaluate(() => document.documentElement.dataset.theme);
  const keys = ['n', 'p', 'ArrowRight', 'ArrowLeft', 'End', 'Home', 't', 'f', 'w', 'd', ' ', '?', '/'];
  for (const k of keys) await page.keyboard.press(k);
  await dialog.getByRole('combobox', { name: 'Left order' }).focus();
  for (const k of ['n', 'ArrowRight', 't', 'End']) await page.keyboard.press(k);
  await dialog.getByRole('spinbutton', { name: 'Seed', exact: true }).focus();
  for (const k of ['n', 'ArrowRight', 't']) await page.keyboard.press(k);
  assert.equal(await text(page, 'counter'), counter, 'the cursor did not move');
  assert.equal(await page.evaluate(() => document.documentElement.dataset.theme), theme, 'the theme did not change');
  assert.equal(await page.locator('[data-testid=glossary]').count(), 0, 'no help opened');
  assert.ok(await dialog.isVisible(), 'the dialog is still open');

  await dialog.getByLabel('Compare with trace').setInputFiles(DEMO_FIXED);
  await page.waitForSelector('[data-testid=compare-why]');
  const table = await text(page, 'compare-table');
  assert.match(table, /A: demo/);
  assert.match(table, /B: demo-fixed\.msgpack/);
  const row = await page.locator('[data-testid=compare-table] tr', { hasText: 'child-before-parent-in-job' }).innerText();
  const [, a, b] = row.split('\t').map((s) => s.trim());
  assert.ok(Number(a) > 0 && Number(b) === 0, row);
  // Each count that differs, explained by the event that makes the difference.
  const why = await text(page, 'compare-why');
  assert.match(why, /child-before-parent-in-job: \d+ on A and 0 on B: on A, batch \d+ delivers \S+ before its parent \S+; on B the parent comes first/);
  assert.match(why, /llmd lost \d+ blocks? on A and 0 on B: on A, batch \d+ delivers/);
  // The events, aligned by block: all 12 in both traces; the moved ones and the ones llm-d
  // judges differently are listed side by side and marked.
  assert.match(await text(page, 'compare-note'), /^12 events aligned by block, [1-9]\d* moved; [1-9]\d* differ/);
  const events = page.locator('[data-testid=compare-events] tr');
  assert.ok(await events.count() > 1);
  assert.ok(await page.locator('[data-testid=compare-events] tr.moved').count() > 0, 'moved events are marked');
  const judged = page.locator('[data-testid=compare-events] tr.judged', { hasText: 'llmd dropped_orphan → applied' });
  assert.ok(await judged.count() > 0, 'llm-d verdicts that differ are marked');
  assert.match(await judged.first().innerText(), /#\d+ · batch \d+\t#\d+ · batch \d+\tBlockStored CPU /);
  await page.screenshot({ path: join(shots, 'compare-loaded.png') });

  // A trace that cannot be read: the error names it and where it broke.
  const bad = join(mkdtempSync(join(tmpdir(), 'kvscope-cmp-')), 'bad.jsonl');
  writeFileSync(bad, '{"source": "x", "events": [}\n');
  await dialog.getByLabel('Compare with trace').setInputFiles(bad);
  await page.waitForSelector('[data-testid=compare] [role=alert]');
  assert.match(await page.locator('[data-testid=compare] [role=alert]').innerText(), /the trace to compare with \(bad\.jsonl\): .*line 1/);

  // Escape closes the dialog; keys act on the page again.
  await page.keyboard.press('Escape');
  assert.equal(await dialog.count(), 0);
  await page.keyboard.press('End');
  assert.equal(await text(page, 'counter'), '12 / 12');
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

// Issue 16, point 7: text that fits.
test('text that fits: hashes shortened in the middle inside their cards, copy button, numbers on one line, plurals, 1280x720 layout', async () => {
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  await page.keyboard.press('n');
  await page.waitForSelector('[data-testid=details-verdicts]');
  const hashes = page.locator('.hash-text .hash');
  assert.ok(await hashes.count() >= 3, 'hashes in details and consumer cards');
  const report = await hashes.evaluateAll((els) => els.map((el) => {
    const box = el.parentElement.getBoundingClientRect();
    const holder = el.closest('.card') || el.closest('td') || el.closest('.pane');
    const hb = holder.getBoundingClientRect();
    return { text: el.textContent, full: el.dataset.full, title: el.title,
      inside: box.left >= hb.left - 0.5 && box.right <= hb.right + 0.5, rects: el.getClientRects().length };
  }));
  for (const h of report) {
    assert.ok(h.title.startsWith(h.full), `full value on hover: ${JSON.stringify(h)}`);
    if (h.full.length > 13) assert.match(h.text, /^.{6}….{6}$/, `ellipsis in the middle: ${JSON.stringify(h)}`);
    assert.ok(h.inside, `the hash stays inside its card or cell: ${JSON.stringify(h)}`);
    assert.equal(h.rects, 1, `on one line: ${JSON.stringify(h)}`);
  }
  // The copy button copies the full value.
  const first = report.find((h) => h.full.length > 13);
  await page.getByRole('button', { name: `Copy hash ${first.full}` }).first().click();
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), first.full);
  // Numbers and counters never wrap.
  const wrapped = await page.locator('.mono, .counter, .verdict, .card td').evaluateAll((els) => els
    .filter((el) => el.getClientRects().length > 1 || (el.tagName === 'TD' && el.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(el).lineHeight)))
    .map((el) => el.textContent));
  assert.deepEqual(wrapped, []);
  // A router's status (one long identifier) is cut with an ellipsis inside its card, never
  // broken mid-word, and whole on hover.
  const statuses = await page.locator('.card .clip').evaluateAll((els) => els.map((el) => {
    const card = el.closest('.card').getBoundingClientRect();
    const box = el.getBoundingClientRect();
    return { text: el.textContent, title: el.title, rects: el.getClientRects().length,
      inside: box.left >= card.left - 0.5 && box.right <= card.right + 0.5,
      ellipsis: getComputedStyle(el).textOverflow };
  }));
  assert.ok(statuses.length >= 1, 'the demo\'s first violation shows a router status');
  for (const st of statuses) {
    assert.ok(st.text.startsWith('status ') && st.title === st.text, `whole on hover: ${JSON.stringify(st)}`);
    assert.ok(st.inside && st.rects === 1 && st.ellipsis === 'ellipsis', `one line inside its card: ${JSON.stringify(st)}`);
  }
  // 1280x720: the timeline, the details and the consumer cards are all on screen.
  for (const sel of ['[data-testid=timeline]', '[data-testid=details-title]', '[data-testid=consumer-llmd] h4', '[data-testid=verdict-llmd]']) {
    const b = await page.locator(sel).first().boundingBox();
    assert.ok(b && b.y >= 0 && b.y + b.height <= 720 && b.x >= 0 && b.x + b.width <= 1280, `${sel} on screen: ${JSON.stringify(b)}`);
  }
  // The legend of marks is one line at 1280 px: the lanes select does not wrap onto its own.
  const row = async (loc) => Math.round((await loc.boundingBox()).y + (await loc.boundingBox()).height / 2);
  const firstMark = await row(page.locator('[data-testid=legend] .legend-item').first());
  const lanes = await row(page.getByRole('combobox', { name: 'Lanes' }));
  assert.ok(Math.abs(lanes - firstMark) <= 4, `the lanes select (y ${lanes}) is on the marks' line (y ${firstMark})`);
  await page.screenshot({ path: join(shots, 'text-fits-1280.png') });
  // Plurals: one event, one batch, one lane.
  const one = join(mkdtempSync(join(tmpdir(), 'kvscope-one-')), 'one.jsonl');
  writeFileSync(one, '{"source":"p","dp_rank":0,"seq":0,"ts":1700000000.0,"events":[{"type":"BlockStored","block_hashes":[7],"parent_block_hash":null,"token_ids":[1,2],"block_size":2,"lora_id":null,"medium":"CPU","lora_name":null}]}\n');
  await page.setInputFiles('[data-testid=file-input]', one);
  // Wait for the new trace's analysis (its stats start with its event count, no "analysing").
  await page.waitForSelector('[data-testid=status]:has-text("Loaded one.jsonl")');
  await page.waitForFunction(() => {
    const s = document.querySelector('[data-testid=stats]').textContent;
    return /^1 event\b/.test(s) && !s.includes('analysing');
  });
  const stats = await text(page, 'stats');
  assert.match(stats, /^1 event · 1 batch · 1 lane · /);
  // Every count agrees with its noun (the analysis decides the counts, not this test).
  for (const [, n, noun] of stats.matchAll(/(\d+) (events?|batch(?:es)?|lanes?|violations?|loss findings?)\b/g)) {
    assert.equal(Number(n) === 1, !noun.endsWith('s'), `"${n} ${noun}" in ${stats}`);
  }
  assert.match(await text(page, 'status'), /Loaded one\.jsonl: 1 event in/);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 6: keyboard everywhere.
test('keyboard: shortcuts work after the slider, a select and a button; text fields keep their keys; focus is visible', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  const counter = () => text(page, 'counter');
  // The slider: one arrow press is one step (not two), and n/p reach the page.
  const slider = page.getByRole('slider', { name: 'Cursor position' });
  await slider.focus();
  await page.keyboard.press('Home');
  assert.equal(await counter(), '0 / 12');
  await page.keyboard.press('ArrowRight');
  assert.equal(await counter(), '1 / 12');
  await page.keyboard.press('n');
  assert.notEqual(await counter(), '1 / 12', 'n after the slider jumps to a violation');
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  const firstViolation = await counter();
  assert.notEqual(firstViolation, '0 / 12');
  // A select whose value was chosen: keys go to the page, the value stays.
  const speed = page.getByRole('combobox', { name: 'Speed' });
  await speed.focus();
  await speed.selectOption('15');
  await page.keyboard.press('Home');
  assert.equal(await counter(), '0 / 12');
  await page.keyboard.press('n');
  assert.equal(await counter(), firstViolation);
  await page.keyboard.press('End');
  assert.equal(await counter(), '12 / 12');
  assert.equal(await speed.inputValue(), '15', 'shortcut letters do not pick options');
  const outline = (loc) => loc.evaluate((el) => { const s = getComputedStyle(el); return `${s.outlineStyle} ${s.outlineWidth}`; });
  assert.match(await outline(speed), /^solid [1-9]/, 'the focused select shows its focus');
  const lanes = page.getByRole('combobox', { name: 'Lanes' });
  await lanes.focus();
  await lanes.selectOption('job');
  await page.waitForSelector('[data-testid=stats]:has-text("2 lanes")');
  await page.keyboard.press('Home');
  assert.equal(await counter(), '0 / 12');
  // A button: after a click, the shortcuts act.
  await page.getByRole('button', { name: 'Step forward' }).click();
  assert.equal(await counter(), '1 / 12');
  await page.keyboard.press('ArrowRight');
  assert.equal(await counter(), '2 / 12');
  // Keyboard focus is visible on a button.
  await page.keyboard.press('Tab');
  const focused = page.locator(':focus');
  assert.match(await outline(focused), /^solid [1-9]/, `focus ring on ${await focused.evaluate((el) => el.outerHTML.slice(0, 80))}`);
  // A text field keeps its keys.
  await page.getByRole('searchbox', { name: 'Search' }).focus();
  await page.keyboard.type('np');
  assert.equal(await counter(), '2 / 12');
  assert.equal(await page.getByRole('searchbox', { name: 'Search' }).inputValue(), 'np');
  await page.keyboard.press('Escape');
  await page.keyboard.press('ArrowRight');
  assert.equal(await counter(), '3 / 12', 'Esc leaves the search box, then keys act again');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 4 (last sentence): keys pressed in a dialog never act on the page behind it.
test('keys pressed in a dialog never act on the page behind it', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  await page.waitForSelector('[data-testid=story]'); // the demo opened at its first violation
  const counter = () => text(page, 'counter');
  await page.keyboard.press('Home');
  assert.equal(await counter(), '0 / 12');
  const theme = () => page.evaluate(() => document.documentElement.dataset.theme);
  const themeBefore = await theme();
  await page.keyboard.press('?');
  await page.waitForSelector('[data-testid=help]');
  for (const k of ['ArrowRight', 'n', 'End', 't', 'f']) await page.keyboard.press(k);
  assert.equal(await counter(), '0 / 12', 'help open: no step');
  assert.equal(await theme(), themeBefore, 'help open: t does not toggle the theme behind it');
  await page.keyboard.press('Escape');
  await page.waitForSelector('[data-testid=help]', { state: 'detached' });
  // The paste dialog: keys in its text area and on its buttons stay in the dialog.
  await page.getByRole('button', { name: 'Paste trace' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.locator('textarea').focus();
  await page.keyboard.type('n p');
  await page.keyboard.press('Tab');
  for (const k of ['ArrowRight', 'n', 'End', 't']) await page.keyboard.press(k);
  assert.equal(await counter(), '0 / 12', 'paste dialog open: no step');
  await page.keyboard.press('Escape');
  await page.keyboard.press('ArrowRight');
  assert.equal(await counter(), '1 / 12', 'dialog closed: keys act on the page again');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 1: the router lens.
test('router lens: pick llm-d, the legend counts its verdicts, n/p and the violation buttons walk its loss roots, a click inspects without moving the cursor', async () => {
  const page = await openLegacyAnalysed();
  const counter = () => text(page, 'counter');
  const router = page.getByRole('combobox', { name: 'Router' });
  assert.match(await text(page, 'lens-legend'), /choose a router/);
  await router.selectOption('llmd');
  await page.waitForSelector('[data-testid=lens-dropped]');
  const count = async (mark) => Number((await text(page, `lens-${mark}`)).match(/(\d+)$/)[1]);
  const marks = {};
  for (const mark of ['applied', 'dropped', 'misrooted', 'pending', 'replayed', 'ignored']) marks[mark] = await count(mark);
  assert.equal(Object.values(marks).reduce((a, b) => a + b, 0), 48, `every event has one mark: ${JSON.stringify(marks)}`);
  assert.ok(marks.dropped > 0, `llm-d drops events of the legacy trace: ${JSON.stringify(marks)}`);
  await page.screenshot({ path: join(shots, 'lens-llmd.png') });
  // n goes to llm-d's loss roots: each is an event llm-d dropped.
  const roots = [];
  for (let k = 0; k < 60; k++) {
    const before = await counter();
    await page.keyboard.press('n');
    const now = await counter();
    if (now === before) break;
    roots.push(Number(now.split(' / ')[0]) - 1);
    assert.match(await text(page, 'details-verdicts'), /llmd\s+(dropped_orphan|truncated)/, `root #${roots.at(-1)} is dropped by llm-d`);
  }
  assert.ok(roots.length > 0 && roots.length <= marks.dropped, `roots ${roots} within the ${marks.dropped} dropped events`);
  assert.deepEqual([...roots].sort((a, b) => a - b), roots, 'ascending');
  // p and the named buttons walk them back and forth.
  if (roots.length > 1) {
    await page.keyboard.press('p');
    assert.equal(await counter(), `${roots.at(-2) + 1} / 48`);
    await page.getByRole('button', { name: 'Next violation', exact: true }).click();
    assert.equal(await counter(), `${roots.at(-1) + 1} / 48`);
    await page.getByRole('button', { name: 'Previous violation', exact: true }).click();
    assert.equal(await counter(), `${roots.at(-2) + 1} / 48`);
  }
  // The ideal model loses nothing: n does not move.
  await router.selectOption('ideal');
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  assert.equal(await counter(), '0 / 48', 'the ideal model has no loss root');
  // All routers: n goes to the ordering violations as before.
  await router.selectOption('');
  await page.keyboard.press('n');
  assert.equal(await counter(), `${FIRST_VIOLATION + 1} / 48`);
  // A click on the timeline inspects an event; the cursor stays. A double click goes there.
  await page.keyboard.press('f');
  const canvas = page.locator('[data-testid=timeline]');
  const box = await canvas.boundingBox();
  const perPx = Math.max(48 / (box.width - 128), 1 / 48);
  const target = 40;
  const x = 128 + (target + 0.5) / perPx, y = box.height / 2;
  await canvas.click({ position: { x, y } });
  await page.waitForSelector('[data-testid=inspecting]');
  const inspecting = await text(page, 'inspecting');
  const picked = Number(inspecting.match(/Inspecting #(\d+)/)[1]);
  assert.ok(Math.abs(picked - target) <= 2, `picked #${picked} near #${target}`);
  assert.equal(await counter(), `${FIRST_VIOLATION + 1} / 48`, 'the cursor did not move');
  assert.match(await text(page, 'details-title'), new RegExp(`^#${picked} `));
  assert.match(await text(page, 'details-verdicts'), /llmd/);
  await canvas.dblclick({ position: { x, y } });
  assert.equal(await counter(), `${picked + 1} / 48`, 'double click moves the cursor');
  assert.equal(await page.locator('[data-testid=inspecting]').count(), 0);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 1: the loss list, the cascade highlight, verdicts at the cursor or at the end.
test('router lens: the loss list names each root, its cascade is ringed, verdicts at the cursor or at the end of the trace', async () => {
  const page = await openLegacyAnalysed();
  const counter = () => text(page, 'counter');
  const router = page.getByRole('combobox', { name: 'Router' });
  await router.selectOption('llmd');
  await page.waitForSelector('[data-testid=violations-title]:has-text("llmd:")');
  const roots = Number((await text(page, 'violations-title')).match(/^llmd: (\d+) loss roots?/i)[1]);
  assert.ok(roots > 0, 'llm-d loses blocks of the legacy trace');
  const rows = page.locator('[data-testid=violations] .vlist li');
  assert.equal(await rows.count(), Math.min(roots, 100), 'one row per loss root');
  // Every row names the root's block, its missing parent and what it cost.
  for (const row of await rows.all()) {
    const t = await row.innerText();
    assert.match(t, /#\d+/);
    assert.match(t, /block \S+ · (parent \S+ missing|no missing parent)/, t);
    assert.match(t, /\d+ blocks? lost: this event (only|and [1-9]\d* descendants?)/, t);
  }
  // n goes to the first root: its row is current and its cascade is ringed and counted.
  await page.keyboard.press('n');
  const root = Number((await counter()).split(' / ')[0]) - 1;
  const current = await page.locator('[data-testid=violations] .vlist li.current').innerText();
  assert.match(current, new RegExp(`#${root}\\b`));
  const descendants = Number(current.match(/this event and (\d+) descendants?/)?.[1] ?? 0);
  const cascade = await text(page, 'cascade');
  assert.match(cascade, descendants
    ? new RegExp(`^Cascade of loss root #${root}: ${descendants} later events? lost with it`)
    : new RegExp(`^Loss root #${root}: no later event lost with it$`), cascade);
  // A row click goes to its root: the first root with a cascade, ringed on the timeline.
  const texts = await rows.allInnerTexts();
  const k = texts.findIndex((t) => !/this event only/.test(t));
  if (k >= 0) {
    const [, at, n] = texts[k].match(/#(\d+)[\s\S]*this event and (\d+) descendants?/);
    await rows.nth(k).locator('button').click();
    assert.equal(await counter(), `${Number(at) + 1} / 48`);
    assert.match(await text(page, 'cascade'), new RegExp(`^Cascade of loss root #${at}: ${n} later events? lost with it`));
    await page.screenshot({ path: join(shots, 'lens-cascade.png') });
  }
  // All models: the ordering violations again, no cascade.
  await router.selectOption('');
  await page.waitForSelector('[data-testid=violations-title]:has-text("Violations")');
  assert.equal(await page.locator('[data-testid=cascade]').count(), 0);
  // The verdicts of the first violation: the ideal model holds it (pending at the cursor) and
  // replays it once its parent arrives (the end of the trace).
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  assert.equal(await counter(), `${FIRST_VIOLATION + 1} / 48`);
  assert.match(await text(page, 'verdict-time'), /at the cursor/);
  assert.match(await text(page, 'details-verdicts'), /ideal\s+pending/);
  await page.getByRole('button', { name: 'End of trace', exact: true }).click();
  assert.match(await text(page, 'verdict-time'), /end of the trace/);
  assert.match(await text(page, 'details-verdicts'), /ideal\s+replayed/);
  assert.match(await text(page, 'details-verdicts'), /llmd\s+dropped_orphan/);
  await page.getByRole('button', { name: 'At cursor', exact: true }).click();
  assert.match(await text(page, 'details-verdicts'), /ideal\s+pending/);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 2: at 200k events, zoomed out, the lanes draw density: no lane is a red slab.
test('timeline at 200k events: violations are a share of each pixel column, not a red slab', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'kvscope-large-'));
  const path = join(dir, 'large-200k.jsonl');
  writeFileSync(path, large(200000));
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  await page.setInputFiles('[data-testid=file-input]', path);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded large-200k.jsonl")', { timeout: 120000 });
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 120000 });
  await page.keyboard.press('f');
  const violations = Number((await text(page, 'violations')).match(/Violations \((\d+)/i)[1]);
  assert.ok(violations > 500, `the trace has many violations: ${violations}`);
  // Share of the lanes' plot that is violation red, and of it that is event blue.
  const share = await page.evaluate(() => new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(() => {
    const c = document.querySelector('[data-testid=timeline]');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    const gutter = Math.round(128 * window.devicePixelRatio);
    let red = 0, blue = 0, all = 0;
    for (let y = 0; y < c.height; y++) {
      for (let x = gutter; x < c.width; x++) {
        const k = (y * c.width + x) * 4;
        const [r, g, b] = [d[k], d[k + 1], d[k + 2]];
        all++;
        if (r > 160 && g < 110 && b < 110) red++;
        if (b > 180 && r < 120) blue++;
      }
    }
    res({ red: red / all, blue: blue / all });
  }))));
  assert.ok(share.blue > 0.2, `events are drawn: ${JSON.stringify(share)}`);
  assert.ok(share.red < 0.05, `violations are a small share of the plot, not a slab: ${JSON.stringify(share)}`);
  assert.ok(share.red > 0, `violations stay visible: ${JSON.stringify(share)}`);
  await page.screenshot({ path: join(shots, 'large-200k.png') });
  await page.close();
  rmSync(dir, { recursive: true, force: true });
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 9: one plain sentence of what happened at a violation, from the core, whose
// counts agree with the lens.
test('the demo opens at its first violation, told in one sentence that agrees with the router lens', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  // No key pressed: the demo opens at its first violation (what n from the start gives).
  await page.waitForSelector('[data-testid=story]');
  const at = await text(page, 'counter');
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  assert.equal(await text(page, 'counter'), at, 'the first violation');
  const story = await text(page, 'story');
  assert.match(story, /^child delivered before its parent; /, story);
  assert.match(story, /kept it|dropped it|held it/, story);
  const dropped = story.match(/llmd dropped it and (\d+) descendants?/);
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
  if (dropped) {
    assert.match(await text(page, 'cascade'), new RegExp(`: ${dropped[1]} later events? lost with it`));
  } else {
    assert.equal(await page.locator('[data-testid=cascade]').count() === 0 || /: no later event/.test(await text(page, 'cascade')), true);
  }
  await page.screenshot({ path: join(shots, 'demo-story.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 3: a 150-block chain is one chain of runs, not a staircase; at the llm-d loss
// root the whole cascade shows, coloured at the cursor (not stored yet) or at the end (dropped).
test('topology: a 150-block chain reads as one chain of runs, with the whole cascade at a loss root', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  const path = join(mkdtempSync(join(tmpdir(), 'kvscope-chain-')), 'chain-150.jsonl');
  writeFileSync(path, chain150());
  await page.setInputFiles('[data-testid=file-input]', path);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded chain-150.jsonl")');
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  const root = Number((await text(page, 'counter')).split(' / ')[0]) - 1;
  await page.getByRole('tab', { name: 'Topology' }).click();
  await page.waitForSelector('[data-testid=topology] .node');
  assert.match(await text(page, 'topology-caption'), new RegExp(`^150 blocks around event #${root}, coloured by llmd at the cursor \\(a loss root: the whole cascade\\)`));
  const nodes = page.locator('[data-testid=topology] .node');
  assert.ok(await nodes.count() <= 5, `${await nodes.count()} nodes for a 150-block chain`);
  assert.equal(await page.locator('[data-testid=topology] .branches').count(), 0, 'one chain, no branches');
  const titles = await nodes.evaluateAll((els) => els.map((e) => e.title));
  const counted = titles.reduce((n, t) => n + (Number((t.match(/^(\d+) blocks,/) || [])[1]) || 1), 0);
  assert.equal(counted, 150, titles.join(' | '));
  assert.ok(titles.some((t) => /^\d+ blocks, .*: not stored yet \(an ancestor was dropped\)$/.test(t)), titles.join(' | '));
  assert.equal(await page.locator('[data-testid=topology] .node.current.s-dropped').count(), 1, 'the root, dropped');
  // The tree stays inside its pane (no staircase off the side).
  const box = await page.locator('[data-testid=topology]').boundingBox();
  const pane = await page.locator('[data-testid=inspector]').boundingBox();
  assert.ok(box.x + box.width <= pane.x + pane.width + 1, 'within the pane');
  await page.screenshot({ path: join(shots, 'chain150-topology-cursor.png') });
  await page.getByRole('button', { name: 'End of trace', exact: true }).click();
  await page.waitForSelector('[data-testid=topology-caption]:has-text("at the end of the trace")');
  const after = await page.locator('[data-testid=topology] .node').evaluateAll((els) => els.map((e) => e.title));
  assert.ok(after.some((t) => /^\d+ blocks, .*: dropped \(an ancestor was dropped\)$/.test(t)), after.join(' | '));
  assert.ok(!after.some((t) => /not stored yet/.test(t)), after.join(' | '));
  await page.screenshot({ path: join(shots, 'chain150-topology-end.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 8: search that answers questions.
test('search: by router verdict, rule, tier and shortened hash, with a match count, previous/next match and the grammar in ?', async () => {
  const page = await openLegacyAnalysed();
  const counter = () => text(page, 'counter');
  const box = page.getByRole('searchbox', { name: 'Search' });
  await box.fill('llmd=dropped_orphan');
  const note = page.locator('[data-testid=search-note]');
  await page.waitForFunction(() => /\d+ match/.test(document.querySelector('[data-testid=search-note]').textContent));
  const total = Number((await note.innerText()).match(/(\d+) match/)[1]);
  // The lens legend counts the same events (final verdicts).
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
  await page.waitForSelector('[data-testid=lens-dropped]');
  assert.ok(total > 0 && total <= Number((await text(page, 'lens-dropped')).match(/(\d+)$/)[1]), `${total} dropped_orphan events`);
  await box.focus();
  await page.keyboard.press('Enter');
  assert.match(await note.innerText(), new RegExp(`^1 of ${total} match`));
  const first = Number((await counter()).split(' / ')[0]) - 1;
  assert.match(await text(page, 'details-verdicts'), /llmd\s+dropped_orphan/);
  await page.getByRole('button', { name: 'Next match' }).click();
  if (total > 1) assert.match(await note.innerText(), new RegExp(`^2 of ${total} match`));
  await page.getByRole('button', { name: 'Previous match' }).click();
  assert.equal(await counter(), `${first + 1} / 48`, 'back to the first match');
  await page.keyboard.press('Shift+Enter');
  assert.match(await note.innerText(), new RegExp(`^${total} of ${total} match`), 'Shift+Enter wraps back to the last');
  await page.screenshot({ path: join(shots, 'search-llmd-dropped.png') });
  // By the hash as the page shows it (shortened in the middle): the event is among the matches.
  await page.keyboard.press('Escape');
  await page.keyboard.press('Home');
  await page.keyboard.press('n');
  const shown = await page.locator('[data-testid=details] .hash-text .hash').first().innerText();
  assert.match(shown, /…/);
  const at = await counter();
  await box.fill(`hash=${shown}`);
  await box.press('Enter');
  assert.match(await text(page, 'details'), new RegExp(shown.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));
  assert.match(await note.innerText(), /of \d+ match/);
  // By rule and tier together; an unknown field or a value that is no verdict matches
  // nothing, and the note says why.
  await box.fill('rule=in-job tier=CPU');
  await box.press('Enter');
  assert.match(await text(page, 'violation-detail'), /child-before-parent-in-job/);
  await box.fill('colour=red');
  await page.waitForFunction(() => document.querySelector('[data-testid=search-note]').textContent === 'no match: colour=red: unknown field');
  await box.fill('tier=CPU llmd=gone');
  await page.waitForFunction(() => document.querySelector('[data-testid=search-note]').textContent === 'no match: llmd=gone: not a verdict');
  await box.fill('tier=nowhere');
  await page.waitForFunction(() => document.querySelector('[data-testid=search-note]').textContent === 'no match');
  assert.ok(at);
  // The grammar and the verdict glossary are in ?.
  await page.keyboard.press('Escape');
  await page.keyboard.press('?');
  assert.match(await text(page, 'search-grammar'), /llmd=dropped_orphan/);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 5: a trace too large to inline is kept in this browser: the link says it
// carries the view only, a reload restores the trace, the cursor and the tab; a browser that
// no longer keeps it says so instead of showing the demo.
test('permalinks and reloads: a large dropped trace is kept for reloads, the link says the trace is not in it, the tab is in the view', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  const path = join(mkdtempSync(join(tmpdir(), 'kvscope-keep-')), 'large-20k.jsonl');
  writeFileSync(path, large(20000));
  await page.setInputFiles('[data-testid=file-input]', path);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded large-20k.jsonl")');
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  await page.keyboard.press('n');
  await page.getByRole('tab', { name: 'Job order' }).click();
  await page.waitForSelector('[data-testid=keep-note]:has-text("kept here")');
  const note = await page.locator('[data-testid=keep-note]').getAttribute('title');
  assert.match(note, /The link carries the view, not the trace \(.* is too large to inline\)\. This browser keeps the trace/);
  await page.waitForFunction(() => /(^|[#&])s=/.test(location.hash) && location.hash.includes('i=jobs'));
  assert.doesNotMatch(page.url(), /[#&]t=/, 'not inlined');
  const counter = await text(page, 'counter');
  await page.screenshot({ path: join(shots, 'keep-note.png') });
  await page.reload();
  await page.waitForSelector('[data-testid=status]:has-text("Loaded large-20k.jsonl")');
  assert.equal(await text(page, 'counter'), counter);
  assert.equal(await page.getByRole('tab', { name: 'Job order' }).getAttribute('aria-selected'), 'true');
  await page.waitForSelector('[data-testid=keep-note]:has-text("kept here")');
  // Another browser (here: this one with its storage cleared) cannot restore it: it says so.
  await page.evaluate(() => new Promise((res) => {
    const r = indexedDB.deleteDatabase('kvscope');
    r.onsuccess = r.onerror = r.onblocked = res;
  }));
  await page.reload();
  await page.waitForSelector('[data-testid=load-error]');
  assert.match(await text(page, 'load-error'), /carries the view but not the trace .* does not keep it: open the trace file again/);
  assert.doesNotMatch(await text(page, 'trace-name'), /demo/, 'not silently replaced by the demo');
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 9: a first screen that explains itself.
test('first screen: a legend of every mark, an axis with batches and time, hover text on events, a glossary, counts that agree, no timings in the status line', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  await page.waitForSelector('[data-testid=story]');
  const legend = await text(page, 'legend');
  for (const mark of ['BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'violation', 'parent → child', 'child before its parent', 'parent in another lane', 'cursor', 'search match']) {
    assert.ok(legend.includes(mark), `legend has "${mark}": ${legend}`);
  }
  // Every router lens mark has its glyph in the legend.
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
  for (const mark of ['applied', 'dropped', 'misrooted', 'pending', 'replayed', 'ignored']) {
    assert.equal(await page.locator(`[data-testid=lens-${mark}] i.g-${mark}`).count(), 1, mark);
  }
  // Counts agree: the header's violations and loss roots are the lists'.
  await page.waitForSelector('[data-testid=violations-title]:has-text("llmd:")');
  const stats = await text(page, 'stats');
  const roots = Number((await text(page, 'violations-title')).match(/^llmd: (\d+) loss roots?/i)[1]);
  assert.match(stats, new RegExp(`llmd: ${roots} loss roots?`), stats);
  await page.getByRole('combobox', { name: 'Router' }).selectOption('');
  await page.waitForSelector('[data-testid=violations-title]:has-text("Violations")');
  const listed = Number((await text(page, 'violations-title')).match(/Violations \((\d+)/i)[1]);
  assert.match(await text(page, 'stats'), new RegExp(`· ${listed} violations?\\b`));
  // The status line says what was loaded, not how fast each phase went.
  const status = await text(page, 'status');
  assert.doesNotMatch(status, /events\/s|parse \d/, status);
  // The axis head is two lines tall: event index, then batch and time (drawn on the canvas).
  assert.equal((await page.locator('[data-testid=timeline-head]').boundingBox()).height, 40);
  // Hovering an event tells what it is and what the routers did with it, as plain text.
  await page.keyboard.press('f');
  const canvas = page.locator('[data-testid=timeline]');
  const b = await canvas.boundingBox();
  const perPx = Math.max(12 / (b.width - 128), 1 / 48);
  const hoverAt = async (i) => {
    await canvas.hover({ position: { x: 128 + (i + 0.5) / perPx, y: 5 } });
    await page.waitForFunction((i) => document.querySelector('[data-testid=timeline]').title.startsWith(`#${i} `), i);
    return canvas.getAttribute('title');
  };
  const first = Number((await text(page, 'counter')).split(' / ')[0]) - 1;
  const tip = await hoverAt(first);
  assert.match(tip, new RegExp(`^#${first} Block(Stored|Removed) · \\S+ · block \\S+ · .*child-before-parent`), tip);
  assert.match(tip, /(llmd|dynamo|smg|sglang|ideal) [a-z_]+|every router applied it/, tip);
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
  assert.match(await hoverAt(first), /· llmd [a-z_]+$/, 'with a router chosen: its verdict');
  await page.getByRole('combobox', { name: 'Router' }).selectOption('');
  await page.screenshot({ path: join(shots, 'demo-tooltip.png') });
  // The glossary names every verdict.
  await page.keyboard.press('?');
  const glossary = await text(page, 'glossary');
  for (const v of ['applied', 'dropped_orphan', 'misrooted', 'pending', 'replayed', 'truncated', 'removed', 'remove_unknown', 'ignored', 'cleared', 'loss root', 'cascade']) {
    assert.ok(glossary.includes(v), `glossary has ${v}`);
  }
  assert.match(await page.locator('[data-testid=loaded]').getAttribute('title'), /milliseconds per phase: parse \d+/);
  await page.screenshot({ path: join(shots, 'help.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, point 10: a capture cut mid-batch offers its complete leading batches, saying how
// many and where it broke; the button opens them.
test('a truncated capture offers to open its complete leading batches (JSON Lines and msgpack)', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  const dir = mkdtempSync(join(tmpdir(), 'kvscope-cut-'));
  // JSON Lines cut in the middle of line 7 (a header and five batches before it).
  const lines = readFileSync(LEGACY, 'utf8').split('\n');
  const keep = lines.slice(0, 6);
  const events = keep.slice(1).reduce((n, l) => n + JSON.parse(l).events.length, 0);
  const cut = join(dir, 'cut.jsonl');
  writeFileSync(cut, keep.join('\n') + '\n' + lines[6].slice(0, 40));
  await page.setInputFiles('[data-testid=file-input]', cut);
  await page.waitForSelector('[data-testid=load-error]');
  assert.match(await text(page, 'load-error'), /line 7/);
  assert.match(await text(page, 'recover'), /^The input broke at line 7, column \d+\. The 5 complete batches before it can be opened\./);
  await page.screenshot({ path: join(shots, 'truncated-offer.png') });
  await page.getByRole('button', { name: 'Open 5 complete batches' }).click();
  await page.waitForSelector(`[data-testid=status]:has-text("Loaded cut.jsonl (first 5 batches): ${events} events")`);
  assert.equal(await page.locator('[data-testid=recover]').count(), 0);
  // A msgpack stream cut mid-payload: located by byte offset.
  const stream = readFileSync(join(root, 'tests', 'fixtures', 'wire', 'stream.msgpack'));
  const mp = join(dir, 'cut.msgpack');
  const at = Math.floor(stream.length * 0.6);
  writeFileSync(mp, stream.subarray(0, at));
  await page.setInputFiles('[data-testid=file-input]', mp);
  await page.waitForSelector('[data-testid=recover]');
  const offer = await text(page, 'recover');
  const [, offset, n] = offer.match(/^The input broke at byte offset (\d+)\. The (\d+) complete batch(?:es)? before it can be opened\./);
  assert.ok(Number(offset) <= at && Number(n) > 0, offer);
  await page.getByRole('button', { name: new RegExp(`^Open ${n} complete batch`) }).click();
  await page.waitForSelector(`[data-testid=status]:has-text("Loaded cut.msgpack (first ${n} batch")`);
  await page.close();
  assert.deepEqual(pageErrors, []);
});

// Issue 16, done when: which events did llm-d drop, why, and what did it cost, on a two-tier
// legacy trace, in under five actions.
test('done when: a new user learns which events llm-d dropped, why and what it cost in under five actions', async () => {
  const page = await open();
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  let actions = 0;
  // 1. Open the trace.
  await page.setInputFiles('[data-testid=file-input]', LEGACY); actions++;
  await page.waitForSelector('[data-testid=status]:has-text("Loaded legacy.jsonl")');
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  // 2. Pick llm-d as the router: the header, the legend and the loss list answer.
  await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd'); actions++;
  await page.waitForSelector('[data-testid=lens-dropped]');
  const stats = await text(page, 'stats');
  const [, roots, lost] = stats.match(/llmd: (\d+) loss roots?, (\d+) events? lost/).map(Number);
  // At 1280 px the header's counts are whole (wrapped, not cut); the name gives way first and
  // keeps its full text on hover; the header stays one bar tall.
  const cut = await page.locator('[data-testid=stats], [data-testid=trace-name]').evaluateAll((els) => els.map((el) => ({
    id: el.dataset.testid, cut: el.scrollWidth > el.clientWidth + 1 || el.scrollHeight > el.clientHeight + 1, title: el.title })));
  assert.equal(cut.find((c) => c.id === 'stats').cut, false, 'the counts are not cut');
  assert.match(cut.find((c) => c.id === 'trace-name').title, /^legacy\.jsonl — /);
  assert.ok((await page.locator('header.top').boundingBox()).height <= 48, 'one bar');
  assert.ok(roots > 0 && lost >= roots, stats);
  // Which: the timeline marks them (legend count), the list names each root.
  const marked = ['dropped', 'misrooted'].map(async (m) => Number((await text(page, `lens-${m}`)).match(/(\d+)$/)[1]));
  const [dropped, misrooted] = await Promise.all(marked);
  assert.equal(dropped + misrooted, lost, `the legend's marks are the events lost: ${stats}`);
  const rows = await page.locator('[data-testid=violations] .vlist li').allInnerTexts();
  assert.equal(rows.length, roots);
  // Why and what it cost: each row names the missing parent and the blocks lost with it.
  let blocks = 0;
  for (const r of rows) {
    assert.match(r, /parent \S+ missing/, r);
    blocks += Number(r.match(/(\d+) blocks? lost/)[1]);
  }
  assert.ok(blocks >= lost, `${blocks} blocks lost in ${lost} events`);
  // 3. n: the first root, told in one sentence.
  await page.keyboard.press('n'); actions++;
  const story = await text(page, 'story');
  assert.match(story, /^child delivered before its parent; .*llmd dropped it( and \d+ descendants?)?/, story);
  assert.ok(actions < 5, `${actions} actions`);
  await page.screenshot({ path: join(shots, 'done-when-llmd.png') });
  await page.close();
  assert.deepEqual(pageErrors, []);
});
