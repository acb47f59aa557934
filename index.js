'use strict'
// The package entry: napi's generated loader (binding.js) plus one adaptation napi cannot
// express — promise rejections from Rust carry a fixed napi status as `code`, so the engine's
// stable code travels as a `CODE: ` message prefix and is moved into `error.code` here.

const binding = require('./binding.js')
const { configArg, loadConfig, loadJsConfig } = require('./lib/load-config.js')

// The optional semantic-search weights, found as `require` finds a package from here (beside
// this one): inside Node the engine's own program is `node`, so it cannot look beside itself.
// The config's `search.model` and ANYGPT_SEARCH_MODEL still come first.
let modelPackage
try {
  modelPackage = require('node:path').dirname(require.resolve('@anygpt/discovery-model-minilm/package.json'))
} catch {
  // Not installed: search is lexical.
}
if (modelPackage) binding._setModelPackage(modelPackage)

const CODE_PREFIX = /^([A-Z][A-Z_]+): /

function withCode(error) {
  if (error instanceof Error) {
    const match = CODE_PREFIX.exec(error.message)
    if (match) {
      error.code = match[1]
      error.message = error.message.slice(match[0].length)
      if (typeof error.stack === 'string') error.stack = error.stack.replace(match[0], '')
    }
  }
  return error
}

function withCodes(fn) {
  return function (...args) {
    let result
    try {
      result = fn.apply(this, args)
    } catch (error) {
      throw withCode(error)
    }
    return result && typeof result.then === 'function'
      ? result.then(undefined, (error) => {
          throw withCode(error)
        })
      : result
  }
}

const proto = binding.DiscoveryEngine.prototype
for (const name of Object.getOwnPropertyNames(proto)) {
  const descriptor = Object.getOwnPropertyDescriptor(proto, name)
  if (name !== 'constructor' && typeof descriptor.value === 'function') {
    Object.defineProperty(proto, name, { ...descriptor, value: withCodes(descriptor.value) })
  }
}

// An AbortSignal cannot cross into Rust: executeTool gets a call id instead, and the
// signal's abort event cancels that id. The promise then rejects with `signal.reason`.
// onProgress runs from a native callback, where a throw would be an uncaught exception:
// it is turned into a process warning instead.
let nextCallId = 1
const executeTool = proto.executeTool
Object.defineProperty(proto, 'executeTool', {
  ...Object.getOwnPropertyDescriptor(proto, 'executeTool'),
  value: function (server, tool, args, options) {
    if (!options) return executeTool.call(this, server, tool, args, options)
    const { signal, onProgress } = options
    const native = { ...options, signal: undefined }
    if (typeof onProgress === 'function') {
      native.onProgress = (progress) => {
        try {
          onProgress(progress)
        } catch (error) {
          process.emitWarning(`executeTool onProgress threw: ${error && error.stack ? error.stack : error}`)
        }
      }
    }
    if (!signal) return executeTool.call(this, server, tool, args, native)
    if (signal.aborted) return Promise.reject(signal.reason)
    const id = nextCallId++ % 0xffffffff
    const onAbort = () => this._abortCall(id)
    signal.addEventListener('abort', onAbort, { once: true })
    const done = () => signal.removeEventListener('abort', onAbort)
    let pending
    try {
      pending = executeTool.call(this, server, tool, args, { ...native, signal: id })
    } catch (error) {
      done()
      throw error
    }
    return pending.then(
      (result) => {
        done()
        return result
      },
      (error) => {
        done()
        throw signal.aborted ? signal.reason : error
      },
    )
  },
})

const DiscoveryEngine = new Proxy(binding.DiscoveryEngine, {
  construct(target, args) {
    try {
      return new target(...args)
    } catch (error) {
      throw withCode(error)
    }
  },
})

/**
 * Returns `config` unchanged: in TypeScript, `export default defineConfig({ discovery: { … } })`
 * type-checks a config file against the types generated from the engine's own (config.d.ts).
 */
function defineConfig(config) {
  return config
}

/**
 * An engine for the config the search order picks (or `options.config`, like `--config`):
 * a TS/JS file is evaluated here, JSON/YAML read by the engine, and with no file every MCP
 * client's config found is imported (zero-config).
 */
async function createEngine(options = {}) {
  const loaded = await loadConfig(binding.locateConfig, options.config)
  // JSON/YAML or zero-config: the engine runs the same search itself, so a project file keeps
  // its scope (a file named here would be the user's own, read again without its approval).
  if (loaded.value === undefined) return new DiscoveryEngine(undefined, options.config)
  const engine = new DiscoveryEngine(loaded.value, loaded.path)
  // The engine cannot read a TS/JS file itself: `reload()` with no config evaluates it again
  // here (a bad file rejects with CONFIGURATION_ERROR and the current config keeps serving).
  const reload = engine.reload
  engine.reload = async function (config) {
    if (config !== undefined) return reload.call(this, config)
    // A project file is evaluated again only while the search still chooses it: once it
    // changed since its approval (or was denied), it is not run again.
    if (options.config === undefined && binding.locateConfig(undefined).file !== loaded.path) {
      throw withCode(new Error(`CONFIGURATION_ERROR: ${loaded.path}: not approved in its current version, so it is not evaluated again; still serving what it had. Approve it: \`anygpt-discovery allow ${loaded.path}\``))
    }
    return reload.call(this, (await loadJsConfig(loaded.path)).value)
  }
  return engine
}

// The commands whose configuration errors exit 2 (the seed's table); serving exits 1.
const COMMANDS = new Set(['list', 'search', 'tools', 'inspect', 'execute', 'config', 'trust'])

/**
 * Run the CLI as `anygpt-discovery <args…>`, e.g. `runCli(['search', 'echo', '--json'])`:
 * output goes to this process's stdout/stderr, and the promise resolves with the exit code
 * (never rejects). A TS/JS config the search order picks is evaluated here first. While it
 * runs, SIGINT/SIGTERM stop it (a tool call is cancelled, exit 130; a server exits 0); SIGHUP
 * makes a server reload its config and stops a command.
 */
async function runCli(args = process.argv.slice(2)) {
  let config = {}
  try {
    // A TS/JS config is code: evaluated only for a command that reads the config (never for
    // --help, --version, completions, allow, deny or config path), and only once the search
    // order chose it (a project file only when approved).
    if (binding.commandNeedsConfig(args)) config = await loadConfig(binding.locateConfig, configArg(args))
  } catch (error) {
    process.stderr.write(`error: ${error && error.message}\n`)
    return args.some((arg) => COMMANDS.has(arg)) ? 2 : 1
  }
  const signals = ['SIGINT', 'SIGTERM']
  // A Rust-side signal handler would fight Node's: Node catches them and asks the CLI to stop.
  for (const signal of signals) process.on(signal, binding.requestShutdown)
  const hangup = () => binding.requestReload() || binding.requestShutdown()
  process.on('SIGHUP', hangup)
  try {
    // A served TS/JS config reloads by being evaluated again here (the engine decides when).
    const reevaluate = config.value === undefined ? undefined : async () => (await loadJsConfig(config.path)).value
    return await binding.runCliWithConfig(args, config.value, config.path, reevaluate)
  } finally {
    for (const signal of signals) process.off(signal, binding.requestShutdown)
    process.off('SIGHUP', hangup)
  }
}

const { _setModelPackage, ...exported } = binding

module.exports = {
  ...exported,
  runCli,
  DiscoveryEngine,
  defineConfig,
  createEngine,
  matchPattern: withCodes(binding.matchPattern),
}
