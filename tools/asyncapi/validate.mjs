// Validates an AsyncAPI document with the AsyncAPI parser and its Avro schema parser
// (tests/unit/test_asyncapi.py runs it on docs/asyncapi.yaml). Written for this project.
// Usage: node validate.mjs FILE   -> exit 0 and "valid: N channels, M messages" or exit 1 with the findings
import { readFileSync } from "node:fs";
import { Parser } from "@asyncapi/parser";
import { AvroSchemaParser } from "@asyncapi/avro-schema-parser";

const file = process.argv[2];
const parser = new Parser();
parser.registerSchemaParser(AvroSchemaParser());
const { document, diagnostics } = await parser.parse(readFileSync(file, "utf8"), { source: file });
// severity 0 = error, 1 = warning
const errors = diagnostics.filter((d) => d.severity === 0);
for (const d of diagnostics) {
  console.log(`${d.severity === 0 ? "error" : "warning"}: ${d.code} at ${(d.path || []).join(".")}: ${d.message}`);
}
if (errors.length || !document) {
  console.log(`invalid: ${errors.length} errors`);
  process.exit(1);
}
console.log(`valid: ${document.channels().length} channels, ${document.allMessages().length} messages`);
