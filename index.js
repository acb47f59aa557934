'use strict'
// The package entry: napi's generated loader (binding.js) plus one adaptation napi cannot
// express — promise rejections from Rust carry a fixed napi status as `code`, so the engine's
// stable code travels as a `CODE: ` message prefix and is moved into `error.code` here.

const binding = require('./binding.js')

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

const DiscoveryEngine = new Proxy(binding.DiscoveryEngine, {
  construct(target, args) {
    try {
      return new target(...args)
    } catch (error) {
      throw withCode(error)
    }
  },
})

module.exports = {
  ...binding,
  DiscoveryEngine,
  matchPattern: withCodes(binding.matchPattern),
}
