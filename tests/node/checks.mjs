// Assertions over a loaded kvscope package module (nodejs or web build, full or lean).
// Used by package-e2e.mjs; every check can fail.
import assert from "node:assert/strict";

const t16 = (k) => JSON.stringify(Array.from({ length: 16 }, (_, i) => 16 * k + i));
const stored = (hash, parent, k) =>
  `{"type": "BlockStored", "block_hashes": [${hash}], "parent_block_hash": ${parent}, ` +
  `"token_ids": ${t16(k)}, "block_size": 16, "lora_id": null, "medium": "CPU", "lora_name": null}`;
const batch = (seq, events) =>
  `{"source": "pod-a", "dp_rank": 0, "seq": ${seq}, "ts": ${1700000000 + seq}.0, ` +
  `"events": [${events.join(", ")}]}`;
export const JSONL = [
  batch(0, [stored("18446744073709551615", "null", 0)]),
  batch(1, [
    stored("9007199254740993", "9007199254740992", 2),
    stored("9007199254740992", "18446744073709551615", 1),
  ]),
].join("\n");

export function runChecks(k, { sim }) {
  assert.equal(k.hasSimulator(), sim);
  assert.match(k.version(), /^\d+\.\d+\.\d+/);

  // Load: exact hashes as strings, seq as bigint.
  const trace = k.loadTrace(JSONL);
  assert.equal(trace.eventCount, 3);
  assert.equal(trace.batchCount, 2);
  const b = trace.batches();
  assert.equal(b[0].events[0].block_hashes[0], "18446744073709551615");
  assert.equal(typeof b[1].events[0].block_hashes[0], "string");
  assert.equal(b[1].events[0].block_hashes[0], "9007199254740993");
  assert.equal(b[1].events[0].parent_block_hash, "9007199254740992");
  assert.equal(b[1].seq, 1n);
  assert.equal(BigInt(b[0].events[0].block_hashes[0]), 2n ** 64n - 1n);

  // Export and reload: msgpack (Uint8Array) and JSONL.
  const mp = trace.toMsgpack();
  assert.ok(mp instanceof Uint8Array && mp.length > 0);
  const back = k.loadTrace(mp, "pod-a");
  assert.equal(back.batches()[1].events[0].block_hashes[0], "9007199254740993");
  assert.deepEqual(back.toMsgpack(), mp);
  back.free();
  assert.ok(trace.toJsonl().includes("[18446744073709551615]"));

  // Errors name the line / byte offset.
  assert.throws(() => k.loadTrace(JSONL + "\n{\"events\": [1]}"), (e) => {
    assert.ok(e instanceof Error);
    assert.match(e.message, /^line 3/);
    assert.equal(e.line, 3);
    return true;
  });
  assert.throws(() => k.loadTrace(mp.subarray(0, mp.length - 2)), (e) => {
    assert.match(e.message, /^byte offset \d+/);
    assert.equal(typeof e.byteOffset, "number");
    return true;
  });
  assert.throws(() => k.loadTrace(42), /expects a string/);

  // Analyze.
  const a = trace.analyze({ consumers: ["llmd", "dynamo", "ideal"] });
  assert.equal(a.has_deny, true);
  assert.deepEqual(a.counts, { "child-before-parent-in-job": 1, "consumer-loss": 1 });
  assert.equal(a.violations[0].parent, "9007199254740992");
  assert.deepEqual(a.losses.map((l) => [l.consumer, l.blocks_lost]), [["llmd", 1], ["dynamo", 0], ["ideal", 0]]);
  assert.throws(() => trace.analyze({ consumers: ["nginx"] }), /unknown consumer "nginx"/);
  assert.throws(() => trace.analyze({ consumer: ["llmd"] }), /unknown field `consumer`/);

  // Replay: load -> seek -> next violation -> state / diff.
  const s = trace.replay({ consumers: ["llmd", "ideal"] });
  assert.equal(s.length, 3);
  assert.equal(s.seek(1), 1);
  assert.equal(s.nextViolation({ rule: "child-before-parent-in-job" }), 1);
  assert.equal(s.cursor, 2);
  const step = s.lastStep();
  assert.equal(step.event.hashes[0], "9007199254740993");
  assert.equal(step.event.seq, 1n);
  assert.equal(step.verdicts[0].verdict.verdict, "dropped_orphan");
  assert.equal(step.verdicts[1].final_verdict, "replayed");
  const st = s.state();
  assert.equal(st.cursor, 2);
  assert.equal(st.consumers[0].total.dropped, 1);
  assert.equal(s.nextViolation({ rule: "child-before-parent-in-job" }), null);
  assert.equal(s.stepForward().event.index, 2);
  assert.equal(s.stepForward(), null);
  assert.equal(s.stepBack().event.index, 2);
  assert.equal(s.previousViolation(), null); // event 1 is the one at the cursor
  s.seek(3);
  assert.equal(s.previousViolation(), 1);
  assert.equal(s.cursor, 2);
  assert.equal(s.block(9007199254740992n).children[0], "9007199254740993");
  assert.throws(() => s.seek(-1), RangeError);

  // .free(): the heap returns to its level before the session; a freed object throws.
  s.free();
  assert.throws(() => s.cursor);
  const before = k.heapBytes();
  for (let i = 0; i < 3; i++) {
    const s2 = trace.replay();
    s2.seek(3);
    assert.ok(k.heapBytes() > before);
    s2.free();
    assert.equal(k.heapBytes(), before);
  }

  // A session shares its trace rather than copying it: freeing the Trace while a session
  // lives releases little (the session still holds the events), the session keeps working,
  // and the heap returns to its level once both are freed.
  const base = k.heapBytes();
  const lines = Array.from({ length: 200 }, (_, i) =>
    batch(i, [stored(1000 + i, i ? 999 + i : "null", i)]),
  );
  const big = k.loadTrace(lines.join("\n"));
  const traceBytes = k.heapBytes() - base;
  const shared = big.replay({ consumers: ["llmd"] });
  const withSession = k.heapBytes();
  big.free();
  assert.ok(withSession - k.heapBytes() < traceBytes / 4, "the session copied the trace");
  shared.seek(200);
  assert.equal(shared.cursor, 200);
  assert.equal(shared.event(199).hashes[0], "1199");
  assert.equal(shared.event(199).line, 200);
  shared.free();
  assert.equal(k.heapBytes(), base);

  // Generate (full build only).
  if (sim) {
    const names = k.listScenarios().map((x) => x.name);
    assert.ok(names.includes("legacy-vs-fixed"));
    const fixed = k.generate("legacy-vs-fixed", { order: "fixed" });
    const bug = k.generate("legacy-vs-fixed", { order: "cpython", python_hash_seed: 0 });
    assert.ok(fixed.eventCount > 0);
    assert.equal(fixed.analyze().counts["child-before-parent-in-job"], undefined);
    assert.notEqual(bug.toJsonl(), fixed.toJsonl());
    assert.equal(k.generate("legacy-vs-fixed", { order: "legacy", seed: 5n }).toJsonl(),
      k.generate("legacy-vs-fixed", { order: "legacy", seed: 5 }).toJsonl());
    const custom = JSON.parse(k.builtinScenario("single-request"));
    assert.equal(k.generate(custom).scenario, "single-request");
    assert.throws(() => k.generate("nope"), /"nope"/);
    fixed.free();
    bug.free();
  } else {
    assert.equal(k.generate, undefined);
  }
  trace.free();
}
