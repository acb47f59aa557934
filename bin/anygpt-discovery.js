#!/usr/bin/env node
'use strict'
// The npm bin: hands process.argv to the addon's CLI, which serves MCP on fds 0/1 itself.
// This file must never touch process.stdin or process.stdout: Node reading fd 0 would take
// messages away from the server. It only evaluates a TS/JS config (when the engine's search
// order picks one) and relays signals.

const { configArg, loadConfig } = require('../lib/load-config.js')

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
const { runCli, requestShutdown, locateConfig } = addon

// The optional semantic-search weights, when installed beside this package: the engine runs
// inside Node here, so it cannot find them from its own path; tell it where they are.
if (!process.env.ANYGPT_SEARCH_MODEL) {
  try {
    process.env.ANYGPT_SEARCH_MODEL = require('node:path').dirname(
      require.resolve('@anygpt/discovery-model-minilm/package.json'),
    )
  } catch {
    // Not installed: search is lexical.
  }
}

async function main() {
  let config
  try {
    config = await loadConfig(locateConfig, configArg(process.argv.slice(2)))
  } catch (error) {
    process.stderr.write(`error: ${error && error.message}\n`)
    return 1
  }
  // Rust-side signal handlers would fight Node's; Node catches them and asks the addon to stop.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) process.on(signal, requestShutdown)
  return runCli(process.argv, config.value, config.path)
}

main().then(
  (code) => process.exit(code),
  (error) => {
    process.stderr.write(`error: ${error && error.stack ? error.stack : error}\n`)
    process.exit(1)
  },
)
