#!/usr/bin/env node
// A stand-in for $EDITOR in tests: each call applies the next edit of LLMGW_TEST_EDITS
// (a JSON list) to the file it is given, and saves what it was shown.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

const file = process.argv[2];
const edits = JSON.parse(process.env.LLMGW_TEST_EDITS ?? '[]');
const state = process.env.LLMGW_TEST_EDITS_STATE;
const n = existsSync(state) ? Number(readFileSync(state, 'utf8')) : 0;
writeFileSync(state, String(n + 1));
const shown = readFileSync(file, 'utf8');
writeFileSync(`${state}.shown-${n}`, shown);
const edit = edits[n] ?? {};
let text = shown;
if (edit.replace) text = text.replace(edit.replace[0], edit.replace[1]);
if (edit.append) text += edit.append;
writeFileSync(file, text);
process.exit(edit.exit ?? 0);
