// End-to-end tests of the kvscope web debugger in Debian's Chromium (set-up in harness.mjs):
// what a user does with a loaded trace: the router lens, large timelines, topology, search,
// permalinks and reloads, the first screen, truncated captures. Fails on any `pageerror`.
// Screenshots go to tests/e2e/screenshots/ (gitignored): look at them.
//
//   node --test tests/e2e/e2e.test.mjs tests/e2e/journeys.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { large, chain150 } from './traces.mjs';
import {
  useBrowser, open, openLegacyAnalysed, text, pageErrors, here, root, shots, fixtures, LEGACY,
  FIRST_VIOLATION,
} from './harness.mjs';

useBrowser();

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
