// End-to-end test of the BUILT npm packages (scripts/wasm-pkg.sh): for each of the nodejs and
// web builds, full and lean, run the README example verbatim and compare its output with the
// README's, then run checks.mjs against the package. Usage: node tests/node/package-e2e.mjs
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

import { runChecks } from "./checks.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const builds = [
  { dir: "pkg-node", target: "nodejs", sim: true },
  { dir: "pkg-web", target: "web", sim: true },
  { dir: "pkg-node-lean", target: "nodejs", sim: false },
  { dir: "pkg-web-lean", target: "web", sim: false },
];

// The README's example: the first ```js block, and the ```text block after it.
const readme = readFileSync(join(root, "wasm/README.md"), "utf8");
const example = readme.match(/```js\n([\s\S]*?)```/)?.[1];
const expected = readme.slice(readme.indexOf(example)).match(/```text\n([\s\S]*?)```/)?.[1];
assert.ok(example && expected, "README has a ```js example and a ```text output block");
assert.ok(example.includes('from "kvscope-wasm"'), "the example imports the package by name");

const work = mkdtempSync(join(tmpdir(), "kvscope-e2e-"));
try {
  for (const b of builds) {
    const pkg = join(root, "wasm", b.dir);
    const js = join(pkg, "kvscope_wasm.js");
    const wasm = join(pkg, "kvscope_wasm_bg.wasm");
    assert.ok(existsSync(js) && existsSync(wasm), `${b.dir} is built (run scripts/wasm-pkg.sh)`);
    const url = pathToFileURL(js).href;

    // 1. The README example, verbatim apart from where the package comes from.
    let code = example.replace('from "kvscope-wasm"', `from ${JSON.stringify(url)}`);
    if (b.target === "web") {
      code = code.replace(/import \{([^}]*)\} from ("[^"]*");/, (_, names, from) =>
        `import { initSync,${names}} from ${from};\n` +
        `import { readFileSync } from "node:fs";\n` +
        `initSync({ module: readFileSync(${JSON.stringify(wasm)}) });`);
    }
    const file = join(work, `${b.dir}-example.mjs`);
    writeFileSync(file, code);
    const out = execFileSync(process.execPath, [file], { encoding: "utf8" });
    assert.equal(out, expected, `${b.dir}: README example output`);

    // 2. The assertion suite against the package.
    const k = await import(url);
    if (b.target === "web") k.initSync({ module: readFileSync(wasm) });
    runChecks(k, { sim: b.sim });
    console.log(`ok ${b.dir} (${b.target}${b.sim ? "" : ", lean"}): README example and checks`);
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
