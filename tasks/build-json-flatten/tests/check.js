// Hidden checks: the fraction that pass is the reward.
const assert = require("node:assert");
const fs = require("node:fs");
const checks = {
  nested: (f) => assert.deepStrictEqual(f({ a: { b: 1, c: { d: "x" } } }), { "a.b": 1, "a.c.d": "x" }),
  arrays: (f) => assert.deepStrictEqual(f({ a: [5, { b: 6 }] }), { "a.0": 5, "a.1.b": 6 }),
  empties: (f) => assert.deepStrictEqual(f({ a: {}, b: [], c: null }), { a: {}, b: [], c: null }),
  flat: (f) => assert.deepStrictEqual(f({ x: 1, y: true }), { x: 1, y: true }),
};
let passed = 0;
for (const [name, fn] of Object.entries(checks)) {
  try {
    delete require.cache[require.resolve("/app/flatten.js")];
    fn(require("/app/flatten.js").flatten);
    passed++;
    console.log("PASS", name);
  } catch (err) {
    console.log("FAIL", name, err.message.split("\n")[0]);
  }
}
const total = Object.keys(checks).length;
fs.writeFileSync("/logs/verifier/reward.txt", `${passed / total}\n`);
console.log(`${passed}/${total} checks passed`);
