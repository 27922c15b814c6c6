// The end-to-end tests' shared set-up: serves dist/ (built by scripts/build-web.sh) with
// `kvscope serve` when the binary exists (KVSCOPE_BIN), else python's http.server, and opens
// Debian's Chromium (playwright-core, no downloads). A test file calls `useBrowser()` once and
// then opens pages with `open()`; every page's `pageerror` lands in `pageErrors`.
import { before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, mkdirSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import net from 'node:net';
import { chromium } from 'playwright-core';

export const here = dirname(fileURLToPath(import.meta.url));
export const root = join(here, '..', '..');
const dist = process.env.KVSCOPE_DIST || join(root, 'dist');
export const shots = join(here, 'screenshots');
export const fixtures = join(here, 'fixtures');
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
mkdirSync(shots, { recursive: true });

// The legacy fixture (`kvscope generate two-tiers-async --order cpython`): `kvscope check`
// reports its first ordering violation at event 2, child-before-parent-in-job.
export const LEGACY = join(fixtures, 'legacy.jsonl');
export const FIRST_VIOLATION = 2;

let server, userDir;
/** The server's address and the browser context, once `useBrowser`'s set-up ran. */
export let base, context;
export const pageErrors = [];

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

/** Start the server and the browser before the file's tests; stop them after. */
export function useBrowser() {
  before(start);
  after(stop);
}

async function start() {
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
}

async function stop() {
  await context?.close();
  server?.kill();
  if (userDir) rmSync(userDir, { recursive: true, force: true });
}

export async function open(url = base) {
  const page = await context.newPage();
  page.on('pageerror', (e) => pageErrors.push(`${url}: ${e.message}`));
  await page.goto(url);
  return page;
}

// The page with the two-tier legacy trace opened through the file input and analysed.
export async function openLegacyAnalysed() {
  const page = await open();
  await page.waitForSelector('[data-testid=stats]:has-text("events")');
  await page.setInputFiles('[data-testid=file-input]', LEGACY);
  await page.waitForSelector('[data-testid=status]:has-text("Loaded legacy.jsonl")');
  await page.waitForSelector('[data-testid=analysis-state]:has-text("analysed in")');
  return page;
}

export const text = (page, id) => page.locator(`[data-testid=${id}]`).innerText();
