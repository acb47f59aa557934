'use strict'
// Loading TS/JS configs for the bin. They are evaluated here, on the JS side, and handed to
// the engine as a plain object; JSON and YAML are read natively by the engine itself.

const path = require('node:path')

const JS_EXTENSIONS = new Set(['.ts', '.mts', '.cts', '.js', '.mjs', '.cjs'])

/** Whether the engine cannot read this file natively and the bin must evaluate it. */
function isJsConfig(file) {
  return JS_EXTENSIONS.has(path.extname(file).toLowerCase())
}

/** The value of `--config FILE` / `--config=FILE` in argv, if any. */
function configArg(args) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--config') return args[i + 1]
    if (args[i].startsWith('--config=')) return args[i].slice('--config='.length)
  }
  return undefined
}

/**
 * Evaluate a TS/JS config and return `{ value, path }` where `value` is `{ discovery }`.
 * An `anygpt.config.ts` may hold other sections; only `discovery` is passed on.
 */
async function loadJsConfig(file) {
  const absolute = path.resolve(file)
  const { createJiti } = require('jiti')
  const jiti = createJiti(__filename, { moduleCache: false })
  const loaded = await jiti.import(absolute, { default: true })
  if (loaded === null || typeof loaded !== 'object') {
    throw new Error(`${absolute}: the default export must be an object, found ${typeof loaded}`)
  }
  const value = 'discovery' in loaded ? { discovery: loaded.discovery } : loaded
  // The engine takes plain data; a function or class instance in the config cannot cross.
  return { value: JSON.parse(JSON.stringify(value)), path: absolute }
}

module.exports = { configArg, isJsConfig, loadJsConfig }
