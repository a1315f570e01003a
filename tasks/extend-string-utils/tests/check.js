const assert = require("node:assert");
const fs = require("node:fs");
const checks = {
  basic: (m) => assert.strictEqual(m.titleCase("the lord of the rings"), "The Lord of the Rings"),
  mixedCase: (m) => assert.strictEqual(m.titleCase("gONE wITH tHE wIND"), "Gone With the Wind"),
  single: (m) => assert.strictEqual(m.titleCase("an"), "An"),
  keepsOthers: (m) => assert.strictEqual(m.titleCase("x") + m.reverse("ab") + m.capitalize("hI"), "XbaHi"),
};
let passed = 0;
for (const [name, fn] of Object.entries(checks)) {
  try {
    fn(require("/app/strings.js"));
    passed++;
    console.log("PASS", name);
  } catch (err) {
    console.log("FAIL", name, err.message.split("\n")[0]);
  }
}
fs.writeFileSync("/logs/verifier/reward.txt", `${passed / Object.keys(checks).length}\n`);
