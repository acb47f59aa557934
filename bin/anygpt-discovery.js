#!/usr/bin/env node
'use strict'
// The npm bin: hands its arguments to `runCli` (index.js), whose Rust side serves MCP on
// fds 0/1 itself or runs a command. This file must never touch process.stdin or
// process.stdout: Node reading fd 0 would take messages away from the server. `runCli`
// evaluates a TS/JS config (when the engine's search order picks one) and relays signals.

// Without a native binary for this platform nothing can run, `--help` included: say which
// binary is missing and how to get it, without a stack trace.
let addon
try {
  addon = require('../index.js')
} catch (error) {
  if (!error || error.code !== 'ANYGPT_DISCOVERY_NO_BINARY') throw error
  process.stderr.write(`error: ${error.message}\n`)
  process.exit(1)
}

addon.runCli(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`error: ${error && error.stack ? error.stack : error}\n`)
    process.exit(1)
  },
)
