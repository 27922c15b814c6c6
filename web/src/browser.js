// The page's hand-written JavaScript: the few browser calls that are smaller or simpler as JS
// glue than as web-sys bindings. Each Rust module binds its part with
// `#[wasm_bindgen(module = "/src/browser.js")]`.
//
// One file on purpose: every snippet is a module the page fetches before it can start, and
// the browser fetches them in parallel. wasm-bindgen-test-runner's server (tiny_http 0.12)
// starts four connection threads and can queue a fifth connection that arrives in the same
// burst behind them; Chromium keeps its connections open, so that request is never answered
// and the component tests hang before their first test (seen with five snippets). Add
// functions here, not new `inline_js` snippets.

// --- load.rs: yielding to the browser

const ch = new MessageChannel(), q = [];
ch.port1.onmessage = () => q.shift()();
export function next_task() { return new Promise((r) => { q.push(r); ch.port2.postMessage(0); }); }

// --- read.rs: reading a file as a Blob

export function blob_part(blob, at, end) { return blob.slice(at, end).arrayBuffer().then((b) => new Uint8Array(b)); }
export function blob_of(bytes) { return new Blob([bytes]); }

// --- permalink.rs: inline traces (raw deflate, bounded)

// The whole of `stream` as one Uint8Array, or `over()` as soon as it passes `limit` bytes (the
// stream is then cancelled).
async function read_limited(stream, limit, over) {
  const reader = stream.getReader();
  const parts = [];
  let total = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    total += value.length;
    if (total > limit) {
      await reader.cancel().catch(() => {});
      return over();
    }
    parts.push(value);
  }
  const out = new Uint8Array(total);
  let o = 0;
  for (const p of parts) { out.set(p, o); o += p.length; }
  return out;
}
export async function deflate_raw_limited(blob, limit) {
  const deflated = blob.stream().pipeThrough(new CompressionStream('deflate-raw'));
  return read_limited(deflated, limit, () => undefined);
}
export async function inflate_raw_limited(bytes, limit) {
  const ds = new DecompressionStream('deflate-raw');
  const writer = ds.writable.getWriter();
  // `bytes` is a view into wasm memory, valid only during this call: the stream reads it
  // later, so hand it a copy (a view read after Rust reused the memory came out truncated).
  writer.write(bytes.slice()).catch(() => {});
  writer.close().catch(() => {});
  return read_limited(ds.readable, limit, () => {
    throw new Error(`it inflates to more than ${limit} bytes`);
  });
}

// --- keep.rs: the trace kept in IndexedDB

function db() {
  return new Promise((res, rej) => {
    const r = indexedDB.open('kvscope', 1);
    r.onupgradeneeded = () => r.result.createObjectStore('traces');
    r.onsuccess = () => res(r.result);
    r.onerror = () => rej(r.error);
  });
}
function done(req) {
  return new Promise((res, rej) => { req.onsuccess = () => res(req.result); req.onerror = () => rej(req.error); });
}
export async function keep_trace(id, name, blob) {
  const d = await db();
  try {
    const t = d.transaction('traces', 'readwrite');
    t.objectStore('traces').put({ id, name, bytes: blob }, 'last');
    await new Promise((res, rej) => { t.oncomplete = res; t.onerror = () => rej(t.error); t.onabort = () => rej(t.error); });
  } finally { d.close(); }
}
export async function kept_trace(id) {
  const d = await db();
  try {
    const v = await done(d.transaction('traces').objectStore('traces').get('last'));
    return v && v.id === id ? [v.name, v.bytes instanceof Blob ? v.bytes : new Blob([v.bytes])] : undefined;
  } finally { d.close(); }
}

// --- compare.rs: the simulator module (in a worker) and the traces compared

// The simulator module (kvscope_sim.js and its wasm) runs in a module worker, so simulating or
// comparing two large traces never blocks the page (at 1M events a side, the comparison is
// seconds of work). Each message is `[id, js, wasm, name, args]`: the worker loads the module
// once, calls `name(...args)` (every answer is JSON text) and answers `[id, ok, the parsed
// answer or an error message]`. `compare_loaded(a, a_name, b, b_name, workers)` reads the two
// `Blob`s 4 MiB at a time into the module's `SideReader`s, so neither file is ever whole in
// memory.
const SIM_WORKER = `let sim;
// A reader not handed to compare_read is freed here (its side can be hundreds of MB).
const side = async (blob, name, left, workers) => {
  const r = new sim.SideReader(name, left, workers);
  try {
    for (let at = 0; at < blob.size; at += 1 << 22) {
      r.push(new Uint8Array(await blob.slice(at, at + (1 << 22)).arrayBuffer()));
    }
  } catch (e) { r.free(); throw e; }
  return r;
};
const ops = {
  compare_loaded: async (a, a_name, b, b_name, workers) => {
    const ra = await side(a, a_name, true, workers);
    let rb;
    try { rb = await side(b, b_name, false, workers); } catch (e) { ra.free(); throw e; }
    return sim.compare_read(ra, rb);
  },
};
onmessage = async ({ data: [id, js, wasm, name, args] }) => {
  try {
    if (!sim) {
      const m = await import(js);
      await m.default({ module_or_path: wasm });
      sim = m;
    }
    postMessage([id, true, JSON.parse(await (ops[name] || sim[name])(...args))]);
  } catch (e) {
    postMessage([id, false, String((e && e.message) || e)]);
  }
};`;
// The simulator's start, kept once begun: dialogs opened while it loads share one worker. A
// failed start is dropped, so the next dialog tries again.
let sim_start;
// Start the simulator worker (once) and load its module; resolves to `call(name, ...args)`,
// which resolves to the module's `name(...args)` (rejects with its error).
export function import_sim(js, wasm) {
  sim_start ||= start_sim(js, wasm).catch((e) => { sim_start = undefined; throw e; });
  return sim_start;
}
function start_sim(js, wasm) {
  const base = document.baseURI;
  const urls = [new URL(js, base).href, new URL(wasm, base).href];
  const src = URL.createObjectURL(new Blob([SIM_WORKER], { type: 'text/javascript' }));
  const worker = new Worker(src, { type: 'module' });
  const waiting = new Map();
  let next = 0;
  worker.onmessage = ({ data: [id, ok, v] }) => {
    const [res, rej] = waiting.get(id);
    waiting.delete(id);
    if (ok) res(v); else rej(new Error(v));
  };
  worker.onerror = (e) => {
    e.preventDefault();
    for (const [, rej] of waiting.values()) rej(new Error(e.message || 'the simulator stopped'));
    waiting.clear();
  };
  const call = (name, ...args) => new Promise((res, rej) => {
    const id = next++;
    waiting.set(id, [res, rej]);
    worker.postMessage([id, ...urls, name, args]);
  });
  // Load the module now, so that a missing one fails here (and its worker ends: a failed
  // start is not kept, and each try would leave one behind).
  return call('builtins').then(() => call, (e) => { worker.terminate(); throw e; });
}
let current, other;
export function remember(name, blob) { current = [name, blob]; }
export function kept(left) { return left ? current : other; }
export async function compare_file(call, input, workers) {
  const file = input.files[0];
  input.value = '';
  if (!file) throw new Error('no file chosen');
  if (!current) throw new Error('load a trace first: it is compared with the trace you pick');
  other = [file.name, file];
  return call('compare_loaded', current[1], current[0], file, file.name, workers);
}
