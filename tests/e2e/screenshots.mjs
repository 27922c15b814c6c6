// Screenshots of the demo for review (not part of the test run):
//   node tests/e2e/screenshots.mjs            (serves dist/ with python's http.server)
// Writes tests/e2e/screenshots/demo-{1440x900,1280x720}-{light,dark}[-llmd].png: the demo at
// its first violation, then with the llm-d router lens at its first loss root, then the ? help;
// then the other traces; then compare-*.png: the Compare dialog with the demo beside
// demo-fixed.msgpack.
// Look at them.
import { chromium } from 'playwright-core';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { writeTraces } from './traces.mjs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const dist = process.env.KVSCOPE_DIST || join(here, '..', '..', 'dist');
const shots = join(here, 'screenshots');
mkdirSync(shots, { recursive: true });
const port = 8900 + Math.floor(Math.random() * 90);
const server = spawn('python3', ['-m', 'http.server', String(port), '--bind', '127.0.0.1', '--directory', dist], { stdio: 'ignore' });
await new Promise((r) => setTimeout(r, 800));
const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'] });
try {
  for (const [w, h] of [[1440, 900], [1280, 720]]) {
    for (const theme of ['light', 'dark']) {
      const page = await browser.newPage({ viewport: { width: w, height: h }, colorScheme: theme });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
      // The demo opens at its first violation, its story in the details.
      await page.waitForSelector('[data-testid=story]');
      await page.waitForSelector('[data-testid=details-verdicts]');
      const name = `demo-${w}x${h}-${theme}`;
      await page.screenshot({ path: join(shots, `${name}.png`) });
      await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
      await page.keyboard.press('Home');
      await page.keyboard.press('n');
      await page.waitForSelector('[data-testid=lens-dropped]');
      await page.screenshot({ path: join(shots, `${name}-llmd.png`) });
      await page.keyboard.press('?');
      await page.waitForSelector('[data-testid=glossary]');
      await page.screenshot({ path: join(shots, `${name}-help.png`) });
      if (errors.length) throw new Error(`${name}: ${errors.join('; ')}`);
      console.log(`${name}: ok`);
      await page.close();
    }
  }
  // The other traces: open each, go to its first violation (with the llm-d lens), shoot.
  const tmp = mkdtempSync(join(tmpdir(), 'kvscope-shots-'));
  const t = writeTraces(tmp);
  const traces = [['legacy', join(here, 'fixtures', 'legacy.jsonl')], ['groups', t.groups], ['chain150', t.chain], ['large200k', t.large]];
  for (const [w, h] of [[1440, 900], [1280, 720]]) {
    for (const theme of ['light', 'dark']) {
      for (const [label, path] of traces) {
        const page = await browser.newPage({ viewport: { width: w, height: h }, colorScheme: theme });
        const errors = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(`http://127.0.0.1:${port}/`);
        await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
        await page.setInputFiles('[data-testid=file-input]', path);
        await page.waitForSelector(`[data-testid=status]:has-text("Loaded ${path.split('/').pop()}")`, { timeout: 120000 });
        await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")', { timeout: 120000 });
        const name = `${label}-${w}x${h}-${theme}`;
        await page.keyboard.press('f');
        await page.keyboard.press('n');
        await page.screenshot({ path: join(shots, `${name}.png`) });
        await page.getByRole('combobox', { name: 'Router' }).selectOption('llmd');
        await page.keyboard.press('Home');
        await page.keyboard.press('n');
        await page.getByRole('tab', { name: 'Topology' }).click();
        await page.screenshot({ path: join(shots, `${name}-llmd.png`) });
        if (errors.length) throw new Error(`${name}: ${errors.join('; ')}`);
        console.log(`${name}: ok`);
        await page.close();
      }
    }
  }
  rmSync(tmp, { recursive: true, force: true });
  // The Compare dialog: the demo beside the same scenario in the fixed order (a msgpack
  // stream), side by side with why each count differs.
  for (const [w, h] of [[1440, 900], [1280, 720]]) {
    for (const theme of ['light', 'dark']) {
      const page = await browser.newPage({ viewport: { width: w, height: h }, colorScheme: theme });
      const errors = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`http://127.0.0.1:${port}/`);
      await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
      await page.getByRole('button', { name: 'Compare', exact: true }).click();
      await page.getByRole('button', { name: 'Generate and compare' }).waitFor();
      await page.getByLabel('Compare with trace').setInputFiles(join(here, 'fixtures', 'demo-fixed.msgpack'));
      await page.waitForSelector('[data-testid=compare-why]');
      const name = `compare-${w}x${h}-${theme}`;
      await page.screenshot({ path: join(shots, `${name}.png`) });
      if (errors.length) throw new Error(`${name}: ${errors.join('; ')}`);
      console.log(`${name}: ok`);
      await page.close();
    }
  }
} finally {
  await browser.close();
  server.kill();
}
