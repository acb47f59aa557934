'use strict'
// Loading configs on the JS side. Which file wins is the engine's decision (`locateConfig`,
// the one search order every face shares); only a TS/JS winner is evaluated here, with jiti,
// and handed to the engine as a plain object. JSON/YAML and zero-config are read natively.

const path = require('node:path')

/** The value of `--config FILE` / `--config=FILE` in argv, if any. */
function configArg(args) {
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--config') return args[i + 1]
    if (args[i].startsWith('--config=')) return args[i].slice('--config='.length)
  }
  return undefined
}

/** An error that reads like the engine's own configuration errors. */
function configurationError(file, message) {
  const error = new Error(`${file}: cannot load config: ${message}`)
  error.code = 'CONFIGURATION_ERROR'
  return error
}

/**
 * Evaluate a TS/JS config and return `{ value, path }`. Only the `discovery` section crosses
 * to the engine: an `anygpt.config.ts` holds other sections (possibly functions) that are not
 * ours; without a `discovery` section it is passed as `{}` and the engine falls back to
 * zero-config.
 */
async function loadJsConfig(file) {
  const absolute = path.resolve(file)
  const { createJiti } = require('jiti')
  const jiti = createJiti(__filename, { moduleCache: false })
  let loaded
  try {
    loaded = await jiti.import(absolute, { default: true })
  } catch (error) {
    throw configurationError(absolute, error && error.message ? error.message : String(error))
  }
  if (loaded === null || typeof loaded !== 'object') {
    throw configurationError(absolute, `the default export must be an object, found ${loaded === null ? 'null' : typeof loaded}`)
  }
  let value
  if ('discovery' in loaded) value = { discovery: loaded.discovery }
  else if (path.basename(absolute).startsWith('anygpt.config.')) value = {}
  else value = loaded
  // The engine takes plain data; a function or class instance in the config cannot cross.
  return { value: JSON.parse(JSON.stringify(value)), path: absolute }
}

/**
 * Ask the engine which config wins (`explicit` is like `--config`) and evaluate it when it is
 * TS/JS. Returns `{ located, value?, path? }`: `value` only for a TS/JS winner.
 */
async function loadConfig(locateConfig, explicit) {
  const located = locateConfig(explicit)
  if (!located.needsJs) return { located }
  return { located, ...(await loadJsConfig(located.file)) }
}

module.exports = { configArg, loadConfig, loadJsConfig }
