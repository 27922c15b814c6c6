// Generated JSON Lines traces for the screenshots and e2e tests: a 150-block chain, a
// multi-group trace and a large trace (200k events), written to a temporary directory.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Hashes of at least 2^32 (small integers are llm-d's undecodable-batch case).
const H = (k) => 4294967296 + k * 7919;
const stored = (hash, parent, medium, group = 0) => ({
  type: 'BlockStored', block_hashes: [hash], parent_block_hash: parent, token_ids: [1, 2, 3, 4],
  block_size: 4, lora_id: null, medium, lora_name: null, group_idx: group, kv_cache_spec_kind: 'full_attention',
});
const header = (scenario) => JSON.stringify({ kind: 'header', kvscope: 1, scenario, meta: { generator: 'tests/e2e/traces.mjs', hash_format: 'int' } });
const batch = (source, seq, events) => JSON.stringify({ source, dp_rank: 0, seq, ts: 1700000000 + seq, events });

/** A 150-block prompt offloaded to CPU in one transfer job whose keys come out with block 10
 *  last (set order), as captured from the offload on (no GPU events): llm-d drops block 11 as
 *  an orphan and loses blocks 12..149 with it (one loss root, a cascade of 138). */
export function chain150() {
  const order = [...Array(150).keys()].filter((k) => k !== 10).concat([10]);
  const cpu = order.map((k) => stored(H(k), k ? H(k - 1) : null, 'CPU'));
  return [header('chain-150'), batch('pod-a', 0, cpu)].join('\n') + '\n';
}

/** Two KV groups (full attention and sliding window) with the same hashes, the second group's
 *  CPU offload delivered child first. */
export function multiGroup() {
  const lines = [header('two-groups')];
  let seq = 0;
  for (let r = 0; r < 6; r++) {
    const base = r * 8;
    for (const g of [0, 1]) {
      const ev = [];
      for (let k = 0; k < 8; k++) ev.push(stored(H(base + k), k ? H(base + k - 1) : null, 'GPU', g));
      lines.push(batch('pod-a', seq++, ev));
    }
    for (const g of [0, 1]) {
      const ks = [...Array(8).keys()];
      if (g === 1) [ks[2], ks[3]] = [ks[3], ks[2]];
      lines.push(batch('pod-a', seq++, ks.map((k) => stored(H(base + k), k ? H(base + k - 1) : null, 'CPU', g))));
    }
  }
  return lines.join('\n') + '\n';
}

/** `n` events: requests of 16-block chains on two sources, stored on GPU, then offloaded to
 *  CPU with a child delivered first in one request of eight. */
export function large(n = 200000) {
  const lines = [header('large')];
  const seq = { 'pod-a': 0, 'pod-b': 0 };
  let events = 0, req = 0;
  while (events < n) {
    const src = req % 2 ? 'pod-b' : 'pod-a';
    const base = req * 16;
    const gpu = [], cpu = [];
    for (let k = 0; k < 16; k++) gpu.push(stored(H(base + k), k ? H(base + k - 1) : null, 'GPU'));
    const ks = [...Array(16).keys()];
    if (req % 8 === 3) [ks[5], ks[6]] = [ks[6], ks[5]];
    for (const k of ks) cpu.push(stored(H(base + k), k ? H(base + k - 1) : null, 'CPU'));
    lines.push(batch(src, seq[src]++, gpu), batch(src, seq[src]++, cpu));
    events += 32;
    req++;
  }
  return lines.join('\n') + '\n';
}

/** Write the three traces into `dir`; returns their paths. */
export function writeTraces(dir) {
  const out = { chain: join(dir, 'chain-150.jsonl'), groups: join(dir, 'two-groups.jsonl'), large: join(dir, 'large-200k.jsonl') };
  writeFileSync(out.chain, chain150());
  writeFileSync(out.groups, multiGroup());
  writeFileSync(out.large, large());
  return out;
}
