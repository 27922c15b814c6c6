// End-to-end tests of the kvscope web debugger in Debian's Chromium (set-up in harness.mjs):
// the demo, lanes, loading a file, accessibility, bad input, Compare, text that fits, the
// keyboard and dialogs. Fails on any `pageerror`. Screenshots go to tests/e2e/screenshots/
// (gitignored): look at them. journeys.test.mjs has the rest.
//
//   node --test tests/e2e/e2e.test.mjs tests/e2e/journeys.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { large } from './traces.mjs';
import {
  useBrowser, open, text, pageErrors, base, context, shots, fixtures, LEGACY, FIRST_VIOLATION,
} from './harness.mjs';

useBrowser();

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
