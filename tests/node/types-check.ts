// Type-checks the package's generated TypeScript declarations (wasm/pkg-web/kvscope_wasm.d.ts)
// against the README's usage, strictly. Compiled only (`tsc --noEmit -p tests/node`), never run.
import {
  initSync, loadTrace, generate, listScenarios, heapBytes, Trace, ReplaySession,
  type Analysis, type Step, type Snapshot, type Batch, type BlockInfo, type ScenarioInfo,
} from "../../wasm/pkg-web/kvscope_wasm.js";

declare const wasmBytes: Uint8Array;
initSync({ module: wasmBytes });

const trace: Trace = loadTrace("{}\n", null);
const fromBytes: Trace = loadTrace(new Uint8Array(0), "pod-a");
const b: Batch = trace.batch(0);
const hash: string = b.events.length > 0 && b.events[0].type === "BlockStored" ? b.events[0].block_hashes[0] : "";
const seq: bigint = b.seq;
const a: Analysis = trace.analyze({ consumers: ["llmd", "ideal"], rules: ["seq-gap"], levels: { "seq-gap": "warn" } });
const defaults: Analysis = trace.analyze();
const lost: number = a.losses[0].blocks_lost;
const parent: string | null = a.violations[0].parent;
const s: ReplaySession = trace.replay({ consumer_config: { dynamo_kv_block_size: 32 } });
const s2 = new ReplaySession(trace);
const cursor: number = s.seek(1);
const at: number | null = s.nextViolation({ rule: "child-before-parent-in-job" });
const back: number | null = s.previousViolation();
const step: Step | null = s.lastStep();
const stepSeq: bigint | undefined = step?.event.seq;
const st: Snapshot = s.state();
const dropped: number = st.consumers[0].total.dropped;
const block: BlockInfo = s.block(18446744073709551615n);
const block2: BlockInfo = s.block("9007199254740993");
const mp: Uint8Array = trace.toMsgpack("array");
const text: string = trace.toJsonl();
const gen: Trace = generate("legacy-vs-fixed", { order: "cpython", python_hash_seed: 0, seed: 5n });
const list: ScenarioInfo[] = listScenarios();
const live: number = heapBytes();

// @ts-expect-error block hashes are strings, never numbers
const asNumber: number = a.violations[0].hashes[0];
// @ts-expect-error unknown consumer names are rejected by the types too
trace.analyze({ consumers: ["nginx"] });
// @ts-expect-error hashes are not passed as numbers
s.block(1);
// @ts-expect-error only "map" or "array"
trace.toMsgpack("yaml");

s.free();
s2.free();
trace.free();
fromBytes.free();
gen.free();
export { hash, seq, defaults, lost, parent, cursor, at, back, stepSeq, dropped, block, block2, mp, text, list, live, asNumber };
